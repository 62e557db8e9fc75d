/**
 * Live changes for one subscriber. Each committed change of the right kind
 * is queued; the subscriber resolves the node through the same per-request
 * loaders (and so the same visibility rules) as queries, with a fresh loader
 * cache per event, and yields it if it is visible and matches. An invisible
 * node is skipped exactly like a node that does not exist.
 */
import { contextCacheSymbol } from '@pothos/core';
import { GraphQLError } from 'graphql';
import { Repeater } from 'graphql-yoga';
import type { ChangeEvent, ChangeKind } from '../src/server/change-feed.js';
import type { GraphQLContext } from '../schema/context.js';
import { viewerDID } from './viewer.js';

/**
 * Events a subscriber may have waiting. Past it, waiting events of the same
 * node are merged (each event reloads the node, so only the last matters);
 * a subscriber with this many distinct nodes waiting is closed as too slow.
 */
export const MAX_PENDING_EVENTS = 1_000;

/** What one subscription listens for. */
export interface ChangeStreamOptions<T> {
  kind: ChangeKind;
  /** Cheap pre-filter on the node key (e.g. one id); default: every key. */
  nodeKey?: string;
  /** Loads the changed node with the subscriber's loaders; null when missing or invisible. */
  load: (event: ChangeEvent, ctx: GraphQLContext) => Promise<T | null>;
  /** Whether a loaded node belongs in this stream (filters); default: all. */
  accept?: (node: T) => boolean;
}

/**
 * The async stream a subscription field returns. It listens from the moment
 * the subscription is accepted (not from the first read), and closing it,
 * whether or not it was ever read, frees its slot and its listener.
 */
export function changeStream<T>(ctx: GraphQLContext, options: ChangeStreamOptions<T>): AsyncIterableIterator<T> {
  // Refused before anything is registered, so a refusal holds nothing.
  const release = ctx.subscriptions.open(viewerDID(ctx.viewer));
  let queue: ChangeEvent[] = [];
  let wake: (() => void) | undefined;
  let failure: GraphQLError | undefined;
  const unlisten = ctx.changes.listen((event) => {
    if (failure !== undefined || event.kind !== options.kind) return;
    if (options.nodeKey !== undefined && event.nodeKey !== options.nodeKey) return;
    if (queue.length >= MAX_PENDING_EVENTS) queue = lastOccurrences(queue);
    if (queue.length >= MAX_PENDING_EVENTS) {
      failure = new GraphQLError('subscriber too slow: re-query, then subscribe again', { extensions: { code: 'SUBSCRIBER_TOO_SLOW' } });
      queue = [];
    } else {
      queue.push(event);
    }
    wake?.();
  });
  let cleaned = false;
  const cleanup = () => {
    if (cleaned) return;
    cleaned = true;
    unlisten();
    unregister();
    release();
    wake?.();
  };

  const repeater = new Repeater<T>(async (push, stop) => {
    let stopped = false;
    void stop.then(() => {
      stopped = true;
      wake?.();
    });
    try {
      while (!stopped && !cleaned) {
        if (failure !== undefined) {
          stop(failure);
          break;
        }
        const event = queue.shift();
        if (event === undefined) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
          continue;
        }
        // A fresh loader cache for this event: the subscription's context
        // lives as long as the stream, and a cached row would be stale.
        (ctx as unknown as Record<symbol, object>)[contextCacheSymbol] = {};
        const node = await options.load(event, ctx);
        if (node !== null && (options.accept?.(node) ?? true)) await push(node);
      }
    } catch (error) {
      ctx.log.error({ err: error }, 'subscription failed');
      stop(new GraphQLError('Unexpected error.', { extensions: { code: 'INTERNAL_SERVER_ERROR' } }));
    } finally {
      cleanup();
    }
  });
  const unregister = ctx.subscriptions.register(() => {
    void repeater.return();
    cleanup();
  });

  return {
    next: () => repeater.next(),
    return: async (value?: unknown) => {
      try {
        return await repeater.return(value as T);
      } finally {
        cleanup();
      }
    },
    throw: async (error?: unknown) => {
      try {
        return await repeater.throw(error);
      } finally {
        cleanup();
      }
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/** The queue with each node kept only at its last event. */
function lastOccurrences(queue: readonly ChangeEvent[]): ChangeEvent[] {
  const seen = new Set<string>();
  const kept: ChangeEvent[] = [];
  for (let i = queue.length - 1; i >= 0; i--) {
    const event = queue[i]!;
    if (!seen.has(event.nodeKey)) {
      seen.add(event.nodeKey);
      kept.push(event);
    }
  }
  return kept.reverse();
}

const snapshots = new WeakMap<ChangeEvent, Promise<unknown>>();

/**
 * The row a change event points at, read once per event per process and
 * shared by every subscriber that handles that event (the feed hands the same
 * event object to all of them): 200 subscribers cost one read, not 200. Each
 * subscriber still judges the row with its own viewer (see `primeVisible`).
 */
export function snapshotOf<R>(event: ChangeEvent, read: () => Promise<R>): Promise<R> {
  let pending = snapshots.get(event) as Promise<R> | undefined;
  if (pending === undefined) {
    pending = read();
    snapshots.set(event, pending);
  }
  return pending;
}

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
