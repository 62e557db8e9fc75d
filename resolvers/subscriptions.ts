/**
 * Live changes for one subscriber. The process's change dispatcher
 * (change-dispatcher.ts) reads each changed row once for every subscriber and
 * offers it to each subscription, which keeps it only if its viewer may see
 * it and it matches the filter: what waits for a subscriber is its own. On
 * delivery the row is primed into the subscriber's own (fresh) loaders, so
 * nested fields resolve as in queries. An invisible node is skipped exactly
 * like a node that does not exist.
 */
import { contextCacheSymbol } from '@pothos/core';
import { GraphQLError } from 'graphql';
import { Repeater } from 'graphql-yoga';
import type DataLoader from 'dataloader';
import { getOperationsByNodeKeys, type ConnectorOperation } from '../src/store/operations/index.js';
import { getWatchesByNodeKeys, type ProjectionWatch } from '../src/store/projection-watches/index.js';
import { getSweepReceiptsByNodeKeys, type SweepReceipt } from '../src/store/sweeps/index.js';
import type { ChangeKind, ChangeWrite, GraphQLContext } from './context.js';
import { toStoreFilter, type OperationFilterArgs } from './operations.js';
import { matchesOperationFilter } from '../src/store/operations/index.js';
import { classifyDatabaseError } from '../src/store/errors.js';
import { canSeeOperation, canSeeOwned, viewerDID } from './viewer.js';
import { sweepReceiptMatches, type SweepReceiptFilterArgs } from './sweeps.js';
import type { WatchFilterArgs } from './watches.js';
import { STORE_CHANGE_SUBJECTS, storeChangeFor, type StoreChange, type StoreChangeSubject } from '../src/store/store-changes.js';
import { ChangeDispatcher, changeDispatcherFor, type ChangedRowReader } from './change-dispatcher.js';

export type { StoreChange } from '../src/store/store-changes.js';
export { MAX_EVENT_READ_ATTEMPTS, EVENT_READ_RETRY_DELAY_MS, MAX_DISPATCH_PENDING } from './change-dispatcher.js';

/**
 * Events a subscriber may have waiting. Past it, waiting events of the same
 * node are merged (only the latest state matters); a subscriber with this
 * many distinct nodes waiting is closed as too slow. Only nodes it may see
 * and that match its filter count: its own backlog.
 */
export const MAX_PENDING_EVENTS = 1_000;

/**
 * Nodes one write may queue for one subscriber. A write that changed more of
 * the nodes a subscription follows (a bulk action of 1 000, resumeDeferred)
 * queues the first 100 of them, and the viewer's `storeChanged` hears one
 * `BULK_CHANGE` for it ("many changed: re-read"), so no single write can fill
 * a subscriber's queue.
 */
export const MAX_NODES_PER_WRITE = 100;

/** Writes whose nodes a subscription remembers, to hold each to its share. */
const TRACKED_WRITES = 16;

/** The store-change subject a "many changed" of each node kind is told as. */
const BULK_SUBJECTS: Partial<Record<ChangeKind, StoreChangeSubject>> = { operation: 'OPERATIONS', watch: 'WATCHES', sweepReceipt: 'SWEEP_RECEIPTS' };

/** Who may see a changed row of each kind (the node loaders' rule). */
const CAN_SEE: Partial<Record<ChangeKind, (ctx: GraphQLContext, row: never) => boolean>> = {
  operation: (ctx, op: ConnectorOperation) => canSeeOperation(ctx.viewer, op),
  watch: (ctx, watch: ProjectionWatch) => canSeeOwned(ctx.viewer, watch),
  sweepReceipt: (ctx, receipt: SweepReceipt) => canSeeOwned(ctx.viewer, receipt),
};

const READERS: Partial<Record<ChangeKind, ChangedRowReader>> = {
  operation: getOperationsByNodeKeys,
  watch: getWatchesByNodeKeys,
  sweepReceipt: getSweepReceiptsByNodeKeys,
};

function dispatcher(ctx: GraphQLContext): ChangeDispatcher {
  return changeDispatcherFor(ctx.changes, ctx.store, () => new ChangeDispatcher(ctx.changes, ctx.store, READERS, MAX_NODES_PER_WRITE));
}

/** What one subscription listens for. */
export interface ChangeStreamOptions<T> {
  kind: ChangeKind;
  /** Only this node (e.g. one id); default: every node of the kind. */
  nodeKey?: string;
  /** What a changed row becomes in this subscriber's queue; null when its viewer may not see it or it does not match. Runs before anything is queued. */
  admit: (row: unknown, nodeKey: string) => unknown;
  /** What the subscriber is sent for a queued value (e.g. the row primed into its loaders); null: nothing. */
  deliver: (value: unknown, nodeKey: string, ctx: GraphQLContext) => Promise<T | null> | T | null;
  /** Whether a value whose node is already waiting is dropped (the waiting one says the same): `storeChanged`. */
  mergeWaiting?: boolean;
  /** `storeChanged`: the subjects it tells "many changed" of (see {@link MAX_NODES_PER_WRITE}). */
  bulk?: { subjects: readonly StoreChangeSubject[]; make: (subject: StoreChangeSubject) => T };
}

