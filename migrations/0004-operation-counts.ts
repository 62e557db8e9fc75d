/**
 * Operation counts in O(1) rows read (issue 10): a counter table keeps how
 * many operations there are per (caller, owner, connector, model, state, last
 * kind, defer reason, shard), maintained by triggers in the same transaction
 * as every insert, delete and change of a counted column, whichever code path
 * makes it. `totalCount` and `operationCounts` sum these rows instead of
 * counting the operations table.
 *
 * - Absent last kind / defer reason are stored as '' (a primary key cannot
 *   hold NULL, and NULLs would not meet in ON CONFLICT).
 * - `shard` (0–7, from the operation's random node key) spreads concurrent
 *   writers of one combination over eight rows, so claims of one caller do
 *   not queue on a single counter row's lock on Postgres.
 * - Postgres: statement-level triggers with transition tables, one grouped
 *   upsert per statement (a retention batch of 500 deletes is one upsert);
 *   deltas that cancel out are not written, so an update that changes no
 *   counted column locks no counter row; rows are upserted in key order, so
 *   two transactions never wait on each other's counter rows in a cycle.
 *   SQLite: row-level triggers (one writer at a time, no lock contention).
 * Frozen: never edit after release; add a new migration instead.
 */
import { sql, type Kysely, type Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

const DIMENSIONS = ['caller_did', 'owner_did', 'connector_name', 'model', 'state', 'last_kind', 'defer_reason', 'shard'] as const;
const KEY = DIMENSIONS.join(', ');

/** The counter key of a row reference (`new`, `old` or a transition table alias): one SQL expression per dimension. */
function keyParts(row: string, dialect: 'postgres' | 'sqlite'): string[] {
  const shard =
    dialect === 'postgres' ? `ascii(${row}.node_key) % 8` : `unicode(substr(${row}.node_key, 1, 1)) % 8`;
  return [
    `${row}.caller_did`,
    `${row}.owner_did`,
    `${row}.connector_name`,
    `${row}.model`,
    `${row}.state`,
    `coalesce(${row}.last_kind, '')`,
    `coalesce(${row}.defer_reason, '')`,
    shard,
  ];
}

function keyOf(row: string, dialect: 'postgres' | 'sqlite'): string {
  return keyParts(row, dialect).join(', ');
}

const COUNTED_CHANGE = ['state', 'last_kind', 'defer_reason', 'owner_did', 'connector_name', 'model', 'caller_did']
  .map((column) => `old.${column} is not new.${column}`)
  .join(' or ');

export function operationCountsMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('kubun_connector_operation_count')
        .addColumn('caller_did', t.text, (c) => c.notNull())
        .addColumn('owner_did', t.text, (c) => c.notNull())
        .addColumn('connector_name', t.text, (c) => c.notNull())
        .addColumn('model', t.text, (c) => c.notNull())
        .addColumn('state', t.text, (c) => c.notNull())
        .addColumn('last_kind', t.text, (c) => c.notNull())
        .addColumn('defer_reason', t.text, (c) => c.notNull())
        .addColumn('shard', 'integer', (c) => c.notNull())
        .addColumn('n', t.bigint, (c) => c.notNull())
        .addPrimaryKeyConstraint('kubun_connector_operation_count_pkey', [...DIMENSIONS])
        .execute();
      // The viewer's counts are the rows where it is the caller (the primary key's prefix) or the owner.
      await db.schema.createIndex('idx_connector_operation_count_owner').on('kubun_connector_operation_count').column('owner_did').execute();

      await sql
        .raw(
          `insert into kubun_connector_operation_count (${KEY}, n)
           select ${keyOf('o', t.dialect)}, count(*) from kubun_connector_operation o
           group by ${keyOf('o', t.dialect)}`,
        )
        .execute(db);

      if (t.dialect === 'postgres') {
        const upsertFrom = (deltas: string) =>
          `insert into kubun_connector_operation_count as c (${KEY}, n)
             select ${KEY}, sum(delta) from (${deltas}) d
             group by ${KEY} having sum(delta) <> 0 order by ${KEY}
           on conflict (${KEY}) do update set n = c.n + excluded.n`;
        const deltas = (table: string, sign: string) => `select ${keyParts('r', 'postgres').map((e, i) => `${e} as ${DIMENSIONS[i]}`).join(', ')}, ${sign} as delta from ${table} r`;
        await sql
          .raw(
            `create function kubun_connector_operation_count_insert() returns trigger language plpgsql as $$
             begin ${upsertFrom(deltas('new_rows', '1'))}; return null; end $$`,
          )
          .execute(db);
        await sql
          .raw(
            `create function kubun_connector_operation_count_delete() returns trigger language plpgsql as $$
             begin ${upsertFrom(deltas('old_rows', '-1'))}; return null; end $$`,
          )
          .execute(db);
        await sql
          .raw(
            `create function kubun_connector_operation_count_update() returns trigger language plpgsql as $$
             begin ${upsertFrom(`${deltas('old_rows', '-1')} union all ${deltas('new_rows', '1')}`)}; return null; end $$`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger kubun_connector_operation_count_insert after insert on kubun_connector_operation
             referencing new table as new_rows for each statement execute function kubun_connector_operation_count_insert()`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger kubun_connector_operation_count_delete after delete on kubun_connector_operation
             referencing old table as old_rows for each statement execute function kubun_connector_operation_count_delete()`,
          )
          .execute(db);
        await sql
          .raw(
            `create trigger kubun_connector_operation_count_update after update on kubun_connector_operation
             referencing old table as old_rows new table as new_rows for each statement execute function kubun_connector_operation_count_update()`,
          )
          .execute(db);
      } else {
        const bump = (row: string, delta: number) =>
          `insert into kubun_connector_operation_count (${KEY}, n) values (${keyOf(row, 'sqlite')}, ${delta})
           on conflict (${KEY}) do update set n = n + excluded.n;`;
        await sql
          .raw(`create trigger kubun_connector_operation_count_insert after insert on kubun_connector_operation begin ${bump('new', 1)} end`)
          .execute(db);
        await sql
          .raw(`create trigger kubun_connector_operation_count_delete after delete on kubun_connector_operation begin ${bump('old', -1)} end`)
          .execute(db);
        await sql
          .raw(
            `create trigger kubun_connector_operation_count_update after update on kubun_connector_operation
             when ${COUNTED_CHANGE} begin ${bump('old', -1)} ${bump('new', 1)} end`,
          )
          .execute(db);
      }
    },
    async down(db: Kysely<any>): Promise<void> {
      for (const event of ['insert', 'delete', 'update']) {
        await sql.raw(`drop trigger if exists kubun_connector_operation_count_${event}${t.dialect === 'postgres' ? ' on kubun_connector_operation' : ''}`).execute(db);
        if (t.dialect === 'postgres') await sql.raw(`drop function if exists kubun_connector_operation_count_${event}()`).execute(db);
      }
      await db.schema.dropTable('kubun_connector_operation_count').execute();
    },
  };
}
