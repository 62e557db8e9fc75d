/**
 * The per-process cap on open subscriptions per viewer, and the registry of
 * open streams that shutdown ends. A resource limit of this process, not a
 * data invariant, so it lives in memory.
 */
import { GraphQLError } from 'graphql';

/** A per-process cap on open subscriptions per viewer. */
export function createSubscriptionLimiter(maxPerViewer: number) {
  const open = new Map<string, number>();
  const streams = new Set<() => void>();
  return {
    /** Remembers how to end a stream; returns the function that forgets it. */
    register(end: () => void): () => void {
      streams.add(end);
      return () => streams.delete(end);
    },
    /** Ends every open stream (server shutdown). */
    closeAll(): void {
      for (const end of [...streams]) end();
    },
    open(viewer: string): () => void {
      const count = open.get(viewer) ?? 0;
      if (count >= maxPerViewer) {
        throw new GraphQLError(`too many open subscriptions (at most ${maxPerViewer} per viewer)`, {
          extensions: { code: 'TOO_MANY_SUBSCRIPTIONS' },
        });
      }
      open.set(viewer, count + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        const left = (open.get(viewer) ?? 1) - 1;
        if (left <= 0) open.delete(viewer);
        else open.set(viewer, left);
      };
    },
    /** Open subscriptions of one viewer (for tests and metrics). */
    count: (viewer: string) => open.get(viewer) ?? 0,
  };
}
