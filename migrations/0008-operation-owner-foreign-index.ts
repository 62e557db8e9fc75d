/**
 * A viewer's operations as owner but not caller, in listing order, without
 * reading the ones they called themselves (issue 10: visibility served by
 * indexes for any viewer). The listing's second branch, `owner_did = viewer
 * AND caller_did <> viewer`, read `idx_connector_operation_owner_created`
 * and skipped every row the viewer had also called: for an owner who calls
 * most of their own writes (the common case) a page read ten rows per row
 * shown, and an owner with a million self-called rows would have had all of
 * them read for an empty branch. This partial index holds only rows whose
 * caller is not their owner; the branch is written `caller_did <> owner_did`
 * (the same rows, given `owner_did = viewer`) so both dialects match it.
 * Frozen: never edit after release; add a new migration instead.
 */
import { sql, type Kysely, type Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

export function operationOwnerForeignIndexMigration(_t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createIndex('idx_connector_operation_owner_foreign_created')
        .on('kubun_connector_operation')
        .columns(['owner_did', 'created_at', 'node_key'])
        .where(sql<boolean>`caller_did <> owner_did`)
        .execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.dropIndex('idx_connector_operation_owner_foreign_created').execute();
    },
  };
}
