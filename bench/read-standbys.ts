/**
 * Reads on a hot standby measured (issue 24 item 5): the dashboard list of
 * bench/throughput.ts (`operations(first: 50) { … watch }` as a service
 * principal, over its 10 000 seeded operations) served by the server in its
 * own process twice, both running side by side and loaded in interleaved
 * rounds (a, b, a, b, …) so drift of the shared machine falls on both:
 *
 * - (a) `DATABASE_URL` = the primary only;
 * - (b) the same primary and `READ_DATABASE_URLS` = a streaming standby of it,
 *   made by test/helpers/standby.ts (`pg_basebackup -R` of the test cluster,
 *   `pg_ctl` on a free loopback port).
 *
 * On this 2-core machine the primary, the standby, the servers and autocannon
 * share the same cores, so req/s cannot show scale-out; what the standby buys
 * is the primary's CPU per read, which is the claim. Per round it measures req/s,
 * p50/p99, and CPU per read (utime + stime from /proc, in `getconf CLK_TCK`
 * ticks) of:
 *
 * - the primary cluster: its postmaster (found by `postmaster.pid` in
 *   `show data_directory`), every child of it, and the children it reaped
 *   during the round (the postmaster's cutime + cstime); that includes any
 *   other database's activity on the shared test server, so
 * - the primary's backends of the scratch database alone (pids from
 *   `pg_stat_activity`), which other users of the test server cannot move;
 * - the standby cluster, the same way (its replay, its walreceiver, its backends);
 * - the server process.
 *
 * Reported as medians of the rounds and the ratio (b) ÷ (a) of the same run,
 * with how many reads server (b) routed to the standby (its /metrics). Skipped,
 * not failed, when no Postgres answers, the primary is not on this machine (its
 * processes cannot be read), or no standby can be made (the reason is printed).
 *
 *   npx tsx bench/read-standbys.ts          (or npm run bench; about 1.5 minutes)
 *   BENCH_SECONDS=5 BENCH_ROUNDS=5 BENCH_CONNECTIONS=32 npx tsx bench/read-standbys.ts
 */
import { pathToFileURL } from 'node:url';
import type { Request } from 'autocannon';
import { generateLocalKey, mintToken } from '../src/auth/index.js';
import { startStandby, standbyToolsAvailable, type Standby } from '../test/helpers/standby.js';
import { backendDelta, backendPIDs, backendTicks, clusterTicks, msPer, TICKS_PER_SECOND, watchCluster, type Cluster } from './postgres-cpu.js';
import { AUDIENCE, appEnv, cpuTicks, DASHBOARD_LIST, loadRound, post, scratchDatabase, seed, startProcess, type Target } from './throughput.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
const log = (line: string) => console.error(`[read standbys] ${line}`);


/** One round of load on one server. */
interface Round {
  /** Reads served in the round. */
  reads: number;
  rps: number;
  p50: number;
  p99: number;
  /** CPU ms per read of the primary cluster, of the scratch database's backends on it, of the standby cluster, of the server. */
  primary: number;
  primaryBackends: number;
  standby: number;
  /** Primary and standby clusters together: where the database's work went. */
  databases: number;
  server: number;
}

/** Loads one server for SECONDS and measures its reads and the CPU each part spent on them. */
async function measureRound(target: Target, requests: Request[], headers: Record<string, string>, primary: Cluster, standby: Cluster, database: string): Promise<Round> {
  const pidsBefore = await backendPIDs(primary, database);
  const before = { primary: clusterTicks(primary.postmasterPID), backends: backendTicks(pidsBefore), standby: clusterTicks(standby.postmasterPID), server: cpuTicks(target.process) };
  const result = await loadRound(target, requests, headers, { seconds: SECONDS, connections: CONNECTIONS });
  const pidsAfter = await backendPIDs(primary, database);
  const after = { primary: clusterTicks(primary.postmasterPID), backends: backendTicks(pidsAfter), standby: clusterTicks(standby.postmasterPID), server: cpuTicks(target.process) };
  const reads = result.requests.total;
  return {
    reads,
    rps: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    primary: msPer(after.primary - before.primary, reads),
    primaryBackends: msPer(backendDelta(before.backends, after.backends), reads),
    standby: msPer(after.standby - before.standby, reads),
    databases: msPer(after.primary - before.primary + after.standby - before.standby, reads),
    server: msPer(after.server - before.server, reads),
  };
}

