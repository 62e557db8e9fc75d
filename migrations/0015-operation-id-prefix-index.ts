/**
 * Operation IDs by prefix (issue 38 item 5: the console's search offers the
 * idempotency keys that start with what was typed). A prefix is a range of
 * the index only in byte order: SQLite's BINARY collation already is
 * (idx_connector_operation_operation_id, migration 0010, serves it), while a
 * Postgres column sorts in the database's collation, where "starts with" is
 * no range at all (en_US ignores punctuation at the first level). This index
 * sorts the key in the "C" collation (code-point order), with the caller
 * after it, so a prefix read walks it in order and stops after the page.
 * Frozen: never edit after release; add a new migration instead.
 */
import { sql, type Kysely, type Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

const INDEX = 'idx_connector_operation_operation_id_bytes';

export function operationIDPrefixIndexMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      if (t.dialect !== 'postgres') return;
      await sql`create index ${sql.id(INDEX)} on kubun_connector_operation (operation_id collate "C", caller_did)`.execute(db);
    },
    async down(db: Kysely<any>): Promise<void> {
      if (t.dialect !== 'postgres') return;
      await db.schema.dropIndex(INDEX).ifExists().execute();
    },
  };
}
