/**
 * Compiled execution (graphql-jit) for queries and mutations: each document
 * is compiled once into plain functions, which roughly halves the execution
 * cost of a page of nodes (`npm run bench`, throughput table).
 *
 * graphql-jit coerces variables on its own and says less than graphql-js
 * when one is wrong (`Expected type DID.` instead of the scalar's own
 * message). A compiled query refuses such variables before any resolver
 * runs, answering errors and no `data`; only then does the request run
 * again through graphql-js, which reports it in its own words. (Checking
 * every request's variables with graphql-js first, as this plugin used to,
 * coerced them twice: ~2.5 % of a mutation's CPU.) graphql-jit also walks
 * deep JSON variables recursively, so variables deeper than any input
 * accepts go to graphql-js, which refuses them clearly. Subscriptions are
 * never compiled (their streams, filters and cancellation stay on
 * graphql-js), nor is a document graphql-jit cannot compile.
 */
import { getOperationAST, type DocumentNode, type ExecutionArgs } from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import { makeExecute, type Plugin } from 'graphql-yoga';

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

/** The yoga plugin. */
export function useCompiledExecution(): Plugin {
  // Per parsed document (yoga's parser cache hands out the same object) and operation name; null: not compilable.
  // One plugin per server app, so one schema.
  const compiled = new WeakMap<DocumentNode, Map<string, CompiledQuery | null>>();
  const compiledFor = (args: ExecutionArgs): CompiledQuery | null => {
    let byName = compiled.get(args.document);
    if (byName === undefined) compiled.set(args.document, (byName = new Map()));
    const name = args.operationName ?? '';
    let query = byName.get(name);
    if (query === undefined) {
      const result = compileQuery(args.schema, args.document, args.operationName ?? undefined);
      query = isCompiledQuery(result) ? result : null;
      byName.set(name, query);
    }
    return query;
  };
  return {
    onExecute({ args, executeFn, setExecuteFn }) {
      const operation = getOperationAST(args.document, args.operationName);
      if (operation === null || operation === undefined || operation.operation === 'subscription') return;
      if ((operation.variableDefinitions?.length ?? 0) > 0 && deeperThan(args.variableValues, MAX_COMPILED_VARIABLE_DEPTH)) return;
      const query = compiledFor(args);
      if (query === null) return;
      setExecuteFn(
        makeExecute(async (run) => {
          const result = await query.query(run.rootValue, run.contextValue, run.variableValues);
          // Variables refused before anything ran: graphql-js runs the request and says why.
          if (!('data' in result)) return executeFn(run);
          return Object.assign(result, { stringify: query.stringify });
        }),
      );
    },
  };
}
