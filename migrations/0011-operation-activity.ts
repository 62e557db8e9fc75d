/**
 * Operation activity by hour (issue 22 item 7: the overview's charts), kept
 * by triggers in the transaction of the write they count, whichever code
 * path makes it, like the counters of migration 0004.
 *
 * - `kubun_connector_operation_activity`: per (caller, hour, owner,
 *   connector, outcome, shard), for a viewer's series (rows where they are
 *   caller or owner); `idx_..._activity_owner` serves the owner side and
 *   `idx_..._activity_hour` the pruning.
 * - `kubun_connector_operation_activity_total`: per (hour, connector,
 *   outcome, shard), for a service's series over everyone.
 * - `hour` is the start of the UTC hour (ms epoch) the event happened in.
 *   `outcome` is `committed` (an operation entering that state: finalize)
 *   or the kind of an attempt's recorded outcome (`retryable`, `unknown`,
 *   `fatal`, `offline`, `auth`: the history row's outcome going from null to
 *   a kind, at its `ended_at`).
 * - Activity is what happened: deleting an operation (retention, the
 *   document sweep) takes nothing off. Rows older than the longest window
 *   are pruned by retention.
 * - `shard` (from the operation's random node key) spreads concurrent
 *   writers of one hour over several rows, so outcomes do not queue on one
 *   counter row's lock on Postgres. Each write bumps one row per table, so
 *   two transactions never wait on each other's activity rows in a cycle.
 * - Row-level AFTER UPDATE triggers with a WHEN clause on both dialects:
 *   the function runs only for the row that changed that way.
 *
 * - `kubun_connector_backlog_sample`: the due backlog (live operations a
 *   worker could claim) as one server counted it at the start of a sampling
 *   slot; one row per slot, whichever replica took it first.
 * Frozen: never edit after release; add a new migration instead.
 */
