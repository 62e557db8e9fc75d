/**
 * A documented schema (docs/api.md): every named type, field, argument,
 * input field and enum value of the built schema has a description, so
 * integrators read what an element means instead of guessing. Only GraphQL's
 * own parts are exempt: the `__*` introspection types, the built-in scalars
 * and the standard directives.
 */
import {
  buildSchema,
  isEnumType,
  isInputObjectType,
  isInterfaceType,
  isObjectType,
  isSpecifiedDirective,
  isSpecifiedScalarType,
  type GraphQLArgument,
  type GraphQLSchema,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import { schema } from '../../schema/index.js';

const described = (description: string | null | undefined): boolean => (description ?? '').trim() !== '';

/** Paths of every element without a description: `Type`, `Type.field`, `Type.field(arg:)`, `Enum.VALUE`, `@directive(arg:)`. */
function undescribedElements(target: GraphQLSchema): string[] {
  const missing: string[] = [];
  const checkArgs = (owner: string, args: readonly GraphQLArgument[]) => {
    for (const arg of args) if (!described(arg.description)) missing.push(`${owner}(${arg.name}:)`);
  };
  for (const type of Object.values(target.getTypeMap())) {
    if (type.name.startsWith('__') || isSpecifiedScalarType(type)) continue;
    if (!described(type.description)) missing.push(type.name);
    if (isObjectType(type) || isInterfaceType(type)) {
      for (const field of Object.values(type.getFields())) {
        const path = `${type.name}.${field.name}`;
        if (!described(field.description)) missing.push(path);
        checkArgs(path, field.args);
      }
    } else if (isInputObjectType(type)) {
      for (const field of Object.values(type.getFields())) if (!described(field.description)) missing.push(`${type.name}.${field.name}`);
    } else if (isEnumType(type)) {
      for (const value of type.getValues()) if (!described(value.description)) missing.push(`${type.name}.${value.name}`);
    }
  }
  for (const directive of target.getDirectives()) {
    if (isSpecifiedDirective(directive)) continue;
    if (!described(directive.description)) missing.push(`@${directive.name}`);
    checkArgs(`@${directive.name}`, directive.args);
  }
  return missing.sort();
}

describe('schema descriptions', () => {
  it('every type, field, argument, input field and enum value is described', () => {
    expect(undescribedElements(schema), 'undescribed schema elements: add a `description` in schema/*.ts').toEqual([]);
  });

  it('the check names every kind of undescribed element, and skips GraphQL’s own', () => {
    const sample = buildSchema(`
      "Described."
      type Query { a(x: Int): Thing "Described." b: String @deprecated }
      type Thing { id: ID }
      "Described." interface Named { name: String }
      union Either = Thing
      input Filter { "Described." ok: Boolean, open: Boolean }
      "Described." enum Kind { "Described." ONE TWO }
      scalar Stamp
      directive @tag(name: String) on FIELD_DEFINITION
    `);
    expect(undescribedElements(sample)).toEqual(
      [
        '@tag',
        '@tag(name:)',
        'Either',
        'Filter',
        'Filter.open',
        'Kind.TWO',
        'Named.name',
        'Query.a',
        'Query.a(x:)',
        'Stamp',
        'Thing',
        'Thing.id',
      ].sort(),
    );
  });
});
