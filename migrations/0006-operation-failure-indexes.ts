/**
 * Indexes for the failure filters of `operations` (issue 11): each serves a
 * filter's listing newest first (or a small range to sort) without reading
 * the table, as `npm run bench` (bench/plans.ts) shows at 1 M rows.
 * - last kind and defer reason, each with the listing order;
 * - held leases by expiry (partial: only rows with a lease; `stuck` finds
 *   lapsed ones there, and overdue ones on the due index of migration 0001);
 * - attempts (`minAttempts` picks the few with many).
 * Frozen: never edit after release; add a new migration instead.
 */
import { sql, type Kysely, type Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

export function operationFailureIndexesMigration(_t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createIndex('idx_connector_operation_last_kind_created')
        .on('kubun_connector_operation')
        .columns(['last_kind', 'created_at', 'node_key'])
        .where(sql.ref('last_kind'), 'is not', null)
        .execute();
      await db.schema
        .createIndex('idx_connector_operation_defer_created')
        .on('kubun_connector_operation')
        .columns(['defer_reason', 'created_at', 'node_key'])
        .where(sql.ref('defer_reason'), 'is not', null)
        .execute();
      await db.schema
        .createIndex('idx_connector_operation_lease_expires')
        .on('kubun_connector_operation')
        .column('lease_expires_at')
        .where(sql.ref('lease_token'), 'is not', null)
        .execute();
      await db.schema.createIndex('idx_connector_operation_attempts').on('kubun_connector_operation').column('attempts').execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      for (const name of ['idx_connector_operation_last_kind_created', 'idx_connector_operation_defer_created', 'idx_connector_operation_lease_expires', 'idx_connector_operation_attempts']) {
        await db.schema.dropIndex(name).execute();
      }
    },
  };
}
