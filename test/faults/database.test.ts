/**
 * Database faults, with the app over a database of its own. Postgres (a
 * scratch database): backends terminated while requests are in flight, a
 * statement timeout, an exhausted pool. The process stays up, the affected
 * requests get a typed retryable error (503 + Retry-After, never the generic
 * mask), readiness keeps its own connection, and the next requests succeed.
 * In-flight requests are made to wait on a table lock held by another
 * connection, so they are truly running when the fault strikes. SQLite:
 * another process holding the write lock past busy_timeout.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { openDatabase, parseDatabaseURL, type OpenDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { createStoreContext } from '../../src/store/context.js';
import { setSyncState } from '../../src/store/sync-state/index.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';

const AUDIENCE = 'connector-store-faults';
const user = generateLocalKey();
const QUERY = '{ syncStates(first: 5) { totalCount edges { node { connectorName } } } }';

const run = testDialects().includes('postgres') && dialectAvailable('postgres');

describe.skipIf(!run)('postgres: database faults', () => {
  let scratch: ScratchPostgresDatabase;
  let token: string;
  const opened: OpenDatabase[] = [];
  const lockers: pg.Client[] = [];

  beforeAll(async () => {
    scratch = await createScratchPostgresDatabase('cs_faults');
    const database = openDatabase(parseDatabaseURL(scratch.url));
    await migrateToLatest(database.db, 'postgres');
    await setSyncState(createStoreContext(database.db, 'postgres'), 'google', user.did, { checkpoint: null, lastSyncedAt: 'now', entityCount: 0, status: 'idle' });
    await database.close();
    token = await mintToken({ privateKey: user.privateKey, audience: AUDIENCE, ttlSeconds: 3600 });
  });

  afterEach(async () => {
    for (const locker of lockers.splice(0)) await locker.end().catch(() => {});
    for (const database of opened.splice(0)) await database.close().catch(() => {});
  });

  afterAll(async () => {
    await scratch?.drop();
  });

  /** The app over a pool of its own (`pool`) on the scratch database. */
  function app(pool: { poolMax?: number; statementTimeoutMs?: number; connectionTimeoutMs?: number } = {}): { app: ServerApp; errors: Error[] } {
    const errors: Error[] = [];
    const database = openDatabase(parseDatabaseURL(scratch.url), { ...pool, onPoolError: (error) => errors.push(error) });
    opened.push(database);
    const config = loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0', DATABASE_URL: scratch.url });
    return { app: createServerApp({ config, database, logger: createLogger('silent') }), errors };
  }

  const ask = async (target: ServerApp) => {
    const response = await target.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: QUERY }),
    });
    return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as { data?: unknown; errors?: { message: string; extensions?: { code?: string; retryable?: boolean } }[] } };
  };

  /** Holds an exclusive lock on the sync-state table from a connection of its own, until released. */
  async function lockSyncStates(): Promise<{ pid: number; release(): Promise<void> }> {
    const client = new pg.Client({ connectionString: scratch.url });
    await client.connect();
    lockers.push(client);
    await client.query('begin');
    await client.query('lock table kubun_connector_sync_state in access exclusive mode');
    const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
    return { pid: rows[0]!.pid, release: async () => void (await client.query('rollback')) };
  }

  /** Waits until `count` backends of the scratch database are waiting on a lock. */
  async function waitForLockWaiters(count: number): Promise<void> {
    const admin = new pg.Client({ connectionString: scratch.url });
    await admin.connect();
    try {
      for (let i = 0; i < 200; i++) {
        const { rows } = await admin.query<{ n: number }>(
          "select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'",
        );
        if (rows[0]!.n >= count) return;
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error(`fewer than ${count} requests reached the lock`);
    } finally {
      await admin.end();
    }
  }

  it('terminating the server’s backends mid-request: the process stays up, those requests get DATABASE_UNAVAILABLE (503, Retry-After), the next succeed', async () => {
    const { app: target, errors } = app({ poolMax: 4 });
    expect((await ask(target)).status).toBe(200);
    const lock = await lockSyncStates();
    const inFlight = Array.from({ length: 4 }, () => ask(target));
    await waitForLockWaiters(4);
    const admin = new pg.Client({ connectionString: scratch.url });
    await admin.connect();
    const { rows } = await admin.query<{ ok: boolean }>(
      'select pg_terminate_backend(pid) as ok from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and pid <> $1',
      [lock.pid],
    );
    await admin.end();
    expect(rows.length).toBeGreaterThanOrEqual(4);
    const answers = await Promise.all(inFlight);
    for (const answer of answers) {
      expect(answer.status).toBe(503);
      expect(answer.retryAfter).toBe('1');
      expect(answer.body.errors?.[0]?.extensions).toMatchObject({ code: 'DATABASE_UNAVAILABLE', retryable: true });
      expect(JSON.stringify(answer.body)).not.toMatch(/terminat|57P01|pg_/i);
    }
    await lock.release();
    // The pool replaces the dead connections: every next request succeeds.
    const after = await Promise.all(Array.from({ length: 8 }, () => ask(target)));
    expect(after.map((a) => a.status)).toEqual(Array(8).fill(200));
    // The terminated clients were ended and dropped by the pool as their queries failed, so
    // none was lent to the requests above; any socket error on them went to the listener
    // (logged by main.ts), never to the process.
    expect(errors.every((error) => error instanceof Error)).toBe(true);
  });

  it('a statement timeout is DATABASE_TIMEOUT (503, Retry-After), not "Unexpected error."', async () => {
    const { app: target } = app({ statementTimeoutMs: 300 });
    const lock = await lockSyncStates();
    const answer = await ask(target);
    await lock.release();
    expect(answer.status).toBe(503);
    expect(answer.retryAfter).toBe('1');
    expect(answer.body.errors?.[0]).toMatchObject({ message: 'The database did not answer in time; retry shortly.', extensions: { code: 'DATABASE_TIMEOUT', retryable: true } });
    expect((await ask(target)).status).toBe(200);
  });

  it('an exhausted pool is OVERLOADED (503, Retry-After), while /readyz keeps its own connection and answers 200', async () => {
    const { app: target } = app({ poolMax: 1, connectionTimeoutMs: 300 });
    const lock = await lockSyncStates();
    const holder = ask(target);
    await waitForLockWaiters(1);
    const waiter = await ask(target);
    expect(waiter.status).toBe(503);
    expect(waiter.body.errors?.[0]?.extensions).toMatchObject({ code: 'OVERLOADED', retryable: true });
    const ready = await target.yoga.fetch('http://localhost/readyz');
    expect(ready.status).toBe(200);
    await lock.release();
    expect((await holder).status).toBe(200);
  });
});

