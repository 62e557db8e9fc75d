/**
 * Operation counts in O(1) rows read (issue 10): two counter tables, kept by
 * triggers in the same transaction as every insert, delete and change of a
 * counted column, whichever code path makes it.
 *
 * - `kubun_connector_operation_count`: per (caller, owner, connector, model,
 *   state, last kind, defer reason, shard), for a viewer's counts (the rows
 *   where they are caller or owner) and for any owner filter.
 * - `kubun_connector_operation_total`: the same without caller and owner, for
 *   a service's counts over everyone, so they read a few hundred rows
 *   however many owners there are.
 *
 * - Absent last kind / defer reason are stored as '' (a primary key cannot
 *   hold NULL, and NULLs would not meet in ON CONFLICT).
 * - `shard` (from the operation's random node key: 8 per viewer combination,
 *   32 for the totals every writer touches) spreads concurrent writers of
 *   one combination over several rows, so claims do not queue on one
 *   counter row's lock on Postgres.
 * - Postgres: statement-level triggers with transition tables, one grouped
 *   upsert per table and statement (a retention batch of 500 deletes is one
 *   upsert each); deltas that cancel out are not written, so an update that
 *   changes no counted column locks no counter row; rows are upserted in key
 *   order, the viewer table before the totals, so two transactions never
 *   wait on each other's counter rows in a cycle.
 *   SQLite: row-level triggers (one writer at a time, no lock contention).
 * Frozen: never edit after release; add a new migration instead.
 */
import { sql, type Kysely, type Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

type Dialect = 'postgres' | 'sqlite';

interface CounterTable {
  name: string;
  /** Counted columns, in key order; `shard` is added last. */
  columns: readonly string[];
  shards: number;
}

const COUNTERS: readonly CounterTable[] = [
  { name: 'kubun_connector_operation_count', columns: ['caller_did', 'owner_did', 'connector_name', 'model', 'state', 'last_kind', 'defer_reason'], shards: 8 },
  { name: 'kubun_connector_operation_total', columns: ['connector_name', 'model', 'state', 'last_kind', 'defer_reason'], shards: 32 },
];

const NULLABLE = new Set(['last_kind', 'defer_reason']);

const keyColumns = (table: CounterTable) => [...table.columns, 'shard'];

/** The counter key of a row reference (`new`, `old` or a transition table alias): one SQL expression per key column. */
function keyParts(table: CounterTable, row: string, dialect: Dialect): string[] {
  const shard = dialect === 'postgres' ? `ascii(${row}.node_key) % ${table.shards}` : `unicode(substr(${row}.node_key, 1, 1)) % ${table.shards}`;
  return [...table.columns.map((column) => (NULLABLE.has(column) ? `coalesce(${row}.${column}, '')` : `${row}.${column}`)), shard];
}

const COUNTED_CHANGE = ['state', 'last_kind', 'defer_reason', 'owner_did', 'connector_name', 'model', 'caller_did']
  .map((column) => `old.${column} is not new.${column}`)
  .join(' or ');

/** Postgres: one grouped upsert of `table` from the deltas of transition tables (`sign` per table). */
function postgresUpsert(table: CounterTable, sources: readonly [string, 1 | -1][]): string {
  const key = keyColumns(table).join(', ');
  const deltas = sources
    .map(([source, sign]) => `select ${keyParts(table, 'r', 'postgres').map((e, i) => `${e} as ${keyColumns(table)[i]}`).join(', ')}, ${sign} as delta from ${source} r`)
    .join(' union all ');
  return `insert into ${table.name} as c (${key}, n)
      select ${key}, sum(delta) from (${deltas}) d
      group by ${key} having sum(delta) <> 0 order by ${key}
    on conflict (${key}) do update set n = c.n + excluded.n;`;
}

/** SQLite: one row's bump of `table`. */
function sqliteBump(table: CounterTable, row: string, delta: 1 | -1): string {
  const key = keyColumns(table).join(', ');
  return `insert into ${table.name} (${key}, n) values (${keyParts(table, row, 'sqlite').join(', ')}, ${delta})
    on conflict (${key}) do update set n = n + excluded.n;`;
}

const EVENTS: readonly { event: 'insert' | 'delete' | 'update'; sources: readonly [string, 1 | -1][]; referencing: string }[] = [
  { event: 'insert', sources: [['new_rows', 1]], referencing: 'new table as new_rows' },
  { event: 'delete', sources: [['old_rows', -1]], referencing: 'old table as old_rows' },
  { event: 'update', sources: [['old_rows', -1], ['new_rows', 1]], referencing: 'old table as old_rows new table as new_rows' },
];

export function operationCountsMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      for (const table of COUNTERS) {
        let create = db.schema.createTable(table.name);
        for (const column of table.columns) create = create.addColumn(column, t.text, (c) => c.notNull());
        await create
          .addColumn('shard', 'integer', (c) => c.notNull())
          .addColumn('n', t.bigint, (c) => c.notNull())
          .addPrimaryKeyConstraint(`${table.name}_pkey`, keyColumns(table) as never[]) // column names known only at run time
          .execute();
        const parts = keyParts(table, 'o', t.dialect).join(', ');
        await sql
          .raw(`insert into ${table.name} (${keyColumns(table).join(', ')}, n) select ${parts}, count(*) from kubun_connector_operation o group by ${parts}`)
          .execute(db);
      }
      // A viewer's counts are the rows where it is the caller (the primary key's prefix) or the owner.
      await db.schema.createIndex('idx_connector_operation_count_owner').on('kubun_connector_operation_count').column('owner_did').execute();

      if (t.dialect === 'postgres') {
        for (const { event, sources, referencing } of EVENTS) {
          const body = COUNTERS.map((table) => postgresUpsert(table, sources)).join('\n');
          await sql
            .raw(`create function kubun_connector_operation_count_${event}() returns trigger language plpgsql as $$ begin ${body} return null; end $$`)
            .execute(db);
          await sql
            .raw(
              `create trigger kubun_connector_operation_count_${event} after ${event} on kubun_connector_operation
               referencing ${referencing} for each statement execute function kubun_connector_operation_count_${event}()`,
            )
            .execute(db);
        }
      } else {
        const bumps = (row: string, delta: 1 | -1) => COUNTERS.map((table) => sqliteBump(table, row, delta)).join(' ');
        await sql.raw(`create trigger kubun_connector_operation_count_insert after insert on kubun_connector_operation begin ${bumps('new', 1)} end`).execute(db);
        await sql.raw(`create trigger kubun_connector_operation_count_delete after delete on kubun_connector_operation begin ${bumps('old', -1)} end`).execute(db);
        await sql
          .raw(
            `create trigger kubun_connector_operation_count_update after update on kubun_connector_operation
             when ${COUNTED_CHANGE} begin ${bumps('old', -1)} ${bumps('new', 1)} end`,
          )
          .execute(db);
      }
    },
    async down(db: Kysely<any>): Promise<void> {
      for (const { event } of EVENTS) {
        await sql.raw(`drop trigger if exists kubun_connector_operation_count_${event}${t.dialect === 'postgres' ? ' on kubun_connector_operation' : ''}`).execute(db);
        if (t.dialect === 'postgres') await sql.raw(`drop function if exists kubun_connector_operation_count_${event}()`).execute(db);
      }
      for (const table of COUNTERS) await db.schema.dropTable(table.name).execute();
    },
  };
}
