import { forUpdate, inTransaction, type StoreContext } from '../context.js';
import { prepared } from '../prepared.js';
import { NotFoundError, StaleVersionError } from '../errors.js';
import { rowToProjectionWatch } from './row.js';
import type {
  ArmWatchOutcome,
  ArmWatchReason,
  ProjectionWatch,
  ProjectionWatchIdentity,
} from './types.js';
import {
  deleteSupersededWatches,
  identityOf,
  lockDocumentWatchSlot,
  matchesIdentity,
  newGenerationValues,
  newWatchValues,
} from './watch-predicates.js';
import { requireMsEpoch, requirePositiveInteger } from '../validate.js';
import { PROJECTION_WATCH_COLUMNS, type Database } from '../../db/tables.js';
import type { ExpressionBuilder } from 'kysely';

const WATCH_KEY = ['owner_did', 'connector_name', 'model', 'account_key', 'source_id'] as const;

/** Input of {@link armWatch}. */
export interface ArmWatchInput {
  identity: ProjectionWatchIdentity;
  /**
   * The document the watch tracks. Used only when the watch does not exist
   * yet (it is then created); an existing watch keeps its document. Without
   * it, arming a missing watch is a {@link NotFoundError}.
   */
  documentID?: string;
  reason: ArmWatchReason;
  /** When the (next) verification attempt is due. Default: now. */
  dueAt?: number;
  /**
   * Digest of the winner the caller observed at the provider. Written when
   * the watch is created or a generation is opened; a coalesce ignores it.
   * Default: keep the stored digest (null for a new watch).
   */
  observedWinnerDigest?: string | null;
}

/** What {@link armWatch} did, and the watch as it now is. */
export interface ArmWatchResult {
  outcome: ArmWatchOutcome;
  watch: ProjectionWatch;
}

/**
 * (Re-)arms a watch for verification.
 *
 * - Missing watch: created (`created`) when `documentID` is given, after
 *   deleting the document's watch under any other identity; otherwise a
 *   {@link NotFoundError}.
 * - `ingest` on a watch already `pending_verification`: only `next_attempt_at`
 *   (and `updated_at`) move (`coalesced`); the version stays, so a verifier's
 *   claim in flight remains valid.
 * - Every other case opens a new generation (`rearmed`): repair_generation + 1,
 *   attempts 0, `pending_verification`, due at `dueAt`, claim and defer
 *   reason cleared, version + 1. `write` also clears the verified digest, as
 *   finalize does: the local state it described has just changed.
 *
 * The watch is read `FOR UPDATE` (Postgres) and every generation-opening
 * write is a CAS on the version read, so concurrent arms of one watch queue
 * up behind each other instead of interleaving.
 */
