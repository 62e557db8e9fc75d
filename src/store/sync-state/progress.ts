/** The compare-and-swap progress writes of a sync state (SPEC §3.1). */
import type { StoreContext } from '../context.js';
import { SyncProgressConflictError } from '../errors.js';
import { freshSyncStateRow, progressColumns, rowToSyncState } from './row.js';
import { getSyncState } from './sync-state.js';
import type { SyncProgress, SyncProgressRecompute, SyncState } from './types.js';
import { requireNonNegativeInteger } from '../validate.js';

/** Options of {@link updateSyncProgress}. */
export interface UpdateSyncProgressOptions {
  /** Retries after the first attempt before giving up. Default 5. */
  maxRetries?: number;
}

/**
 * Writes recomputed progress with a CAS loop: read the row, call `recompute`,
 * then update guarded by the read version AND incarnation (version + 1). A
 * lost round rereads and recomputes. With no row it inserts (status `'idle'`,
 * version 0) with ON CONFLICT DO NOTHING and, if a concurrent writer created
 * the row first, takes the update path on the next round. Never writes
 * `status`. Returns the stored row; throws {@link SyncProgressConflictError}
 * after `maxRetries + 1` lost rounds.
 */
export async function updateSyncProgress(
  store: StoreContext,
  connectorName: string,
  ownerDID: string,
  recompute: SyncProgressRecompute,
  options: UpdateSyncProgressOptions = {},
): Promise<SyncState> {
  const maxRetries = options.maxRetries ?? 5;
  requireNonNegativeInteger('maxRetries', maxRetries);
  for (let attempt = 0; attempt <= maxRetries; attempt++) {
    const current = await getSyncState(store, connectorName, ownerDID);
    const next = await recompute(current);
    if (current === null) {
      const inserted = await store.db
        .insertInto('kubun_connector_sync_state')
        .values(freshSyncStateRow(store, connectorName, ownerDID, next, 'idle'))
        .onConflict((oc) => oc.columns(['connector_name', 'owner_did']).doNothing())
        .returningAll()
        .executeTakeFirst();
      if (inserted !== undefined) return rowToSyncState(inserted);
      continue;
    }
    const written = await casWrite(store, current, next);
    if (written !== null) return written;
  }
  throw new SyncProgressConflictError(maxRetries + 1);
}

/** Input of {@link compareAndSetSyncProgress}: the progress plus the version and incarnation the client read. */
export interface CompareAndSetSyncProgressInput extends SyncProgress {
  connectorName: string;
  ownerDID: string;
  expectedVersion: number;
  expectedIncarnation: string | null;
}

/** Result of {@link compareAndSetSyncProgress}. */
export interface CompareAndSetSyncProgressResult {
  applied: boolean;
  /** The row after the write when applied, else the current row (`null` if there is none). */
  state: SyncState | null;
}

/**
 * One CAS round for remote clients: writes the progress only if the row is
 * still at `expectedVersion` and `expectedIncarnation` (version + 1, status
 * untouched). A lost round returns `applied: false` with the current row so
 * the client can rebase. Never creates a row.
 */
export async function compareAndSetSyncProgress(
  store: StoreContext,
  input: CompareAndSetSyncProgressInput,
): Promise<CompareAndSetSyncProgressResult> {
  const written = await casWrite(
    store,
    {
      connectorName: input.connectorName,
      ownerDID: input.ownerDID,
      version: input.expectedVersion,
      incarnation: input.expectedIncarnation,
    },
    input,
  );
  if (written !== null) return { applied: true, state: written };
  return { applied: false, state: await getSyncState(store, input.connectorName, input.ownerDID) };
}

type CASRead = Pick<SyncState, 'connectorName' | 'ownerDID' | 'version' | 'incarnation'>;

/** The guarded UPDATE; `null` when the row moved on (or is gone). */
async function casWrite(store: StoreContext, read: CASRead, next: SyncProgress): Promise<SyncState | null> {
  const row = await store.db
    .updateTable('kubun_connector_sync_state')
    .set({ ...progressColumns(next), version: read.version + 1, progressed_at: store.now() })
    .where('connector_name', '=', read.connectorName)
    .where('owner_did', '=', read.ownerDID)
    .where('version', '=', read.version)
    // `= NULL` never matches; a legacy row without incarnation still needs a working guard.
    .where('incarnation', read.incarnation === null ? 'is' : '=', read.incarnation)
    .returningAll()
    .executeTakeFirst();
  return row === undefined ? null : rowToSyncState(row);
}
