/**
 * The change feed behind subscriptions. Writers publish the node keys a
 * committed write changed; every replica's feed delivers them to its local
 * listeners. On Postgres the fan-out crosses replicas through LISTEN/NOTIFY
 * on a dedicated connection (re-established when it drops); on SQLite, whose
 * database belongs to one process, it stays in process.
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Logger } from 'pino';
import { sql } from 'kysely';
import type { ChangeEvent, ChangeFeed, ChangeFeedStatus, ChangeKind, ChangeListener, ChangeWrite } from '../../resolvers/context.js';
import { appendChangeOutbox, changeOutboxWrittenAt, latestChangeOutboxEntry, pruneChangeOutbox, readChangeOutbox, sqliteDataVersion } from '../store/change-outbox.js';
import type { StoreContext } from '../store/context.js';
import { CHANGE_CHANNEL, CHANGE_KIND_CODES } from '../store/change-channel.js';

/** Feed for a single process (SQLite): delivery is a synchronous local fan-out. */
export function createInProcessChangeFeed(): ChangeFeed {
  return inProcessFeed().feed;
}

/** The in-process feed and its delivery of a write that already has an id (one read from the outbox). */
function inProcessFeed(): { feed: ChangeFeed; deliverWrite(events: readonly ChangeEvent[], write: ChangeWrite): void } {
  const listeners = new Set<ChangeListener>();
  let closed = false;
  const deliverWrite = (events: readonly ChangeEvent[], write: ChangeWrite) => {
    if (closed) return;
    for (const event of events) deliver(listeners, event, write);
  };
  const feed: ChangeFeed = {
    async publish(events) {
      deliverWrite(events, { id: newWriteID(), size: events.length });
    },
    listen(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    status: () => (closed ? 'closed' : 'connected'),
    async close() {
      closed = true;
      listeners.clear();
    },
  };
  return { feed, deliverWrite };
}

/** Names this process's writes apart from other replicas' (a write id is `prefix.counter`). */
const WRITE_PREFIX = randomBytes(6).toString('base64url');
let writeCounter = 0;
/** A fresh write id, unique across the replicas of one database. */
function newWriteID(): string {
  return `${WRITE_PREFIX}.${++writeCounter}`;
}

/** Options of {@link createSQLiteChangeFeed}. */
export interface SQLiteChangeFeedOptions {
  /** The server's store (its connection: `PRAGMA data_version` moves only for other connections' commits). */
  store: StoreContext;
  logger: Logger;
  /** How often the feed asks whether another process wrote (ms). Default 200. */
  pollMs?: number;
  /** How long outbox rows are kept before they are deleted (ms). Default 60 000. */
  keepMs?: number;
}

/** Outbox rows read per round. */
const OUTBOX_BATCH = 500;

/**
 * The feed of a server on SQLite: its own writes are delivered in process, as
 * {@link createInProcessChangeFeed} does, and writes of other processes on the
 * same file (the operator CLI, which records their events in the change
 * outbox: {@link publishFromOutside}) are picked up within `pollMs`: the feed
 * polls `PRAGMA data_version`, which costs no read of the database, and reads
 * the outbox only when another connection committed. A failed poll is
 * logged and tried again; it never ends the feed.
 */
export async function createSQLiteChangeFeed(options: SQLiteChangeFeedOptions): Promise<ChangeFeed> {
  const { feed, deliverWrite } = inProcessFeed();
  const { store, logger } = options;
  const keepMs = options.keepMs ?? 60_000;
  /** The last row delivered (or the newest at start): its number and when it was written. */
  let last = await latestChangeOutboxEntry(store);
  let version = await sqliteDataVersion(store);
  let prunedAt = 0;
  let polling = false;
  let failing = false;
  const poll = async () => {
    if (polling) return;
    polling = true;
    try {
      const now = await sqliteDataVersion(store);
      if (now !== version) {
        // `npm run migrate -- down` then `latest` recreates the outbox, numbering from 1 again: the
        // last row read is then gone or another (one pruned away had nothing after it kept either).
        if (last.seq > 0 && (await changeOutboxWrittenAt(store, last.seq)) !== last.createdAt) last = { seq: 0, createdAt: 0 };
        for (;;) {
          const rows = await readChangeOutbox(store, last.seq, OUTBOX_BATCH);
          for (const row of rows) {
            last = { seq: row.seq, createdAt: row.createdAt };
            const events = decodePayload(row.payload);
            deliverWrite(events, decodeWrite(row.payload) ?? { id: newWriteID(), size: events.length });
          }
          if (rows.length < OUTBOX_BATCH) break;
        }
        // Only once read: a failed read is tried again on the next poll, not skipped.
        version = now;
      }
      if (Date.now() - prunedAt > keepMs) {
        prunedAt = Date.now();
        await pruneChangeOutbox(store, store.now() - keepMs);
      }
      if (failing) logger.info('change outbox: reading again');
      failing = false;
    } catch (error) {
      if (!failing) logger.warn({ err: error }, 'change outbox: could not read changes written by other processes; trying again');
      failing = true;
    } finally {
      polling = false;
    }
  };
  const timer = setInterval(() => void poll(), options.pollMs ?? 200);
  timer.unref();
  return {
    publish: (events) => feed.publish(events),
    listen: (listener) => feed.listen(listener),
    status: () => feed.status(),
    async close() {
      clearInterval(timer);
      await feed.close();
    },
  };
}

/**
 * Publishes the changes of a write made outside the server (the operator
 * CLI), after it committed, to every server on the database: a NOTIFY of the
 * change channel on Postgres, a row of the change outbox on SQLite (which the
 * server's feed polls). Servers deliver them as they deliver their own.
 */
export async function publishFromOutside(store: StoreContext, events: readonly ChangeEvent[]): Promise<void> {
  const write = { id: newWriteID(), size: events.length };
  for (let i = 0; i < events.length; i += MAX_KEYS_PER_NOTIFY) {
    const payload = encodePayload(events.slice(i, i + MAX_KEYS_PER_NOTIFY), write);
    if (store.dialect === 'postgres') await sql`select pg_notify(${CHANGE_CHANNEL}, ${payload})`.execute(store.db);
    else await appendChangeOutbox(store, payload);
  }
}

export { CHANGE_CHANNEL };

/** Options of {@link createPostgresChangeFeed}. */
export interface PostgresChangeFeedOptions {
  connectionString: string;
  /** Publishes with this pool (a `select pg_notify(…)` after the write committed). */
  publish: (channel: string, payload: string) => Promise<void>;
  logger: Logger;
  /** First reconnect delay in ms, doubling to {@link maxReconnectDelayMs}. Default 100. */
  reconnectDelayMs?: number;
  /** Default 5 000. */
  maxReconnectDelayMs?: number;
  /**
   * How often the LISTEN connection is asked `select 1` (ms; 0: never). A
   * connection that stops answering without closing (a dead peer, a dropped
   * NAT entry) is given up after {@link heartbeatTimeoutMs} and reconnected,
   * instead of silently delivering nothing. Default 15 000. TCP keep-alive is
   * on as well.
   */
  heartbeatMs?: number;
  /** How long a heartbeat may take before the connection counts as lost. Default 5 000. */
  heartbeatTimeoutMs?: number;
  /** How long connecting (and LISTEN) may take before the attempt counts as failed, so a peer that accepts and never answers cannot hold the feed down. Default 5 000. */
  connectTimeoutMs?: number;
  /** Random source in [0, 1) for the reconnect jitter (tests pin it). */
  random?: () => number;
}

/**
 * The wait before reconnect attempt `attempt` (0-based): exponential from
 * `baseMs`, capped at `maxMs`, with "equal jitter" (half fixed, half random),
 * so replicas that lost the database together do not reconnect in lockstep.
 */
export function reconnectDelay(attempt: number, baseMs: number, maxMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

/** NOTIFY payloads are limited to 8000 bytes; node keys are ~22 characters, so batches stay far below. */
const MAX_KEYS_PER_NOTIFY = 100;
const KIND_CODES: Record<ChangeKind, string> = CHANGE_KIND_CODES;
const KINDS_BY_CODE = new Map(Object.entries(KIND_CODES).map(([kind, code]) => [code, kind as ChangeKind]));

/**
 * Feed across replicas: one LISTEN connection per process, apart from the
 * pool, so a busy pool never delays delivery. When it drops, the feed reports
 * `reconnecting`, logs, and reconnects with backoff; changes published while
 * it was down are not replayed (clients re-query on reconnect: see docs/subscriptions.md).
 */
export async function createPostgresChangeFeed(options: PostgresChangeFeedOptions): Promise<ChangeFeed> {
  const listeners = new Set<ChangeListener>();
  const log = options.logger.child({ component: 'change-feed' });
  const baseDelay = options.reconnectDelayMs ?? 100;
  const maxDelay = options.maxReconnectDelayMs ?? 5_000;
  const heartbeatMs = options.heartbeatMs ?? 15_000;
  const heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? 5_000;
  const connectTimeoutMs = options.connectTimeoutMs ?? 5_000;
  const random = options.random ?? Math.random;
  let client: pg.Client | undefined;
  let status: ChangeFeedStatus = 'reconnecting';
  let retry: NodeJS.Timeout | undefined;
  let attempt = 0;
  let everConnected = false;
  /** The heartbeat of the current connection. */
  let heartbeat: NodeJS.Timeout | undefined;

  const onNotification = (message: pg.Notification) => {
    if (message.channel !== CHANGE_CHANNEL || message.payload === undefined) return;
    const events = decodePayload(message.payload);
    // A payload without a write (a replica of an older version) is a write of its own.
    const write = decodeWrite(message.payload) ?? { id: newWriteID(), size: events.length };
    for (const event of events) deliver(listeners, event, write);
  };

  const connect = async (): Promise<void> => {
    const next = new pg.Client({
      connectionString: options.connectionString,
      application_name: `connector-store-listener:${process.pid}`,
      keepAlive: true,
      keepAliveInitialDelayMillis: 10_000,
      connectionTimeoutMillis: connectTimeoutMs,
    });
    next.on('notification', onNotification);
    // Errors, ends and unanswered heartbeats all mean the LISTEN is gone; reconnect once per client.
    let dropped = false;
    const drop = (reason: string) => {
      if (dropped || status === 'closed') return;
      dropped = true;
      clearInterval(heartbeat);
      next.removeAllListeners('notification');
      // A peer that stopped answering never acknowledges a graceful end: the socket is destroyed.
      (next as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
      next.end().catch(() => {});
      status = 'reconnecting';
      log.warn({ reason }, 'change feed connection lost; reconnecting');
      schedule();
    };
    next.on('error', (error) => drop(error.message));
    next.on('end', () => drop('connection ended'));
    try {
      await next.connect();
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        next.query(`LISTEN ${CHANGE_CHANNEL}`),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error(`LISTEN not answered within ${connectTimeoutMs} ms`)), connectTimeoutMs);
        }),
      ]).finally(() => clearTimeout(timer));
    } catch (error) {
      drop(error instanceof Error ? error.message : String(error));
      return;
    }
    if (status === 'closed') {
      await next.end().catch(() => {});
      return;
    }
    client = next;
    status = 'connected';
    attempt = 0;
    if (everConnected) log.info('change feed connection re-established');
    everConnected = true;
    if (heartbeatMs > 0) {
      let pending = false;
      heartbeat = setInterval(() => {
        if (pending) return;
        pending = true;
        let timer: NodeJS.Timeout | undefined;
        const answered = next.query('select 1').then(() => true, () => false);
        const timedOut = new Promise<false>((resolve) => {
          timer = setTimeout(() => resolve(false), heartbeatTimeoutMs);
        });
        void Promise.race([answered, timedOut]).then((ok) => {
          clearTimeout(timer);
          pending = false;
          if (!ok) drop(`no answer to the heartbeat within ${heartbeatTimeoutMs} ms`);
        });
      }, heartbeatMs);
      heartbeat.unref();
    }
  };

  const schedule = () => {
    if (retry !== undefined || status === 'closed') return;
    retry = setTimeout(() => {
      retry = undefined;
      void connect();
    }, reconnectDelay(attempt++, baseDelay, maxDelay, random));
    retry.unref();
  };

  await connect();
  return {
    channel: CHANGE_CHANNEL,
    async publish(events) {
      const write = { id: newWriteID(), size: events.length };
      for (let i = 0; i < events.length; i += MAX_KEYS_PER_NOTIFY) {
        await options.publish(CHANGE_CHANNEL, encodePayload(events.slice(i, i + MAX_KEYS_PER_NOTIFY), write));
      }
    },
    listen(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    status: () => status,
    async close() {
      status = 'closed';
      if (retry !== undefined) clearTimeout(retry);
      clearInterval(heartbeat);
      listeners.clear();
      await client?.end().catch(() => {});
    },
  };
}