/** One waiting value of a subscriber's queue. */
interface Waiting {
  nodeKey: string;
  value: unknown;
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
  let queue: Waiting[] = [];
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
  /** Ends the stream over an error of the dispatcher's read (typed and retryable for a database failure, masked otherwise). */
  const failOver = (error: unknown) => {
    if (error instanceof GraphQLError) return fail(error);
    const database = classifyDatabaseError(error);
    if (database !== null) {
      // Typed and retryable, like a request's: the client re-queries and subscribes again.
      ctx.log().warn({ err: error, code: database.code }, 'subscription ended: its database reads kept failing');
      fail(new GraphQLError(database.message, { extensions: { code: database.code, retryable: true } }));
    } else {
      ctx.log().error({ err: error }, 'subscription failed');
      fail(new GraphQLError('Unexpected error.', { extensions: { code: 'INTERNAL_SERVER_ERROR' } }));
    }
  };
  const enqueue = (waiting: Waiting) => {
    if (options.mergeWaiting && queue.some((w) => w.nodeKey === waiting.nodeKey)) return;
    if (queue.length >= MAX_PENDING_EVENTS) queue = lastOccurrences(queue);
    if (queue.length >= MAX_PENDING_EVENTS) {
      fail(new GraphQLError('subscriber too slow: re-query, then subscribe again', { extensions: { code: 'SUBSCRIBER_TOO_SLOW' } }));
      return;
    }
    queue.push(waiting);
    wake?.();
  };
  /** The nodes each recent large write queued here, to hold it to MAX_NODES_PER_WRITE. */
  const writes = new Map<string, Set<string>>();
  const shareOf = (write: ChangeWrite) => {
    let keys = writes.get(write.id);
    if (keys === undefined) {
      writes.set(write.id, (keys = new Set()));
      if (writes.size > TRACKED_WRITES) writes.delete(writes.keys().next().value!);
    }
    return keys;
  };
  /** Visible rows of each recent large write, per kind, for the "many changed" of `storeChanged`. */
  const bulkCounts = new Map<string, number>();
  const unsubscribe = dispatcher(ctx).subscribe({
    kind: options.kind,
    ...(options.nodeKey !== undefined && { nodeKey: options.nodeKey }),
    log: () => ctx.log(),
    fail: failOver,
    offer(nodeKey, row, write) {
      if (failure !== undefined) return;
      const value = options.admit(row, nodeKey);
      if (value === null) return;
      if (write.size > MAX_NODES_PER_WRITE) {
        const share = shareOf(write);
        if (share.has(nodeKey)) {
          // The same node again in one write: its waiting entry takes the newer row.
          const waiting = queue.findLast((w) => w.nodeKey === nodeKey);
          if (waiting !== undefined) return void (waiting.value = value);
        } else {
          // Past its share the write is told as "many changed" (storeChanged), not node by node.
          if (share.size >= MAX_NODES_PER_WRITE) return;
          share.add(nodeKey);
        }
      }
      enqueue({ nodeKey, value });
    },
    ...(options.bulk !== undefined && {
      bulkKinds: (Object.keys(BULK_SUBJECTS) as ChangeKind[]).filter((kind) => options.bulk!.subjects.includes(BULK_SUBJECTS[kind]!)),
      offerBulk(kind: ChangeKind, row: unknown, write: ChangeWrite) {
        const canSee = CAN_SEE[kind];
        if (failure !== undefined || canSee === undefined || !canSee(ctx, row as never)) return;
        const key = `${kind}:${write.id}`;
        const seen = (bulkCounts.get(key) ?? 0) + 1;
        if (seen === 1 && bulkCounts.size >= TRACKED_WRITES) bulkCounts.delete(bulkCounts.keys().next().value!);
        bulkCounts.set(key, seen);
        // Once per write and kind: when it passes what node-by-node subscriptions are sent of it.
        if (seen === MAX_NODES_PER_WRITE + 1) {
          const subject = BULK_SUBJECTS[kind]!;
          enqueue({ nodeKey: `${subject}/BULK_CHANGE`, value: options.bulk!.make(subject) });
        }
      },
    }),
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
    unsubscribe();
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
        const waiting = queue.shift();
        if (waiting === undefined) {
          await new Promise<void>((resolve) => {
            wake = resolve;
          });
          wake = undefined;
          continue;
        }
        // A fresh loader cache for this event: the subscription's context
        // lives as long as the stream, and a cached row would be stale.
        (ctx as unknown as Record<symbol, object>)[contextCacheSymbol] = {};
        const node = await options.deliver(waiting.value, waiting.nodeKey, ctx);
        if (node !== null && !cleaned) await push(node);
      }
    } catch (error) {
      failOver(error);
    } finally {
      cleanup();
    }
  });
  const unregister = ctx.subscriptions.register(() => {
    void repeater.return();
    cleanup();
  });

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
function lastOccurrences(queue: readonly Waiting[]): Waiting[] {
  const seen = new Set<string>();
  const kept: Waiting[] = [];
  for (let i = queue.length - 1; i >= 0; i--) {
    const waiting = queue[i]!;
    if (!seen.has(waiting.nodeKey)) {
      seen.add(waiting.nodeKey);
      kept.push(waiting);
    }
  }
  return kept.reverse();
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
 * A subscription to changed nodes of one kind: a row is admitted if the
 * viewer may see it (the node loader's rule) and `accept` takes it, and is
 * delivered primed into the subscriber's own (fresh) loader, so nested fields
 * resolve as in queries.
 */
function nodeStream<T>(kind: 'operation' | 'watch' | 'sweepReceipt', ctx: GraphQLContext, loader: NodeLoaderOf<T>, nodeKey?: string, accept?: (node: T) => boolean) {
  const canSee = CAN_SEE[kind]! as (ctx: GraphQLContext, row: T) => boolean;
  return changeStream<T>(ctx, {
    kind,
    ...(nodeKey !== undefined && { nodeKey }),
    admit: (row) => (canSee(ctx, row as T) && (accept?.(row as T) ?? true) ? row : null),
    deliver: (row, key) => loader().prime(key, row as T).load(key),
  });
}

/** `sweepReceiptChanged`: every committed change of one visible receipt or of its candidates. */
export function sweepReceiptChanged(nodeKey: string, ctx: GraphQLContext, loader: NodeLoaderOf<SweepReceipt>) {
  return nodeStream('sweepReceipt', ctx, loader, nodeKey);
}

/** `sweepReceiptsChanged`: sweep progress, e.g. of one partition: every change of a visible receipt matching the filter. */
export function sweepReceiptsChanged(filter: SweepReceiptFilterArgs | null | undefined, ctx: GraphQLContext, loader: NodeLoaderOf<SweepReceipt>) {
  return nodeStream('sweepReceipt', ctx, loader, undefined, sweepReceiptMatches(filter));
}

/** `operationChanged`: every committed change of one visible operation. */
export function operationChanged(nodeKey: string, ctx: GraphQLContext, loader: NodeLoaderOf<ConnectorOperation>) {
  return nodeStream('operation', ctx, loader, nodeKey);
}

/** `operationsChanged`: every committed change of a visible operation matching the filter. */
export function operationsChanged(filter: OperationFilterArgs | null | undefined, ctx: GraphQLContext, loader: NodeLoaderOf<ConnectorOperation>) {
  return nodeStream('operation', ctx, loader, undefined, operationMatches(filter, ctx));
}

/** `watchChanged`: every committed change of one visible watch. */
export function watchChanged(nodeKey: string, ctx: GraphQLContext, loader: NodeLoaderOf<ProjectionWatch>) {
  return nodeStream('watch', ctx, loader, nodeKey);
}

/** `watchesChanged`: every committed change of a visible watch matching the filter. */
export function watchesChanged(filter: WatchFilterArgs | null | undefined, ctx: GraphQLContext, loader: NodeLoaderOf<ProjectionWatch>) {
  return nodeStream('watch', ctx, loader, undefined, watchMatches(filter));
}

/**
 * `storeChanged`: changes not delivered node by node (retention, backlog
 * samples, migrations), one event per subject and reason however many rows
 * went, only those meant for this viewer (src/store/store-changes.ts).
 * Events waiting for a slow reader merge: a burst is one re-read.
 */
export function storeChanged(subjects: readonly StoreChangeSubject[] | null | undefined, ctx: GraphQLContext) {
  const wanted = (subject: StoreChangeSubject) => subjects == null || subjects.includes(subject);
  return changeStream<StoreChange>(ctx, {
    kind: 'store',
    admit: (_row, nodeKey) => {
      const change = storeChangeFor(ctx.viewer, { nodeKey }, ctx.store.now());
      return change !== null && wanted(change.subject) ? change : null;
    },
    deliver: (change) => change as StoreChange,
    mergeWaiting: true,
    bulk: { subjects: STORE_CHANGE_SUBJECTS.filter(wanted), make: (subject) => ({ subject, reason: 'BULK_CHANGE', at: ctx.store.now() }) },
  });
}
