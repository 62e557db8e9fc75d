/**
 * The per-process cap on open subscriptions per viewer, and the registry of
 * open streams that shutdown ends. A resource limit of this process, not a
 * data invariant, so it lives in memory.
 */
import { GraphQLError } from 'graphql';

/**
 * Per-process caps on open subscriptions: `maxPerViewer` for one viewer, and
 * `maxTotal` for all of them together, so many fresh identities cannot add
 * up to an unbounded number of streams. Default total: no cap beyond the
 * per-viewer one.
 */
export function createSubscriptionLimiter(maxPerViewer: number, maxTotal = Number.POSITIVE_INFINITY) {
  const open = new Map<string, number>();
  let total = 0;
  const perTransport = new Map<string, number>();
  const streams = new Set<() => void>();
  const limiter = {
    /** Remembers how to end a stream; returns the function that forgets it. */
    register(end: () => void): () => void {
      streams.add(end);
      return () => streams.delete(end);
    },
    /** Ends every open stream (server shutdown). */
    closeAll(): void {
      for (const end of [...streams]) end();
    },
    /** Opens one for `viewer` over `transport` (for metrics: `sse`, `websocket`); throws at a cap. Returns its release. */
    open(viewer: string, transport = 'sse'): () => void {
      const count = open.get(viewer) ?? 0;
      if (count >= maxPerViewer) {
        throw new GraphQLError(`too many open subscriptions (at most ${maxPerViewer} per viewer)`, {
          extensions: { code: 'TOO_MANY_SUBSCRIPTIONS' },
        });
      }
      if (total >= maxTotal) {
        // Retryable: another replica (or this one, later) has room.
        throw new GraphQLError(`this server holds its maximum of ${maxTotal} open subscriptions; retry later or elsewhere`, {
          extensions: { code: 'OVERLOADED', retryable: true },
        });
      }
      open.set(viewer, count + 1);
      total++;
      perTransport.set(transport, (perTransport.get(transport) ?? 0) + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        total--;
        perTransport.set(transport, (perTransport.get(transport) ?? 1) - 1);
        const left = (open.get(viewer) ?? 1) - 1;
        if (left <= 0) open.delete(viewer);
        else open.set(viewer, left);
      };
    },
    /** Open subscriptions of one viewer (for tests and metrics). */
    count: (viewer: string) => open.get(viewer) ?? 0,
    /** Open subscriptions of every viewer. */
    total: () => total,
    /** Open subscriptions per transport (metrics). */
    byTransport: (): ReadonlyMap<string, number> => perTransport,
    /** The same limiter, opening over one transport: what a request's context gets. */
    over(transport: string) {
      return { open: (viewer: string) => limiter.open(viewer, transport), register: (end: () => void) => limiter.register(end) };
    },
  };
  return limiter;
}