/**
 * `#id/size o:key w:key …`: compact, and a node key (base64url) never
 * contains a space or colon. The leading `#id/size` names the write the
 * events belong to (every notification of one write carries it); a decoder
 * that does not know it skips it as a malformed part.
 */
export function encodePayload(events: readonly ChangeEvent[], write?: ChangeWrite): string {
  const parts = events.map((e) => `${KIND_CODES[e.kind]}:${e.nodeKey}`);
  if (write !== undefined) parts.unshift(`#${write.id}/${write.size}`);
  return parts.join(' ');
}

/** The write a payload names (its leading `#id/size`), or undefined. */
export function decodeWrite(payload: string): ChangeWrite | undefined {
  if (!payload.startsWith('#')) return undefined;
  const end = payload.indexOf(' ');
  const tag = payload.slice(1, end < 0 ? undefined : end);
  const slash = tag.lastIndexOf('/');
  const size = Number(tag.slice(slash + 1));
  if (slash <= 0 || !Number.isSafeInteger(size) || size < 0) return undefined;
  return { id: tag.slice(0, slash), size };
}

/** The events of a payload; anything malformed is skipped. */
export function decodePayload(payload: string): ChangeEvent[] {
  const events: ChangeEvent[] = [];
  for (const part of payload.split(' ')) {
    const kind = KINDS_BY_CODE.get(part.slice(0, 1));
    const nodeKey = part.slice(2);
    if (kind !== undefined && part[1] === ':' && nodeKey !== '') events.push({ kind, nodeKey });
  }
  return events;
}

function deliver(listeners: Set<ChangeListener>, event: ChangeEvent, write: ChangeWrite): void {
  // A listener only queues (see subscriptions); one that throws must not starve the rest.
  for (const listener of listeners) {
    try {
      listener(event, write);
    } catch {
      // ignored: the subscription owning it reports its own failure
    }
  }
}
