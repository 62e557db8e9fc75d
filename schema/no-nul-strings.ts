/**
 * A Pothos plugin that refuses a NUL character (U+0000) in every `String`
 * argument and input field, as an `InputValidationError` naming the field.
 * Postgres cannot store NUL in `text` at all and SQLite would store it and
 * hand it back, so without this the same input failed on one dialect (masked)
 * and passed on the other. It hands the check to the validation plugin,
 * and must be listed after it.
 */
import SchemaBuilder, { BasePlugin, unwrapInputFieldType, type PothosInputFieldConfig, type PothosOutputFieldConfig, type SchemaTypes } from '@pothos/core';
import type { StandardSchemaV1 } from '@pothos/plugin-validation';
import { z } from 'zod';

const VALIDATION_EXTENSION = '@pothos/plugin-validation';

function containsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000');
  return Array.isArray(value) && value.some(containsNul);
}

/** Accepts any value (other rules judge it) except a string, or a list of strings, holding a NUL. */
export const noNulCharacter = z.custom<unknown>((value) => !containsNul(value), { message: 'must not contain a NUL character (U+0000)' });

function isStringField<Types extends SchemaTypes>(type: PothosInputFieldConfig<Types>['type']): boolean {
  const ref: unknown = unwrapInputFieldType(type);
  // The built-in scalar's ref is a ScalarRef named 'String' (or just the name).
  return (typeof ref === 'string' ? ref : (ref as { name?: string }).name) === 'String';
}

function withNulCheck<C extends { extensions?: Record<string, unknown> | null }>(config: C): C {
  const extensions = config.extensions ?? {};
  const validation = (extensions[VALIDATION_EXTENSION] ?? {}) as { schemas?: StandardSchemaV1[] };
  return { ...config, extensions: { ...extensions, [VALIDATION_EXTENSION]: { ...validation, schemas: [...(validation.schemas ?? []), noNulCharacter] } } };
}

/**
 * Plugin hooks run last-listed first, so listed after the validation plugin
 * this runs before it: arguments get the check in `onOutputFieldConfig`,
 * which the validation plugin reads them in; input object fields in
 * `onInputFieldConfig` (the validation plugin reads those at build end).
 */
export class NoNulStringsPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  override onOutputFieldConfig(fieldConfig: PothosOutputFieldConfig<Types>): PothosOutputFieldConfig<Types> {
    const entries = Object.entries(fieldConfig.args);
    if (!entries.some(([, arg]) => isStringField(arg.type))) return fieldConfig;
    return { ...fieldConfig, args: Object.fromEntries(entries.map(([name, arg]) => [name, isStringField(arg.type) ? withNulCheck(arg) : arg])) };
  }

  override onInputFieldConfig(fieldConfig: PothosInputFieldConfig<Types>): PothosInputFieldConfig<Types> {
    if (fieldConfig.kind === 'Arg' || !isStringField(fieldConfig.type)) return fieldConfig;
    return withNulCheck(fieldConfig);
  }
}

declare global {
  export namespace PothosSchemaTypes {
    export interface Plugins<Types extends SchemaTypes> {
      noNulStrings: NoNulStringsPlugin<Types>;
    }
  }
}

SchemaBuilder.registerPlugin('noNulStrings', NoNulStringsPlugin);

export default 'noNulStrings' as const;
