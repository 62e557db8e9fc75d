/**
 * The per-request cost budget: before an operation runs (or a subscription
 * starts), its complexity is computed from the schema's field costs
 * (`schema/complexity.ts`) with this request's variables, and an operation
 * over `maxCost` is refused with `QUERY_COMPLEXITY` and nothing resolved.
 * Done at execution, not validation, because the price depends on variables
 * (`nodes(ids: $ids)`, `first: $n`) and yoga caches validation per document.
 */
import { createComplexityRule } from '@pothos/plugin-complexity';
import { GraphQLError, validate, visit, type DocumentNode, type GraphQLSchema } from 'graphql';
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

/** What a priced variable contributes to the price: a number as it is, a list by its length. */
function priceOf(value: unknown): unknown {
  return Array.isArray(value) ? { length: value.length } : typeof value === 'number' || value === null || value === undefined ? (value ?? null) : typeof value;
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

/**
 * Refuses operations that cost more than `maxCost`. The verdict of a
 * (document, operation name, priced variables) is remembered: prices read only
 * `costArguments`, so a dashboard polling one query, or a worker sending one
 * mutation with new inputs, pays the walk once.
 */
export function useQueryCostBudget(maxCost: number, costArguments: ReadonlySet<string>): Plugin {
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
    const key = JSON.stringify([args.operationName ?? null, ...perDocument.priced.map((name) => priceOf(variables[name]))]);
    let errors = perDocument.byKey.get(key);
    if (errors === undefined) perDocument.byKey.set(key, (errors = overBudget(args.schema, args.document, args, maxCost)));
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
