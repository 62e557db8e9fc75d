/**
 * The write-back runtime against the Postgres-backed queue a user would pick
 * instead, graphile-worker (issue 40 item 4), side by side on the same
 * Postgres server, each in a scratch database this creates and drops, with the
 * same number of worker processes, the same concurrency and the same number of
 * jobs, each job doing nothing:
 *
 * - **graphile-worker** (0.17.3, bench/queue-peer/graphile-noop-worker.ts):
 *   no-op jobs added with `addJobs` in batches of 100 (two batches at a time),
 *   then fetched, run and completed by W worker processes of concurrency C, as
 *   its documentation recommends for throughput (a local queue of
 *   concurrency + 1 per process, completion batched); and, unless
 *   QUEUE_PEER_GRAPHILE_DEFAULTS=0, again with its defaults (one fetch and one
 *   completion per job);
 * - **ours**: a server process started as bench/write-back-workers.ts starts
 *   it, warmed up with 100 operations; no-op write-backs enqueued with
 *   `enqueueOperations` (batches of 100, two at a time), then leased, started,
 *   marked sent and finalized by W worker processes running `runWorker`
 *   (bench/queue-peer/noop-write-back-worker.ts: the runtime's defaults, a
 *   handler that marks the send and reports it committed at once).
 *
 * Per phase (adding, then running until every job is done) it reports jobs/s
 * (running: from the moment the worker processes, all loaded, are told to
 * start, to the last job done, seen in the database every 10 ms), Postgres CPU
 * per job (the scratch database's backends, /proc/PID/schedstat: other users of
 * the server cannot move it; and, in a note, the whole cluster, which includes
 * its WAL writer and whatever else runs on it), statements per job (counted in
 * every process that talks to the database, by
 * bench/queue-peer/count-statements.ts: the test server has no
 * pg_stat_statements), the queue's own processes' CPU (graphile-worker's
 * workers; our server and workers), and ours ÷ graphile-worker. Exactly once
 * is checked for ours: every operation COMMITTED, each applied once by the
 * handlers, each finalized once by the runtimes. Then where the statements of
 * a job go.
 *
 *   npx tsx bench/queue-peer.ts     (or npm run bench; about a minute)
 *   QUEUE_PEER_JOBS=2000 QUEUE_PEER_WORKERS=4 QUEUE_PEER_CONCURRENCY=16 npx tsx bench/queue-peer.ts
 *   (also QUEUE_PEER_GRAPHILE_LOCAL_QUEUE, QUEUE_PEER_WARM_UP, QUEUE_PEER_TIMEOUT_MS)
 *   QUEUE_PEER_CPU_PROF=/tmp/prof QUEUE_PEER_GRAPHILE_DEFAULTS=0 npx tsx bench/queue-peer.ts
 *   (our server and measured worker processes under `node --cpu-prof`, profiles left in that directory)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import pg from 'pg';
import { Logger, makeWorkerUtils, runMigrations } from 'graphile-worker';
import { storeClientFromKeyFile } from '../client/key-file.js';
import { MAX_ENQUEUE_BATCH } from '../client/runtime/index.js';
import { makeWorkerKey, startServer } from '../examples/write-back-worker/run.js';
import { enqueueOperations } from '../examples/write-back-worker/scenario.js';
import { backendNanoseconds, backendPIDs, clusterTicks, msPer, statFields, watchCluster, type Cluster } from './postgres-cpu.js';
import { countPoolStatements, tallySince, tallySum, type StatementTally } from './queue-peer/count-statements.js';
import { scratchDatabase } from './throughput.js';

// 3 000: long enough that each process's start (its first requests, a subscription's first stream) is a small share of the run.
const JOBS = Number(process.env.QUEUE_PEER_JOBS ?? 3_000);
const WORKERS = Number(process.env.QUEUE_PEER_WORKERS ?? 4);
const CONCURRENCY = Number(process.env.QUEUE_PEER_CONCURRENCY ?? 16);
const GRAPHILE_DEFAULTS = process.env.QUEUE_PEER_GRAPHILE_DEFAULTS !== '0';
/** graphile-worker's local queue per process: its documentation's starting point, concurrency + 1. */
const LOCAL_QUEUE_SIZE = Number(process.env.QUEUE_PEER_GRAPHILE_LOCAL_QUEUE ?? CONCURRENCY + 1);
const WARM_UP = Number(process.env.QUEUE_PEER_WARM_UP ?? 100);
const TIMEOUT_MS = Number(process.env.QUEUE_PEER_TIMEOUT_MS ?? 300_000);
/** A directory: our server and worker processes run under `node --cpu-prof` and leave their profiles there. */
const CPU_PROF_DIR = process.env.QUEUE_PEER_CPU_PROF;
const CPU_PROF_ARGS = CPU_PROF_DIR === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${CPU_PROF_DIR}`];
/** Adding: batches of at most 100 (the most `enqueueOperations` takes), two at a time, for both. */
const ADD_BATCH = MAX_ENQUEUE_BATCH;
const ADD_IN_PARALLEL = 2;
const AUDIENCE = 'connector-store-bench-queue-peer';
/** How often the benchmark looks for the last job done. */
const POLL_MS = 10;

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TSX_LOADER = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;
const COUNT_STATEMENTS = join(ROOT, 'bench/queue-peer/count-statements.ts');
const log = (line: string) => console.error(`[queue peer] ${line}`);
/** graphile-worker's errors and warnings only. */
const quietLogger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') log(`graphile-worker ${level}: ${message}`);
});
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The database being measured, watched from outside it. */
interface Watch {
  cluster: Cluster;
  database: string;
  /** A connection to the measured database, for the benchmark's own reads; its backend is left out of the sums. */
  probe: pg.Client;
  probePID: number;
}

/** CPU so far of the cluster (ticks), of the measured database's backends (ns, by pid), and of the queue's own processes (ms). */
interface Reading {
  at: number;
  cluster: number;
  backends: Map<number, number>;
  processes: number;
}

/** What one phase (adding, or running) cost. */
interface Phase {
  jobs: number;
  ms: number;
  /** Postgres CPU: the measured database's backends (ns), the whole cluster (ticks). */
  backendNs: number;
  clusterTicks: number;
  /** CPU ms of the queue's own processes (graphile-worker's workers; our server and workers), each worker from when it was loaded. */
  processMs: number;
  statements: StatementTally;
}

interface Result {
  queue: string;
  add: Phase;
  run: Phase;
  exactlyOnce: string;
  /** Our workers' `WorkerCounters`, summed. */
  counters?: Record<string, number>;
  /** Of the running phase's process CPU, our server's (ms); the rest is the worker processes'. */
  serverRunMs?: number;
}

/** CPU ms so far of `pids` (every thread; /proc/PID/stat). */
const processMs = (pids: readonly number[]) =>
  msPer(
    pids.reduce((sum, pid) => {
      const fields = statFields(pid);
      return sum + (fields === undefined ? 0 : Number(fields[11]) + Number(fields[12]));
    }, 0),
    1,
  );

async function reading(watch: Watch, processes: readonly number[]): Promise<Reading> {
  const pids = (await backendPIDs(watch.cluster, watch.database)).filter((pid) => pid !== watch.probePID);
  return { at: performance.now(), cluster: clusterTicks(watch.cluster.postmasterPID), backends: backendNanoseconds(pids), processes: processMs(processes) };
}

/** CPU between two readings; a backend that started in between counts from 0 (one that ended in between is missed: pools keep theirs). */
function phase(jobs: number, before: Reading, after: Reading, statements: StatementTally, ms = after.at - before.at): Phase {
  let backends = 0;
  for (const [pid, now] of after.backends) backends += now - (before.backends.get(pid) ?? 0);
  return { jobs, ms, backendNs: backends, clusterTicks: after.cluster - before.cluster, processMs: after.processes - before.processes, statements };
}

/** A script in its own process (a TypeScript one through tsx), its stdout JSON lines collected. */
interface Child {
  process: ChildProcess;
  lines: Record<string, unknown>[];
  exited: Promise<void>;
}

function spawnScript(script: string, env: Record<string, string>, imports: readonly string[] = [], nodeArgs: readonly string[] = []): Child {
  const args = script.endsWith('.mjs') ? [...nodeArgs, script] : ['--import', TSX_LOADER, ...imports.flatMap((file) => ['--import', pathToFileURL(file).href]), join(ROOT, script)];
  const child = spawn(process.execPath, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const lines: Record<string, unknown>[] = [];
  let partial = '';
  child.stdout!.setEncoding('utf8').on('data', (chunk: string) => {
    const parts = (partial + chunk).split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) if (line.startsWith('{')) lines.push(JSON.parse(line) as Record<string, unknown>);
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { process: child, lines, exited };
}

/** SIGTERM (they drain), SIGKILL after 20 s. */
async function stopChildren(children: readonly Child[]): Promise<void> {
  await Promise.all(
    children.map(async (child) => {
      if (child.process.exitCode !== null || child.process.signalCode !== null) return;
      child.process.kill('SIGTERM');
      const timer = setTimeout(() => child.process.kill('SIGKILL'), 20_000);
      await child.exited;
      clearTimeout(timer);
    }),
  );
}

/** Polls `count` every {@link POLL_MS} until it reaches `done`; the time it was first seen there. */
async function waitUntilDone(count: () => Promise<number>, done: number, what: string): Promise<number> {
  const deadline = Date.now() + TIMEOUT_MS;
  let last = -1;
  let lastLog = Date.now();
  for (;;) {
    const now = await count();
    if (now === done) return Date.now();
    if (Date.now() > deadline) throw new Error(`${what}: ${now} after ${TIMEOUT_MS} ms (want ${done})`);
    if (Date.now() - lastLog > 5_000 && now !== last) {
      log(`${what}: ${now} (want ${done})`);
      lastLog = Date.now();
      last = now;
    }
    await sleep(POLL_MS);
  }
}

/** Waits until every worker is loaded (its `readyCPUms` line), then starts them all at once (a line on each one's stdin); when. */
async function startTogether(children: readonly Child[]): Promise<number> {
  const deadline = Date.now() + 60_000;
  while (!children.every((child) => child.lines.some((line) => line.readyCPUms !== undefined))) {
    if (children.some((child) => child.process.exitCode !== null || child.process.signalCode !== null)) throw new Error('a worker process ended before it was ready');
    if (Date.now() > deadline) throw new Error('the worker processes were not ready within 60 s');
    await sleep(POLL_MS);
  }
  for (const child of children) child.process.stdin!.end('go\n');
  return Date.now();
}

/** The workers' CPU, ms, when each was loaded (their `readyCPUms` lines). */
function readyCPU(children: readonly Child[]): number {
  return children.reduce((sum, child) => sum + ((child.lines.find((line) => typeof line.readyCPUms === 'number')?.readyCPUms as number | undefined) ?? 0), 0);
}

/** Each worker's `applied` line, summed: how many times each job or operation was applied. */
function appliedCounts(children: readonly Child[]): Map<string, number> {
  const applied = new Map<string, number>();
  for (const child of children)
    for (const line of child.lines) {
      if (typeof line.applied !== 'object' || line.applied === null) continue;
      for (const [key, times] of Object.entries(line.applied as Record<string, number>)) applied.set(key, (applied.get(key) ?? 0) + times);
    }
  return applied;
}

async function withScratchDatabase<T>(body: (url: string, watch: Watch) => Promise<T>): Promise<T | undefined> {
  const database = await scratchDatabase('postgres');
  if (database === undefined) return undefined;
  const url = new URL(database.url);
  const name = url.pathname.slice(1);
  let cluster: Cluster | string | undefined;
  const probe = new pg.Client({ connectionString: database.url });
  try {
    cluster = await watchCluster(Object.assign(new URL(database.url), { pathname: '/postgres' }).toString());
    if (typeof cluster === 'string') throw new Error(`Postgres CPU cannot be read here: ${cluster}`);
    await probe.connect();
    const probePID = (await probe.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
    return await body(database.url, { cluster, database: name, probe, probePID });
  } finally {
    await probe.end().catch(() => {});
    if (typeof cluster === 'object') await cluster.client.end();
    await database.drop();
  }
}

/** `items` in batches of {@link ADD_BATCH}, {@link ADD_IN_PARALLEL} batches at a time. */
async function inBatches(count: number, add: (first: number, size: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: ADD_IN_PARALLEL }, async () => {
      while (next < count) {
        const first = next;
        next += ADD_BATCH;
        await add(first, Math.min(ADD_BATCH, count - first));
      }
    }),
  );
}

/** graphile-worker: no-op jobs added, then run by {@link WORKERS} processes of {@link CONCURRENCY}. */
async function graphileWorker(batching: boolean): Promise<Result | undefined> {
  return withScratchDatabase(async (url, watch) => {
    const queue = batching ? `graphile-worker 0.17.3, batched (local queue of ${LOCAL_QUEUE_SIZE}, completion batched)` : 'graphile-worker 0.17.3, its defaults';
    await runMigrations({ connectionString: url, logger: quietLogger });
    const dir = mkdtempSync(join(tmpdir(), 'cs-bench-queue-peer-'));
    const pool = new pg.Pool({ connectionString: url, max: ADD_IN_PARALLEL });
    pool.on('error', (error) => log(`add pool: ${error.message}`));
    const children: Child[] = [];
    try {
      log(`${queue}: adding ${JOBS} jobs`);
      const poolStatements = countPoolStatements(pool);
      const utils = await makeWorkerUtils({ pgPool: pool, logger: quietLogger });
      const addStatementsBefore = structuredClone(poolStatements);
      let before = await reading(watch, []);
      await inBatches(JOBS, async (first, size) => {
        await utils.addJobs(Array.from({ length: size }, (_, k) => ({ identifier: 'noop', payload: { i: first + k } })));
      });
      const add = phase(JOBS, before, await reading(watch, []), tallySince(poolStatements, addStatementsBefore));
      await utils.release();

      log(`${queue}: running them`);
      before = await reading(watch, []);
      for (let i = 0; i < WORKERS; i++) {
        children.push(
          spawnScript(
            'bench/queue-peer/graphile-noop-worker.ts',
            { DATABASE_URL: url, CONCURRENCY: String(CONCURRENCY), GRAPHILE_BATCHING: batching ? '1' : '0', LOCAL_QUEUE_SIZE: String(LOCAL_QUEUE_SIZE), STATEMENT_COUNT_FILE: join(dir, `statements-${i}.json`) },
            [COUNT_STATEMENTS],
          ),
        );
      }
      const startedAt = await startTogether(children);
      const doneAt = await waitUntilDone(async () => Number((await watch.probe.query<{ n: string }>('select count(*) as n from graphile_worker._private_jobs')).rows[0]!.n), 0, `${queue}: jobs left`);
      const after = await reading(
        watch,
        children.map((child) => child.process.pid!),
      );
      // The workers began after `before`: their CPU from when they were loaded.
      const workersBefore = { ...before, processes: readyCPU(children) };
      await stopChildren(children);
      const statements = tallySum(children.map((_, i) => JSON.parse(readFileSync(join(dir, `statements-${i}.json`), 'utf8')) as StatementTally));
      const run = phase(JOBS, workersBefore, after, statements, doneAt - startedAt);
      const applied = appliedCounts(children);
      const twice = [...applied.values()].filter((times) => times > 1).length;
      return { queue, add, run, exactlyOnce: applied.size === JOBS && twice === 0 ? `each of ${JOBS} ran once` : `${applied.size} ran, ${twice} more than once` };
    } finally {
      await stopChildren(children);
      await pool.end().catch(() => {});
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

/** The server's statement tally now (it writes it on SIGUSR2). */
async function serverStatements(pid: number, file: string): Promise<StatementTally> {
  const writes = () => (existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { writes: number }).writes : 0);
  const seen = writes();
  process.kill(pid, 'SIGUSR2');
  for (let i = 0; i < 500; i++) {
    await sleep(10);
    if (writes() !== seen) return JSON.parse(readFileSync(file, 'utf8')) as StatementTally;
  }
  throw new Error('the server did not write its statement count');
}

/** Ours: a server, no-op write-backs enqueued, then run by {@link WORKERS} `runWorker` processes of {@link CONCURRENCY}. */
async function writeBackRuntime(): Promise<Result | undefined> {
  return withScratchDatabase(async (url, watch) => {
    const queue = 'ours: runWorker through the server';
    const dir = mkdtempSync(join(tmpdir(), 'cs-bench-queue-peer-'));
    const { keyFile, did } = await makeWorkerKey(dir);
    const statementFile = join(dir, 'server-statements.json');
    const server = await startServer(
      { DATABASE_URL: url, SERVICE_DIDS: did, AUTH_AUDIENCE: AUDIENCE, RETENTION_INTERVAL_MS: '0', STATEMENT_COUNT_FILE: statementFile, STATEMENT_COUNT_SIGNAL: 'SIGUSR2' },
      ['--import', pathToFileURL(COUNT_STATEMENTS).href, ...CPU_PROF_ARGS],
    );
    const client = await storeClientFromKeyFile(keyFile, { url: server.url, audience: AUDIENCE });
    const children: Child[] = [];
    // As a connector deploys it: built JavaScript (esbuild, like the example's scenario), not TypeScript compiled by tsx on load.
    const worker = join(dir, 'noop-write-back-worker.mjs');
    await build({ entryPoints: [join(ROOT, 'bench/queue-peer/noop-write-back-worker.ts')], outfile: worker, bundle: true, platform: 'node', format: 'esm', target: 'node20', logLevel: 'error' });
    const workerEnv = (connector: string) => ({ STORE_URL: server.url, KEY_FILE: keyFile, AUDIENCE, CONNECTOR: connector, CONCURRENCY: String(CONCURRENCY) });
    const states = async (connector: string) => {
      const rows = (await watch.probe.query<{ state: string; n: string }>('select state, count(*) as n from kubun_connector_operation where connector_name = $1 group by state', [connector])).rows;
      return Object.fromEntries(rows.map((row) => [row.state, Number(row.n)])) as Record<string, number>;
    };
    try {
      // Warm-up, not measured: the server's first requests compile documents and warm its JIT; graphile-worker's
      // counterpart is Postgres itself, already running.
      if (WARM_UP > 0) {
        log(`${queue}: warming the server up with ${WARM_UP} operations`);
        const connector = `warm-up-${Date.now().toString(36)}`;
        await enqueueOperations(client, connector, { operations: WARM_UP });
        const warmer = spawnScript(worker, workerEnv(connector));
        children.push(warmer);
        await startTogether([warmer]);
        await waitUntilDone(async () => (await states(connector)).committed ?? 0, WARM_UP, `${queue}: warm-up`);
        await stopChildren([warmer]);
        children.length = 0;
      }

      const connector = `queue-peer-${Date.now().toString(36)}`;
      log(`${queue}: enqueueing ${JOBS} operations`);
      let statementsBefore = await serverStatements(server.pid, statementFile);
      let before = await reading(watch, [server.pid]);
      await enqueueOperations(client, connector, { operations: JOBS });
      let after = await reading(watch, [server.pid]);
      const add = phase(JOBS, before, after, tallySince(await serverStatements(server.pid, statementFile), statementsBefore));

      log(`${queue}: running them`);
      statementsBefore = await serverStatements(server.pid, statementFile);
      before = await reading(watch, [server.pid]);
      const serverBefore = before.processes;
      for (let i = 0; i < WORKERS; i++) children.push(spawnScript(worker, workerEnv(connector), [], CPU_PROF_ARGS));
      const startedAt = await startTogether(children);
      const doneAt = await waitUntilDone(async () => {
        const now = await states(connector);
        return (now.committed ?? 0) + (now.dead ?? 0);
      }, JOBS, `${queue}: operations finished`);
      after = await reading(watch, [server.pid, ...children.map((child) => child.process.pid!)]);
      const serverRunMs = processMs([server.pid]) - serverBefore;
      await stopChildren(children);
      // The server from `before`; the workers, which began after it, from when they were loaded.
      before = { ...before, processes: before.processes + readyCPU(children) };
      const run = phase(JOBS, before, after, tallySince(await serverStatements(server.pid, statementFile), statementsBefore), doneAt - startedAt);

      // Exactly once: every operation COMMITTED, each applied once by a handler, each finalized once by a runtime.
      const finalStates = await states(connector);
      const applied = appliedCounts(children);
      const expected = Array.from({ length: JOBS }, (_, i) => `${connector}-${i}`);
      const notOnce = expected.filter((operationID) => applied.get(operationID) !== 1);
      const counters: Record<string, number> = {};
      for (const child of children) for (const [name, value] of Object.entries((child.lines.find((line) => line.counters !== undefined)?.counters ?? {}) as Record<string, number>)) counters[name] = (counters[name] ?? 0) + value;
      const finalized = counters.committed ?? 0;
      const ok = finalStates.committed === JOBS && notOnce.length === 0 && applied.size === JOBS && finalized === JOBS;
      const exactlyOnce = ok
        ? `yes: ${JOBS} COMMITTED, each applied once, ${finalized} finalized`
        : `NO: states ${JSON.stringify(finalStates)}, ${notOnce.length} not applied exactly once, ${applied.size} applied, ${finalized} finalized`;
      return { queue, add, run, exactlyOnce, counters, serverRunMs };
    } finally {
      await stopChildren(children);
      client.dispose();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });
}

/** Postgres CPU of the measured database's backends per job, ms. */
const backendMsPerJob = (...phases: Phase[]) => phases.reduce((sum, p) => sum + p.backendNs, 0) / 1e6 / JOBS;
const statementsPerJob = (...phases: Phase[]) => phases.reduce((sum, p) => sum + p.statements.total, 0) / JOBS;
const processMsPerJob = (...phases: Phase[]) => phases.reduce((sum, p) => sum + p.processMs, 0) / JOBS;
const rate = (p: Phase) => p.jobs / (p.ms / 1000);
const fixed = (value: number, digits = 2) => value.toFixed(digits);
const times = (a: number, b: number) => `${(a / b).toFixed(2)}×`;

/** Runs the benchmark and prints its markdown tables. */
export async function runQueuePeerBench(): Promise<void> {
  const results: Result[] = [];
  const peer = await graphileWorker(true);
  if (peer === undefined) {
    console.log('\n(queue peer: no Postgres on 127.0.0.1:5432, skipped)');
    return;
  }
  results.push(peer);
  if (GRAPHILE_DEFAULTS) results.push((await graphileWorker(false))!);
  const ours = (await writeBackRuntime())!;
  results.push(ours);

  console.log(`\n### The write-back runtime against graphile-worker (issue 40 item 4): ${JOBS} no-op jobs, ${WORKERS} worker processes × concurrency ${CONCURRENCY}\n`);
  console.log('| queue | add: jobs/s | add: Postgres CPU ms/job | add: statements/job | run: jobs/s | run: Postgres CPU ms/job | run: statements/job | add + run: Postgres CPU ms/job | add + run: statements/job | queue processes CPU ms/job | exactly once |');
  console.log('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|');
  for (const { queue, add, run, exactlyOnce } of results) {
    console.log(
      `| ${queue} | ${fixed(rate(add), 0)} | ${fixed(backendMsPerJob(add), 3)} | ${fixed(statementsPerJob(add))} | ${fixed(rate(run), 0)} | ${fixed(backendMsPerJob(run), 3)} | ${fixed(statementsPerJob(run))} | ${fixed(backendMsPerJob(add, run), 3)} | ${fixed(statementsPerJob(add, run))} | ${fixed(processMsPerJob(add, run))} | ${exactlyOnce} |`,
    );
  }
  console.log(
    `| **ours ÷ graphile-worker, batched** | ${times(rate(ours.add), rate(peer.add))} | ${times(backendMsPerJob(ours.add), backendMsPerJob(peer.add))} | ${times(statementsPerJob(ours.add), statementsPerJob(peer.add))} | **${times(rate(ours.run), rate(peer.run))}** | ${times(backendMsPerJob(ours.run), backendMsPerJob(peer.run))} | ${times(statementsPerJob(ours.run), statementsPerJob(peer.run))} | **${times(backendMsPerJob(ours.add, ours.run), backendMsPerJob(peer.add, peer.run))}** | ${times(statementsPerJob(ours.add, ours.run), statementsPerJob(peer.add, peer.run))} | ${times(processMsPerJob(ours.add, ours.run), processMsPerJob(peer.add, peer.run))} | |`,
  );
  console.log(
    `\nIssue 40's goal: ours at ≥ 0.5× graphile-worker's throughput (run: ${times(rate(ours.run), rate(peer.run))}) and ≤ 2× its Postgres CPU per job (add + run: ${times(backendMsPerJob(ours.add, ours.run), backendMsPerJob(peer.add, peer.run))}), exactly once intact. ` +
      `Run: from the worker processes, loaded, told to start together to the last job done (seen in the database every ${POLL_MS} ms); adding: batches of ${ADD_BATCH}, ${ADD_IN_PARALLEL} at a time, for both. ` +
      'Postgres CPU: the scratch database’s backends, from /proc/PID/schedstat. ' +
      'Statements: every query a process sent to Postgres (BEGIN and COMMIT included), counted in graphile-worker’s processes (and the adding pool) and in our server. ' +
      'Queue processes: graphile-worker’s worker processes; our server and worker processes (all on the same 2 cores as Postgres), from /proc/PID/stat, each worker from when it was loaded.',
  );
  console.log(
    `\nThe whole Postgres cluster (its WAL writer and checkpointer, and whatever else runs on the server), ms per job, add / run: ${results
      .map(({ queue, add, run }) => `${queue.split(',')[0]}${queue.includes('defaults') ? ' (defaults)' : ''} ${fixed(msPer(add.clusterTicks, JOBS), 2)} / ${fixed(msPer(run.clusterTicks, JOBS), 2)}`)
      .join('; ')}.`,
  );
  if (ours.serverRunMs !== undefined) console.log(`\nOur queue processes' CPU per job while running: the server ${fixed(ours.serverRunMs / JOBS)} ms, the worker processes ${fixed((ours.run.processMs - ours.serverRunMs) / JOBS)} ms.`);
  if (ours.counters !== undefined) console.log(`\nOur workers' counters, summed: ${Object.entries(ours.counters).map(([name, value]) => `${name} ${value}`).join(', ')}.`);

  console.log('\nWhere the statements of a job go (per job, the most frequent first):\n');
  console.log('| queue | phase | statement (its first 60 and last 40 characters) | per job |');
  console.log('|---|---|---|--:|');
  for (const result of results) {
    for (const phaseName of ['add', 'run'] as const) {
      const top = Object.entries(result[phaseName].statements.byText)
        .sort((a, b) => b[1] - a[1])
        .slice(0, result === ours && phaseName === 'run' ? 16 : 4);
      for (const [text, count] of top) console.log(`| ${result.queue.split(' (')[0]} | ${phaseName} | \`${text.replace(/\|/g, '\\|').replace(/`/g, "'")}\` | ${fixed(count / JOBS, 3)} |`);
    }
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await runQueuePeerBench();
