/**
 * Finalize's activity, counted once per statement on Postgres (issue 40
 * item 4). Migration 0011 bumps the hour's activity rows from a row-level
 * trigger, one operation at a time, in the order the UPDATE reaches them:
 * safe while every finalize committed one operation, but a statement that
 * commits many (a gathered batch of finalizes) would lock the activity rows
 * in row order, and two such statements could wait on each other in a
 * cycle. This replaces it, on Postgres only, with a statement-level trigger
 * over the transition tables: the operations the statement moved into
 * `committed`, grouped, one upsert per table in key order, the viewer table
 * before the totals (as migration 0004's counters do), so concurrent
 * statements lock activity rows in one order. Its statements read only the
 * transition tables (no parameters), so plpgsql keeps their plans; an UPDATE
 * that commits nothing writes nothing. SQLite (one writer) keeps 0011's
 * row-level trigger.
 * Frozen: never edit after release; add a new migration instead.
 */
import { sql, type Kysely, type Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

const HOUR_MS = 3_600_000;

/** The operations this statement moved into `committed`, with the hour they entered it. */
const COMMITTED_NOW = `from new_rows n join old_rows o on o.caller_did = n.caller_did and o.operation_id = n.operation_id
  where n.state = 'committed' and o.state <> 'committed'`;

const PER_STATEMENT = `create function kubun_connector_operation_activity_committed_rows() returns trigger language plpgsql as $$ begin
  insert into kubun_connector_operation_activity as a (caller_did, hour, owner_did, connector_name, outcome, shard, n)
    select n.caller_did, (n.updated_at / ${HOUR_MS}) * ${HOUR_MS}, n.owner_did, n.connector_name, 'committed', ascii(n.node_key) % 8, count(*)
    ${COMMITTED_NOW}
    group by 1, 2, 3, 4, 5, 6 order by 1, 2, 3, 4, 5, 6
    on conflict (caller_did, hour, owner_did, connector_name, outcome, shard) do update set n = a.n + excluded.n;
  insert into kubun_connector_operation_activity_total as t (hour, connector_name, outcome, shard, n)
    select (n.updated_at / ${HOUR_MS}) * ${HOUR_MS}, n.connector_name, 'committed', ascii(n.node_key) % 16, count(*)
    ${COMMITTED_NOW}
    group by 1, 2, 3, 4 order by 1, 2, 3, 4
    on conflict (hour, connector_name, outcome, shard) do update set n = t.n + excluded.n;
  return null; end $$`;

/** Migration 0011's row-level trigger and its function, as it created them (restored by `down`). */
const PER_ROW = `create function kubun_connector_operation_activity_committed() returns trigger language plpgsql as $$ begin
  insert into kubun_connector_operation_activity (caller_did, hour, owner_did, connector_name, outcome, shard, n)
    select new.caller_did, (new.updated_at / ${HOUR_MS}) * ${HOUR_MS}, new.owner_did, new.connector_name, 'committed', ascii(new.node_key) % 8, 1 where true
    on conflict (caller_did, hour, owner_did, connector_name, outcome, shard) do update set n = kubun_connector_operation_activity.n + 1;
  insert into kubun_connector_operation_activity_total (hour, connector_name, outcome, shard, n)
    select (new.updated_at / ${HOUR_MS}) * ${HOUR_MS}, new.connector_name, 'committed', ascii(new.node_key) % 16, 1 where true
    on conflict (hour, connector_name, outcome, shard) do update set n = kubun_connector_operation_activity_total.n + 1;
  return null; end $$`;

export function activityCommittedPerStatementMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      if (t.dialect !== 'postgres') return;
      await sql`drop trigger kubun_connector_operation_activity_committed on kubun_connector_operation`.execute(db);
      await sql`drop function kubun_connector_operation_activity_committed()`.execute(db);
      await sql.raw(PER_STATEMENT).execute(db);
      await sql`create trigger kubun_connector_operation_activity_committed after update on kubun_connector_operation
        referencing old table as old_rows new table as new_rows
        for each statement execute function kubun_connector_operation_activity_committed_rows()`.execute(db);
    },
    async down(db: Kysely<any>): Promise<void> {
      if (t.dialect !== 'postgres') return;
      await sql`drop trigger kubun_connector_operation_activity_committed on kubun_connector_operation`.execute(db);
      await sql`drop function kubun_connector_operation_activity_committed_rows()`.execute(db);
      await sql.raw(PER_ROW).execute(db);
      await sql`create trigger kubun_connector_operation_activity_committed after update on kubun_connector_operation
        for each row when (new.state = 'committed' and old.state <> 'committed') execute function kubun_connector_operation_activity_committed()`.execute(db);
    },
  };
}