/** The list's answer (operation ids and whether each has a watch), so both servers are known to serve the same page. */
async function listPage(target: Target, headers: Record<string, string>): Promise<string> {
  const response = await fetch(`${target.url}/graphql`, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ query: DASHBOARD_LIST }) });
  const body = (await response.json()) as { data?: { operations: { edges: { node: { operationID: string; watch: unknown } }[] } }; errors?: unknown };
  const edges = body.data?.operations.edges ?? [];
  if (body.errors !== undefined || edges.length !== 50) throw new Error(`dashboard list on ${target.url}: ${JSON.stringify(body.errors ?? body.data)}`);
  return edges.map((e) => `${e.node.operationID}:${e.node.watch === null ? '-' : 'w'}`).join(' ');
}

/** `connector_store_reads_routed_total` of a server's /metrics, summed by target. */
async function readsRouted(target: Target): Promise<{ standby: number; primary: number }> {
  const text = await (await fetch(`${target.url}/metrics`)).text();
  const routed = { standby: 0, primary: 0 };
  for (const match of text.matchAll(/^connector_store_reads_routed_total\{([^}]*)\} (\S+)$/gm)) {
    const where = /target="(\w+)"/.exec(match[1]!)?.[1];
    if (where === 'standby' || where === 'primary') routed[where] += Number(match[2]);
  }
  return routed;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Runs the benchmark and prints its markdown table. */
