/**
 * `poolMode: 'transaction'` (DATABASE_POOL_MODE=transaction, for a
 * transaction-pooling PgBouncer) against the test server directly: the
 * statement timeout is no startup parameter and never session state, but a
 * `SET LOCAL` in every transaction, and a statement outside one gets a
 * transaction of its own. test/e2e/pgbouncer.test.ts runs the same through
 * a real PgBouncer.
 */
import { sql, type LogEvent } from 'kysely';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, parseDatabaseURL, type OpenDatabase } from '../../src/db/connect.js';
import { classifyDatabaseError } from '../../src/db/errors.js';
import { createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';
import { testDialects } from '../helpers/databases.js';

const runs = testDialects().includes('postgres') && inject('postgresAvailable');

describe.skipIf(!runs)('postgres: DATABASE_POOL_MODE=transaction keeps no session state', () => {
  let scratch: ScratchPostgresDatabase;
  const opened: OpenDatabase[] = [];

  beforeAll(async () => {
    scratch = await createScratchPostgresDatabase('cs_poolmode');
  });
  afterEach(async () => {
    for (const open of opened.splice(0)) await open.close().catch(() => {});
  });
  afterAll(async () => {
    await scratch?.drop();
  });

  /** A one-connection pool, so every statement provably shares one session. */
  function open(options: { log?: (event: LogEvent) => void } = {}): OpenDatabase {
    const database = openDatabase(parseDatabaseURL(scratch.url), { poolMode: 'transaction', statementTimeoutMs: 300, poolMax: 1, ...options });
    opened.push(database);
    return database;
  }

  const setting = async (database: OpenDatabase) =>
    (await sql<{ t: string }>`select current_setting('statement_timeout') as t`.execute(database.db)).rows[0]!.t;

  it('sends no statement_timeout startup parameter (PgBouncer refuses one): the session keeps the server default', async () => {
    const database = open();
    const session = await database.pgPool!.query<{ t: string }>("select current_setting('statement_timeout') as t");
    expect(session.rows[0]!.t).toBe('0');
  });

  it('a statement outside a transaction runs in one of its own, with the timeout set locally; the session is left as it was', async () => {
    const database = open();
    expect(await setting(database)).toBe('300ms');
    const inBlock = await sql<{ open: boolean }>`select now() = statement_timestamp() as open`.execute(database.db);
    // In its own explicit transaction, now() is the BEGIN's time, earlier than the statement's.
    expect(inBlock.rows[0]!.open).toBe(false);
    const session = await database.pgPool!.query<{ t: string }>("select current_setting('statement_timeout') as t");
    expect(session.rows[0]!.t).toBe('0');
  });

  it('a slow statement is cut off at the timeout as DATABASE_TIMEOUT, inside a transaction and outside one', async () => {
    const database = open();
    for (const attempt of [
      () => sql`select pg_sleep(5)`.execute(database.db),
      () => database.db.transaction().execute((tx) => sql`select pg_sleep(5)`.execute(tx)),
    ]) {
      const started = Date.now();
      const failure = await attempt().then(
        () => undefined,
        (error: unknown) => error,
      );
      expect(Date.now() - started).toBeLessThan(3_000);
      expect((failure as { code?: string }).code).toBe('57014');
      expect(classifyDatabaseError(failure)?.code).toBe('DATABASE_TIMEOUT');
    }
    // The one connection is usable again: nothing was left half-open.
    expect(await setting(database)).toBe('300ms');
    const session = await database.pgPool!.query<{ status: string }>('select 1 as status');
    expect(session.rows).toHaveLength(1);
  });

  it('transactions set the timeout in the BEGIN round trip and keep their isolation level', async () => {
    const database = open();
    const seen = await database.db
      .transaction()
      .setIsolationLevel('serializable')
      .execute(async (tx) => {
        const rows = (await sql<{ t: string; iso: string }>`select current_setting('statement_timeout') as t, current_setting('transaction_isolation') as iso`.execute(tx)).rows;
        return rows[0]!;
      });
    expect(seen).toEqual({ t: '300ms', iso: 'serializable' });
    const plain = await database.db.transaction().execute(async (tx) => (await sql<{ t: string }>`select current_setting('statement_timeout') as t`.execute(tx)).rows[0]!.t);
    expect(plain).toBe('300ms');
  });

  it('a failed statement outside a transaction is rolled back: the next one on the same connection runs', async () => {
    const database = open();
    await expect(sql`select 1 / 0`.execute(database.db)).rejects.toMatchObject({ code: '22012' });
    expect(await setting(database)).toBe('300ms');
    // Inside a transaction the error rolls the whole transaction back, as before.
    await expect(database.db.transaction().execute((tx) => sql`select 1 / 0`.execute(tx))).rejects.toMatchObject({ code: '22012' });
    expect(await setting(database)).toBe('300ms');
  });

  it("Kysely's log hook sees each statement once (BEGIN / SET LOCAL / COMMIT are the driver's, not queries)", async () => {
    const statements: string[] = [];
    const database = open({ log: (event) => void statements.push(event.query.sql) });
    await sql`select 1`.execute(database.db);
    await database.db.transaction().execute((tx) => sql`select 2`.execute(tx));
    expect(statements).toEqual(['select 1', 'select 2']);
  });

  it('pg sends unparameterized statements as one simple query: BEGIN and SET LOCAL cost one round trip', async () => {
    // What beginTransaction relies on: a multi-statement text without parameters is accepted in one message.
    const client = new pg.Client({ connectionString: scratch.url });
    await client.connect();
    try {
      const results = (await client.query('begin; set local statement_timeout = 123', [])) as unknown as pg.QueryResult[];
      expect(results.map((r) => r.command)).toEqual(['BEGIN', 'SET']);
      expect((await client.query("select current_setting('statement_timeout') as t")).rows[0].t).toBe('123ms');
      await client.query('commit');
      expect((await client.query("select current_setting('statement_timeout') as t")).rows[0].t).toBe('0');
    } finally {
      await client.end();
    }
  });
});
