/**
 * `npm run schema:check`: today's schema against the last released one
 * (`schema/released.graphql`), with @graphql-inspector/core's diff.
 *
 * - A **breaking** change (a client generated from the released schema may
 *   stop working) passes only when the unreleased section of CHANGELOG.md
 *   names its schema coordinate (`Type.field`, `Type.field.argument`,
 *   `Enum.VALUE`, or the type) and what it breaks was deprecated in the
 *   released schema, so integrators had a release to move. Anything else
 *   fails the check (exit 1).
 * - **Dangerous** changes (a new union member, enum value or optional
 *   argument with a default: clients keep working but may see something new)
 *   are listed.
 * - Removing a type no field could return or take in the released schema
 *   (unreachable from its root types) is safe: no client could have met it.
 * - Safe changes are counted.
 *
 * Releasing copies `schema/schema.graphql` to `schema/released.graphql`
 * (docs/api.md, "Schema compatibility").
 */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { CriticalityLevel, diff, type Change } from '@graphql-inspector/core';
import {
  buildSchema,
  getNamedType,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  isUnionType,
  printSchema,
  type GraphQLNamedType,
  type GraphQLSchema,
} from 'graphql';
import { failureLine, usageError, wantsHelp, type Command } from './command.js';

/** One breaking change and whether the changelog and a deprecation let it through. */
export interface BreakingChange {
  path: string;
  message: string;
  allowed: boolean;
  /** Why it was let through or not, in words. */
  why: string;
}

/** What {@link checkSchemaCompatibility} found. */
export interface SchemaCompatibility {
  breaking: BreakingChange[];
  dangerous: { path: string; message: string }[];
  safe: number;
  /** False when a breaking change is not allowed. */
  ok: boolean;
}

