/**
 * A standby that stops answering (issue 41): a real streaming standby behind
 * a proxy that freezes (test/helpers/freezing-proxy.ts: connections accepted,
 * nothing forwarded, nothing closed, as a paused VM or a partition looks).
 * Every standby call has a deadline of its own on the client side
 * (`timeoutMs`, REPLICA_TIMEOUT_MS): the first call past it takes the standby
 * out of rotation and cuts the others, so a frozen standby costs a read at
 * most one deadline; reads with or without a token answer from the primary;
 * closing the router waits on no frozen standby. The lag check reads the
 * primary's position over a connection of its own: with the request pool
 * exhausted, a standby that stopped replaying still leaves rotation past
 * MAX_REPLICA_LAG_MS; when that check fails, token-less reads leave the
 * standby while reads with a token it replayed stay. A statement that timed
 * out on the client destroys its connection instead of returning it to the pool.
 */
import { sql, type Kysely } from 'kysely';
import pg from 'pg';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, parseDatabaseURL, type OpenDatabase, type PostgresTarget } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { createReadRouter, parseLsn, type ReadRouter, type RouteReason } from '../../src/db/read-replicas.js';
import type { Database } from '../../src/db/tables.js';
import { createStoreContext, type StoreContext } from '../../src/store/context.js';
import { listOperations } from '../../src/store/operations/index.js';
import { testDialects } from '../helpers/databases.js';
import { startFreezingProxy, type FreezingProxy } from '../helpers/freezing-proxy.js';
import { claimFresh } from '../helpers/operation-claim-fixtures.js';
import { adminPostgresURL, createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';
import { describeWithStandby, startStandby, type Standby } from '../helpers/standby.js';

const CHECK_MS = 100;
const MAX_LAG_MS = 800;
const WAIT_MS = 300;
/** The standby calls' deadline (REPLICA_TIMEOUT_MS). */
const DEADLINE_MS = 1_000;
/** What a read may take on top of the deadline (a primary read, scheduling on a loaded 2-core machine). */
const MARGIN_MS = 700;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const onStandby = async (db: Kysely<Database>) => (await sql<{ r: boolean }>`select pg_is_in_recovery() as r`.execute(db)).rows[0]!.r;

async function until(condition: () => boolean | Promise<boolean>, timeoutMs: number, what = 'condition'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await sleep(20);
  }
}

describe.skipIf(!(testDialects().includes('postgres') && inject('postgresAvailable')))('postgres: a statement past its client-side deadline', () => {
  let proxy: FreezingProxy;
  let frozenHost: OpenDatabase;

  beforeAll(async () => {
    proxy = await startFreezingProxy(Number(new URL(adminPostgresURL()).port || 5432));
    frozenHost = openDatabase(parseDatabaseURL(proxy.urlFor(adminPostgresURL())), { poolMax: 1, queryTimeoutMs: DEADLINE_MS, connectionTimeoutMs: DEADLINE_MS });
  });

  afterAll(async () => {
    proxy?.thaw();
    await frozenHost?.close();
    await proxy?.close();
  });

  it('fails at the deadline, and its connection is destroyed, not returned to the pool', async () => {
    const pool = frozenHost.pgPool!;
    const pidBefore = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(frozenHost.db)).rows[0]!.pid;
    expect(pool.totalCount).toBe(1);
    proxy.freeze();
    try {
      const started = Date.now();
      await expect(sql`select 1`.execute(frozenHost.db)).rejects.toThrow(/timeout/i);
      const took = Date.now() - started;
      expect(took).toBeGreaterThanOrEqual(DEADLINE_MS - 20);
      expect(took).toBeLessThan(DEADLINE_MS + MARGIN_MS);
      // Not idle in the pool, where the next statement would queue behind the one that never finished.
      await until(() => pool.totalCount === 0, 1_000, 'the timed-out connection removed');
      // A connection attempt to the frozen host also ends at the deadline.
      const connecting = Date.now();
      await expect(sql`select 1`.execute(frozenHost.db)).rejects.toThrow(/timeout/i);
      expect(Date.now() - connecting).toBeLessThan(DEADLINE_MS + MARGIN_MS);
    } finally {
      proxy.thaw();
    }
    const { n, pid } = (await sql<{ n: number; pid: number }>`select ${41}::int as n, pg_backend_pid() as pid`.execute(frozenHost.db)).rows[0]!;
    expect(n).toBe(41);
    expect(pid).not.toBe(pidBefore);
  });
});

