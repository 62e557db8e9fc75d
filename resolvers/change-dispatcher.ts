/**
 * The fan-out of committed changes to this process's subscriptions (issue 41
 * item 3). One dispatcher per change feed and store listens to the feed once,
 * however many subscriptions are open; it reads the changed rows in batches
 * (up to {@link DISPATCH_READ_BATCH} node keys per statement, one read per
 * row for every subscriber) and offers each row to the subscriptions of its
 * kind, which judge it with their own viewer and filter before anything is
 * queued. So a subscriber's queue holds only what it will be sent: one user's
 * bulk write never fills the queue of a subscriber who may see none of it.
 *
 * What waits for the dispatcher itself is bounded too: past
 * {@link MAX_DISPATCH_PENDING} events of one kind waiting to be read, that
 * kind's subscriptions end with `OVERLOADED` (retryable) instead of the list
 * growing.
 */
import { GraphQLError } from 'graphql';
import type { Logger } from 'pino';
import type { StoreContext } from '../src/store/context.js';
import { classifyDatabaseError } from '../src/store/errors.js';
import type { ChangeEvent, ChangeFeed, ChangeKind, ChangeWrite } from './context.js';

/** Node keys read per statement. */
export const DISPATCH_READ_BATCH = 100;

/**
 * Events of one kind that may wait to be read and offered. Past it the
 * process is behind on its own feed (a database slower than the writes it
 * announces): that kind's subscriptions end with `OVERLOADED`, retryable.
 */
export const MAX_DISPATCH_PENDING = 10_000;

/**
 * Attempts of one batch's read when the database fails in a retryable way
 * (a terminated backend, a timeout, a busy SQLite file): the pool replaces a
 * lost connection, so the next attempt usually succeeds on a fresh one.
 */
export const MAX_EVENT_READ_ATTEMPTS = 4;
/** Wait before the second attempt (ms), doubling for each further one. */
export const EVENT_READ_RETRY_DELAY_MS = 50;

/** Reads the rows of `nodeKeys` (null for a missing one), in their order. */
export type ChangedRowReader = (store: StoreContext, nodeKeys: string[]) => Promise<unknown[]>;

/** One subscription as the dispatcher sees it. */
export interface ChangeSubscriber {
  /** The kind it follows node by node. */
  kind: ChangeKind;
  /** Only this node's changes (e.g. `operationChanged(id)`); default: every node of the kind. */
  nodeKey?: string;
  /** A changed row of its kind, read once for every subscriber: the subscriber judges it and queues it or not. */
  offer(nodeKey: string, row: unknown, write: ChangeWrite): void;
  /**
   * Kinds whose large writes (more than `MAX_NODES_PER_WRITE` events) it
   * hears of row by row through `offerBulk` (`storeChanged`'s "many changed").
   */
  bulkKinds?: readonly ChangeKind[];
  offerBulk?(kind: ChangeKind, row: unknown, write: ChangeWrite): void;
  /** Ends the subscription with `error`: the database kept failing (a driver error) or the dispatcher is overloaded (a GraphQLError). */
  fail(error: unknown): void;
  log(): Logger;
}

interface Pending {
  event: ChangeEvent;
  write: ChangeWrite;
}

/** Per kind: who listens and what waits. */
class KindState {
  readonly subscribers = new Set<ChangeSubscriber>();
  /** Subscribers following every node of the kind. */
  unfiltered = 0;
  /** Subscribers following one node, counted per node key. */
  readonly byNodeKey = new Map<string, number>();
  readonly bulk = new Set<ChangeSubscriber>();
  pending: Pending[] = [];
  running = false;
}

/** Fans committed changes out to the subscriptions of one process (see the file's comment). */
export class ChangeDispatcher {
  private readonly kinds = new Map<ChangeKind, KindState>();
  private unlisten: (() => void) | undefined;
  private count = 0;

  constructor(
    private readonly feed: ChangeFeed,
    private readonly store: StoreContext,
    private readonly readers: Partial<Record<ChangeKind, ChangedRowReader>>,
    /** Writes with more events than this are "bulk" (`ChangeSubscriber.offerBulk`). */
    private readonly bulkThreshold: number,
  ) {}

  /** Adds a subscriber; returns the function that removes it. The dispatcher listens to the feed while it has any. */
  subscribe(subscriber: ChangeSubscriber): () => void {
    const state = this.state(subscriber.kind);
    state.subscribers.add(subscriber);
    if (subscriber.nodeKey === undefined) state.unfiltered++;
    else state.byNodeKey.set(subscriber.nodeKey, (state.byNodeKey.get(subscriber.nodeKey) ?? 0) + 1);
    for (const kind of subscriber.bulkKinds ?? []) this.state(kind).bulk.add(subscriber);
    if (this.count++ === 0) this.unlisten = this.feed.listen((event, write) => this.receive(event, write));
    let removed = false;
    return () => {
      if (removed) return;
      removed = true;
      state.subscribers.delete(subscriber);
      if (subscriber.nodeKey === undefined) state.unfiltered--;
      else {
        const left = (state.byNodeKey.get(subscriber.nodeKey) ?? 1) - 1;
        if (left === 0) state.byNodeKey.delete(subscriber.nodeKey);
        else state.byNodeKey.set(subscriber.nodeKey, left);
      }
      for (const kind of subscriber.bulkKinds ?? []) this.state(kind).bulk.delete(subscriber);
      if (--this.count === 0) {
        this.unlisten?.();
        this.unlisten = undefined;
      }
    };
  }

