/**
 * What every resolver receives, built fresh for each request, and the ports
 * the server plugs in: the change feed (mutations publish, subscriptions
 * listen) and the per-process subscription limiter. Implementations live in
 * `src/server/`; this file is the only one of `resolvers/` the server imports.
 */
import { initContextCache } from '@pothos/core';
import type { Logger } from 'pino';
import type { Viewer } from '../src/auth/index.js';
import type { StoreContext } from '../src/store/context.js';

/** Which kind of node changed. */
/** `store`: a change not delivered node by node (src/store/store-changes.ts); its node key names subject, reason and audience. */
export type ChangeKind = 'operation' | 'watch' | 'syncState' | 'sweepReceipt' | 'store';

/** One committed change: the node's kind and its node key (never a secret or a primary key). */
export interface ChangeEvent {
  kind: ChangeKind;
  nodeKey: string;
}

/**
 * The write an event came from: its events arrive with the same `id` (on
 * Postgres over several notifications when it changed more than 100 nodes),
 * and `size` is how many events it published in all. Subscriptions cap what
 * one write may queue for one subscriber by it.
 */
export interface ChangeWrite {
  id: string;
  size: number;
}

/** Receives every change the feed delivers, in the order published per node, with the write it came from. */
export type ChangeListener = (event: ChangeEvent, write: ChangeWrite) => void;

/** Where the feed stands; `/readyz` reports it. */
export type ChangeFeedStatus = 'connected' | 'reconnecting' | 'closed';

/** Publishes committed changes and delivers them to this process's listeners. */
export interface ChangeFeed {
  /**
   * Announces changes. Call only after the writing transaction committed
   * (resolvers call it after the store call returned): a rolled-back or
   * refused write never reaches here.
   */
  publish(events: readonly ChangeEvent[]): Promise<void>;
  /**
   * The database notification channel the feed listens on (Postgres), if
   * any. A write whose own statement notified it (the store says so) is not
   * published again: every replica already heard it.
   */
  readonly channel?: string;
  /** Adds a listener; returns the function that removes it. */
  listen(listener: ChangeListener): () => void;
  status(): ChangeFeedStatus;
  close(): Promise<void>;
}

/** Per-process guard on open subscriptions (a resource limit, not a data invariant). */
export interface SubscriptionLimiter {
  /** Opens one for `viewerDID`; rejects when admission refuses it (a cap of the viewer, its address or this replica). Resolves to its release. */
  open(viewerDID: string): Promise<() => void>;
  /** Remembers how to end an open stream; returns the function that forgets it. */
  register(end: () => void): () => void;
}

export interface GraphQLContext {
  /** Who is asking: anonymous, a user DID, or a configured service principal. */
  viewer: Viewer;
  /** The audience (`aud`) bearer tokens must name on this server: not a secret, every token carries it. */
  audience: string;
  /** When the request's bearer token expires (ms since the epoch, store clock); null without one. Subscriptions end then. */
  credentialsExpireAt: number | null;
  /**
   * The store over this server's database. A query's may read a hot standby
   * (src/server/read-routing.ts); mutations and subscriptions use the primary.
   */
  store: StoreContext;
  /**
   * The consistency token the client sent back (a WAL position), or null: a
   * query then reads a standby only once it has replayed past it.
   */
  readAfter: bigint | null;
  /** Committed changes: mutations publish to it, subscriptions listen to it. */
  changes: ChangeFeed;
  subscriptions: SubscriptionLimiter;
  /** Correlates log lines of one request; also sent back as `x-request-id`. */
  requestID: string;
  /**
   * The request's logger (carries the request id and viewer), made on first
   * call: most requests log nothing of their own. A function, not a getter:
   * envelop copies the context's properties into its own (`Object.assign`),
   * which would run a getter on every request.
   */
  log(): Logger;
}

/** Builds one request's context, with a fresh per-request loader cache. */
export function createGraphQLContext({ log, ...parts }: Omit<GraphQLContext, 'log'> & { log: () => Logger }): GraphQLContext {
  let logger: Logger | undefined;
  return { ...parts, ...initContextCache(), log: () => (logger ??= log()) };
}
