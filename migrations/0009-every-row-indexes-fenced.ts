/**
 * Listings keep their index whatever the statistics say (issue 21 item 4).
 *
 * A viewer's page of operations is `caller_did = $viewer ORDER BY created_at
 * DESC, node_key DESC LIMIT n`. Two indexes give that order: the viewer's
 * own (caller_did, created_at, node_key), and the newest-first index of
 * every row (created_at, node_key) read with the caller as a filter. Which
 * one Postgres takes depends on how many rows it believes are the viewer's:
 * analyzed while the viewer's rows were most of the table, then handed
 * 60 000 newer rows of a busy tenant before autovacuum analyzed again, it
 * walked the newest-first index past all of them (13.7 ms and 3 466 buffers
 * for a page of 20 at 1 M rows, against 0.1 ms). Postgres has no index
 * hints, and ordering by the viewer's column first does not help: a column
 * equal to a constant is dropped from the required order.
 *
 * So the newest-first indexes of operations, watches and sweep receipts are
 * rebuilt partial on `node_key <> ''`: true of every row (a node key is
 * random and never empty), so they still hold every row, but the planner may use
 * a partial index only for a statement whose conditions imply its predicate.
 * The listings that read every tenant's rows state that condition; the
 * listings narrowed to an owner, a caller or a document never do (a cursor's
 * row comparison does not imply it), so for them these indexes do not exist
 * and the viewer's own index is the only ordered path. (Not `IS NOT NULL`:
 * SQLite folds that to true on a NOT NULL column, and then never matches
 * the statement to the index.)
 *
 * `idx_connector_operation_owner` (owner_did alone) goes: its every use is
 * served by the owner's listing index, which leads with the same column, and
 * with statistics taken before an owner had rows the planner read a page's
 * branch from it and sorted every row of that owner.
 * Frozen: never edit after release; add a new migration instead.
 */
import { sql, type Kysely, type Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

const EVERY_ROW_INDEXES = [
  { name: 'idx_connector_operation_created', table: 'kubun_connector_operation' },
  { name: 'idx_connector_watch_created', table: 'kubun_connector_projection_watch' },
  { name: 'idx_connector_sweep_receipt_created', table: 'kubun_connector_sweep_receipt' },
] as const;

export function everyRowIndexesFencedMigration(_t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      for (const { name, table } of EVERY_ROW_INDEXES) {
        await db.schema.dropIndex(name).execute();
        await db.schema
          .createIndex(name)
          .on(table)
          .columns(['created_at', 'node_key'])
          .where(sql<boolean>`node_key <> ''`)
          .execute();
      }
      await db.schema.dropIndex('idx_connector_operation_owner').execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.createIndex('idx_connector_operation_owner').on('kubun_connector_operation').column('owner_did').execute();
      for (const { name, table } of EVERY_ROW_INDEXES) {
        await db.schema.dropIndex(name).execute();
        await db.schema.createIndex(name).on(table).columns(['created_at', 'node_key']).execute();
      }
    },
  };
}
