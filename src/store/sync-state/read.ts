/** Reads of sync states by their public node key (Relay refetch, DataLoaders). */
import type { StoreContext } from '../context.js';
import { rowToSyncState } from './row.js';
import type { SyncState } from './types.js';
import { alignByNodeKey } from '../node-keys.js';

/** Reads the sync state with this node key, or `null`. */
export async function getSyncStateByNodeKey(store: StoreContext, nodeKey: string): Promise<SyncState | null> {
  const row = await store.db.selectFrom('kubun_connector_sync_state').selectAll().where('node_key', '=', nodeKey).executeTakeFirst();
  return row === undefined ? null : rowToSyncState(row);
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
