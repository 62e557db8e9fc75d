/**
 * What a request selects below a field, read from its resolve info, so a
 * resolver can ask the store only for the columns the answer needs.
 */
import { isAbstractType, Kind, type FieldNode, type GraphQLResolveInfo, type SelectionSetNode } from 'graphql';

/**
 * The names of the fields selected at `path` below the field being resolved
 * (e.g. `['edges', 'node']` below a connection), through fragment spreads
 * and inline fragments, and whatever their `@skip` or `@include`: a
 * superset of what the answer reads, never less. With `onType`, the last
 * step of the path leaves out fragments on another object type (under a
 * field of an interface type such as `node`, `... on ProjectionWatch` never
 * applies to a `ConnectorOperation`).
 */
export function selectedFieldNames(info: Pick<GraphQLResolveInfo, 'fieldNodes' | 'fragments' | 'schema'>, path: readonly string[] = [], onType?: string): Set<string> {
  let sets: SelectionSetNode[] = info.fieldNodes.flatMap((node) => (node.selectionSet === undefined ? [] : [node.selectionSet]));
  for (const name of path) sets = fieldsOf(sets, info).flatMap((field) => (field.name.value === name && field.selectionSet !== undefined ? [field.selectionSet] : []));
  return new Set(fieldsOf(sets, info, onType).map((field) => field.name.value));
}

/** The fields of `sets`, fragments spread in place (with `onType`: those that may apply to it). */
function fieldsOf(sets: readonly SelectionSetNode[], info: Pick<GraphQLResolveInfo, 'fragments' | 'schema'>, onType?: string): FieldNode[] {
  const fields: FieldNode[] = [];
  const applies = (condition: string | undefined) => {
    if (onType === undefined || condition === undefined || condition === onType) return true;
    const type = info.schema.getType(condition);
    return type === undefined || isAbstractType(type);
  };
  const visit = (set: SelectionSetNode, seen: ReadonlySet<string>) => {
    for (const selection of set.selections) {
      if (selection.kind === Kind.FIELD) fields.push(selection);
      else if (selection.kind === Kind.INLINE_FRAGMENT) {
        if (applies(selection.typeCondition?.name.value)) visit(selection.selectionSet, seen);
      } else if (!seen.has(selection.name.value)) {
        const fragment = info.fragments[selection.name.value];
        if (fragment !== undefined && applies(fragment.typeCondition.name.value)) visit(fragment.selectionSet, new Set([...seen, selection.name.value]));
      }
    }
  };
  for (const set of sets) visit(set, new Set());
  return fields;
}
