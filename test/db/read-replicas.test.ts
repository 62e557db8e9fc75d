/**
 * The read router (src/db/read-replicas.ts) against a real streaming standby
 * of the test server: reads go to a standby in rotation; a consistency token
 * is honoured (a paused standby is waited for, then the primary reads); a
 * standby lagging past MAX_REPLICA_LAG_MS leaves rotation and comes back; a
 * standby stopped under load fails no read; an idle primary does not make a
 * standby look behind.
 */
import { sql, type Kysely } from 'kysely';
import pino from 'pino';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { openDatabase, parseDatabaseURL, type OpenDatabase, type PostgresTarget } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { createReadRouter, parseLsn, type ReadRouter, type RouteReason } from '../../src/db/read-replicas.js';
import type { Database } from '../../src/db/tables.js';
import { createStoreContext, type StoreContext } from '../../src/store/context.js';
import { getOperationByKey, listOperations } from '../../src/store/operations/index.js';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { claimFresh, keyOf, claimInput } from '../helpers/operation-claim-fixtures.js';
import { CLAIM, claimInput as claimVariables } from '../helpers/operation-graphql.js';
import { createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';
import { describeWithStandby, startStandby, type Standby } from '../helpers/standby.js';

const CHECK_MS = 100;
const MAX_LAG_MS = 600;
const WAIT_MS = 300;

await describeWithStandby('postgres: reads on a hot standby (read router)', () => {
  let setup: RoutedDatabase;
  let standby: Standby;
  let router: ReadRouter;
  let store: StoreContext;
  const routes: [string, RouteReason][] = [];

  beforeAll(async () => {
    setup = await routedDatabase('cs_reads', MAX_LAG_MS);
    ({ standby, router } = setup);
    store = createStoreContext(setup.primary.db, 'postgres');
    router.onRoute((target, reason) => routes.push([target, reason]));
  }, 90_000);

  afterAll(() => setup?.close());

  const onStandby = async (db: Kysely<Database>) => (await sql<{ r: boolean }>`select pg_is_in_recovery() as r`.execute(db)).rows[0]!.r;
  const lastRoute = () => routes.at(-1);

  it('a read without a token goes to the standby in rotation, which serves the store’s queries', async () => {
    const { operation } = await claimFresh(store, { operationID: 'routed-1' });
    await standby.waitForReplay(await router.currentToken());
    const db = await router.readerFor(null);
    expect(lastRoute()).toEqual(['standby', 'standby']);
    expect(await onStandby(db)).toBe(true);
    const page = await listOperations({ ...store, db }, { visibleTo: null, first: 10 });
    expect(page.operations.map((op) => op.nodeKey)).toContain(operation.nodeKey);
  });

  it('read-your-writes: with a token the standby has not replayed, the read waits, then reads the primary and sees the write', async () => {
    await standby.pauseReplay();
    try {
      await claimFresh(store, { operationID: 'behind-the-pause' });
      const token = parseLsn(await router.currentToken())!;
      const started = Date.now();
      const db = await router.readerFor(token);
      expect(Date.now() - started).toBeGreaterThanOrEqual(WAIT_MS - 20);
      expect(lastRoute()).toEqual(['primary', 'token_wait_timeout']);
      expect(await onStandby(db)).toBe(false);
      expect(await getOperationByKey({ ...store, db }, keyOf(claimInput({ operationID: 'behind-the-pause' })))).not.toBeNull();
      // The standby itself does not have it yet: the token mattered.
      const standbyDb = (await router.readerFor(null)) as Kysely<Database>;
      if (await onStandby(standbyDb)) expect(await getOperationByKey({ ...store, db: standbyDb }, keyOf(claimInput({ operationID: 'behind-the-pause' })))).toBeNull();
    } finally {
      await standby.resumeReplay();
    }
    const token = parseLsn(await router.currentToken())!;
    const db = await router.readerFor(token);
    expect(lastRoute()).toEqual(['standby', 'token_replayed']);
    expect(await onStandby(db)).toBe(true);
    expect(await getOperationByKey({ ...store, db }, keyOf(claimInput({ operationID: 'behind-the-pause' })))).not.toBeNull();
  });

  it('a write sent through a standby’s handle runs on the primary, and the standby stays in rotation', async () => {
    const db = await router.readerFor(null);
    expect(await onStandby(db)).toBe(true);
    const { operation } = await claimFresh(store, { operationID: 'written-through' });
    const result = await db.updateTable('kubun_connector_operation').set({ model: 'rewritten' }).where('node_key', '=', operation.nodeKey).executeTakeFirst();
    expect(result.numUpdatedRows).toBe(1n);
    expect(lastRoute()).toEqual(['primary', 'failover']);
    expect(router.standbys()[0]!.inRotation).toBe(true);
    expect((await getOperationByKey(store, keyOf(claimInput({ operationID: 'written-through' }))))?.model).toBe('rewritten');
  });

  it('a malformed WAL position is not a token', () => {
    for (const text of ['', 'x', '0/', '/1', '0/1/2', '123456789/0', '0/G']) expect(parseLsn(text)).toBeNull();
    expect(parseLsn('16/B374D848')).toBe((0x16n << 32n) + 0xb374d848n);
  });

  it('a standby lagging past the threshold leaves rotation (reads go to the primary, never an error) and comes back', async () => {
    await standby.pauseReplay();
    try {
      let n = 0;
      await until(async () => {
        await claimFresh(store, { operationID: `lagging-${n++}` });
        return !router.standbys()[0]!.inRotation;
      }, 5_000);
      const status = router.standbys()[0]!;
      expect(status.lagMs).toBeGreaterThan(MAX_LAG_MS);
      expect(status.lastError).toMatch(/replay lag/);
      const db = await router.readerFor(null);
      expect(lastRoute()).toEqual(['primary', 'no_standby_in_rotation']);
      expect(await onStandby(db)).toBe(false);
    } finally {
      await standby.resumeReplay();
    }
    await until(() => router.standbys()[0]!.inRotation, 5_000);
    expect(router.standbys()[0]!.lagMs).toBeLessThanOrEqual(MAX_LAG_MS);
  });

  it('a primary with no writes of this test does not make the standby look behind', async () => {
    await standby.waitForReplay(await router.currentToken());
    const quietSince = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 5 * CHECK_MS));
    // Were lag the age of the last replayed commit, an idle cluster would read the whole quiet time. The cluster is
    // shared with other suites, whose WAL the standby replays too: a check can catch it a moment behind.
    const { inRotation, lagMs } = router.standbys()[0]!;
    expect(inRotation).toBe(true);
    expect(lagMs).toBeLessThan(Math.min(CHECK_MS, Date.now() - quietSince));
  });

  it('a standby stopped under load fails no read: statements run again on the primary, and it returns to rotation after a restart', async () => {
    let failures = 0;
    let reads = 0;
    let running = true;
    const reader = async () => {
      while (running) {
        try {
          const db = await router.readerFor(null);
          await listOperations({ ...store, db }, { visibleTo: null, first: 5 });
          reads++;
        } catch {
          failures++;
        }
      }
    };
    const readers = Array.from({ length: 4 }, reader);
    await new Promise((resolve) => setTimeout(resolve, 200));
    await standby.stop();
    await until(() => !router.standbys()[0]!.inRotation, 5_000);
    const readsWhileDown = reads;
    await new Promise((resolve) => setTimeout(resolve, 300));
    running = false;
    await Promise.all(readers);
    expect(failures).toBe(0);
    expect(reads).toBeGreaterThan(readsWhileDown);
    // Some reads were on the standby when it went: their statements failed over.
    expect(routes).toContainEqual(['primary', 'failover']);
    expect(router.standbys()[0]!.lastError).not.toBeNull();

    await standby.start();
    await until(() => router.standbys()[0]!.inRotation, 10_000);
    expect(await onStandby(await router.readerFor(null))).toBe(true);
  }, 30_000);
});

