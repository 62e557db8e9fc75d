/** Plain reads and writes of one sync state row (SPEC §3.1). */
import type { StoreContext } from '../context.js';
import { changedAny } from '../context.js';
import { getSyncStatesByKeys } from './read.js';
import { freshSyncStateRow, progressColumns, rowToSyncState } from './row.js';
import type { SyncState, SyncStateInput } from './types.js';

/** Reads one connector's sync state for one owner, or `null`. */
export async function getSyncState(store: StoreContext, connectorName: string, ownerDID: string): Promise<SyncState | null> {
  return (await getSyncStatesByKeys(store, [{ connectorName, ownerDID }]))[0] ?? null;
}

/** Every owner's sync state of one connector, ordered by owner DID. */
export async function listSyncStatesForConnector(store: StoreContext, connectorName: string): Promise<SyncState[]> {
  const rows = await store.db
    .selectFrom('kubun_connector_sync_state')
    .selectAll()
    .where('connector_name', '=', connectorName)
    .orderBy('owner_did')
    .execute();
  return rows.map(rowToSyncState);
}

/** Deletes one sync state; says whether a row was there. A later write starts a new incarnation and node key. */
export async function deleteSyncState(store: StoreContext, connectorName: string, ownerDID: string): Promise<boolean> {
  const result = await store.db
    .deleteFrom('kubun_connector_sync_state')
    .where('connector_name', '=', connectorName)
    .where('owner_did', '=', ownerDID)
    .executeTakeFirst();
  return changedAny(result);
}

/** Deletes the sync state with this node key (exactly that row: a recreated one has another); says whether it was there. */
export async function deleteSyncStateByNodeKey(store: StoreContext, nodeKey: string): Promise<boolean> {
  return changedAny(await store.db.deleteFrom('kubun_connector_sync_state').where('node_key', '=', nodeKey).executeTakeFirst());
}

/**
 * Upserts a sync state and returns the stored row. A fresh insert seeds
 * version 0, a random incarnation and a new node key; on conflict only the
 * data columns (checkpoint, last synced at, entity count, status, error,
 * recovery) change: version, incarnation, lease expiry and node key stay, so
 * this is not a CAS write and does not invalidate a progress writer's read.
 */
export async function setSyncState(store: StoreContext, connectorName: string, ownerDID: string, state: SyncStateInput): Promise<SyncState> {
  const fresh = freshSyncStateRow(store, connectorName, ownerDID, state, state.status);
  const row = await store.db
    .insertInto('kubun_connector_sync_state')
    .values(fresh)
    .onConflict((oc) =>
      oc.columns(['connector_name', 'owner_did']).doUpdateSet({
        ...progressColumns(state),
        status: state.status,
        progressed_at: store.now(),
      }),
    )
    .returningAll()
    .executeTakeFirstOrThrow();
  return rowToSyncState(row);
}
