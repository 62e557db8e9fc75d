/**
 * What every store function takes first: the database (or the transaction it
 * runs in), its dialect, and the injectable clock and id source.
 */
import { randomBytes } from 'node:crypto';
import type { Kysely, SelectQueryBuilder } from 'kysely';
import type { DialectName } from '../db/connect.js';
import type { Database } from '../db/tables.js';

/** Injectable dependencies: tests control time and ids through these. */
export interface StoreDeps {
  /** Current time in ms since the epoch. Default `Date.now`. */
  now: () => number;
  /** A fresh unguessable id. Default: 128 random bits, base64url. */
  getRandomID: () => string;
}

/** The database handle plus dependencies, passed first to every store function. */
export interface StoreContext extends StoreDeps {
  /** The database, or the transaction the call runs inside. */
  db: Kysely<Database>;
  dialect: DialectName;
}

/** 128 bits from `crypto`, base64url (22 characters). */
export function defaultRandomID(): string {
  return randomBytes(16).toString('base64url');
}

/** Builds a store context with the default clock and id source unless given. */
export function createStoreContext(db: Kysely<Database>, dialect: DialectName, deps: Partial<StoreDeps> = {}): StoreContext {
  return { db, dialect, now: deps.now ?? Date.now, getRandomID: deps.getRandomID ?? defaultRandomID };
}

/**
 * Runs `work` in one transaction. If `store` is already inside a transaction,
 * `work` joins it (no nested transaction), so store functions compose into a
 * caller's transaction.
 */
export async function inTransaction<T>(store: StoreContext, work: (tx: StoreContext) => Promise<T>): Promise<T> {
  if (store.db.isTransaction) return work(store);
  return store.db.transaction().execute((tx) => work({ ...store, db: tx }));
}

/**
 * Adds `FOR UPDATE` on Postgres only. SQLite has no such clause; its single
 * connection (and `BEGIN IMMEDIATE`) already serializes the transaction.
 */
export function forUpdate<DB, TB extends keyof DB, O>(
  store: StoreContext,
  query: SelectQueryBuilder<DB, TB, O>,
): SelectQueryBuilder<DB, TB, O> {
  return store.dialect === 'postgres' ? query.forUpdate() : query;
}

/** Kysely reports affected rows as bigint; this says whether any row changed. */
export function changedAny(result: { numUpdatedRows?: bigint; numDeletedRows?: bigint; numInsertedOrUpdatedRows?: bigint } | undefined): boolean {
  if (result === undefined) return false;
  const count = result.numUpdatedRows ?? result.numDeletedRows ?? result.numInsertedOrUpdatedRows ?? 0n;
  return count > 0n;
}
