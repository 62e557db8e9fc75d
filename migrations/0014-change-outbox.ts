/**
 * Changes made outside the server, on SQLite (issue 38 item 4).
 *
 * - `kubun_connector_change_outbox`: the change events of a write made by
 *   another process than the server's (`npm run ops`: retry, cancel,
 *   requeue), one row per write, its payload encoded as the Postgres change
 *   feed's NOTIFY payload. The server's SQLite feed reads rows past the last
 *   one it saw whenever `PRAGMA data_version` says another connection
 *   committed, delivers them to its subscribers, and deletes rows older than a
 *   minute. On Postgres those writers NOTIFY the change channel instead, so
 *   the table exists only on SQLite.
 *
 * Frozen: never edit after release; add a new migration instead.
 */
import type { Kysely, Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

const OUTBOX = 'kubun_connector_change_outbox';

export function changeOutboxMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      if (t.dialect !== 'sqlite') return;
      await db.schema
        .createTable(OUTBOX)
        // AUTOINCREMENT: a sequence never reused, so a reader that saw `seq` never misses a later row after a prune.
        .addColumn('seq', 'integer', (c) => c.primaryKey().autoIncrement())
        .addColumn('payload', t.text, (c) => c.notNull())
        .addColumn('created_at', t.bigint, (c) => c.notNull())
        .execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      if (t.dialect !== 'sqlite') return;
      await db.schema.dropTable(OUTBOX).ifExists().execute();
    },
  };
}
