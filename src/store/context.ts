/**
 * What every store function takes first: the database (or the transaction it
 * runs in), its dialect, and the injectable clock and id source.
 */
import { randomFillSync } from 'node:crypto';
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

/**
 * Random bytes from `crypto`, drawn 4 KiB at a time and each used once (as
 * `crypto.randomUUID` buffers its own): a `randomBytes(16)` per id was one
 * system call each, about 2 % of a write-back's CPU.
 */
const randomPool = Buffer.alloc(4_096);
let randomOffset = randomPool.length;

/** 128 bits from `crypto`, base64url (22 characters). */
export function defaultRandomID(): string {
  if (randomOffset + 16 > randomPool.length) {
    randomFillSync(randomPool);
    randomOffset = 0;
  }
  const id = randomPool.toString('base64url', randomOffset, randomOffset + 16);
  randomOffset += 16;
  return id;
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
