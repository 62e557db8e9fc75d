/**
 * The per-request cost budget: before an operation runs (or a subscription
 * starts), its complexity is computed from the schema's field costs
 * (`schema/complexity.ts`) with this request's variables, and an operation
 * over `maxCost` is refused with `QUERY_COMPLEXITY` and nothing resolved.
 * The same check adds up the rows its bulk fields may write (their `bulkRows`
 * extension: a bulk action's cap, a receipt's candidates, every alias
 * counted) and refuses more than `maxBulkRows` the same way (issue 19).
 * Done at execution, not validation, because the price depends on variables
 * (`nodes(ids: $ids)`, `first: $n`, `input: { cap }`) and yoga caches
 * validation per document.
 */
import { createComplexityRule } from '@pothos/plugin-complexity';
import {
  getArgumentValues,
  getNamedType,
  getOperationAST,
  GraphQLError,
  isInterfaceType,
  isObjectType,
  Kind,
  validate,
  visit,
  type DocumentNode,
  type FragmentDefinitionNode,
  type GraphQLNamedType,
  type GraphQLSchema,
  type SelectionSetNode,
} from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';

/** Budget verdicts per document (yoga caches parsed documents, so the same object comes back), then per priced variables and operation. */
const VERDICTS_PER_DOCUMENT = 64;

/**
 * The variables of a document that feed a priced argument (`first: $n`,
 * `ids: $ids`): only they can change its price, so only they key the verdict
 * (a claim's `$input` differs on every request and prices the same).
 */
function pricedVariables(document: DocumentNode, costArguments: ReadonlySet<string>): string[] {
  const names = new Set<string>();
  visit(document, {
    Argument(node) {
      if (!costArguments.has(node.name.value)) return;
      visit(node.value, { Variable: (variable) => void names.add(variable.name.value) });
    },
  });
  return [...names].sort();
}

/**
 * What a priced variable contributes to the price: a number as it is, a list
 * by its length, an input object by its priced fields only (a bulk action's
 * `input` by its `cap`, not its filter).
 */
function priceOf(value: unknown, costArguments: ReadonlySet<string>): unknown {
  if (Array.isArray(value)) return { length: value.length };
  if (typeof value === 'number' || value === null || value === undefined) return value ?? null;
  if (typeof value === 'object') {
    const priced = Object.entries(value as Record<string, unknown>).filter(([key]) => costArguments.has(key));
    return Object.fromEntries(priced.sort(([a], [b]) => (a < b ? -1 : 1)).map(([key, child]) => [key, priceOf(child, costArguments)]));
  }
  return typeof value;
}

/** What a bulk field's extension computes: the rows it may write, from its arguments. */
type BulkRowsOf = (args: Record<string, unknown>) => number;

/** What the schema prices by (`schema/complexity.ts`). */
export interface QueryPricing {
  /** The only argument and input-field names any price reads (`COST_ARGUMENTS`). */
  costArguments: ReadonlySet<string>;
  /** The field extension holding a bulk field's {@link BulkRowsOf} (`BULK_ROWS`). */
  bulkRowsExtension: string;
}

/**
 * The rows every bulk field of the operation may write together: each field
 * whose definition carries a `bulkRows` extension, under every alias and
 * fragment it is selected through (a field selected twice under one name
 * runs once, and counts twice: the bound errs on the safe side). Arguments
 * execution would refuse count nothing here; execution reports them.
 */
function bulkRowsOf(
  schema: GraphQLSchema,
  document: DocumentNode,
  operationName: string | null | undefined,
  variables: Record<string, unknown>,
  extension: string,
): number {
  const operation = getOperationAST(document, operationName ?? undefined);
  const root = operation ? schema.getRootType(operation.operation) : null;
  if (!operation || !root) return 0;
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  let rows = 0;
  const walk = (selectionSet: SelectionSetNode, type: GraphQLNamedType | undefined, spread: ReadonlySet<string>): void => {
    for (const selection of selectionSet.selections) {
      if (selection.kind === Kind.FIELD) {
        const field = type && (isObjectType(type) || isInterfaceType(type)) ? type.getFields()[selection.name.value] : undefined;
        if (field === undefined) continue;
        const price = field.extensions?.[extension] as BulkRowsOf | undefined;
        if (typeof price === 'function') {
          try {
            rows += price(getArgumentValues(field, selection, variables));
          } catch {
            // Arguments it cannot read are execution's to refuse.
          }
        }
        if (selection.selectionSet) walk(selection.selectionSet, getNamedType(field.type), spread);
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        walk(selection.selectionSet, selection.typeCondition ? schema.getType(selection.typeCondition.name.value) : type, spread);
      } else {
        const fragment = fragments.get(selection.name.value);
        if (fragment === undefined || spread.has(fragment.name.value)) continue;
        walk(fragment.selectionSet, schema.getType(fragment.typeCondition.name.value), new Set([...spread, fragment.name.value]));
      }
    }
  };
  walk(operation.selectionSet, root, new Set());
  return rows;
}

