/**
 * The change outbox (migration 0014, SQLite only): change events of writes
 * made by another process than the server's (the operator CLI), for the
 * server's SQLite change feed to deliver. On Postgres such writers NOTIFY the
 * change channel instead (src/server/change-feed.ts, `publishFromOutside`).
 */
import { sql } from 'kysely';
import type { StoreContext } from './context.js';

const OUTBOX = 'kubun_connector_change_outbox';

/** One outbox row: its sequence number, when it was written (ms epoch) and its encoded events. */
export interface OutboxEntry {
  seq: number;
  createdAt: number;
  payload: string;
}

/** Appends one write's events (`payload`, encoded by the change feed). */
export async function appendChangeOutbox(store: StoreContext, payload: string): Promise<void> {
  await store.db.insertInto(OUTBOX).values({ payload, created_at: store.now() }).execute();
}

/** Rows after `afterSeq`, oldest first, at most `limit`. */
export async function readChangeOutbox(store: StoreContext, afterSeq: number, limit: number): Promise<OutboxEntry[]> {
  const rows = await store.db.selectFrom(OUTBOX).select(['seq', 'created_at', 'payload']).where('seq', '>', afterSeq).orderBy('seq').limit(limit).execute();
  return rows.map((row) => ({ seq: Number(row.seq), createdAt: Number(row.created_at), payload: row.payload }));
}

/** The newest row's number and time (`{ seq: 0, createdAt: 0 }` when there is none): where a reader that starts now begins. */
export async function latestChangeOutboxEntry(store: StoreContext): Promise<{ seq: number; createdAt: number }> {
  const row = await store.db.selectFrom(OUTBOX).select(['seq', 'created_at']).orderBy('seq', 'desc').limit(1).executeTakeFirst();
  return row === undefined ? { seq: 0, createdAt: 0 } : { seq: Number(row.seq), createdAt: Number(row.created_at) };
}

/** When row `seq` was written; undefined when there is no such row (pruned, or the table was recreated). */
export async function changeOutboxWrittenAt(store: StoreContext, seq: number): Promise<number | undefined> {
  const row = await store.db.selectFrom(OUTBOX).select('created_at').where('seq', '=', seq).executeTakeFirst();
  return row === undefined ? undefined : Number(row.created_at);
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

/** Whether the outbox table exists (a database reverted below migration 0014 has none, and no server that reads it). */
export async function changeOutboxExists(store: StoreContext): Promise<boolean> {
  const { rows } = await sql<{ name: string }>`select name from sqlite_master where type = 'table' and name = ${OUTBOX}`.execute(store.db);
  return rows.length > 0;
}
