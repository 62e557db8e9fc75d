import { sql, type Kysely } from 'kysely';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { createMigrator, unwrapMigrationResult } from '../../src/db/migrator.js';
import { createTestDatabase, testDialects, type TestDatabase } from '../helpers/databases.js';

const TABLES = [
  'kubun_connector_backlog_sample',
  'kubun_connector_entity_trim',
  'kubun_connector_observation_records',
  'kubun_connector_observation_repair',
  'kubun_connector_operation',
  'kubun_connector_operation_activity',
  'kubun_connector_operation_activity_total',
  'kubun_connector_operation_count',
  'kubun_connector_operation_history',
  'kubun_connector_operation_request',
  'kubun_connector_operation_total',
  'kubun_connector_pending_auth',
  'kubun_connector_projection_watch',
  'kubun_connector_sweep_candidate',
  'kubun_connector_sweep_checkpoint',
  'kubun_connector_sweep_receipt',
  'kubun_connector_sync_state',
];

const PRIMARY_KEYS: Record<string, string[]> = {
  kubun_connector_sync_state: ['connector_name', 'owner_did'],
  kubun_connector_pending_auth: ['state'],
  kubun_connector_operation: ['caller_did', 'operation_id'],
  kubun_connector_operation_count: ['caller_did', 'owner_did', 'connector_name', 'model', 'state', 'last_kind', 'defer_reason', 'shard'],
  kubun_connector_operation_history: ['caller_did', 'operation_id', 'seq'],
  kubun_connector_operation_activity: ['caller_did', 'hour', 'owner_did', 'connector_name', 'outcome', 'shard'],
  kubun_connector_operation_activity_total: ['hour', 'connector_name', 'outcome', 'shard'],
  kubun_connector_backlog_sample: ['sampled_at'],
  kubun_connector_operation_total: ['connector_name', 'model', 'state', 'last_kind', 'defer_reason', 'shard'],
  kubun_connector_projection_watch: ['owner_did', 'connector_name', 'model', 'account_key', 'source_id'],
  kubun_connector_observation_records: ['type', 'owner', 'id', 'op_hash'],
  kubun_connector_observation_repair: ['document_id'],
  kubun_connector_entity_trim: ['document_id'],
  kubun_connector_sweep_receipt: ['owner_did', 'connector_name', 'partition', 'provenance'],
  kubun_connector_sweep_candidate: ['owner_did', 'connector_name', 'partition', 'provenance', 'document_id'],
  kubun_connector_sweep_checkpoint: ['owner_did', 'connector_name', 'partition'],
};

/** Unique indexes besides primary keys: name → columns. */
const UNIQUE_INDEXES: Record<string, string[]> = {
  uq_connector_operation_node_key: ['node_key'],
  uq_connector_watch_node_key: ['node_key'],
  uq_connector_sync_state_node_key: ['node_key'],
  uq_connector_watch_ingress: ['owner_did', 'model', 'document_id'],
  uq_connector_sweep_receipt_node_key: ['node_key'],
};

const INDEXES = [
  'idx_connector_operation_document',
  'idx_connector_operation_terminal_updated',
  'idx_connector_operation_retried_attempts',
  'idx_connector_operation_count_owner',
  'idx_connector_watch_document',
  'idx_connector_observation_repair_written',
  'kubun_connector_sweep_candidate_due_idx',
  'idx_connector_sweep_receipt_created',
  'idx_connector_sweep_receipt_owner_created',
  'idx_connector_operation_owner_foreign_created',
  'idx_connector_operation_operation_id',
  'idx_connector_operation_activity_owner',
  'idx_connector_operation_activity_hour',
];

const MIGRATIONS = ['0001-initial', '0002-sweep-receipt-node-key', '0003-operation-finalized-lease', '0004-operation-counts', '0005-operation-history', '0006-operation-failure-indexes', '0007-sync-state-progressed-at', '0008-operation-owner-foreign-index', '0009-every-row-indexes-fenced', '0010-operation-id-index', '0011-operation-activity', '0012-replay-parameters', '0013-request-keys-and-send-window', '0014-change-outbox', '0015-operation-id-prefix-index', '0016-activity-committed-per-statement', '0017-operation-hot-steps'];

interface Introspected {
  tables: string[];
  primaryKey(table: string): Promise<string[]>;
  uniqueIndexes(): Promise<Record<string, string[]>>;
  indexes(): Promise<string[]>;
}

