/** Whether a DID owns anything here: the cheap hint admission uses to tell known viewers from fresh keys. */
import { sql } from 'kysely';
import type { StoreContext } from '../context.js';

/** Options of {@link ownsAnyRow}. */
export interface OwnsAnyRowOptions {
  /**
   * Count only rows created at or before this instant (ms): operations and
   * projection watches by their `created_at`. Sync states carry no creation
   * time, so they do not count then. Default: any row, sync states included.
   */
  createdBefore?: number;
}

/**
 * Whether `ownerDID` owns at least one operation, projection watch or sync
 * state (with `createdBefore`: an operation or watch at least that old). One
 * statement of `exists` probes, each answered from an index that leads with
 * `owner_did` (idx_connector_operation_owner_created,
 * idx_connector_watch_owner_created, idx_connector_sync_state_owner; the first
 * two hold `created_at` next): at most one index entry read per table,
 * whatever the tables hold.
 */
export async function ownsAnyRow(store: StoreContext, ownerDID: string, options: OwnsAnyRowOptions = {}): Promise<boolean> {
  const one = sql<number>`1`.as('one');
  const { createdBefore } = options;
  const row = await store.db
    .selectNoFrom((eb) => {
      const operation = eb.selectFrom('kubun_connector_operation').select(one).where('owner_did', '=', ownerDID);
      const watch = eb.selectFrom('kubun_connector_projection_watch').select(one).where('owner_did', '=', ownerDID);
      const probes =
        createdBefore === undefined
          ? [eb.exists(operation), eb.exists(watch), eb.exists(eb.selectFrom('kubun_connector_sync_state').select(one).where('owner_did', '=', ownerDID))]
          : [eb.exists(operation.where('created_at', '<=', createdBefore)), eb.exists(watch.where('created_at', '<=', createdBefore))];
      return eb.or(probes).as('owns');
    })
    .executeTakeFirstOrThrow();
  // Postgres answers a boolean, SQLite 0 or 1.
  return row.owns === true || Number(row.owns) === 1;
}
