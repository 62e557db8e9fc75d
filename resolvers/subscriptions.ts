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
import type DataLoader from 'dataloader';
import { getOperationsByNodeKeys, type ConnectorOperation } from '../src/store/operations/index.js';
import { getWatchesByNodeKeys, type ProjectionWatch } from '../src/store/projection-watches/index.js';
import { getSweepReceiptsByNodeKeys, type SweepReceipt } from '../src/store/sweeps/index.js';
import type { ChangeEvent, ChangeKind, GraphQLContext } from './context.js';
import { toStoreFilter, type OperationFilterArgs } from './operations.js';
import { matchesOperationFilter } from '../src/store/operations/index.js';
import { classifyDatabaseError } from '../src/store/errors.js';
import { canSeeOperation, canSeeOwned, viewerDID } from './viewer.js';
import { sweepReceiptMatches, type SweepReceiptFilterArgs } from './sweeps.js';
import type { WatchFilterArgs } from './watches.js';
import { storeChangeFor, type StoreChange, type StoreChangeSubject } from '../src/store/store-changes.js';

export type { StoreChange } from '../src/store/store-changes.js';

/**
 * Events a subscriber may have waiting. Past it, waiting events of the same
 * node are merged (each event reloads the node, so only the last matters);
 * a subscriber with this many distinct nodes waiting is closed as too slow.
 */
export const MAX_PENDING_EVENTS = 1_000;

/**
 * Attempts of one event's read when the database fails in a retryable way
 * (a terminated backend, a timeout, a busy SQLite file): the pool replaces a
 * lost connection, so the next attempt usually succeeds on a fresh one.
 */
export const MAX_EVENT_READ_ATTEMPTS = 4;
/** Wait before the second attempt (ms), doubling for each further one. */
export const EVENT_READ_RETRY_DELAY_MS = 50;

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
 *
 * A stream that has to end (token expired, too slow, the database gone)
 * yields the error as its last value and then completes: the field's
 * resolver returns it, so graphql-js reports it as that field's error, and
 * every transport sends one `next` with `errors`, then `complete`. Thrown out
 * of the iterator instead, each transport did something else with it (yoga's
 * SSE sent it, graphql-sse's handler tore its stream down, and the process with
 * it, over an unhandled rejection).
 */
