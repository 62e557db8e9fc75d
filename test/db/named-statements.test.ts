/**
 * Named statements (src/db/named-statements.ts): on a direct Postgres
 * connection the store's prepared statements are parsed once per connection
 * under a name, planned per run (`plan_cache_mode = force_custom_plan`), and
 * never with a `*` column list; through a transaction pooler nothing is named.
 * A named statement whose table changed under it costs one failed run on that
 * connection, then the pool opens a new one. The column lists that replace
 * `*` hold exactly the table's columns, on both dialects.
 */
import { CompiledQuery, sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, parseDatabaseURL, type OpenDatabase, type PoolMode } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { CACHED_PLAN_CHANGED, keepsResultType, nameStatement, statementName } from '../../src/db/named-statements.js';
import {
  ENTITY_TRIM_COLUMNS,
  OBSERVATION_RECORD_COLUMNS,
  OBSERVATION_REPAIR_COLUMNS,
  OPERATION_COLUMNS,
  PROJECTION_WATCH_COLUMNS,
  SWEEP_CANDIDATE_COLUMNS,
} from '../../src/db/tables.js';
import { getOperationsByDocumentIDs, getOperationByKey } from '../../src/store/operations/read.js';
import { getAllWatchesByDocumentIDs } from '../../src/store/projection-watches/read.js';
import { getEntityTrimsByDocumentIDs } from '../../src/store/entity-trim/entity-trim.js';
import { getSweepCandidatesByDocumentIDs } from '../../src/store/sweeps/candidates.js';
import { getObservationRecordsByDocumentIDs } from '../../src/store/observations/records.js';
import { getObservationRepairsByDocumentIDs } from '../../src/store/observations/repairs.js';
import { createStoreContext } from '../../src/store/context.js';
import { listOperations } from '../../src/store/operations/list.js';
import { getOperationsByNodeKeys } from '../../src/store/operations/read.js';
import { createTestDatabase, testDialects } from '../helpers/databases.js';
import { claimFresh } from '../helpers/operation-claim-fixtures.js';
import { CALLER } from '../helpers/row-fixtures.js';
import { createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';

describe('which texts may be named', () => {
  it('a text that lists its columns may; one with a `*` column list may not (a migration that adds a column would change its result)', () => {
    expect(keepsResultType('select "a", "b" from "t" where "a" = $1')).toBe(true);
    expect(keepsResultType('select count(*) as "n" from "t"')).toBe(true);
    expect(keepsResultType('select COUNT(*) from "t"')).toBe(true);
    expect(keepsResultType('select * from "t"')).toBe(false);
    expect(keepsResultType('select "t".* from "t"')).toBe(false);
    expect(keepsResultType('update "t" set "a" = $1 returning *')).toBe(false);
    expect(keepsResultType('select count(*), * from "t"')).toBe(false);
  });

  it('a registered text gets one stable name derived from it; a `*` text none', () => {
    const text = 'select "a" from "named_statements_probe" where "a" = $1';
    nameStatement(text);
    const name = statementName(text);
    expect(name).toMatch(/^cs_[\w-]{32}$/);
    nameStatement(text);
    expect(statementName(text)).toBe(name);
    expect(statementName('select "b" from "named_statements_probe"')).toBeUndefined();
    nameStatement('select * from "named_statements_probe"');
    expect(statementName('select * from "named_statements_probe"')).toBeUndefined();
  });
});

describe('every column, written out', () => {
  for (const dialect of testDialects()) {
    it(`${dialect}: every column list (operations, watches, trims, sweep candidates, observation records and repairs) is exactly its migrated table's columns`, async ({ skip }) => {
      if (dialect === 'postgres' && !inject('postgresAvailable')) skip();
      const database = await createTestDatabase(dialect);
      try {
        // The columns rows carry: not the generated ones, which only key indexes (migration 0017; pragma_table_info leaves them out too).
        const columns = async (table: string) =>
          dialect === 'postgres'
            ? (await sql<{ name: string }>`select column_name as name from information_schema.columns where table_name = ${table} and is_generated = 'NEVER' order by ordinal_position`.execute(database.open.db)).rows.map((r) => r.name)
            : (await sql<{ name: string }>`select name from pragma_table_info(${table})`.execute(database.open.db)).rows.map((r) => r.name);
        const generated =
          dialect === 'postgres'
            ? (await sql<{ name: string }>`select column_name as name from information_schema.columns where table_name = 'kubun_connector_operation' and is_generated <> 'NEVER'`.execute(database.open.db)).rows.map((r) => r.name)
            : (await sql<{ name: string }>`select name from pragma_table_xinfo('kubun_connector_operation') where hidden <> 0`.execute(database.open.db)).rows.map((r) => r.name);
        expect(generated.sort()).toEqual(['retried_attempts', 'terminal_updated_at']);
        expect([...OPERATION_COLUMNS].sort()).toEqual((await columns('kubun_connector_operation')).sort());
        expect([...PROJECTION_WATCH_COLUMNS].sort()).toEqual((await columns('kubun_connector_projection_watch')).sort());
        expect([...ENTITY_TRIM_COLUMNS].sort()).toEqual((await columns('kubun_connector_entity_trim')).sort());
        expect([...SWEEP_CANDIDATE_COLUMNS].sort()).toEqual((await columns('kubun_connector_sweep_candidate')).sort());
        expect([...OBSERVATION_RECORD_COLUMNS].sort()).toEqual((await columns('kubun_connector_observation_records')).sort());
        expect([...OBSERVATION_REPAIR_COLUMNS].sort()).toEqual((await columns('kubun_connector_observation_repair')).sort());
      } finally {
        await database.destroy();
      }
    });
  }
});

const runs = testDialects().includes('postgres') && inject('postgresAvailable');

describe.skipIf(!runs)('postgres: named statements per connection', () => {
  let scratch: ScratchPostgresDatabase;
  const opened: OpenDatabase[] = [];

  beforeAll(async () => {
    scratch = await createScratchPostgresDatabase('cs_named');
    const setup = openDatabase(parseDatabaseURL(scratch.url), { poolMax: 1 });
    await migrateToLatest(setup.db, 'postgres');
    await setup.close();
  });
  afterAll(async () => {
    for (const open of opened.splice(0)) await open.close().catch(() => {});
    await scratch?.drop();
  });

  /** One connection, so every statement provably shares one session. */
  function open(poolMode: PoolMode = 'direct', namedStatements = true): OpenDatabase {
    const database = openDatabase(parseDatabaseURL(scratch.url), { poolMode, namedStatements, poolMax: 1 });
    opened.push(database);
    return database;
  }

  const preparedOnSession = async (database: OpenDatabase) =>
    (await sql<{ name: string; statement: string }>`select name, statement from pg_prepared_statements`.execute(database.db)).rows;

  async function claimOne(database: OpenDatabase, operationID: string) {
    const store = createStoreContext(database.db, 'postgres');
    return { store, claimed: await claimFresh(store, { operationID }) };
  }

  it('direct: the store’s statements run named, parsed once on the connection, and every run is planned with its values', async () => {
    const database = open();
    const { store, claimed } = await claimOne(database, 'named-1');
    const nodeKey = claimed.operation.nodeKey;
    for (let i = 0; i < 7; i++) expect((await getOperationsByNodeKeys(store, [nodeKey]))[0]?.operationID).toBe('named-1');
    const prepared = await preparedOnSession(database);
    const read = prepared.find((p) => p.statement.includes('"node_key" in ($1)'));
    expect(read?.name).toMatch(/^cs_/);
    expect(read?.statement).not.toContain('*');
    // One entry per text: seven runs parsed it once.
    expect(prepared.filter((p) => p.statement === read!.statement)).toHaveLength(1);
    const mode = await sql<{ mode: string }>`select current_setting('plan_cache_mode') as mode`.execute(database.db);
    expect(mode.rows[0]!.mode).toBe('force_custom_plan');
  });

  it('direct: a page of operations, for a service and for a viewer (two index-ordered branches), runs named', async () => {
    const database = open();
    const { store } = await claimOne(database, 'paged-1');
    expect((await listOperations(store, { visibleTo: null, first: 5 })).operations.map((o) => o.operationID)).toContain('paged-1');
    expect((await listOperations(store, { visibleTo: CALLER, first: 5 })).operations.map((o) => o.operationID)).toContain('paged-1');
    const pages = (await preparedOnSession(database)).filter((p) => p.statement.includes('"kubun_connector_operation"') && p.statement.includes('order by "created_at" desc'));
    expect(pages).toHaveLength(2);
    expect(pages.some((p) => p.statement.includes('union all'))).toBe(true);
    for (const page of pages) expect(page.statement).not.toContain('*');
  });

  it('direct: pages after and before a cursor and filtered pages, for a service and for a viewer, run named, one text per shape', async () => {
    const database = open();
    const { store } = await claimOne(database, 'cursor-1');
    await claimOne(database, 'cursor-2');
    await claimOne(database, 'cursor-3');
    const cursorTexts = async () =>
      (await preparedOnSession(database)).filter((p) => p.statement.includes('"kubun_connector_operation"') && /\("created_at", "node_key"\) [<>] \(\$\d+, \$\d+\)/.test(p.statement));
    expect(await cursorTexts()).toHaveLength(0);
    for (const visibleTo of [null, CALLER]) {
      const first = await listOperations(store, { visibleTo, first: 1 });
      const edge = first.operations[0]!;
      const after = { createdAt: edge.createdAt, nodeKey: edge.nodeKey };
      // Two runs of each shape with different cursors: one text, parsed once.
      const second = await listOperations(store, { visibleTo, first: 1, after });
      const secondEdge = second.operations[0]!;
      const third = await listOperations(store, { visibleTo, first: 1, after: { createdAt: secondEdge.createdAt, nodeKey: secondEdge.nodeKey } });
      expect(new Set([edge, secondEdge, third.operations[0]!].map((o) => o.operationID)).size).toBe(3);
      const back = await listOperations(store, { visibleTo, last: 1, before: { createdAt: secondEdge.createdAt, nodeKey: secondEdge.nodeKey } });
      expect(back.operations.map((o) => o.operationID)).toEqual([edge.operationID]);
      const filteredPage = await listOperations(store, { visibleTo, first: 5, after, filter: { states: ['attempted', 'attempted'], connectorName: edge.connectorName, stuck: false } });
      // Older rows of the suite's other tests follow.
      expect(filteredPage.operations.map((o) => o.operationID).slice(0, 2)).toEqual([secondEdge.operationID, third.operations[0]!.operationID]);
    }
    const texts = await cursorTexts();
    // Per visibility: after (forward), before (backward), after with a filter.
    expect(texts).toHaveLength(6);
    expect(texts.filter((p) => p.statement.includes('union all'))).toHaveLength(3);
    for (const text of texts) {
      expect(text.name).toMatch(/^cs_/);
      expect(text.statement).not.toContain('*');
    }
    // Values are parameters, never text: no cursor value appears in a statement.
    for (const text of texts) expect(text.statement).not.toContain('cursor-');
  });

  it('direct: every read of `documents` (operations, watches, trims, sweep candidates, observation records, repairs) and the claim’s row read run named with their columns', async () => {
    const database = open();
    const { store } = await claimOne(database, 'documents-1');
    const ids = ['doc-a', 'doc-b', 'doc-c'];
    await getOperationsByDocumentIDs(store, ids);
    await getAllWatchesByDocumentIDs(store, ids);
    await getEntityTrimsByDocumentIDs(store, ids);
    await getSweepCandidatesByDocumentIDs(store, ids);
    await getObservationRecordsByDocumentIDs(store, ids);
    await getObservationRepairsByDocumentIDs(store, ids);
    expect((await getOperationByKey(store, { callerDID: CALLER, operationID: 'documents-1' }))?.operationID).toBe('documents-1');
    const named = await preparedOnSession(database);
    for (const table of ['operation', 'projection_watch', 'entity_trim', 'sweep_candidate', 'observation_records', 'observation_repair']) {
      const reads = named.filter((p) => p.statement.startsWith('select') && p.statement.includes(`from "kubun_connector_${table}"`) && p.statement.includes('"document_id" in (') || p.statement.includes(`from "kubun_connector_${table}" where "type" = $1 and "id" in (`));
      expect(reads.length, table).toBeGreaterThan(0);
      for (const read of reads) expect(read.statement, table).not.toContain('*');
    }
    expect(named.some((p) => p.statement.includes('from "kubun_connector_operation" where "caller_did" = $1 and "operation_id" = $2'))).toBe(true);
  });

  it('transaction pooling: nothing is named and the session keeps its plan cache mode (PgBouncer may run the next transaction elsewhere)', async () => {
    const database = open('transaction');
    const { store, claimed } = await claimOne(database, 'unnamed-1');
    expect((await getOperationsByNodeKeys(store, [claimed.operation.nodeKey]))[0]?.operationID).toBe('unnamed-1');
    expect(await preparedOnSession(database)).toEqual([]);
    const mode = await sql<{ mode: string }>`select current_setting('plan_cache_mode') as mode`.execute(database.db);
    expect(mode.rows[0]!.mode).toBe('auto');
  });

  it('DATABASE_NAMED_STATEMENTS=false: a direct connection names nothing and keeps its plan cache mode', async () => {
    const database = open('direct', false);
    const { store, claimed } = await claimOne(database, 'unnamed-2');
    expect((await getOperationsByNodeKeys(store, [claimed.operation.nodeKey]))[0]?.operationID).toBe('unnamed-2');
    expect(await preparedOnSession(database)).toEqual([]);
    const mode = await sql<{ mode: string }>`select current_setting('plan_cache_mode') as mode`.execute(database.db);
    expect(mode.rows[0]!.mode).toBe('auto');
  });

  it('a `*` statement stays unnamed, so a column added under it changes nothing for the running server', async () => {
    const database = open();
    await sql`create table named_star (id int primary key, v text)`.execute(database.db);
    await sql`insert into named_star values (1, 'one')`.execute(database.db);
    const star = 'select * from named_star where id = $1';
    nameStatement(star);
    expect((await database.db.executeQuery(CompiledQuery.raw(star, [1]))).rows).toEqual([{ id: 1, v: 'one' }]);
    await sql`alter table named_star add column w text`.execute(database.db);
    expect((await database.db.executeQuery(CompiledQuery.raw(star, [1]))).rows).toEqual([{ id: 1, v: 'one', w: null }]);
    expect((await preparedOnSession(database)).map((p) => p.statement)).not.toContain(star);
  });

  it('a named statement whose column changed type fails once (0A000) on its connection; the pool then opens a new one and it answers again', async () => {
    const database = open();
    await sql`create table named_typed (id int primary key, v int)`.execute(database.db);
    await sql`insert into named_typed values (1, 7)`.execute(database.db);
    const text = 'select id, v from named_typed where id = $1';
    nameStatement(text);
    const run = () => database.db.executeQuery(CompiledQuery.raw(text, [1]));
    expect((await run()).rows).toEqual([{ id: 1, v: 7 }]);
    const pidBefore = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(database.db)).rows[0]!.pid;
    await sql`alter table named_typed alter column v type text`.execute(database.db);
    const failure = await run().then(
      () => undefined,
      (error: unknown) => error as { code?: string },
    );
    expect(failure?.code).toBe(CACHED_PLAN_CHANGED);
    // The connection that failed is ended and replaced; the statement is parsed afresh there.
    await expect.poll(async () => (await run().catch(() => ({ rows: [] }))).rows, { timeout: 5_000 }).toEqual([{ id: 1, v: '7' }]);
    const pidAfter = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(database.db)).rows[0]!.pid;
    expect(pidAfter).not.toBe(pidBefore);
  });
});
