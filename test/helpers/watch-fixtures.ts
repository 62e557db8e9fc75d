/** Raw projection watch rows for tests of finalize and watches. */
import type { ProjectionWatchRow } from '../../src/db/tables.js';
import type { StoreContext } from '../../src/store/context.js';
import type { ProjectionWatchIdentity } from '../../src/store/projection-watches/index.js';

/** A watch identity; `overrides` replace any part. */
export function watchIdentity(overrides: Partial<ProjectionWatchIdentity> = {}): ProjectionWatchIdentity {
  return {
    ownerDID: 'did:key:zOwner',
    connectorName: 'google',
    model: 'calendar.event',
    accountKey: 'account-1',
    sourceID: 'source-1',
    ...overrides,
  };
}

/** Every raw watch row, in a stable order. */
export async function allWatchRows(store: StoreContext): Promise<ProjectionWatchRow[]> {
  return store.db
    .selectFrom('kubun_connector_projection_watch')
    .selectAll()
    .orderBy('owner_did')
    .orderBy('connector_name')
    .orderBy('model')
    .orderBy('account_key')
    .orderBy('source_id')
    .execute();
}

/** Overwrites columns of the watch of `identity` directly (to set up states). */
export async function patchWatchRow(
  store: StoreContext,
  identity: ProjectionWatchIdentity,
  patch: Partial<Omit<ProjectionWatchRow, 'owner_did' | 'connector_name' | 'model' | 'account_key' | 'source_id'>>,
): Promise<void> {
  await store.db
    .updateTable('kubun_connector_projection_watch')
    .set(patch)
    .where('owner_did', '=', identity.ownerDID)
    .where('connector_name', '=', identity.connectorName)
    .where('model', '=', identity.model)
    .where('account_key', '=', identity.accountKey)
    .where('source_id', '=', identity.sourceID)
    .execute();
}