export async function changeStream<T>(ctx: GraphQLContext, options: ChangeStreamOptions<T>): Promise<AsyncIterableIterator<T>> {
  // Refused before anything is registered, so a refusal holds nothing.
  const release = await ctx.subscriptions.open(viewerDID(ctx.viewer));
  let queue: ChangeEvent[] = [];
  let wake: (() => void) | undefined;
  let failure: GraphQLError | undefined;
  /** Delivers the final error and stops the repeater, once its executor runs. */
  let endWith: ((error: GraphQLError) => void) | undefined;
  /** Ends the stream with `error` (the first reason wins) and frees what it holds at once. */
  const fail = (error: GraphQLError) => {
    if (failure !== undefined) return;
    failure = error;
    queue = [];
    cleanup();
    endWith?.(error);
  };
  const unlisten = ctx.changes.listen((event) => {
    if (failure !== undefined || event.kind !== options.kind) return;
    if (options.nodeKey !== undefined && event.nodeKey !== options.nodeKey) return;
    if (queue.length >= MAX_PENDING_EVENTS) queue = lastOccurrences(queue);
    if (queue.length >= MAX_PENDING_EVENTS) {
      fail(new GraphQLError('subscriber too slow: re-query, then subscribe again', { extensions: { code: 'SUBSCRIBER_TOO_SLOW' } }));
      return;
    }
    queue.push(event);
    wake?.();
  });
  // A stream outliving its bearer token would keep serving a viewer nobody vouches for any more.
  const expiry =
    ctx.credentialsExpireAt === null
      ? undefined
      : setTimeout(
          () => fail(new GraphQLError('the bearer token expired: subscribe again with a fresh token', { extensions: { code: 'TOKEN_EXPIRED' } })),
          Math.min(2_147_483_647, Math.max(0, ctx.credentialsExpireAt - ctx.store.now())),
        );
  expiry?.unref();
  let cleaned = false;
  function cleanup() {
    if (cleaned) return;
    cleaned = true;
    clearTimeout(expiry);
    unlisten();
    unregister();
    release();
    wake?.();
  }

  const repeater = new Repeater<T>(async (push, stop) => {
    let stopped = false;
    void stop.then(() => {
      stopped = true;
      wake?.();
    });
    endWith = (error) => {
      // Queued behind whatever the transport has not taken yet, then the end.
      void push(error as unknown as T);
      stop();
    };
    if (failure !== undefined) return endWith(failure);
    try {
      while (!stopped && !cleaned) {
        const event = queue.shift();
        if (event === undefined) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
          continue;
        }
        const node = await loadWithRetries(event);
        if (node !== null && !cleaned && (options.accept?.(node) ?? true)) await push(node);
      }
    } catch (error) {
      const database = classifyDatabaseError(error);
      if (database !== null) {
        // Typed and retryable, like a request's: the client re-queries and subscribes again.
        ctx.log().warn({ err: error, code: database.code }, 'subscription ended: its database reads kept failing');
        fail(new GraphQLError(database.message, { extensions: { code: database.code, retryable: true } }));
      } else {
        ctx.log().error({ err: error }, 'subscription failed');
        fail(new GraphQLError('Unexpected error.', { extensions: { code: 'INTERNAL_SERVER_ERROR' } }));
      }
    } finally {
      cleanup();
    }
  });
  const unregister = ctx.subscriptions.register(() => {
    void repeater.return();
    cleanup();
  });

  /** One event's node, its read retried on a retryable database failure (each attempt with fresh loaders and a fresh shared snapshot). */
  async function loadWithRetries(event: ChangeEvent): Promise<T | null> {
    for (let attempt = 1; ; attempt++) {
      // A fresh loader cache for this event: the subscription's context
      // lives as long as the stream, and a cached row would be stale.
      (ctx as unknown as Record<symbol, object>)[contextCacheSymbol] = {};
      try {
        return await options.load(event, ctx);
      } catch (error) {
        const database = classifyDatabaseError(error);
        if (database === null || attempt >= MAX_EVENT_READ_ATTEMPTS || cleaned) throw error;
        ctx.log().warn({ err: error, code: database.code, attempt }, 'subscription read failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, EVENT_READ_RETRY_DELAY_MS * 2 ** (attempt - 1)));
      }
    }
  }

  const stream: AsyncIterableIterator<T> = {
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
  return stream;
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
 * subscriber still judges the row with its own viewer (see `changedNode`).
 */
export function snapshotOf<R>(event: ChangeEvent, read: () => Promise<R>): Promise<R> {
  let pending = snapshots.get(event) as Promise<R> | undefined;
  if (pending === undefined) {
    const reading = read();
    pending = reading;
    snapshots.set(event, reading);
    // A failed read is not the row: forgotten, so the next subscriber (or a retry) reads again.
    reading.catch(() => {
      if (snapshots.get(event) === reading) snapshots.delete(event);
    });
  }
  return pending;
}

/**
 * The node loader of one type, fetched anew for each event: the stream resets
 * the context's loader cache per event, so a loader taken once would be stale.
 */
export type NodeLoaderOf<T> = () => DataLoader<string, T | null>;

function operationMatches(filter: OperationFilterArgs | null | undefined, ctx: GraphQLContext) {
  const storeFilter = toStoreFilter(filter);
  return (op: ConnectorOperation) => matchesOperationFilter(op, storeFilter, ctx.store.now());
}

function watchMatches(filter: WatchFilterArgs | null | undefined) {
  return (watch: ProjectionWatch) =>
    (filter?.statuses == null || filter.statuses.includes(watch.verificationStatus)) &&
    (filter?.connectorName == null || filter.connectorName === watch.connectorName) &&
    (filter?.ownerDID == null || filter.ownerDID === watch.ownerDID) &&
    (filter?.documentID == null || filter.documentID === watch.documentID);
}

/**
 * Loads a changed node as this subscriber may see it: the event's shared
 * snapshot (`read`), judged by the same access rule as the node loader
 * (`canSee`), primed into the subscriber's own (fresh) loader so nested
 * fields resolve as in queries.
 */
function changedNode<T>(read: (store: GraphQLContext['store'], nodeKeys: string[]) => Promise<(T | null)[]>, canSee: (ctx: GraphQLContext, row: T) => boolean) {
  return (loader: NodeLoaderOf<T>) =>
    async (event: ChangeEvent, ctx: GraphQLContext): Promise<T | null> => {
      const row = await snapshotOf(event, async () => (await read(ctx.store, [event.nodeKey]))[0] ?? null);
      if (row === null || !canSee(ctx, row)) return null;
      return loader().prime(event.nodeKey, row).load(event.nodeKey);
    };
}

const changedOperation = changedNode<ConnectorOperation>(getOperationsByNodeKeys, (ctx, op) => canSeeOperation(ctx.viewer, op));
const changedWatch = changedNode<ProjectionWatch>(getWatchesByNodeKeys, (ctx, watch) => canSeeOwned(ctx.viewer, watch));
const changedSweepReceipt = changedNode<SweepReceipt>(getSweepReceiptsByNodeKeys, (ctx, receipt) => canSeeOwned(ctx.viewer, receipt));

/** `sweepReceiptChanged`: every committed change of one visible receipt or of its candidates. */
export function sweepReceiptChanged(nodeKey: string, ctx: GraphQLContext, loader: NodeLoaderOf<SweepReceipt>) {
  return changeStream(ctx, { kind: 'sweepReceipt', nodeKey, load: changedSweepReceipt(loader) });
}

/** `sweepReceiptsChanged`: sweep progress, e.g. of one partition: every change of a visible receipt matching the filter. */
export function sweepReceiptsChanged(filter: SweepReceiptFilterArgs | null | undefined, ctx: GraphQLContext, loader: NodeLoaderOf<SweepReceipt>) {
  return changeStream(ctx, { kind: 'sweepReceipt', load: changedSweepReceipt(loader), accept: sweepReceiptMatches(filter) });
}

/** `operationChanged`: every committed change of one visible operation. */
export function operationChanged(nodeKey: string, ctx: GraphQLContext, loader: NodeLoaderOf<ConnectorOperation>) {
  return changeStream(ctx, { kind: 'operation', nodeKey, load: changedOperation(loader) });
}

/** `operationsChanged`: every committed change of a visible operation matching the filter. */
export function operationsChanged(filter: OperationFilterArgs | null | undefined, ctx: GraphQLContext, loader: NodeLoaderOf<ConnectorOperation>) {
  return changeStream(ctx, { kind: 'operation', load: changedOperation(loader), accept: operationMatches(filter, ctx) });
}

/** `watchChanged`: every committed change of one visible watch. */
export function watchChanged(nodeKey: string, ctx: GraphQLContext, loader: NodeLoaderOf<ProjectionWatch>) {
  return changeStream(ctx, { kind: 'watch', nodeKey, load: changedWatch(loader) });
}

/** `watchesChanged`: every committed change of a visible watch matching the filter. */
export function watchesChanged(filter: WatchFilterArgs | null | undefined, ctx: GraphQLContext, loader: NodeLoaderOf<ProjectionWatch>) {
  return changeStream(ctx, { kind: 'watch', load: changedWatch(loader), accept: watchMatches(filter) });
}

/**
 * `storeChanged`: changes not delivered node by node (retention, backlog
 * samples, migrations), one event per subject and reason however many rows
 * went, only those meant for this viewer (src/store/store-changes.ts).
 * Events waiting for a slow reader merge: a burst is one re-read.
 */
export function storeChanged(subjects: readonly StoreChangeSubject[] | null | undefined, ctx: GraphQLContext) {
  return changeStream<StoreChange>(ctx, {
    kind: 'store',
    load: async (event) => storeChangeFor(ctx.viewer, event, ctx.store.now()),
    accept: (change) => subjects == null || subjects.includes(change.subject),
  });
}