await describeWithStandby('postgres: the API on a hot standby (read routing)', () => {
  let setup: RoutedDatabase;
  let standby: Standby;
  let router: ReadRouter;
  let app: ServerApp;
  const alice = generateLocalKey();
  const AUDIENCE = 'read-routing-test';

  beforeAll(async () => {
    setup = await routedDatabase('cs_reads_api', 60_000);
    ({ standby, router } = setup);
    const config = loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0', RATE_LIMIT_PER_VIEWER: '0', METRICS_CACHE_MS: '0' });
    app = createServerApp({ config, database: setup.primary, logger: createLogger('silent'), readRouter: router });
  }, 90_000);

  afterAll(() => setup?.close());

  const post = async (query: string, variables: Record<string, unknown>, headers: Record<string, string> = {}) => {
    const token = await mintToken({ privateKey: alice.privateKey, did: alice.did, audience: AUDIENCE, ttlSeconds: 600 });
    const response = await app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...headers },
      body: JSON.stringify({ query, variables }),
    });
    return { status: response.status, body: (await response.json()) as { data?: any; errors?: { message: string; extensions?: Record<string, unknown> }[]; extensions?: Record<string, unknown> } };
  };
  const BY_KEY = 'query($id: String!) { operationByKey(operationID: $id) { operationID } }';

  it('a mutation answers its consistency token; a query sending it back sees the write while the standby is paused, one without it reads the standby', async () => {
    await standby.pauseReplay();
    try {
      const claimed = await post(CLAIM, { input: claimVariables({ operationID: 'api-ryw' }) });
      expect(claimed.body.data.claimOperation.__typename).toBe('ClaimOperationPayload');
      const token = claimed.body.extensions?.consistencyToken as string;
      expect(token).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
      const stale = await post(BY_KEY, { id: 'api-ryw' });
      expect(stale.body).toEqual({ data: { operationByKey: null } });
      const fresh = await post(BY_KEY, { id: 'api-ryw' }, { 'consistency-token': token });
      expect(fresh.body).toEqual({ data: { operationByKey: { operationID: 'api-ryw' } } });
      // Queries carry no token of their own.
      expect(fresh.body.extensions?.consistencyToken).toBeUndefined();
    } finally {
      await standby.resumeReplay();
    }
    await standby.waitForReplay(await router.currentToken());
    expect((await post(BY_KEY, { id: 'api-ryw' })).body).toEqual({ data: { operationByKey: { operationID: 'api-ryw' } } });
  });

  it('a malformed Consistency-Token is refused (400, BAD_USER_INPUT), never ignored', async () => {
    const refused = await post(BY_KEY, { id: 'x' }, { 'consistency-token': 'yesterday' });
    expect(refused.status).toBe(400);
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(refused.body.errors?.[0]?.message).toMatch(/consistency-token/);
  });

  it('/readyz looks at the primary only: a stopped standby leaves it ready, and queries keep answering', async () => {
    await standby.stop();
    try {
      await until(() => !router.standbys()[0]!.inRotation, 5_000);
      expect((await app.yoga.fetch('http://localhost/readyz')).status).toBe(200);
      expect((await post(BY_KEY, { id: 'api-ryw' })).body).toEqual({ data: { operationByKey: { operationID: 'api-ryw' } } });
    } finally {
      await standby.start();
    }
    await until(() => router.standbys()[0]!.inRotation, 10_000);
  });

  it('/metrics shows each standby’s lag and rotation and where reads went', async () => {
    await post(BY_KEY, { id: 'x' });
    const text = await (await app.yoga.fetch('http://localhost/metrics')).text();
    expect(text).toMatch(/connector_store_read_standby_in_rotation\{standby="postgres:\/\/[^"]*127\.0\.0\.1:\d+\/cs_reads_api[^"]*"\} 1/);
    expect(text).toMatch(/connector_store_read_standby_lag_seconds\{standby="[^"]+"\} \d/);
    expect(text).toMatch(/connector_store_reads_routed_total\{target="standby",reason="standby"\} [1-9]/);
    expect(text).toMatch(/connector_store_reads_routed_total\{target="primary",reason="token_wait_timeout"\} [1-9]/);
  });
});

