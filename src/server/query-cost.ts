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

/** Refuses operations that cost more than `maxCost`. */
export function useQueryCostBudget(maxCost: number): Plugin {
  const refuse = (errors: readonly GraphQLError[]) => ({
    errors: errors.map((error) => new GraphQLError(error.message, { extensions: { ...error.extensions, http: { status: 400 } } })),
  });
  return {
    onExecute: ({ args, setResultAndStopExecution }) => {
      const errors = overBudget(args.schema, args.document, args, maxCost);
      if (errors.length > 0) setResultAndStopExecution(refuse(errors));
    },
    onSubscribe: ({ args, setResultAndStopExecution }) => {
      const errors = overBudget(args.schema, args.document, args, maxCost);
      if (errors.length > 0) setResultAndStopExecution(refuse(errors));
    },
  };
}
