/**
 * The per-request cost budget: before an operation runs (or a subscription
 * starts), its complexity is computed from the schema's field costs
 * (`schema/complexity.ts`) with this request's variables, and an operation
 * over `maxCost` is refused with `QUERY_COMPLEXITY` and nothing resolved.
 * Done at execution, not validation, because the price depends on variables
 * (`nodes(ids: $ids)`, `first: $n`) and yoga caches validation per document.
 */
import { createComplexityRule } from '@pothos/plugin-complexity';
import { GraphQLError, validate, type DocumentNode, type GraphQLSchema } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { LRUCache } from 'lru-cache';

/** Budget verdicts per document (yoga caches parsed documents, so the same object comes back), then per variables and operation. */
const VERDICTS_PER_DOCUMENT = 64;
/** Variables longer than this (as JSON) are priced every time rather than kept. */
const MAX_REMEMBERED_KEY = 2_048;

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

/** The cache key of a request's verdict, or undefined for variables too long (or too deep to stringify) to keep. */
function rememberedKey(operationName: string | null | undefined, variables: unknown): string | undefined {
  let json: string;
  try {
    json = JSON.stringify(variables ?? {});
  } catch {
    return undefined; // nested past the engine's stack: priced (and refused by the input rules) without caching
  }
  return json.length > MAX_REMEMBERED_KEY ? undefined : `${operationName ?? ''}\u0000${json}`;
}

/**
 * Refuses operations that cost more than `maxCost`. The verdict of a
 * (document, operation name, variables) is remembered: the field costs depend
 * on arguments only, so a dashboard polling one query pays the walk once.
 */
export function useQueryCostBudget(maxCost: number): Plugin {
  const refuse = (errors: readonly GraphQLError[]) => ({
    errors: errors.map((error) => new GraphQLError(error.message, { extensions: { ...error.extensions, http: { status: 400 } } })),
  });
  const verdicts = new WeakMap<DocumentNode, LRUCache<string, readonly GraphQLError[]>>();
  const check = (args: { schema: GraphQLSchema; document: DocumentNode; variableValues?: unknown; operationName?: string | null; contextValue: unknown }) => {
    let perDocument = verdicts.get(args.document);
    if (perDocument === undefined) verdicts.set(args.document, (perDocument = new LRUCache({ max: VERDICTS_PER_DOCUMENT })));
    const key = rememberedKey(args.operationName, args.variableValues);
    if (key === undefined) return overBudget(args.schema, args.document, args, maxCost);
    let errors = perDocument.get(key);
    if (errors === undefined) perDocument.set(key, (errors = overBudget(args.schema, args.document, args, maxCost)));
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
