/**
 * Stale sync states as data (issue 11): `progressed_at`, when the store last
 * wrote a sync state's progress (ms epoch, the store's clock; the connector's
 * own `last_synced_at` is free text and cannot be compared). Rows from
 * before this migration count as progressed when it ran. Indexed for the
 * `staleForMs` filter.
 * Frozen: never edit after release; add a new migration instead.
 */
import type { Kysely, Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

export function syncStateProgressedAtMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('kubun_connector_sync_state').addColumn('progressed_at', t.bigint).execute();
      await db.updateTable('kubun_connector_sync_state').set({ progressed_at: Date.now() }).execute();
      await db.schema.createIndex('idx_connector_sync_state_progressed').on('kubun_connector_sync_state').column('progressed_at').execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.dropIndex('idx_connector_sync_state_progressed').execute();
      await db.schema.alterTable('kubun_connector_sync_state').dropColumn('progressed_at').execute();
    },
  };
}
