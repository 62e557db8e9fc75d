/** Whether a DID owns anything here: the cheap hint admission uses to tell known viewers from fresh keys. */
import { sql } from 'kysely';
import type { StoreContext } from '../context.js';

/**
 * Whether `ownerDID` owns at least one operation, projection watch or sync
 * state. One statement of three `exists` probes, each answered from an index
 * that leads with `owner_did` (idx_connector_operation_owner_created,
 * idx_connector_watch_owner_created, idx_connector_sync_state_owner): at most
 * one index entry read per table, whatever the tables hold.
 */
export async function ownsAnyRow(store: StoreContext, ownerDID: string): Promise<boolean> {
  const one = sql<number>`1`.as('one');
  const row = await store.db
    .selectNoFrom((eb) =>
      eb
        .or([
          eb.exists(eb.selectFrom('kubun_connector_operation').select(one).where('owner_did', '=', ownerDID)),
          eb.exists(eb.selectFrom('kubun_connector_projection_watch').select(one).where('owner_did', '=', ownerDID)),
          eb.exists(eb.selectFrom('kubun_connector_sync_state').select(one).where('owner_did', '=', ownerDID)),
        ])
        .as('owns'),
    )
    .executeTakeFirstOrThrow();
  // Postgres answers a boolean, SQLite 0 or 1.
  return row.owns === true || Number(row.owns) === 1;
}