function introspect(database: TestDatabase): Introspected {
  const db = database.open.db;
  if (database.dialect === 'sqlite') {
    return {
      tables: [],
      async primaryKey(table) {
        const { rows } = await sql<{ name: string; pk: number }>`select name, pk from pragma_table_info(${table})`.execute(db);
        return rows.filter((r) => r.pk > 0).sort((a, b) => a.pk - b.pk).map((r) => r.name);
      },
      async uniqueIndexes() {
        const { rows } = await sql<{ index_name: string; column_name: string }>`
          select il.name as index_name, ii.name as column_name
          from sqlite_master m, pragma_index_list(m.name) il, pragma_index_info(il.name) ii
          where m.type = 'table' and il."unique" = 1 and il.origin = 'c'
          order by il.name, ii.seqno`.execute(db);
        return group(rows);
      },
      async indexes() {
        const { rows } = await sql<{ name: string }>`select name from sqlite_master where type = 'index'`.execute(db);
        return rows.map((r) => r.name);
      },
    };
  }
  return {
    tables: [],
    async primaryKey(table) {
      const { rows } = await sql<{ column_name: string }>`
        select a.attname as column_name
        from pg_index i
        join lateral unnest(i.indkey) with ordinality as k(attnum, ord) on true
        join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
        where i.indrelid = ${table}::regclass and i.indisprimary
        order by k.ord`.execute(db);
      return rows.map((r) => r.column_name);
    },
    async uniqueIndexes() {
      const { rows } = await sql<{ index_name: string; column_name: string }>`
        select c.relname as index_name, a.attname as column_name
        from pg_index i
        join pg_class c on c.oid = i.indexrelid
        join pg_namespace n on n.oid = c.relnamespace and n.nspname = 'public'
        join lateral unnest(i.indkey) with ordinality as k(attnum, ord) on true
        join pg_attribute a on a.attrelid = i.indrelid and a.attnum = k.attnum
        where i.indisunique and not i.indisprimary
        order by c.relname, k.ord`.execute(db);
      return group(rows);
    },
    async indexes() {
      const { rows } = await sql<{ indexname: string }>`select indexname from pg_indexes where schemaname = 'public'`.execute(db);
      return rows.map((r) => r.indexname);
    },
  };
}

function group(rows: { index_name: string; column_name: string }[]): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const r of rows) (out[r.index_name] ??= []).push(r.column_name);
  return out;
}

/** Every table of `dialect`: the change outbox (migration 0014) is SQLite's only (on Postgres, other processes NOTIFY their changes). */
function tablesOf(dialect: string): string[] {
  return (dialect === 'sqlite' ? [...TABLES, 'kubun_connector_change_outbox'] : TABLES).sort();
}

async function connectorTables(database: TestDatabase): Promise<string[]> {
  const tables = await database.open.db.introspection.getTables();
  return tables.map((t) => t.name).filter((n) => n.startsWith('kubun_connector_') && !n.includes('migration')).sort();
}

