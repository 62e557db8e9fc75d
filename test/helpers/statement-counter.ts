/** A store context over the same database that records every statement it runs. */
import type { StoreContext } from '../../src/store/context.js';

/**
 * Returns a copy of `store` whose executed statements are appended (as the
 * root node kind, e.g. `SelectQueryNode`) to `statements`.
 *
 * Counted when a result comes back, not in `transformQuery`: Kysely also
 * runs `transformQuery` for every nested builder (subqueries, union
 * branches), which would count one statement several times.
 */
export function withStatementCounter(store: StoreContext): { store: StoreContext; statements: string[] } {
  const statements: string[] = [];
  const kinds = new Map<unknown, string>();
  const db = store.db.withPlugin({
    transformQuery: (args) => {
      kinds.set(args.queryId, args.node.kind);
      return args.node;
    },
    transformResult: async (args) => {
      statements.push(kinds.get(args.queryId) ?? 'unknown');
      kinds.delete(args.queryId);
      return args.result;
    },
  });
  return { store: { ...store, db }, statements };
}