  private state(kind: ChangeKind): KindState {
    let state = this.kinds.get(kind);
    if (state === undefined) this.kinds.set(kind, (state = new KindState()));
    return state;
  }

  /** Whether some subscriber may want this event (nothing is read for an event nobody follows). */
  private wanted(state: KindState, event: ChangeEvent, write: ChangeWrite): boolean {
    return state.unfiltered > 0 || state.byNodeKey.has(event.nodeKey) || (state.bulk.size > 0 && write.size > this.bulkThreshold);
  }

  private receive(event: ChangeEvent, write: ChangeWrite): void {
    const state = this.kinds.get(event.kind);
    if (state === undefined || !this.wanted(state, event, write)) return;
    if (state.pending.length >= MAX_DISPATCH_PENDING) {
      this.overload(state);
      return;
    }
    state.pending.push({ event, write });
    if (!state.running) void this.run(event.kind, state);
  }

  /** Ends every subscription of the kind (and those hearing of its bulk writes): this process cannot keep up with its feed. */
  private overload(state: KindState): void {
    state.pending = [];
    const error = new GraphQLError('the server has more changes waiting than it can deliver: re-query, then subscribe again', {
      extensions: { code: 'OVERLOADED', retryable: true },
    });
    for (const subscriber of [...state.subscribers, ...state.bulk]) subscriber.fail(error);
  }

  /** Reads and offers what waits for one kind, a batch at a time, in the order it arrived. */
  private async run(kind: ChangeKind, state: KindState): Promise<void> {
    state.running = true;
    try {
      // After the events delivered with this one (a publish delivers its events in one go): one batch, not one read for the first.
      await Promise.resolve();
      while (state.pending.length > 0) {
        const batch = state.pending.splice(0, DISPATCH_READ_BATCH);
        const keys = [...new Set(batch.map((p) => p.event.nodeKey))];
        let rows: Map<string, unknown>;
        try {
          rows = await this.read(kind, keys, state);
        } catch (error) {
          for (const subscriber of this.interested(state, batch)) subscriber.fail(error);
          continue;
        }
        for (const { event, write } of batch) {
          const row = rows.get(event.nodeKey);
          if (row == null) continue;
          for (const subscriber of state.subscribers) {
            if (subscriber.nodeKey === undefined || subscriber.nodeKey === event.nodeKey) offerTo(subscriber, () => subscriber.offer(event.nodeKey, row, write));
          }
          if (write.size > this.bulkThreshold) for (const subscriber of state.bulk) offerTo(subscriber, () => subscriber.offerBulk?.(kind, row, write));
        }
      }
    } finally {
      state.running = false;
    }
  }

  /** The subscribers a failed batch would have been offered to. */
  private interested(state: KindState, batch: readonly Pending[]): ChangeSubscriber[] {
    const keys = new Set(batch.map((p) => p.event.nodeKey));
    const bulk = batch.some((p) => p.write.size > this.bulkThreshold);
    return [
      ...[...state.subscribers].filter((s) => s.nodeKey === undefined || keys.has(s.nodeKey)),
      ...(bulk ? [...state.bulk] : []),
    ];
  }

  /** The rows of `keys`, the read retried on a retryable database failure. */
  private async read(kind: ChangeKind, keys: string[], state: KindState): Promise<Map<string, unknown>> {
    const reader = this.readers[kind];
    // A kind without rows (`store`): the node key is all there is.
    if (reader === undefined) return new Map(keys.map((key) => [key, key]));
    for (let attempt = 1; ; attempt++) {
      try {
        const rows = await reader(this.store, keys);
        return new Map(keys.map((key, i) => [key, rows[i] ?? null]));
      } catch (error) {
        const database = classifyDatabaseError(error);
        const anyone = state.subscribers.values().next().value ?? state.bulk.values().next().value;
        if (database === null || attempt >= MAX_EVENT_READ_ATTEMPTS || anyone === undefined) throw error;
        anyone.log().warn({ err: error, code: database.code, attempt, kind }, 'reading changed rows for subscriptions failed; retrying');
        await new Promise((resolve) => setTimeout(resolve, EVENT_READ_RETRY_DELAY_MS * 2 ** (attempt - 1)));
      }
    }
  }
}

/** Runs one subscriber's offer; one that throws ends that subscriber, never the dispatch to the others. */
function offerTo(subscriber: ChangeSubscriber, offer: () => void): void {
  try {
    offer();
  } catch (error) {
    subscriber.fail(error);
  }
}

const dispatchers = new WeakMap<ChangeFeed, WeakMap<StoreContext, ChangeDispatcher>>();

/** The dispatcher of `feed` over `store`, made on first use (one per process and app). */
export function changeDispatcherFor(
  feed: ChangeFeed,
  store: StoreContext,
  make: () => ChangeDispatcher,
): ChangeDispatcher {
  let byStore = dispatchers.get(feed);
  if (byStore === undefined) dispatchers.set(feed, (byStore = new WeakMap()));
  let dispatcher = byStore.get(store);
  if (dispatcher === undefined) byStore.set(store, (dispatcher = make()));
  return dispatcher;
}