/** A migrated scratch database, a streaming standby of it, and a router over both with the standby in rotation. */
interface RoutedDatabase {
  primary: OpenDatabase;
  standby: Standby;
  router: ReadRouter;
  close(): Promise<void>;
}

async function routedDatabase(prefix: string, maxLagMs: number): Promise<RoutedDatabase> {
  const scratch: ScratchPostgresDatabase = await createScratchPostgresDatabase(prefix);
  const primary = openDatabase(parseDatabaseURL(scratch.url));
  await migrateToLatest(primary.db, 'postgres');
  const standby = await startStandby({ database: new URL(scratch.url).pathname.slice(1) });
  const router = await createReadRouter({
    primary,
    standbys: [parseDatabaseURL(standby.url) as PostgresTarget],
    maxLagMs,
    checkIntervalMs: CHECK_MS,
    readYourWritesWaitMs: WAIT_MS,
    poolOptions: { poolMax: 4 },
    logger: pino({ level: 'silent' }),
  });
  await until(() => router.standbys()[0]!.inRotation, 5_000);
  return {
    primary,
    standby,
    router,
    async close() {
      await router.close();
      await primary.close();
      // The standby first: dropping the database replays as a drop there too.
      await standby.destroy();
      await scratch.drop();
    },
  };
}

async function until(condition: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
