/**
 * Exactly once without fine print (issue 37).
 *
 * - `kubun_connector_operation_request`: one row per keyed request of the
 *   write-back protocol (claim, acquire, start, mark sent, record outcome,
 *   record reconcile result, renew, release, finalize) that wrote something:
 *   the request key the client chose, which mutation it was, a digest of each
 *   of its input fields (secrets only as digests) and its answer, so the
 *   same request resent after a lost answer gets that answer and writes
 *   nothing, and another request under the same key is refused naming the
 *   fields that differ. `lease_token` keeps the lease a claim or acquire
 *   granted (a secret, never listed). Rows go with their operation (a
 *   trigger, as for the attempt history) and with retention.
 * - `kubun_connector_operation.send_timeout_ms`: the longest a send may take,
 *   chosen at claim (null: the mark's, or the store's default);
 *   `send_deadline_at`: set by mark-sent to when the send must have ended, and
 *   cleared with the marker. A takeover of a marked send with no recorded
 *   outcome waits for it (plus a margin), so no reconcile races a request the
 *   provider is still applying.
 *
 * Frozen: never edit after release; add a new migration instead.
 */
import { sql, type Kysely, type Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

export function requestKeysAndSendWindowMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('kubun_connector_operation').addColumn('send_timeout_ms', t.bigint).execute();
      await db.schema.alterTable('kubun_connector_operation').addColumn('send_deadline_at', t.bigint).execute();
      await db.schema
        .createTable('kubun_connector_operation_request')
        .addColumn('caller_did', t.text, (c) => c.notNull())
        .addColumn('operation_id', t.text, (c) => c.notNull())
        .addColumn('request_key', t.text, (c) => c.notNull())
        .addColumn('step', t.text, (c) => c.notNull())
        .addColumn('input', t.text, (c) => c.notNull())
        .addColumn('answer', t.text, (c) => c.notNull())
        .addColumn('lease_token', t.text)
        .addColumn('created_at', t.bigint, (c) => c.notNull())
        .addPrimaryKeyConstraint('kubun_connector_operation_request_pkey', ['caller_did', 'operation_id', 'request_key'])
        .execute();
      await db.schema.createIndex('idx_connector_operation_request_created').on('kubun_connector_operation_request').column('created_at').execute();
      if (t.dialect === 'postgres') {
        await sql
          .raw(
            `create function kubun_connector_operation_request_cascade() returns trigger language plpgsql as $$ begin
               delete from kubun_connector_operation_request r using old_rows o where r.caller_did = o.caller_did and r.operation_id = o.operation_id;
               return null; end $$`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger kubun_connector_operation_request_cascade after delete on kubun_connector_operation
             referencing old table as old_rows for each statement execute function kubun_connector_operation_request_cascade()`,
          )
          .execute(db);
      } else {
        await sql
          .raw(
            `create trigger kubun_connector_operation_request_cascade after delete on kubun_connector_operation begin
               delete from kubun_connector_operation_request where caller_did = old.caller_did and operation_id = old.operation_id; end`,
          )
          .execute(db);
      }
    },
    async down(db: Kysely<any>): Promise<void> {
      await sql.raw(`drop trigger if exists kubun_connector_operation_request_cascade${t.dialect === 'postgres' ? ' on kubun_connector_operation' : ''}`).execute(db);
      if (t.dialect === 'postgres') await sql.raw('drop function if exists kubun_connector_operation_request_cascade()').execute(db);
      await db.schema.dropTable('kubun_connector_operation_request').execute();
      await db.schema.alterTable('kubun_connector_operation').dropColumn('send_deadline_at').execute();
      await db.schema.alterTable('kubun_connector_operation').dropColumn('send_timeout_ms').execute();
    },
  };
}
