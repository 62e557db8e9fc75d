/**
 * A holder's start and mark-sent rewrite no index entry (issue 40 item 4).
 * Postgres updates a row in place on its page, as a heap-only tuple (HOT:
 * no new entry in any index), only when no column that any index names (as
 * a key, in an expression or in a partial index's predicate) changes and the
 * new version fits on the page. Before this migration every step of a
 * write-back changed an indexed column, so each of its four updates of the
 * operation row (lease, start, mark sent, finalize) wrote an entry into
 * every one of the table's 15 indexes:
 * - `updated_at`, written by every step, keyed idx_connector_operation_state_updated
 *   (state, updated_at), which only retention reads (terminal rows by age);
 * - `attempts`, incremented by every start, keyed idx_connector_operation_attempts
 *   (migration 0006), which the `minAttempts` filter reads to pick the few
 *   operations with many attempts.
 * Both are replaced by an index over a stored generated column that a live
 * operation's steps leave unchanged (null while live, or while it is on its
 * first attempt), partial so that such rows have no entry at all:
 * - `terminal_updated_at`: `updated_at` once the state is committed or dead,
 *   else null; idx_connector_operation_terminal_updated (state, terminal_updated_at)
 *   is retention's range, per terminal state, as (state, updated_at) was;
 * - `retried_attempts`: `attempts` once more than one attempt started, else
 *   null; idx_connector_operation_retried_attempts serves `minAttempts` of 2
 *   and more (one attempt or more is most started work, which no index
 *   would pick out).
 * The lease itself stays indexed (idx_connector_operation_lease_expires:
 * expired leases and `stuck`), so taking a lease, like finalize (state,
 * document), still writes every index; start and mark sent are HOT.
 * On Postgres the operation table's fillfactor becomes 80 (and the attempt
 * history's 90, whose row mark sent updates), leaving room on each page for
 * a row's next version; it is set before the columns are added, whose
 * rewrite of the table lays the existing rows out with that room. That
 * rewrite holds the operation table exclusively while it copies every row
 * and rebuilds the indexes (one ALTER for both columns, the two replaced
 * indexes dropped first: 16 s for 200 000 operations on a loaded 2-core
 * test machine, where two ALTERs with the drops after them took 35 s), so
 * the connection's statement timeout is lifted for the migration's
 * transaction and bounds the wait for the lock instead (`lock_timeout`).
 * Down drops the columns (no rewrite) and rebuilds the two indexes.
 * SQLite (no HOT) gets the same columns, virtual, and the same indexes, so
 * the store's statements are the same on both.
 * Frozen: never edit after release; add a new migration instead.
 */
import { sql, type Kysely, type Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

const TABLE = 'kubun_connector_operation';
const GENERATED = {
  terminal_updated_at: sql`case when state in ('committed', 'dead') then updated_at end`,
  retried_attempts: sql`case when attempts > 1 then attempts end`,
};

export function operationHotStepsMigration(t: MigrationColumnTypes): Migration {
  const postgres = t.dialect === 'postgres';
  return {
    async up(db: Kysely<any>): Promise<void> {
      if (postgres) {
        // The rewrite below takes as long as the table is big, not a request's time: for this
        // transaction the connection's statement timeout (DB_STATEMENT_TIMEOUT_MS at start-up)
        // bounds only the wait for the table's lock.
        await sql`select set_config('lock_timeout', current_setting('statement_timeout'), true)`.execute(db);
        await sql`set local statement_timeout = 0`.execute(db);
        await sql`alter table kubun_connector_operation set (fillfactor = 80)`.execute(db);
        await sql`alter table kubun_connector_operation_history set (fillfactor = 90)`.execute(db);
      }
      // Dropped first, so the rewrite below does not rebuild them (the migration runs in one transaction on Postgres).
      await db.schema.dropIndex('idx_connector_operation_state_updated').execute();
      await db.schema.dropIndex('idx_connector_operation_attempts').execute();
      // Postgres 15 stores every generated column and rewrites the table to add one: both in one
      // ALTER, one rewrite. SQLite adds only virtual ones to an existing table, one per ALTER.
      if (postgres) {
        await db.schema
          .alterTable(TABLE)
          .addColumn('terminal_updated_at', t.bigint, (c) => c.generatedAlwaysAs(GENERATED.terminal_updated_at).stored())
          .addColumn('retried_attempts', 'integer', (c) => c.generatedAlwaysAs(GENERATED.retried_attempts).stored())
          .execute();
      } else {
        await db.schema.alterTable(TABLE).addColumn('terminal_updated_at', t.bigint, (c) => c.generatedAlwaysAs(GENERATED.terminal_updated_at)).execute();
        await db.schema.alterTable(TABLE).addColumn('retried_attempts', 'integer', (c) => c.generatedAlwaysAs(GENERATED.retried_attempts)).execute();
      }
      await db.schema
        .createIndex('idx_connector_operation_terminal_updated')
        .on(TABLE)
        .columns(['state', 'terminal_updated_at'])
        .where(sql.ref('terminal_updated_at'), 'is not', null)
        .execute();
      await db.schema
        .createIndex('idx_connector_operation_retried_attempts')
        .on(TABLE)
        .column('retried_attempts')
        .where(sql.ref('retried_attempts'), 'is not', null)
        .execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.dropIndex('idx_connector_operation_retried_attempts').execute();
      await db.schema.dropIndex('idx_connector_operation_terminal_updated').execute();
      await db.schema.createIndex('idx_connector_operation_attempts').on(TABLE).column('attempts').execute();
      await db.schema.createIndex('idx_connector_operation_state_updated').on(TABLE).columns(['state', 'updated_at']).execute();
      await db.schema.alterTable(TABLE).dropColumn('retried_attempts').execute();
      await db.schema.alterTable(TABLE).dropColumn('terminal_updated_at').execute();
      if (postgres) {
        await sql`alter table kubun_connector_operation_history reset (fillfactor)`.execute(db);
        await sql`alter table kubun_connector_operation reset (fillfactor)`.execute(db);
      }
    },
  };
}