export async function armWatch(store: StoreContext, input: ArmWatchInput): Promise<ArmWatchResult> {
  if (input.dueAt !== undefined) requireMsEpoch('dueAt', input.dueAt);
  return inTransaction(store, async (tx) => {
    const now = tx.now();
    const dueAt = input.dueAt ?? now;
    const { identity } = input;
    let row = await readWatchForUpdate(tx, identity);

    if (row === undefined) {
      if (input.documentID === undefined) throw new NotFoundError('projection watch');
      await lockDocumentWatchSlot(tx, { ownerDID: identity.ownerDID, model: identity.model, documentID: input.documentID });
      await deleteSupersededWatches(tx, identity, input.documentID);
      const inserted = await tx.db
        .insertInto('kubun_connector_projection_watch')
        .values(
          newWatchValues({
            identity,
            nodeKey: tx.getRandomID(),
            documentID: input.documentID,
            observedWinnerDigest: input.observedWinnerDigest ?? null,
            dueAt,
            now,
          }),
        )
        .onConflict((oc) => oc.columns([...WATCH_KEY]).doNothing())
        .returningAll()
        .executeTakeFirst();
      if (inserted !== undefined) return { outcome: 'created', watch: rowToProjectionWatch(inserted) };
      // A concurrent arm or finalize created it first (Postgres made this
      // insert wait for its commit): arm that watch instead.
      row = await readWatchForUpdate(tx, identity);
      if (row === undefined) throw new NotFoundError('projection watch');
    }

    if (input.reason === 'ingest' && row.verification_status === 'pending_verification') {
      const coalesced = await tx.db
        .updateTable('kubun_connector_projection_watch')
        .set({ next_attempt_at: dueAt, updated_at: now })
        .where(matchesIdentity(identity))
        .where('version', '=', row.version)
        .returningAll()
        .executeTakeFirst();
      if (coalesced === undefined) throw new StaleVersionError('projection watch');
      return { outcome: 'coalesced', watch: rowToProjectionWatch(coalesced) };
    }

    const rearmed = await tx.db
      .updateTable('kubun_connector_projection_watch')
      .set((eb) =>
        newGenerationValues(eb, { dueAt, now, observedWinnerDigest: input.observedWinnerDigest, clearVerifiedDigest: input.reason === 'write' }),
      )
      .where(matchesIdentity(identity))
      .where('version', '=', row.version)
      .returningAll()
      .executeTakeFirst();
    // Unreachable while the row lock (Postgres) or the single connection
    // (SQLite) is held; kept so a lost CAS can never pass silently.
    if (rearmed === undefined) throw new StaleVersionError('projection watch');
    return { outcome: 'rearmed', watch: rowToProjectionWatch(rearmed) };
  });
}

/** Input of {@link armWatchForWrite}. */
export interface ArmWatchForWriteInput {
  identity: ProjectionWatchIdentity;
  documentID: string;
  /** Digest of the local winner the write carried. */
  observedWinnerDigest: string | null;
}

/**
 * Arms the watch of a document a write-back just produced, due now, inside
 * the caller's transaction: the document's watch under any other identity is
 * deleted (one watch per document), then the watch is created or, if it
 * exists, given a new generation with its verified digest cleared — one
 * upsert statement, the same generation rule as {@link armWatch}.
 */
export async function armWatchForWrite(tx: StoreContext, input: ArmWatchForWriteInput): Promise<ProjectionWatch> {
  const now = tx.now();
  const { identity, documentID, observedWinnerDigest } = input;
  await lockDocumentWatchSlot(tx, { ownerDID: identity.ownerDID, model: identity.model, documentID });
  await deleteSupersededWatches(tx, identity, documentID);
  const { rows } = await ARM_FOR_WRITE(tx, { ...identity, documentID, observedWinnerDigest, nodeKey: tx.getRandomID(), now });
  return rowToProjectionWatch(rows[0]!);
}

/** The watch created, or given a new generation with its verified digest cleared, due now. */
const ARM_FOR_WRITE = prepared((db, v: ProjectionWatchIdentity & { documentID: string; observedWinnerDigest: string | null; nodeKey: string; now: number }) =>
  db
    .insertInto('kubun_connector_projection_watch')
    .values(newWatchValues({ identity: v, nodeKey: v.nodeKey, documentID: v.documentID, observedWinnerDigest: v.observedWinnerDigest, dueAt: v.now, now: v.now }))
    .onConflict((oc) =>
      oc.columns([...WATCH_KEY]).doUpdateSet((eb) => newGenerationValues(eb, { dueAt: v.now, now: v.now, observedWinnerDigest: v.observedWinnerDigest, clearVerifiedDigest: true })),
    )
    .returning(PROJECTION_WATCH_COLUMNS),
);

/** Options of {@link requestRepull} and {@link requestRepullByNodeKey}. */
export interface RequestRepullOptions {
  /** When the new verification attempt is due. Default: now. */
  dueAt?: number;
}

