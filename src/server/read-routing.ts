/**
 * Where a GraphQL operation reads (issue 24): a query may read a hot standby
 * (`READ_DATABASE_URLS`, src/db/read-replicas.ts), everything else uses the
 * primary: mutations (and every read they make), subscriptions (whose reads
 * follow change events). Read-your-writes: every mutation answers
 * `extensions.consistencyToken`, the primary's WAL position after it; a
 * request that sends it back in the `Consistency-Token` header reads a
 * standby only once that standby has replayed past it, else the primary.
 */
import { getOperationAST, GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { GraphQLContext } from '../../resolvers/context.js';
import { parseLsn, type ReadRouter } from '../db/read-replicas.js';

/** The request header a client sends its last consistency token in. */
export const CONSISTENCY_TOKEN_HEADER = 'consistency-token';

/** The token in `headers`, or null when none is sent; a malformed one is refused (400, BAD_USER_INPUT), never ignored. */
export function readAfterOf(headers: Headers): bigint | null {
  const sent = headers.get(CONSISTENCY_TOKEN_HEADER);
  if (sent === null || sent.trim() === '') return null;
  const lsn = parseLsn(sent);
  if (lsn === null) {
    throw new GraphQLError(`the ${CONSISTENCY_TOKEN_HEADER} header is not a consistency token (send back extensions.consistencyToken of a mutation's answer, e.g. 0/3000148)`, {
      extensions: { code: 'BAD_USER_INPUT', http: { status: 400 } },
    });
  }
  return lsn;
}

/** The yoga plugin: a query's store reads through the router; a mutation's answer carries its consistency token. */
export function useReadRouting(router: ReadRouter): Plugin<GraphQLContext> {
  return {
    async onExecute({ args }) {
      const operation = getOperationAST(args.document, args.operationName)?.operation;
      const ctx = args.contextValue;
      if (operation === 'query') {
        const db = await router.readerFor(ctx.readAfter);
        if (db !== ctx.store.db) ctx.store = { ...ctx.store, db };
        return;
      }
      if (operation !== 'mutation') return;
      return {
        async onExecuteDone({ result, setResult }) {
          if (Symbol.asyncIterator in result) return;
          // After the mutation committed: any position at or past its commit record is a valid token.
          const token = await router.currentToken().catch(() => null);
          if (token !== null) setResult({ ...result, extensions: { ...result.extensions, consistencyToken: token } });
        },
      };
    },
  };
}
