/** Reads of sync states by their public node key (Relay refetch, DataLoaders). */
import type { StoreContext } from '../context.js';
import { rowToSyncState } from './row.js';
import type { SyncState } from './types.js';
import { alignByKey, alignByNodeKey } from '../node-keys.js';

/** Reads the sync state with this node key, or `null`. */
export async function getSyncStateByNodeKey(store: StoreContext, nodeKey: string): Promise<SyncState | null> {
  const row = await store.db.selectFrom('kubun_connector_sync_state').selectAll().where('node_key', '=', nodeKey).executeTakeFirst();
  return row === undefined ? null : rowToSyncState(row);
}

/** A sync state's primary key. */
export interface SyncStateKey {
  connectorName: string;
  ownerDID: string;
}

/** Reads the sync states of many (connector, owner) keys in one statement; aligned with `keys` (`null` where none). */
export async function getSyncStatesByKeys(store: StoreContext, keys: readonly SyncStateKey[]): Promise<(SyncState | null)[]> {
  if (keys.length === 0) return [];
  const rows = await store.db
    .selectFrom('kubun_connector_sync_state')
    .selectAll()
    .where(({ eb, refTuple, tuple }) =>
      eb(refTuple('connector_name', 'owner_did'), 'in', keys.map((key) => tuple(key.connectorName, key.ownerDID))),
    )
    .execute();
  return alignByKey(
    rows,
    keys,
    (row) => JSON.stringify([row.connector_name, row.owner_did]),
    (key) => JSON.stringify([key.connectorName, key.ownerDID]),
    rowToSyncState,
  );
}

/** Reads many sync states in one statement; the result is aligned with `nodeKeys` (`null` where none). */
export async function getSyncStatesByNodeKeys(store: StoreContext, nodeKeys: readonly string[]): Promise<(SyncState | null)[]> {
  if (nodeKeys.length === 0) return [];
  const rows = await store.db
    .selectFrom('kubun_connector_sync_state')
    .selectAll()
    .where('node_key', 'in', [...new Set(nodeKeys)])
    .execute();
  return alignByNodeKey(rows, nodeKeys, rowToSyncState);
}