/** The bulk-rows error of an operation over `maxBulkRows` (none when it fits). */
function overBulkRows(rows: number, maxBulkRows: number): GraphQLError[] {
  if (rows <= maxBulkRows) return [];
  return [
    new GraphQLError(
      `the operation may write ${rows} rows in bulk, more than the ${maxBulkRows} one request may (MAX_BULK_ROWS_PER_REQUEST): lower the caps, or send the actions in separate requests`,
      { extensions: { code: 'QUERY_COMPLEXITY', bulkRows: { actual: rows, max: maxBulkRows } } },
    ),
  ];
}

/**
 * The budget errors of one operation (empty when it fits). Other problems the
 * rule meets on the way (an argument its validation refuses, bad variables)
 * are left to execution, which reports them as it always does.
 */
function overBudget(schema: GraphQLSchema, document: DocumentNode, args: { variableValues?: unknown; operationName?: string | null; contextValue: unknown }, maxCost: number) {
  const errors = validate(schema, document, [
    createComplexityRule({
      context: args.contextValue as object,
      variableValues: (args.variableValues ?? {}) as Record<string, unknown>,
      ...(args.operationName != null && { operationName: args.operationName }),
      maxComplexity: maxCost,
    }),
  ]);
  return errors.filter((error) => error.extensions.code === 'QUERY_COMPLEXITY');
}

/** What {@link useQueryCostBudget} holds each request to. */
export interface QueryCostLimits {
  /** Most a request may cost (`MAX_QUERY_COST`). */
  maxCost: number;
  /** Most rows its bulk fields may write together (`MAX_BULK_ROWS_PER_REQUEST`). */
  maxBulkRows: number;
}

/**
 * Refuses operations that cost more than `maxCost`, or whose bulk fields may
 * write more than `maxBulkRows` rows together. The verdict of a (document,
 * operation name, priced variables) is remembered: prices read only
 * `costArguments`, so a dashboard polling one query, or a worker sending one
 * mutation with new inputs, pays the walk once.
 */
export function useQueryCostBudget(limits: QueryCostLimits, { costArguments, bulkRowsExtension }: QueryPricing): Plugin {
  const refuse = (errors: readonly GraphQLError[]) => ({
    errors: errors.map((error) => new GraphQLError(error.message, { extensions: { ...error.extensions, http: { status: 400 } } })),
  });
  const verdicts = new WeakMap<DocumentNode, { priced: string[]; byKey: LRUCache<string, readonly GraphQLError[]> }>();
  const check = (args: { schema: GraphQLSchema; document: DocumentNode; variableValues?: unknown; operationName?: string | null; contextValue: unknown }) => {
    let perDocument = verdicts.get(args.document);
    if (perDocument === undefined) {
      perDocument = { priced: pricedVariables(args.document, costArguments), byKey: new LRUCache({ max: VERDICTS_PER_DOCUMENT }) };
      verdicts.set(args.document, perDocument);
    }
    const variables = (args.variableValues ?? {}) as Record<string, unknown>;
    const key = JSON.stringify([args.operationName ?? null, ...perDocument.priced.map((name) => priceOf(variables[name], costArguments))]);
    let errors = perDocument.byKey.get(key);
    if (errors === undefined) {
      errors = overBudget(args.schema, args.document, args, limits.maxCost);
      if (errors.length === 0) errors = overBulkRows(bulkRowsOf(args.schema, args.document, args.operationName, variables, bulkRowsExtension), limits.maxBulkRows);
      perDocument.byKey.set(key, errors);
    }
    return errors;
  };
  return {
    onExecute: ({ args, setResultAndStopExecution }) => {
      const errors = check(args);
      if (errors.length > 0) setResultAndStopExecution(refuse(errors));
    },
    onSubscribe: ({ args, setResultAndStopExecution }) => {
      const errors = check(args);
      if (errors.length > 0) setResultAndStopExecution(refuse(errors));
    },
  };
}