/**
 * Asks for the watch to be verified again: an `armWatch` with reason
 * `manual`, which always opens a new generation. A missing watch is a
 * {@link NotFoundError}. The caller schedules the sweep tick that picks it up.
 */
export async function requestRepull(
  store: StoreContext,
  identity: ProjectionWatchIdentity,
  options: RequestRepullOptions = {},
): Promise<ProjectionWatch> {
  const { watch } = await armWatch(store, { identity, reason: 'manual', dueAt: options.dueAt });
  return watch;
}

/** Options of {@link requestRepullByNodeKey}. */
export interface RequestRepullByNodeKeyOptions extends RequestRepullOptions {
  /**
   * Only a watch of this owner may be re-pulled; any other is reported as
   * not found, exactly like an unknown key. Default null: no restriction
   * (a service principal).
   */
  visibleTo?: string | null;
}

/** {@link requestRepull} for the watch with this node key (the API addresses watches by node id). */
export async function requestRepullByNodeKey(
  store: StoreContext,
  nodeKey: string,
  options: RequestRepullByNodeKeyOptions = {},
): Promise<ProjectionWatch> {
  return inTransaction(store, async (tx) => {
    // Locking the row by node key pins the exact watch: a delete + recreate
    // of the identity in between would carry another node key.
    const row = await forUpdate(
      tx,
      tx.db.selectFrom('kubun_connector_projection_watch').selectAll().where('node_key', '=', nodeKey),
    ).executeTakeFirst();
    const visibleTo = options.visibleTo ?? null;
    if (row === undefined || (visibleTo !== null && row.owner_did !== visibleTo)) {
      throw new NotFoundError('projection watch');
    }
    return requestRepull(tx, identityOf(rowToProjectionWatch(row)), { dueAt: options.dueAt });
  });
}

/**
 * Makes every watch deferred for being offline due now (the device
 * reconnected), optionally for one owner only. Like a coalesce it moves only
 * the schedule (and clears the defer reason), not the version. Returns the node keys
 * of the watches it resumed.
 */
export async function resumeOfflineWatches(store: StoreContext, options: { ownerDID?: string; limit?: number } = {}): Promise<string[]> {
  const now = store.now();
  const update = store.db.updateTable('kubun_connector_projection_watch').set({ next_attempt_at: now, defer_reason: null, updated_at: now });
  if (options.limit === undefined) return (await update.where(offlineWatches(options.ownerDID)).returning('node_key').execute()).map((row) => row.node_key);
  requirePositiveInteger('limit', options.limit);
  // At most `limit` rows: what this call resumed no longer matches, so the next call moves on to the rest.
  const keys = store.db.selectFrom('kubun_connector_projection_watch').select('node_key').where(offlineWatches(options.ownerDID)).limit(options.limit);
  const rows = await update.where('node_key', 'in', keys).returning('node_key').execute();
  return rows.map((row) => row.node_key);
}

/** Whether offline-deferred watches {@link resumeOfflineWatches} would resume are left. */
export async function hasOfflineWatches(store: StoreContext, options: { ownerDID?: string } = {}): Promise<boolean> {
  const row = await store.db.selectFrom('kubun_connector_projection_watch').select('node_key').where(offlineWatches(options.ownerDID)).limit(1).executeTakeFirst();
  return row !== undefined;
}

function offlineWatches(ownerDID: string | undefined) {
  return (eb: ExpressionBuilder<Database, 'kubun_connector_projection_watch'>) => {
    const conditions = [eb('verification_status', '=', 'pending_verification'), eb('defer_reason', '=', 'offline')];
    if (ownerDID !== undefined) conditions.push(eb('owner_did', '=', ownerDID));
    return eb.and(conditions);
  };
}

async function readWatchForUpdate(store: StoreContext, identity: ProjectionWatchIdentity) {
  return forUpdate(
    store,
    store.db.selectFrom('kubun_connector_projection_watch').selectAll().where(matchesIdentity(identity)),
  ).executeTakeFirst();
}
