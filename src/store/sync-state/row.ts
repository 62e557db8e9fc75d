/** Row ↔ domain mapping of `kubun_connector_sync_state`. */
import type { Insertable } from 'kysely';
import type { SyncStateRow, SyncStateTable } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { decodeJSONColumn, encodeJSONColumn } from '../json.js';
import type { SyncProgress, SyncState, SyncStatus } from './types.js';

/** Maps a row to the domain shape: JSON decoded, counts and times as numbers. */
export function rowToSyncState(row: SyncStateRow): SyncState {
  return {
    connectorName: row.connector_name,
    ownerDID: row.owner_did,
    nodeKey: row.node_key,
    checkpoint: decodeJSONColumn(row.checkpoint),
    lastSyncedAt: row.last_synced_at,
    entityCount: Number(row.entity_count),
    status: row.status,
    error: row.error,
    leaseExpiresAt: row.lease_expires_at === null ? null : Number(row.lease_expires_at),
    recovery: decodeJSONColumn(row.recovery),
    version: Number(row.version),
    incarnation: row.incarnation,
    progressedAt: row.progressed_at === null ? null : Number(row.progressed_at),
  };
}

/** The columns a progress write sets (never `status`). */
export function progressColumns(progress: SyncProgress) {
  return {
    checkpoint: encodeJSONColumn(progress.checkpoint),
    last_synced_at: progress.lastSyncedAt,
    entity_count: progress.entityCount,
    error: progress.error ?? null,
    recovery: encodeJSONColumn(progress.recovery),
  };
}

/** A brand-new row: version 0, a fresh incarnation and node key, no lease. */
export function freshSyncStateRow(
  store: StoreContext,
  connectorName: string,
  ownerDID: string,
  progress: SyncProgress,
  status: SyncStatus,
): Insertable<SyncStateTable> {
  return {
    connector_name: connectorName,
    owner_did: ownerDID,
    node_key: store.getRandomID(),
    ...progressColumns(progress),
    status,
    lease_expires_at: null,
    version: 0,
    incarnation: store.getRandomID(),
    progressed_at: store.now(),
  };
}
