/**
 * Operations by idempotency key alone (issue 22 item 3: the console's search
 * and `OperationFilter.operationID`). The primary key leads with the caller,
 * so a service looking a key up without knowing who called it read every
 * row; this index answers it with the rows of that key (one per caller that
 * used it, sorted after). It is the primary key's two columns in the other
 * order, so a keyed write may be planned on either and still reads one row.
 * Frozen: never edit after release; add a new migration instead.
 */
import type { Kysely, Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

export function operationIDIndexMigration(_t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.createIndex('idx_connector_operation_operation_id').on('kubun_connector_operation').columns(['operation_id', 'caller_did']).execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.dropIndex('idx_connector_operation_operation_id').execute();
    },
  };
}
