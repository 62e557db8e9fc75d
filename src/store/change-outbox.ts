/**
 * The change outbox (migration 0014, SQLite only): change events of writes
 * made by another process than the server's (the operator CLI), for the
 * server's SQLite change feed to deliver. On Postgres such writers NOTIFY the
 * change channel instead (src/server/change-feed.ts, `publishFromOutside`).
 */
import { sql } from 'kysely';
import type { StoreContext } from './context.js';

const OUTBOX = 'kubun_connector_change_outbox';

/** One outbox row: its sequence number and its encoded events. */
export interface OutboxEntry {
  seq: number;
  payload: string;
}

/** Appends one write's events (`payload`, encoded by the change feed). */
export async function appendChangeOutbox(store: StoreContext, payload: string): Promise<void> {
  await store.db.insertInto(OUTBOX).values({ payload, created_at: store.now() }).execute();
}

/** Rows after `afterSeq`, oldest first, at most `limit`. */
export async function readChangeOutbox(store: StoreContext, afterSeq: number, limit: number): Promise<OutboxEntry[]> {
  return store.db.selectFrom(OUTBOX).select(['seq', 'payload']).where('seq', '>', afterSeq).orderBy('seq').limit(limit).execute();
}

/** The newest row's sequence number (0 when there is none): where a reader that starts now begins. */
export async function latestChangeOutboxSeq(store: StoreContext): Promise<number> {
  const row = await store.db.selectFrom(OUTBOX).select((eb) => eb.fn.max('seq').as('seq')).executeTakeFirst();
  return Number(row?.seq ?? 0);
}

/** Deletes rows written before `before` (ms epoch). */
export async function pruneChangeOutbox(store: StoreContext, before: number): Promise<void> {
  await store.db.deleteFrom(OUTBOX).where('created_at', '<', before).execute();
}

/**
 * SQLite's `PRAGMA data_version` on the store's connection: it changes
 * whenever another connection committed, and never for this connection's own
 * writes, so polling it costs no read of the database.
 */
export async function sqliteDataVersion(store: StoreContext): Promise<number> {
  const { rows } = await sql<{ data_version: number }>`pragma data_version`.execute(store.db);
  return Number(rows[0]?.data_version ?? 0);
}
