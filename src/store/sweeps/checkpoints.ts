/** The partition checkpoint: the last receipt sequence committed. */
import type { StoreContext } from '../context.js';
import { rowToSweepCheckpoint } from './row.js';
import type { SweepCheckpoint, SweepKey } from './types.js';

/** Reads a partition's checkpoint, or null before its first commit. */
export async function getSweepCheckpoint(store: StoreContext, key: SweepKey): Promise<SweepCheckpoint | null> {
  const row = await store.db
    .selectFrom('kubun_connector_sweep_checkpoint')
    .selectAll()
    .where((eb) => eb.and({ owner_did: key.ownerDID, connector_name: key.connectorName, partition: key.partition }))
    .executeTakeFirst();
  return row === undefined ? null : rowToSweepCheckpoint(row);
}
