/** A store context over the same database that records every statement it runs. */
import type { StoreContext } from '../../src/store/context.js';

/** Returns a copy of `store` whose statements are appended (as SQL text) to `statements`. */
export function withStatementCounter(store: StoreContext): { store: StoreContext; statements: string[] } {
  const statements: string[] = [];
  const db = store.db.withPlugin({
    transformQuery: (args) => {
      statements.push(args.node.kind);
      return args.node;
    },
    transformResult: async (args) => args.result,
  });
  return { store: { ...store, db }, statements };
}