await describeWithStandby('postgres: a read standby that stops answering (frozen)', () => {
  let scratch: ScratchPostgresDatabase;
  let standby: Standby;
  let standbyProxy: FreezingProxy;
  let primaryProxy: FreezingProxy;
  /** The router's primary: its request pool is small, so a test can hold all of it. */
  let primary: OpenDatabase;
  /** The test's own writes, beside the router's primary. */
  let writer: OpenDatabase;
  let store: StoreContext;
  let router: ReadRouter;
  const routes: [string, RouteReason][] = [];
  const lastRoute = () => routes.at(-1);
  let claims = 0;
  const write = () => claimFresh(store, { operationID: `frozen-${claims++}` });
  const token = async () => parseLsn(await router.currentToken())!;

  beforeAll(async () => {
    scratch = await createScratchPostgresDatabase('cs_frozen');
    primary = openDatabase(parseDatabaseURL(scratch.url), { poolMax: 3, connectionTimeoutMs: 5_000 });
    writer = openDatabase(parseDatabaseURL(scratch.url), { poolMax: 2 });
    await migrateToLatest(writer.db, 'postgres');
    store = createStoreContext(writer.db, 'postgres');
    standby = await startStandby({ database: new URL(scratch.url).pathname.slice(1) });
    standbyProxy = await startFreezingProxy(standby.port);
    // The primary's position is read over this one, so a test can make that check fail without touching the primary.
    primaryProxy = await startFreezingProxy(Number(new URL(scratch.url).port || 5432));
    router = await createReadRouter({
      primary,
      primaryCheck: parseDatabaseURL(primaryProxy.urlFor(scratch.url)) as PostgresTarget,
      standbys: [parseDatabaseURL(standbyProxy.urlFor(standby.url)) as PostgresTarget],
      maxLagMs: MAX_LAG_MS,
      checkIntervalMs: CHECK_MS,
      readYourWritesWaitMs: WAIT_MS,
      timeoutMs: DEADLINE_MS,
      poolOptions: { poolMax: 4 },
      logger: pino({ level: 'silent' }),
    });
    router.onRoute((target, reason) => routes.push([target, reason]));
    await until(() => router.standbys()[0]!.inRotation, 5_000, 'standby in rotation');
  }, 90_000);

  afterEach(async () => {
    standbyProxy?.thaw();
    primaryProxy?.thaw();
    await standby?.resumeReplay().catch(() => {});
    await until(() => router.standbys()[0]!.inRotation, 10_000, 'standby back in rotation');
  });

  afterAll(async () => {
    standbyProxy?.thaw();
    primaryProxy?.thaw();
    await router?.close();
    await primary?.close();
    await writer?.close();
    await standbyProxy?.close();
    await primaryProxy?.close();
    // The standby first: dropping the database replays as a drop there too.
    await standby?.destroy();
    await scratch?.drop();
  });

  it('frozen under load: it leaves rotation within one deadline, no read fails or waits more than one deadline, reads with a token included', async () => {
    await write();
    await standby.waitForReplay(await router.currentToken());
    const reads: { started: number; took: number; withToken: boolean }[] = [];
    const failures: string[] = [];
    let running = true;
    const reader = async (withToken: boolean) => {
      while (running) {
        const started = Date.now();
        try {
          const db = await router.readerFor(withToken ? await token() : null);
          await listOperations({ ...store, db }, { visibleTo: null, first: 5 });
          reads.push({ started, took: Date.now() - started, withToken });
        } catch (error) {
          failures.push(String(error));
        }
      }
    };
    const readers = [...Array.from({ length: 4 }, () => reader(false)), ...Array.from({ length: 2 }, () => reader(true))];
    let frozenAt = 0;
    let outAt = 0;
    let routesAtFreeze = 0;
    // Read while it is out: once thawed, its next check may put it back, clearing the error.
    let errorWhenOut: string | null = null;
    try {
      await sleep(300);
      expect(routes.filter(([target]) => target === 'standby').length).toBeGreaterThan(0);
      routesAtFreeze = routes.length;
      frozenAt = Date.now();
      standbyProxy.freeze();
      await until(() => !router.standbys()[0]!.inRotation, DEADLINE_MS + MARGIN_MS, 'out of rotation');
      outAt = Date.now();
      errorWhenOut = router.standbys()[0]!.lastError;
      await sleep(2 * DEADLINE_MS);
    } finally {
      running = false;
      standbyProxy.thaw();
      await Promise.all(readers);
    }
    expect(failures).toEqual([]);
    expect(outAt - frozenAt).toBeLessThan(DEADLINE_MS + MARGIN_MS);
    // Cut at its deadline: the statement's own timeout, or its connection ended by the deadline first.
    expect(errorWhenOut).toMatch(/timeout|terminated/i);
    // Every read that was running or started during the freeze: one deadline at most, for those it caught on the standby.
    const duringFreeze = reads.filter((read) => read.started + read.took >= frozenAt);
    expect(duringFreeze.length).toBeGreaterThan(10);
    expect(Math.max(...duringFreeze.map((read) => read.took))).toBeLessThan(DEADLINE_MS + MARGIN_MS);
    // It did catch reads there, which ran again on the primary.
    expect(routes.slice(routesAtFreeze)).toContainEqual(['primary', 'failover']);
    // Once it is out, no read waits on it at all: not one deadline each.
    const afterOut = duringFreeze.filter((read) => read.started > outAt + 50);
    expect(afterOut.length).toBeGreaterThan(10);
    expect(afterOut.filter((read) => read.withToken).length).toBeGreaterThan(0);
    // (A read that waited on it took a deadline at least; a read on the primary takes milliseconds, more on a loaded machine.)
    expect(Math.max(...afterOut.map((read) => read.took))).toBeLessThan(DEADLINE_MS);
  }, 30_000);

  it('thawed, it returns to rotation and its connections answer their own statements', async () => {
    standbyProxy.freeze();
    await until(() => !router.standbys()[0]!.inRotation, DEADLINE_MS + MARGIN_MS, 'out of rotation');
    standbyProxy.thaw();
    await until(() => router.standbys()[0]!.inRotation, 5_000, 'back in rotation');
    const db = await router.readerFor(null);
    expect(lastRoute()).toEqual(['standby', 'standby']);
    const answers = await Promise.all(Array.from({ length: 12 }, async (_, i) => (await sql<{ n: number; r: boolean }>`select ${i}::int as n, pg_is_in_recovery() as r`.execute(db)).rows[0]));
    expect(answers).toEqual(Array.from({ length: 12 }, (_, i) => ({ n: i, r: true })));
  });

  it('the lag check has its own connection: with the primary’s request pool exhausted, a standby that stopped replaying leaves rotation past MAX_REPLICA_LAG_MS', async () => {
    await standby.pauseReplay();
    const held: pg.PoolClient[] = [];
    try {
      for (let i = 0; i < 3; i++) held.push(await primary.pgPool!.connect());
      const paused = Date.now();
      // The primary moves on (other connections write); the paused standby does not.
      const writing = (async () => {
        while (Date.now() - paused < MAX_LAG_MS + 2_000 && router.standbys()[0]!.inRotation) {
          await write();
          await sleep(50);
        }
      })();
      await until(() => !router.standbys()[0]!.inRotation, MAX_LAG_MS + 1_500, 'out of rotation for its lag');
      await writing;
      expect(router.standbys()[0]!.lastError).toMatch(/replay lag/);
      const db = await router.readerFor(null);
      expect(lastRoute()).toEqual(['primary', 'no_standby_in_rotation']);
      expect(db).toBe(primary.db);
    } finally {
      for (const client of held) client.release();
      await standby.resumeReplay();
    }
  }, 20_000);

  it('a failed lag check takes the standby out for reads without a token; a read whose token it replayed still reads it', async () => {
    await write();
    const replayedToken = await token();
    await standby.waitForReplay(await router.currentToken());
    primaryProxy.freeze();
    try {
      await until(() => !router.standbys()[0]!.inRotation, DEADLINE_MS + MARGIN_MS + CHECK_MS, 'out of rotation (lag unknown)');
      expect(router.standbys()[0]!.lastError).toMatch(/primary/i);
      expect(await router.readerFor(null)).toBe(primary.db);
      expect(lastRoute()).toEqual(['primary', 'no_standby_in_rotation']);
      const db = await router.readerFor(replayedToken);
      expect(lastRoute()).toEqual(['standby', 'token_replayed']);
      expect(await onStandby(db)).toBe(true);
    } finally {
      primaryProxy.thaw();
    }
  });

  it('a busy standby pool is not a standby that stopped answering: a read that waited past the deadline for a connection runs on the primary, the standby stays in rotation', async () => {
    const busy = await createReadRouter({
      primary,
      standbys: [parseDatabaseURL(standbyProxy.urlFor(standby.url)) as PostgresTarget],
      maxLagMs: MAX_LAG_MS,
      checkIntervalMs: CHECK_MS,
      readYourWritesWaitMs: WAIT_MS,
      timeoutMs: DEADLINE_MS,
      poolOptions: { poolMax: 1 },
      logger: pino({ level: 'silent' }),
    });
    const busyRoutes: [string, RouteReason][] = [];
    busy.onRoute((target, reason) => busyRoutes.push([target, reason]));
    try {
      await until(() => busy.standbys()[0]!.inRotation, 5_000, 'in rotation');
      const db = await busy.readerFor(null);
      let everOut = false;
      const watching = setInterval(() => (everOut ||= !busy.standbys()[0]!.inRotation), 5);
      // Each well within the deadline; one connection for four: the last ones wait longer than it for theirs.
      const ran = await Promise.all(Array.from({ length: 4 }, async () => (await sql<{ r: boolean }>`select pg_sleep(${DEADLINE_MS / 2000}), pg_is_in_recovery() as r`.execute(db)).rows[0]!.r));
      clearInterval(watching);
      expect(everOut).toBe(false);
      expect(ran.filter((r) => r).length).toBeGreaterThan(0);
      expect(ran.filter((r) => !r).length).toBeGreaterThan(0);
      expect(busyRoutes).toContainEqual(['primary', 'failover']);
      expect(busy.standbys()[0]).toMatchObject({ inRotation: true, answering: true, lastError: null });
    } finally {
      await busy.close();
    }
  });

  it('closing the router while reads wait on the frozen standby takes at most one deadline, and the reads answer from the primary', async () => {
    const closing = await createReadRouter({
      primary,
      standbys: [parseDatabaseURL(standbyProxy.urlFor(standby.url)) as PostgresTarget],
      maxLagMs: MAX_LAG_MS,
      checkIntervalMs: CHECK_MS,
      readYourWritesWaitMs: WAIT_MS,
      // Longer than this test waits: only closing may end the reads.
      timeoutMs: 20_000,
      poolOptions: { poolMax: 4 },
      logger: pino({ level: 'silent' }),
    });
    await until(() => closing.standbys()[0]!.inRotation, 5_000, 'in rotation');
    const dbs = await Promise.all(Array.from({ length: 3 }, () => closing.readerFor(null)));
    standbyProxy.freeze();
    const reads = dbs.map((db) => onStandby(db));
    await sleep(300);
    const started = Date.now();
    await closing.close();
    expect(Date.now() - started).toBeLessThan(DEADLINE_MS);
    expect(await Promise.all(reads)).toEqual([false, false, false]);
  });
});
