/** Keyset-paged listing of sync states for the API (SPEC §3.1, §4). */
import type { ExpressionBuilder, SelectQueryBuilder } from 'kysely';
import type { Database } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { countUpTo, type BoundedCount } from '../count.js';
import { SYNC_STATE_ORDER, type KeysetPageRequest } from '../page.js';
import { rowToSyncState } from './row.js';
import type { SyncState, SyncStateCursor, SyncStateFilter } from './types.js';

/** Who is looking: an owner DID sees only its own rows; `null` is the service principal and sees all. */
export interface SyncStateScope {
  visibleTo: string | null;
  filter?: SyncStateFilter;
}

/**
 * Options of {@link listSyncStates}: exactly one of `first` (the rows after
 * `after`, exclusive; from the start when absent) or `last` (the rows just
 * before `before`; the last ones when absent); sizes 0 or more.
 */
export interface ListSyncStatesOptions extends SyncStateScope, KeysetPageRequest<SyncStateCursor> {}

/** A page of {@link listSyncStates}, in (connector name, owner DID) order. */
export interface SyncStatePage {
  syncStates: SyncState[];
  /** Forward: whether more rows follow this page; backward: whether more precede it. */
  hasMore: boolean;
}

/**
 * Lists visible sync states in (connector name, owner DID) order, keyset
 * paged either way. Served by the primary key, or for an owner by
 * `idx_connector_sync_state_owner`, where the owner is fixed and the order
 * reduces to the connector name; a backward page reads the index the other way.
 */
export async function listSyncStates(store: StoreContext, options: ListSyncStatesOptions): Promise<SyncStatePage> {
  const page = await SYNC_STATE_ORDER.page(scoped(store, options).selectAll(), options, rowToSyncState);
  return { syncStates: page.items, hasMore: page.hasMore };
}

/** Counts the sync states {@link listSyncStates} would page through, up to the count cap. */
export async function countSyncStates(store: StoreContext, scope: SyncStateScope): Promise<BoundedCount> {
  return countUpTo(store, scoped(store, scope));
}

function scoped(store: StoreContext, { visibleTo, filter = {} }: SyncStateScope): SelectQueryBuilder<Database, 'kubun_connector_sync_state', {}> {
  return store.db.selectFrom('kubun_connector_sync_state').where((eb: ExpressionBuilder<Database, 'kubun_connector_sync_state'>) => {
    const conditions = [];
    if (visibleTo !== null) conditions.push(eb('owner_did', '=', visibleTo));
    if (filter.ownerDID !== undefined) conditions.push(eb('owner_did', '=', filter.ownerDID));
    if (filter.connectorName !== undefined) conditions.push(eb('connector_name', '=', filter.connectorName));
    if (filter.status !== undefined) conditions.push(eb('status', '=', filter.status));
    if (filter.staleForMs !== undefined) {
      const now = store.now();
      conditions.push(
        eb.or([
          eb('progressed_at', 'is', null),
          eb('progressed_at', '<=', now - filter.staleForMs),
          eb.and([eb('lease_expires_at', 'is not', null), eb('lease_expires_at', '<=', now)]),
        ]),
      );
    }
    return eb.and(conditions);
  });
}
