/**
 * Compiled execution (`@envelop/graphql-jit`) for queries and mutations: the
 * document is compiled once into plain functions, which roughly halves the
 * execution cost of a page of nodes (`npm run bench`, throughput table).
 *
 * graphql-jit coerces variables on its own and says less than graphql-js
 * when one is wrong (`Expected type DID.` instead of the scalar's own
 * message), and it walks deep JSON variables recursively. So a request runs
 * compiled only when graphql-js has already coerced its variables without
 * error and they are no deeper than any input accepts; any other request
 * runs through graphql-js, which reports it exactly as before. Subscriptions are never compiled (their
 * streams, filters and cancellation stay on graphql-js).
 */
import { useGraphQlJit } from '@envelop/graphql-jit';
import { getOperationAST, type ExecutionArgs } from 'graphql';
import { getVariableValues } from 'graphql/execution/values.js';
import type { Plugin } from 'graphql-yoga';

/** Deeper variables than any input accepts (JSON inputs stop at 64 levels) are left to graphql-js, which refuses them clearly. */
const MAX_COMPILED_VARIABLE_DEPTH = 72;

function deeperThan(value: unknown, limit: number): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (item === null || typeof item !== 'object') continue;
    if (depth >= limit) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) stack.push([child, depth + 1]);
  }
  return false;
}

function compiledExecutionFits(args: ExecutionArgs): boolean {
  const operation = getOperationAST(args.document, args.operationName);
  if (operation === null || operation === undefined || operation.operation === 'subscription') return false;
  const definitions = operation.variableDefinitions ?? [];
  if (definitions.length === 0) return true;
  if (deeperThan(args.variableValues, MAX_COMPILED_VARIABLE_DEPTH)) return false;
  const coerced = getVariableValues(args.schema, definitions, (args.variableValues ?? {}) as Record<string, unknown>, { maxErrors: 1 });
  return coerced.errors === undefined;
}

/** The yoga plugin. */
export function useCompiledExecution(): Plugin {
  return useGraphQlJit({}, { enableIf: compiledExecutionFits }) as Plugin;
}
