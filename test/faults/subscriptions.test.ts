/**
 * Database faults under open subscriptions (issue 19 item 2), on a real HTTP
 * server in this process with the WebSocket endpoint attached, every
 * transport at once: yoga's SSE on `/graphql`, graphql-sse on
 * `/graphql/stream`, graphql-ws. A subscriber's per-event read that fails in
 * a retryable way is retried on a fresh connection, so the subscriber keeps
 * going; one that keeps failing ends the stream with a typed, retryable
 * error (never the masked "Unexpected error.").
 * The read waits on a table lock held by another connection, then every
 * backend of the server's pool is terminated (`pg_terminate_backend` from an
 * admin connection); with a statement timeout and the lock held past every
 * attempt, `DATABASE_TIMEOUT`.
 *
 * Postgres only: a subscriber's read has no real fault to meet on SQLite. The
 * database is a file in the process (no connection to lose, no statement
 * timeout), and in WAL mode a reader never waits on or fails because of a
 * writer; the one way to make reads busy, another connection taking the file
 * in exclusive locking mode, is refused while the server has it open. The
 * retry does not depend on the dialect (any error `classifyDatabaseError`
 * calls retryable, SQLITE_BUSY included: test/db/errors.test.ts).
 */
import { createServer, type Server } from 'node:http';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { openDatabase, parseDatabaseURL, type OpenDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { attachGraphQLWebSocket, type GraphQLWebSocket } from '../../src/server/websocket.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { CLAIM, claimInput } from '../helpers/operation-graphql.js';
import { createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';
import { openStalledSubscriber, type StalledSubscriber, type Transport } from '../helpers/stalled-subscribers.js';

const AUDIENCE = 'connector-store-subscription-faults';
const user = generateLocalKey();
const OPERATION_CHANGED = 'subscription($id: ID!) { operationChanged(id: $id) { id state } }';
const TRANSPORTS: Transport[] = ['sse', 'graphql-sse-distinct', 'websocket'];

/** The app over `database`, served over HTTP and WebSocket on 127.0.0.1. */
async function serve(database: OpenDatabase): Promise<{ app: ServerApp; origin: string; close(): Promise<void> }> {
  const config = loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0', RATE_LIMIT_PER_VIEWER: '0' });
  const app = createServerApp({ config, database, logger: createLogger('silent') });
  const server: Server = createServer(app.yoga);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const websocket: GraphQLWebSocket = attachGraphQLWebSocket(server, app, { logger: createLogger('silent'), maxPayloadBytes: 1_000_000, closeTimeoutMs: 200 });
  const { port } = server.address() as { port: number };
  return {
    app,
    origin: `http://127.0.0.1:${port}`,
    close: async () => {
      app.closeSubscriptions();
      await websocket.close();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Claims an operation over HTTP and subscribes to it on every transport; `change()` announces a change of it. */
async function subscribedOperation(served: { app: ServerApp; origin: string }, operationID: string) {
  const token = await mintToken({ privateKey: user.privateKey, audience: AUDIENCE, ttlSeconds: 3600 });
  const response = await fetch(`${served.origin}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: CLAIM, variables: { input: claimInput({ operationID }) } }),
  });
  const { id } = ((await response.json()) as { data: { claimOperation: { operation: { id: string } } } }).data.claimOperation.operation;
  const nodeKey = Buffer.from(id, 'base64url').toString('utf8').split(':')[1]!;
  const subscribers: StalledSubscriber[] = [];
  for (const transport of TRANSPORTS) subscribers.push(await openStalledSubscriber(served.origin, transport, token, OPERATION_CHANGED, { id }));
  return {
    subscribers,
    // The row did not change; the event makes every subscriber read it again, which is what the fault hits.
    change: () => served.app.changes.publish([{ kind: 'operation', nodeKey }]),
  };
}

const runPostgres = testDialects().includes('postgres') && dialectAvailable('postgres');

describe.skipIf(!runPostgres)('postgres: subscriptions under database faults', () => {
  let scratch: ScratchPostgresDatabase;
  const cleanups: (() => Promise<unknown>)[] = [];

  beforeAll(async () => {
    scratch = await createScratchPostgresDatabase('cs_subfaults');
    const database = openDatabase(parseDatabaseURL(scratch.url));
    await migrateToLatest(database.db, 'postgres');
    await database.close();
  });

  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => {});
  });

  afterAll(async () => {
    await scratch?.drop();
  });

  async function start(pool: { poolMax?: number; statementTimeoutMs?: number }) {
    const database = openDatabase(parseDatabaseURL(scratch.url), { ...pool, onPoolError: () => {} });
    cleanups.push(() => database.close());
    const served = await serve(database);
    cleanups.push(() => served.close());
    return served;
  }

  /** An exclusive lock on the operations table from a connection of its own. */
  async function lockOperations() {
    const client = new pg.Client({ connectionString: scratch.url });
    await client.connect();
    cleanups.push(() => client.end());
    await client.query('begin');
    await client.query('lock table kubun_connector_operation in access exclusive mode');
    const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
    return { pid: rows[0]!.pid, release: async () => void (await client.query('rollback')) };
  }

  async function admin<T extends pg.QueryResultRow>(text: string, values: unknown[] = []) {
    const client = new pg.Client({ connectionString: scratch.url });
    await client.connect();
    try {
      return (await client.query<T>(text, values)).rows;
    } finally {
      await client.end();
    }
  }

  it('the pool’s backends terminated under a subscriber’s read: the read is retried on a fresh connection and every transport keeps going', async () => {
    const served = await start({ poolMax: 4 });
    const { subscribers, change } = await subscribedOperation(served, 'op-terminated');
    const lock = await lockOperations();
    await change();
    // The event's one shared read is waiting on the lock.
    await expect
      .poll(async () => (await admin<{ n: number }>("select count(*)::int as n from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'"))[0]!.n, { timeout: 5_000 })
      .toBeGreaterThanOrEqual(1);
    const terminated = await admin<{ ok: boolean }>(
      'select pg_terminate_backend(pid) as ok from pg_stat_activity where datname = current_database() and pid <> pg_backend_pid() and pid <> $1',
      [lock.pid],
    );
    expect(terminated.length).toBeGreaterThanOrEqual(1);
    await lock.release();
    await change();
    for (const subscriber of subscribers) {
      const resumed = await subscriber.resume(500, 10_000);
      subscriber.close();
      expect(resumed.results.map((r) => r.errors?.[0]?.extensions?.code ?? r.data?.operationChanged?.state), subscriber.transport).toEqual(['ATTEMPTED', 'ATTEMPTED']);
      expect(resumed.ended, subscriber.transport).toBe(false);
    }
  }, 30_000);

  it('a read that keeps failing (statement timeout past every attempt) ends the stream with DATABASE_TIMEOUT, retryable, on every transport', async () => {
    const served = await start({ poolMax: 4, statementTimeoutMs: 150 });
    const { subscribers, change } = await subscribedOperation(served, 'op-timeout');
    const lock = await lockOperations();
    await change();
    // Four attempts of 150 ms with 50 + 100 + 200 ms between them.
    await new Promise((r) => setTimeout(r, 2_000));
    await lock.release();
    for (const subscriber of subscribers) {
      const resumed = await subscriber.resume(500, 10_000);
      subscriber.close();
      expect(resumed.results, subscriber.transport).toHaveLength(1);
      expect(resumed.results[0]?.errors?.[0], subscriber.transport).toMatchObject({
        message: 'The database did not answer in time; retry shortly.',
        extensions: { code: 'DATABASE_TIMEOUT', retryable: true },
      });
      expect(resumed.ended, subscriber.transport).toBe(true);
    }
  }, 30_000);
});