describe('sqlite: database faults', () => {
  it('a write lock held past busy_timeout by another process is OVERLOADED (503, Retry-After), and the write is retried fine', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'cs-faults-'));
    const path = join(dir, 'store.sqlite');
    const database = openDatabase({ dialect: 'sqlite', path, display: path }, { busyTimeoutMs: 100 });
    try {
      await migrateToLatest(database.db, 'sqlite');
      const config = loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0' });
      const target = createServerApp({ config, database, logger: createLogger('silent') });
      const token = await mintToken({ privateKey: user.privateKey, audience: AUDIENCE, ttlSeconds: 3600 });
      const write = async () => {
        const response = await target.yoga.fetch('http://localhost/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({
            query: 'mutation($i: SetSyncStateInput!) { setSyncState(input: $i) { __typename } }',
            variables: { i: { connectorName: 'google', lastSyncedAt: 'now', entityCount: 1, status: 'idle' } },
          }),
        });
        return { status: response.status, retryAfter: response.headers.get('retry-after'), body: (await response.json()) as { errors?: { extensions?: { code?: string } }[] } };
      };
      const other = new SQLite(path);
      other.exec('begin immediate');
      const busy = await write();
      other.exec('rollback');
      other.close();
      expect(busy.status).toBe(503);
      expect(busy.retryAfter).toBe('1');
      expect(busy.body.errors?.[0]?.extensions?.code).toBe('OVERLOADED');
      expect((await write()).status).toBe(200);
    } finally {
      await database.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
