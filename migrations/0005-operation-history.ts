/**
 * Attempt history (issue 11): one row per attempt of an operation (opened by
 * start, stamped by mark-sent, closed by the recorded outcome with its kind,
 * HTTP status, retry-after, defer reason and a bounded, redacted message),
 * numbered per operation by `seq`; and `last_error` on the operation, the
 * message of its latest outcome. History goes with its operation: a trigger
 * deletes an operation's rows in the statement that deletes the operation
 * (retention, the document sweep), on both dialects.
 * Frozen: never edit after release; add a new migration instead.
 */
import { sql, type Kysely, type Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

export function operationHistoryMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('kubun_connector_operation').addColumn('last_error', t.text).execute();
      await db.schema
        .createTable('kubun_connector_operation_history')
        .addColumn('caller_did', t.text, (c) => c.notNull())
        .addColumn('operation_id', t.text, (c) => c.notNull())
        .addColumn('seq', 'integer', (c) => c.notNull())
        .addColumn('kind', t.text, (c) => c.notNull())
        .addColumn('attempt', 'integer', (c) => c.notNull())
        .addColumn('started_at', t.bigint, (c) => c.notNull())
        .addColumn('sent_at', t.bigint)
        .addColumn('ended_at', t.bigint)
        .addColumn('outcome', t.text)
        .addColumn('http_status', 'integer')
        .addColumn('retry_after_ms', t.bigint)
        .addColumn('defer_reason', t.text)
        .addColumn('message', t.text)
        .addColumn('actor_did', t.text)
        .addPrimaryKeyConstraint('kubun_connector_operation_history_pkey', ['caller_did', 'operation_id', 'seq'])
        .execute();
      if (t.dialect === 'postgres') {
        await sql
          .raw(
            `create function kubun_connector_operation_history_cascade() returns trigger language plpgsql as $$ begin
               delete from kubun_connector_operation_history h using old_rows o where h.caller_did = o.caller_did and h.operation_id = o.operation_id;
               return null; end $$`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger kubun_connector_operation_history_cascade after delete on kubun_connector_operation
             referencing old table as old_rows for each statement execute function kubun_connector_operation_history_cascade()`,
          )
          .execute(db);
      } else {
        await sql
          .raw(
            `create trigger kubun_connector_operation_history_cascade after delete on kubun_connector_operation begin
               delete from kubun_connector_operation_history where caller_did = old.caller_did and operation_id = old.operation_id; end`,
          )
          .execute(db);
      }
    },
    async down(db: Kysely<any>): Promise<void> {
      await sql.raw(`drop trigger if exists kubun_connector_operation_history_cascade${t.dialect === 'postgres' ? ' on kubun_connector_operation' : ''}`).execute(db);
      if (t.dialect === 'postgres') await sql.raw('drop function if exists kubun_connector_operation_history_cascade()').execute(db);
      await db.schema.dropTable('kubun_connector_operation_history').execute();
      await db.schema.alterTable('kubun_connector_operation').dropColumn('last_error').execute();
    },
  };
}