import { sql, type Kysely, type Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

const ACTIVITY = 'kubun_connector_operation_activity';
const ACTIVITY_TOTAL = 'kubun_connector_operation_activity_total';
const BACKLOG = 'kubun_connector_backlog_sample';
const HOUR_MS = 3_600_000;
const VIEWER_SHARDS = 8;
const TOTAL_SHARDS = 16;

/** The two upserts of one event, `operation` being the operation's row alias, `hour` and `outcome` SQL expressions. */
function bumps(dialect: 'postgres' | 'sqlite', operation: string, hour: string, outcome: string, from: string): string {
  // SQLite parses INSERT … SELECT … ON CONFLICT unambiguously only with a WHERE clause.
  const source = from === '' ? 'where true' : from;
  const shard = (n: number) => (dialect === 'postgres' ? `ascii(${operation}.node_key) % ${n}` : `unicode(substr(${operation}.node_key, 1, 1)) % ${n}`);
  return `
    insert into ${ACTIVITY} (caller_did, hour, owner_did, connector_name, outcome, shard, n)
      select ${operation}.caller_did, ${hour}, ${operation}.owner_did, ${operation}.connector_name, ${outcome}, ${shard(VIEWER_SHARDS)}, 1 ${source}
      on conflict (caller_did, hour, owner_did, connector_name, outcome, shard) do update set n = ${ACTIVITY}.n + 1;
    insert into ${ACTIVITY_TOTAL} (hour, connector_name, outcome, shard, n)
      select ${hour}, ${operation}.connector_name, ${outcome}, ${shard(TOTAL_SHARDS)}, 1 ${source}
      on conflict (hour, connector_name, outcome, shard) do update set n = ${ACTIVITY_TOTAL}.n + 1;`;
}

const hourOf = (column: string) => `(${column} / ${HOUR_MS}) * ${HOUR_MS}`;

export function operationActivityMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable(ACTIVITY)
        .addColumn('caller_did', t.text, (c) => c.notNull())
        .addColumn('hour', t.bigint, (c) => c.notNull())
        .addColumn('owner_did', t.text, (c) => c.notNull())
        .addColumn('connector_name', t.text, (c) => c.notNull())
        .addColumn('outcome', t.text, (c) => c.notNull())
        .addColumn('shard', 'integer', (c) => c.notNull())
        .addColumn('n', t.bigint, (c) => c.notNull())
        .addPrimaryKeyConstraint(`${ACTIVITY}_pkey`, ['caller_did', 'hour', 'owner_did', 'connector_name', 'outcome', 'shard'])
        .execute();
      await db.schema.createIndex(`idx_connector_operation_activity_owner`).on(ACTIVITY).columns(['owner_did', 'hour']).execute();
      await db.schema.createIndex(`idx_connector_operation_activity_hour`).on(ACTIVITY).column('hour').execute();
      await db.schema
        .createTable(ACTIVITY_TOTAL)
        .addColumn('hour', t.bigint, (c) => c.notNull())
        .addColumn('connector_name', t.text, (c) => c.notNull())
        .addColumn('outcome', t.text, (c) => c.notNull())
        .addColumn('shard', 'integer', (c) => c.notNull())
        .addColumn('n', t.bigint, (c) => c.notNull())
        .addPrimaryKeyConstraint(`${ACTIVITY_TOTAL}_pkey`, ['hour', 'connector_name', 'outcome', 'shard'])
        .execute();
      await db.schema
        .createTable(BACKLOG)
        .addColumn('sampled_at', t.bigint, (c) => c.primaryKey())
        .addColumn('due', t.bigint, (c) => c.notNull())
        .addColumn('capped', 'integer', (c) => c.notNull())
        .execute();

      // Finalize: an operation entering `committed`, at its updated_at.
      const committedWhen = `new.state = 'committed' and old.state <> 'committed'`;
      // A recorded outcome closes a history row: its outcome goes from null to a kind, at its ended_at.
      const outcomeWhen = `old.outcome is null and new.outcome is not null`;
      const fromOperation = `from kubun_connector_operation o where o.caller_did = new.caller_did and o.operation_id = new.operation_id`;
      if (t.dialect === 'postgres') {
        await sql
          .raw(
            `create function kubun_connector_operation_activity_committed() returns trigger language plpgsql as $$ begin
               ${bumps('postgres', 'new', hourOf('new.updated_at'), `'committed'`, '')}
               return null; end $$`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger kubun_connector_operation_activity_committed after update on kubun_connector_operation
             for each row when (${committedWhen}) execute function kubun_connector_operation_activity_committed()`,
          )
          .execute(db);
        await sql
          .raw(
            `create function kubun_connector_operation_activity_outcome() returns trigger language plpgsql as $$ begin
               ${bumps('postgres', 'o', hourOf('new.ended_at'), 'new.outcome', fromOperation)}
               return null; end $$`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger kubun_connector_operation_activity_outcome after update on kubun_connector_operation_history
             for each row when (${outcomeWhen}) execute function kubun_connector_operation_activity_outcome()`,
          )
          .execute(db);
      } else {
        await sql
          .raw(
            `create trigger kubun_connector_operation_activity_committed after update on kubun_connector_operation
             when ${committedWhen} begin ${bumps('sqlite', 'new', hourOf('new.updated_at'), `'committed'`, '')} end`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger kubun_connector_operation_activity_outcome after update on kubun_connector_operation_history
             when ${outcomeWhen} begin ${bumps('sqlite', 'o', hourOf('new.ended_at'), 'new.outcome', fromOperation)} end`,
          )
          .execute(db);
      }
    },
    async down(db: Kysely<any>): Promise<void> {
      const postgres = t.dialect === 'postgres';
      await sql.raw(`drop trigger if exists kubun_connector_operation_activity_committed${postgres ? ' on kubun_connector_operation' : ''}`).execute(db);
      await sql.raw(`drop trigger if exists kubun_connector_operation_activity_outcome${postgres ? ' on kubun_connector_operation_history' : ''}`).execute(db);
      if (postgres) {
        await sql.raw('drop function if exists kubun_connector_operation_activity_committed()').execute(db);
        await sql.raw('drop function if exists kubun_connector_operation_activity_outcome()').execute(db);
      }
      await db.schema.dropTable(BACKLOG).execute();
      await db.schema.dropTable(ACTIVITY_TOTAL).execute();
      await db.schema.dropTable(ACTIVITY).execute();
    },
  };
}