/** The text of CHANGELOG.md's first section whose heading says "unreleased" (empty when none). */
export function unreleasedSection(changelog: string): string {
  const sections = changelog.split(/^## /m);
  return sections.find((section) => /^[^\n]*unreleased/i.test(section)) ?? '';
}

/** Whether the schema element at `path` (or the field it belongs to) is deprecated in `schema`. */
function deprecatedIn(schema: GraphQLSchema, path: string): boolean {
  const [typeName, fieldName, argName] = path.split('.');
  const type = typeName === undefined ? undefined : schema.getType(typeName);
  if (type === undefined || type === null || fieldName === undefined) return false;
  if (isEnumType(type)) return type.getValue(fieldName)?.deprecationReason != null;
  if (isObjectType(type) || isInterfaceType(type)) {
    const field = type.getFields()[fieldName];
    if (field === undefined) return false;
    if (field.deprecationReason != null) return true;
    return argName !== undefined && field.args.find((arg) => arg.name === argName)?.deprecationReason != null;
  }
  if (isInputObjectType(type)) return type.getFields()[fieldName]?.deprecationReason != null;
  return false;
}

/** The names of every type reachable from the schema's root types through fields, arguments, union members and implementations. */
export function reachableTypes(schema: GraphQLSchema): Set<string> {
  const seen = new Set<string>();
  const implementations = new Map<string, string[]>();
  for (const type of Object.values(schema.getTypeMap())) {
    if (isObjectType(type) || isInterfaceType(type)) for (const i of type.getInterfaces()) implementations.set(i.name, [...(implementations.get(i.name) ?? []), type.name]);
  }
  const queue: GraphQLNamedType[] = [schema.getQueryType(), schema.getMutationType(), schema.getSubscriptionType()].filter((t): t is NonNullable<typeof t> => t != null);
  while (queue.length > 0) {
    const type = queue.pop()!;
    if (seen.has(type.name)) continue;
    seen.add(type.name);
    const next: GraphQLNamedType[] = [];
    if (isObjectType(type) || isInterfaceType(type)) {
      for (const field of Object.values(type.getFields())) {
        next.push(getNamedType(field.type));
        for (const arg of field.args) next.push(getNamedType(arg.type));
      }
      for (const name of implementations.get(type.name) ?? []) next.push(schema.getType(name)!);
    }
    if (isUnionType(type)) next.push(...type.getTypes());
    if (isInputObjectType(type)) for (const field of Object.values(type.getFields())) next.push(getNamedType(field.type));
    queue.push(...next.filter((t) => !seen.has(t.name)));
  }
  return seen;
}

/** Whether the changelog text names `path` as a coordinate (backticked or bare, not as part of a longer one). */
function named(changelog: string, path: string): boolean {
  const escaped = path.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return new RegExp(`(^|[^\\w.])${escaped}($|[^\\w.])`, 'm').test(changelog);
}

/** Compares two schemas (SDL) under the rules above; `changelog` is the whole CHANGELOG.md. */
export async function checkSchemaCompatibility(released: string, current: string, changelog: string): Promise<SchemaCompatibility> {
  const before = buildSchema(released);
  const after = buildSchema(current);
  const changes: Change[] = await diff(before, after);
  const unreleased = unreleasedSection(changelog);
  const reachable = reachableTypes(before);
  const breaking: BreakingChange[] = [];
  const dangerous: SchemaCompatibility['dangerous'] = [];
  let safe = 0;
  for (const change of changes) {
    const path = change.path ?? '(schema)';
    const unreachableRemoval = change.type === 'TYPE_REMOVED' && !reachable.has(path);
    if (change.criticality.level === CriticalityLevel.Breaking && !unreachableRemoval) {
      const inChangelog = named(unreleased, path);
      const deprecated = deprecatedIn(before, path);
      const allowed = inChangelog && deprecated;
      const why = allowed
        ? 'deprecated in the released schema and named in CHANGELOG'
        : [!deprecated && 'not deprecated in the released schema first', !inChangelog && 'not named in CHANGELOG’s unreleased section'].filter(Boolean).join('; ');
      breaking.push({ path, message: change.message, allowed, why });
    } else if (change.criticality.level === CriticalityLevel.Dangerous) {
      dangerous.push({ path, message: change.message });
    } else {
      safe += 1;
    }
  }
  return { breaking, dangerous, safe, ok: breaking.every((change) => change.allowed) };
}

/** The report the command prints. */
export function formatCompatibility(result: SchemaCompatibility): string {
  const lines = [`schema check: ${result.breaking.length} breaking, ${result.dangerous.length} dangerous, ${result.safe} safe change(s) since the released schema`];
  for (const change of result.breaking) lines.push(`  ${change.allowed ? 'allowed ' : 'BREAKING'} ${change.path}: ${change.message} (${change.why})`);
  for (const change of result.dangerous) lines.push(`  dangerous ${change.path}: ${change.message}`);
  lines.push(result.ok ? 'ok' : 'refused: deprecate first and name each breaking change in CHANGELOG.md’s unreleased section (docs/api.md, "Schema compatibility")');
  return `${lines.join('\n')}\n`;
}

export const schemaCheckCommand: Command = {
  summary: 'compare the schema with the released one; fail on unannounced breaking changes',
  usage: `usage: npm run schema:check

Diffs today's schema (schema/index.ts) against schema/released.graphql. A
breaking change fails unless the released schema deprecated what it breaks
and CHANGELOG.md's unreleased section names its coordinate (Type.field).
Dangerous changes are listed. Exit 0 when nothing breaks unannounced.
`,

  async run(io) {
    if (wantsHelp(io.argv)) {
      io.stdout(schemaCheckCommand.usage);
      return 0;
    }
    if (io.argv.length > 0) return usageError(io, schemaCheckCommand, `unknown argument ${JSON.stringify(io.argv[0])}`);
    try {
      const { schema } = await import('../../schema/index.js');
      const released = await readFile(join(io.cwd, 'schema', 'released.graphql'), 'utf8');
      const changelog = await readFile(join(io.cwd, 'CHANGELOG.md'), 'utf8');
      const result = await checkSchemaCompatibility(released, printSchema(schema), changelog);
      (result.ok ? io.stdout : io.stderr)(formatCompatibility(result));
      return result.ok ? 0 : 1;
    } catch (error) {
      io.stderr(failureLine('schema:check', error));
      return 1;
    }
  },
};