for (const dialect of testDialects()) {
  describe.skipIf(dialect === 'postgres' && !inject('postgresAvailable'))(`${dialect}: migrations`, () => {
    let database: TestDatabase;
    beforeAll(async () => {
      database = await createTestDatabase(dialect, { migrate: false });
    });
    afterAll(async () => {
      await database?.destroy();
    });

    it('runs up → down → up and leaves every table, key and unique index', async () => {
      const migrator = createMigrator(database.open.db, dialect);
      const up = unwrapMigrationResult(await migrator.migrateToLatest());
      expect(up.map((r) => [r.migrationName, r.status])).toEqual(MIGRATIONS.map((name) => [name, 'Success']));
      expect(await connectorTables(database)).toEqual(tablesOf(dialect));

      for (const name of [...MIGRATIONS].reverse()) {
        const down = unwrapMigrationResult(await migrator.migrateDown());
        expect(down.map((r) => [r.migrationName, r.direction, r.status])).toEqual([[name, 'Down', 'Success']]);
      }
      expect(await connectorTables(database)).toEqual([]);

      unwrapMigrationResult(await migrator.migrateToLatest());
      expect(await connectorTables(database)).toEqual(tablesOf(dialect));

      const shape = introspect(database);
      for (const [table, columns] of Object.entries(PRIMARY_KEYS)) {
        expect(await shape.primaryKey(table), `primary key of ${table}`).toEqual(columns);
      }
      const unique = await shape.uniqueIndexes();
      for (const [name, columns] of Object.entries(UNIQUE_INDEXES)) {
        expect(unique[name], `unique index ${name}`).toEqual(columns);
      }
      const indexes = await shape.indexes();
      for (const name of INDEXES) expect(indexes).toContain(name);
      // Operation IDs in byte order for prefix reads (migration 0015): Postgres only; SQLite's BINARY index already is.
      if (dialect === 'postgres') expect(indexes).toContain('idx_connector_operation_operation_id_bytes');
    });

    it('reports every migration as applied and a second run as a no-op', async () => {
      const migrator = createMigrator(database.open.db, dialect);
      const again = unwrapMigrationResult(await migrator.migrateToLatest());
      expect(again).toEqual([]);
      const list = await migrator.getMigrations();
      expect(list.map((m) => [m.name, m.executedAt !== undefined])).toEqual(MIGRATIONS.map((name) => [name, true]));
    });

    it('0002 gives receipts recorded before it a unique random node key, and down removes the column', async () => {
      const migrator = createMigrator(database.open.db, dialect);
      unwrapMigrationResult(await migrator.migrateTo('0001-initial'));
      const db = database.open.db as Kysely<any>;
      const receipt = (provenance: string) => ({
        owner_did: 'did:key:owner', connector_name: 'google', partition: 'p', provenance, sequence: 1, model_id: 'm',
        scope: 's', keep: 'k', source_fetch_hlc: 'h', predicate: null, kind: 'full', complete: 1, created_at: 1, committed_at: null,
      });
      await db.insertInto('kubun_connector_sweep_receipt').values([receipt('run-1'), receipt('run-2')]).execute();
      unwrapMigrationResult(await migrator.migrateToLatest());
      const rows = await db.selectFrom('kubun_connector_sweep_receipt').select(['provenance', 'node_key']).orderBy('provenance').execute();
      const keys = rows.map((r) => r.node_key as string);
      expect(rows.map((r) => r.provenance)).toEqual(['run-1', 'run-2']);
      for (const key of keys) expect(key).toMatch(/^[A-Za-z0-9_-]{22}$/);
      expect(new Set(keys).size).toBe(2);
      // run-2 may not take run-1's key.
      await expect(db.updateTable('kubun_connector_sweep_receipt').set({ node_key: keys[0] }).where('provenance', '=', 'run-2').execute()).rejects.toThrow();
      await db.deleteFrom('kubun_connector_sweep_receipt').execute();
    });

    it('0017 on operations written before it: their generated columns are filled, and down brings back the indexes it replaced', async () => {
      const migrator = createMigrator(database.open.db, dialect);
      unwrapMigrationResult(await migrator.migrateTo('0016-activity-committed-per-statement'));
      const db = database.open.db as Kysely<any>;
      const operation = (id: string, state: string, attempts: number) => ({
        caller_did: 'did:key:caller', operation_id: id, node_key: `n-${id}`, owner_did: 'did:key:caller', connector_name: 'google', model: 'm', op: 'create',
        account_key: 'a', target: 't', deterministic_event_id: `e-${id}`, payload_hash: 'h', reissue_intent: 'none', state, attempts, version: 0,
        next_attempt_at: 1, created_at: 1, updated_at: 7,
      });
      await db.insertInto('kubun_connector_operation').values([operation('live', 'attempted', 1), operation('retried', 'attempted', 3), operation('done', 'committed', 2), operation('dead', 'dead', 5)]).execute();
      unwrapMigrationResult(await migrator.migrateToLatest());
      const generated = await db.selectFrom('kubun_connector_operation').select(['operation_id', 'terminal_updated_at', 'retried_attempts']).orderBy('operation_id').execute();
      expect(generated.map((r) => [r.operation_id, r.terminal_updated_at === null ? null : Number(r.terminal_updated_at), r.retried_attempts])).toEqual([
        ['dead', 7, 5],
        ['done', 7, 2],
        ['live', null, null],
        ['retried', null, 3],
      ]);
      // A step writes through them: a live row's columns follow its state and attempts.
      await db.updateTable('kubun_connector_operation').set({ state: 'committed', attempts: 2, updated_at: 9 }).where('operation_id', '=', 'live').execute();
      expect(await db.selectFrom('kubun_connector_operation').select(['terminal_updated_at', 'retried_attempts']).where('operation_id', '=', 'live').executeTakeFirstOrThrow()).toMatchObject({ retried_attempts: 2 });

      unwrapMigrationResult(await migrator.migrateTo('0016-activity-committed-per-statement'));
      const indexes = await introspect(database).indexes();
      expect(indexes).toEqual(expect.arrayContaining(['idx_connector_operation_state_updated', 'idx_connector_operation_attempts']));
      expect(indexes).not.toContain('idx_connector_operation_terminal_updated');
      expect(indexes).not.toContain('idx_connector_operation_retried_attempts');
      const columns = (await database.open.db.introspection.getTables()).find((t) => t.name === 'kubun_connector_operation')!.columns.map((c) => c.name);
      expect(columns).not.toContain('terminal_updated_at');
      expect(columns).not.toContain('retried_attempts');
      expect(await db.selectFrom('kubun_connector_operation').select('operation_id').orderBy('operation_id').execute()).toHaveLength(4);
      unwrapMigrationResult(await migrator.migrateToLatest());
      await db.deleteFrom('kubun_connector_operation').execute();
    });

    it('enforces the node_key and watch ingress unique indexes', async () => {
      const db = database.open.db;
      const watch = {
        owner_did: 'did:key:owner',
        connector_name: 'google',
        model: 'm',
        account_key: 'a',
        source_id: 's1',
        node_key: 'k1',
        document_id: 'doc-1',
        verification_status: 'pending_verification',
        created_at: 1,
        updated_at: 1,
      };
      await db.insertInto('kubun_connector_projection_watch').values(watch).execute();
      await expect(
        db.insertInto('kubun_connector_projection_watch').values({ ...watch, source_id: 's2', node_key: 'k2' }).execute(),
      ).rejects.toThrow();
      await expect(
        db.insertInto('kubun_connector_projection_watch').values({ ...watch, source_id: 's3', node_key: 'k1', document_id: 'doc-2' }).execute(),
      ).rejects.toThrow();
      await db.deleteFrom('kubun_connector_projection_watch').execute();
    });
  });
}