export async function runReadStandbysBench(): Promise<void> {
  const tools = await standbyToolsAvailable();
  if (!tools.available) {
    console.log(`\nReads on a hot standby skipped: no standby can be made here: ${tools.reason}`);
    return;
  }
  const database = await scratchDatabase('postgres');
  if (database === undefined) {
    console.log('\nReads on a hot standby skipped: no Postgres reachable (set PG_TEST_URL).');
    return;
  }
  const databaseName = decodeURIComponent(new URL(database.url).pathname.slice(1));
  const servers: Target[] = [];
  const clusters: Cluster[] = [];
  let standby: Standby | undefined;
  try {
    const primary = await watchCluster(Object.assign(new URL(database.url), { pathname: '/postgres' }).toString());
    if (typeof primary === 'string') {
      console.log(`\nReads on a hot standby skipped: the primary's CPU cannot be measured: ${primary}`);
      return;
    }
    clusters.push(primary);
    const key = generateLocalKey();
    const token = await mintToken({ privateKey: key.privateKey, audience: AUDIENCE, ttlSeconds: 3_600 });
    const headers = { authorization: `Bearer ${token}` };
    const env = { DATABASE_URL: database.url, NODE_ENV: 'production', ...appEnv(key.did) };
    // The first server migrates the empty database; the standby is copied after the seed.
    const primaryOnly = await startProcess('scripts/start.mjs', env, '/readyz');
    servers.push(primaryOnly);
    await seed('postgres', database.url, key.did);
    log('making the standby (pg_basebackup of the test cluster)');
    standby = await startStandby({ database: databaseName });
    const standbyCluster = await watchCluster(standby.urlFor('postgres'));
    if (typeof standbyCluster === 'string') throw new Error(`the standby's CPU cannot be measured: ${standbyCluster}`);
    clusters.push(standbyCluster);
    const withStandby = await startProcess('scripts/start.mjs', { ...env, READ_DATABASE_URLS: standby.url }, '/readyz');
    servers.push(withStandby);

    if ((await listPage(primaryOnly, headers)) !== (await listPage(withStandby, headers))) throw new Error('the two servers list different pages');
    const requests = () => [post(() => ({ query: DASHBOARD_LIST }))];

    const runs = [
      { name: '(a) primary only', target: primaryOnly, rounds: [] as Round[] },
      { name: '(b) primary + 1 standby (`READ_DATABASE_URLS`)', target: withStandby, rounds: [] as Round[] },
    ];
    // The primary's own activity with both servers idle: what every round carries besides the reads.
    const idleSeconds = 3;
    const idleBefore = clusterTicks(primary.postmasterPID);
    await new Promise((r) => setTimeout(r, idleSeconds * 1_000));
    const idleMsPerSecond = ((clusterTicks(primary.postmasterPID) - idleBefore) / TICKS_PER_SECOND) * 1_000 / idleSeconds;
    for (const run of runs) await measureRound(run.target, requests(), headers, primary, standbyCluster, databaseName); // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      for (const run of runs) {
        const measured = await measureRound(run.target, requests(), headers, primary, standbyCluster, databaseName);
        run.rounds.push(measured);
        log(`round ${round + 1} ${run.name}: ${measured.rps.toFixed(0)} req/s, primary ${measured.primary.toFixed(3)} ms/read (its backends ${measured.primaryBackends.toFixed(3)}), standby ${measured.standby.toFixed(3)}, server ${measured.server.toFixed(2)}`);
      }
    }
    const routed = await readsRouted(withStandby);

    const m = (rounds: Round[], field: keyof Round) => median(rounds.map((r) => r[field]));
    const [a, b] = [runs[0]!.rounds, runs[1]!.rounds];
    // CPU is counted in whole ticks: a part that used none in a round is shown as below one tick per read.
    const tickMsPerRead = (rounds: Round[]) => 1_000 / TICKS_PER_SECOND / m(rounds, 'reads');
    const ms = (rounds: Round[], field: keyof Round) => (m(rounds, field) === 0 ? `< ${tickMsPerRead(rounds).toFixed(3)}` : m(rounds, field).toFixed(3));
    const ratio = (field: keyof Round) =>
      m(b, field) === 0 ? `< ${(tickMsPerRead(b) / m(a, field)).toFixed(2)}×` : `${(m(b, field) / m(a, field)).toFixed(2)}×`;
    console.log(`\n### Reads on a hot standby: the dashboard list (autocannon, ${CONNECTIONS} connections, ${ROUNDS} interleaved rounds × ${SECONDS} s, median; CPU ms per read from /proc)\n`);
    console.log(
      "| server | req/s | p50 / p99 ms | primary cluster CPU ms/read | primary: the scratch database's backends | standby cluster CPU ms/read | primary + standby | server CPU ms/read |",
    );
    console.log('|---|--:|--:|--:|--:|--:|--:|--:|');
    for (const run of runs) {
      const r = run.rounds;
      console.log(
        `| ${run.name} | ${m(r, 'rps').toFixed(0)} | ${m(r, 'p50').toFixed(1)} / ${m(r, 'p99').toFixed(1)} | ${ms(r, 'primary')} | ${ms(r, 'primaryBackends')} | ${ms(r, 'standby')} | ${ms(r, 'databases')} | ${m(r, 'server').toFixed(2)} |`,
      );
    }
    console.log(`| (b) ÷ (a) | ${ratio('rps')} | | **${ratio('primary')}** | **${ratio('primaryBackends')}** | | ${ratio('databases')} | ${ratio('server')} |`);
    console.log(
      `\nServer (b) routed ${routed.standby} reads to the standby and ${routed.primary} to the primary (warm-up included). ` +
        `The primary cluster idled at ${idleMsPerSecond.toFixed(0)} ms CPU/s with both servers idle (other databases' activity included). ` +
        `One clock tick is ${(1_000 / TICKS_PER_SECOND).toFixed(0)} ms.`,
    );
  } finally {
    for (const server of servers) server.process.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    for (const cluster of clusters) await cluster.client.end().catch(() => {});
    await standby?.destroy();
    await database.drop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await runReadStandbysBench();
