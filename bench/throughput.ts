/**
 * Throughput against baselines, over real HTTP with autocannon: the server
 * (`src/server/main.ts` in its own process) against, in the same run and in
 * interleaved rounds, a bare yoga server with one field and a raw-SQL
 * `node:http` handler that issues the store's statements directly
 * (bench/baselines/raw-sql.ts), on SQLite and on Postgres. Prints req/s,
 * p50/p99 latency and CPU of the server process per request (from
 * /proc/PID/stat), each with the ratio to its baseline. Absolute numbers are
 * noise on a shared machine (autocannon, the servers and Postgres share its
 * two cores); the ratios, measured side by side, are the claim.
 *
 * On Postgres the baselines name their statements and plan each run, as the
 * server does on a direct connection (src/db/named-statements.ts), so the
 * database does the same work for each target and the ratios measure the
 * servers; BASELINE_UNNAMED=1 has them send every statement unnamed, as
 * Kysely does (Postgres then parses each run again). What each target asked
 * of the database is printed as the CPU of every `postgres` process on the
 * machine over its rounds, per request.
 *
 * A peer on Postgres (issue 21 item 1): PostGraphile v5, 5.1.5 (its newest
 * release; it declares Node >= 22 but on Node 20 lacks only
 * `Promise.withResolvers`, polyfilled in its process alone), a package of its
 * own (bench/peers/postgraphile/: its package.json pins the tree's grafast,
 * grafserv, pg-sql2 … by `overrides`; installed from its lock by the first run
 * that needs it, so the project's `npm ci` stays free of its engine warnings),
 * started in its own process (bench/peers/postgraphile/server.ts:
 * amber preset, grafserv on node:http, no GraphiQL, no watch, no explain, the
 * schema built once at start) over the same seeded database, measured in the
 * same interleaved rounds for `{ __typename }` and the dashboard list, with its
 * CPU, p99 and the RSS of both processes after the run (VmRSS, VmHWM from
 * /proc/PID/status; issue 21's goal for the app is <= 200 MiB). Its list
 * document is POSTGRAPHILE_LIST below: `allKubunConnectorOperations(first: 50,
 * orderBy: [CREATED_AT_DESC, NODE_KEY_DESC])` with the same fields and the
 * watch through a relation declared by smart tags in that process (operation
 * (owner_did, model, document_id) -> watch, the migrations' unique index
 * uq_connector_watch_ingress; no constraint on document_id alone is possible,
 * it is not unique on watches). The benchmark checks once that both answers
 * list the same 50 operations in the same order with the same watches. What
 * differs: PostGraphile answers with one statement (operations LEFT JOIN
 * watches ... LIMIT 51), the app with two (the page, then the page's watches by
 * document_id, newest per document); PostGraphile's join needs the watch's
 * owner and model to equal the operation's, the app takes a document's newest
 * watch under any owner (the same rows here); `createdAt` is the bigint as a
 * string, not an ISO date; its node ids encode the primary key. Visibility is
 * the same: PostGraphile runs as the database owner with no role, pgSettings or
 * row-level security, and the app's viewer is a service principal, which
 * reads every row. The claim and write-back scenarios have no PostGraphile
 * column: it has no equivalent of the fenced lease protocol.
 *
 * A second peer on Postgres (issue 40 item 6): fastify 5 + mercurius 16 with
 * graphql-jit (`jit: 1`), the best-built bare GraphQL server on Node, running
 * for the dashboard list the app's very statements: captured on the wire from
 * the app (bench/sql-capture.ts), and checked the same way against the
 * baseline's (names, texts, parameters) and its answer's bytes against the
 * app's before it is measured (startMercuriusOnAppSQL, bench/baselines/mercurius.ts).
 * Its table has app ÷ mercurius and the app's p99 over the jit floor's.
 *
 * Scenarios (the dashboard list reads a table seeded by SQL with 10 000 operations):
 * - `{ __typename }` with a reused bearer token vs a bare yoga server (and PostGraphile);
 * - dashboard list: `operations(first: 50) { … watch }` vs the same two SELECTs (and PostGraphile's one);
 * - claim of new keys vs SELECT + INSERT … RETURNING + NOTIFY;
 * - the write-back sequence claim → start → sent → finalize, per sequence.
 *
 *   npx tsx bench/throughput.ts          (or npm run bench; about 3 minutes)
 *   BENCH_SECONDS=5 BENCH_ROUNDS=3 BENCH_CONNECTIONS=32 BENCH_IDLE_SECONDS=30 BENCH_DIALECTS=postgres npx tsx bench/throughput.ts
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import autocannon, { type Request } from 'autocannon';
import pg from 'pg';
import SQLite from 'better-sqlite3';
import { randomBytes } from 'node:crypto';
import { generateLocalKey, mintToken } from '../src/auth/index.js';
import { startSQLCapture } from './sql-capture.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);
/** How long the processes idle after the last round before their RSS is read again. */
const IDLE_SECONDS = Number(process.env.BENCH_IDLE_SECONDS ?? 30);
const DIALECTS = (process.env.BENCH_DIALECTS ?? 'sqlite,postgres').split(',');
/** Substrings of scenario names to run (default all): BENCH_SCENARIOS=typename,list */
const ONLY = (process.env.BENCH_SCENARIOS ?? '').split(',').filter((s) => s !== '');
/**
 * Extra environment of the app server (e.g. BENCH_APP_ENV=METRICS=false), to measure what a
 * setting costs; every benchmark that starts the app reads it.
 */
export const APP_ENV: Record<string, string> = Object.fromEntries((process.env.BENCH_APP_ENV ?? '').split(',').filter((s) => s.includes('=')).map((s) => [s.slice(0, s.indexOf('=')), s.slice(s.indexOf('=') + 1)]));

/** Space-separated flags for node (V8's too) from the variable `name`, e.g. GC_NODE_ARGS='--max-semi-space-size=8'. */
export function nodeArgsFrom(name: string): string[] {
  return (process.env[name] ?? '').split(' ').filter((arg) => arg !== '');
}
const ROWS = 10_000;
/** The audience of the benchmark's tokens. */
export const AUDIENCE = 'connector-store-bench';

/**
 * The app's environment in every benchmark that starts it (throughput,
 * profile, instructions): `serviceDID` is a service principal (it reads
 * every row, as the baselines do), quiet logs, no retention job, no rate
 * limits (the load comes from one address and one viewer).
 */
export function appEnv(serviceDID: string): Record<string, string> {
  return { AUTH_AUDIENCE: AUDIENCE, SERVICE_DIDS: serviceDID, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0', RATE_LIMIT_PER_VIEWER: '0', RATE_LIMIT_PER_IP: '0' };
}

/** Prints a markdown table under a heading (nothing when it has no rows). */
function printTable(heading: string, header: string, align: string, rows: readonly string[]): void {
  if (rows.length === 0) return;
  console.log(`\n### ${heading}\n`);
  console.log(header);
  console.log(align);
  for (const row of rows) console.log(row);
}
const ROOT = fileURLToPath(new URL('..', import.meta.url));
const TICKS_PER_SECOND = 100; // USER_HZ on Linux

export interface Target {
  url: string;
  process: ChildProcess;
}

/**
 * Installs the peer package bench/peers/`name` from its lock when it has not
 * been, or its lock changed since (`npm ci` there; npm's own warnings are
 * not shown: PostGraphile's tree declares Node >= 22 and runs here anyway).
 */
export function installPeer(name: string): void {
  const dir = join(ROOT, 'bench/peers', name);
  const installed = join(dir, 'node_modules/.package-lock.json');
  if (existsSync(installed) && statSync(installed).mtimeMs >= statSync(join(dir, 'package-lock.json')).mtimeMs) return;
  console.log(`Installing the ${name} peer (bench/peers/${name}, npm ci) …`);
  execFileSync('npm', ['ci', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, stdio: ['ignore', 'ignore', 'inherit'] });
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/**
 * The flags `npm start` gives node (package.json's `start` script, e.g.
 * `--max-semi-space-size=32`): every benchmark that starts scripts/start.mjs
 * passes them, so the app runs as `npm start` runs it.
 */
export function startNodeArgs(): string[] {
  const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: { start: string } };
  const words = scripts.start.split(/\s+/);
  return words.slice(words.indexOf('node') + 1, words.indexOf('scripts/start.mjs')).filter((word) => word.startsWith('--'));
}

/**
 * Starts `script` as a process on a free loopback port and waits for `readyPath`:
 * TypeScript through tsx, JavaScript (`scripts/start.mjs`, the app as `npm start` runs it, with its node flags) as is.
 */
export async function startProcess(script: string, env: Record<string, string>, readyPath: string, nodeArgs: string[] = []): Promise<Target> {
  const port = await freePort();
  const loader = script.endsWith('.mjs') ? [] : ['--import', 'tsx'];
  const flags = script === 'scripts/start.mjs' ? startNodeArgs() : [];
  const child = spawn(process.execPath, [...flags, ...nodeArgs, ...loader, script], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', HOST: '127.0.0.1', PORT: String(port), ...env },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 300; i++) {
    if (child.exitCode !== null) throw new Error(`${script} exited: ${stderr}`);
    try {
      const response = await fetch(url + readyPath);
      if (response.ok) return { url, process: child };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error(`${script} did not become ready: ${stderr}`);
}

export function cpuTicks(child: ChildProcess): number {
  // Fields after the command name: state is field 3, utime 14, stime 15.
  const stat = readFileSync(`/proc/${child.pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(fields[11]) + Number(fields[12]);
}

export interface Measured {
  rps: number;
  p50: number;
  p99: number;
  cpuMsPerRequest: number;
  /** CPU of every `postgres` process on this machine per request (0 on SQLite): what the target asked of the database. */
  dbCpuMsPerRequest: number;
  /** Of the requests answered, the share refused with a retryable 503 (0 unless the load counts refusals). */
  refusedShare: number;
}

/** CPU ticks of each process named `postgres` (the server and its backends) on this machine, by pid. */
function postgresTicks(): Map<string, number> {
  const ticks = new Map<string, number>();
  for (const pid of readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (!stat.includes('(postgres)')) continue;
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      ticks.set(pid, Number(fields[11]) + Number(fields[12]));
    } catch {
      // ended meanwhile
    }
  }
  return ticks;
}

/**
 * The ticks `postgres` processes spent between two readings: a backend that
 * began after `before` counts whole; one that ended before `after` is not
 * seen (pools close idle connections: those of targets idle meanwhile).
 */
function postgresTicksBetween(before: Map<string, number>, after: Map<string, number>): number {
  let ticks = 0;
  for (const [pid, now] of after) ticks += now - (before.get(pid) ?? 0);
  return ticks;
}

/**
 * One round of load (default: CONNECTIONS for SECONDS) of `requests`; a non-2xx answer or a failed request fails the
 * benchmark, unless `refusals` is `count`: then answers of 503 (a typed, retryable refusal) are counted, not fatal.
 */
export async function loadRound(
  target: Target,
  requests: Request[],
  headers: Record<string, string>,
  { seconds = SECONDS, connections = CONNECTIONS, refusals = 'fail' }: { seconds?: number; connections?: number; refusals?: 'fail' | 'count' } = {},
): Promise<autocannon.Result> {
  const result = await autocannon({
    url: target.url,
    connections,
    duration: seconds,
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    requests,
  });
  const refused = refusals === 'count' ? (result.statusCodeStats?.['503']?.count ?? 0) : 0;
  if (result.non2xx > refused || result.errors > 0) throw new Error(`${target.url}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return result;
}

export async function load(target: Target, requests: Request[], perUnit: number, headers: Record<string, string>, refusals: 'fail' | 'count' = 'fail'): Promise<Measured> {
  const before = cpuTicks(target.process);
  const dbBefore = postgresTicks();
  const result = await loadRound(target, requests, headers, { refusals });
  const ticks = cpuTicks(target.process) - before;
  const dbTicks = postgresTicksBetween(dbBefore, postgresTicks());
  const units = result.requests.total / perUnit;
  return {
    rps: result.requests.average / perUnit,
    p50: result.latency.p50,
    p99: result.latency.p99,
    cpuMsPerRequest: ((ticks / TICKS_PER_SECOND) * 1_000) / units,
    dbCpuMsPerRequest: ((dbTicks / TICKS_PER_SECOND) * 1_000) / units,
    refusedShare: result.requests.total === 0 ? 0 : result.non2xx / result.requests.total,
  };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** A request whose body is built per request (autocannon calls setupRequest for each). */
export function post(body: (context: Record<string, any>) => unknown, onResponse?: (body: any, context: Record<string, any>) => void): Request {
  return {
    method: 'POST',
    path: '/graphql',
    setupRequest: (request, context) => ({ ...request, body: JSON.stringify(body(context as Record<string, any>)) }),
    ...(onResponse !== undefined && {
      onResponse: (status: number, text: string, context: Record<string, any>) => {
        if (status === 200) onResponse(JSON.parse(text), context);
      },
    }),
  } as Request;
}

let sequence = 0;
const nextID = (prefix: string) => `${prefix}-${process.pid}-${++sequence}`;

/** The dashboard list: the newest 50 operations with their watches. */
export const DASHBOARD_LIST = `query { operations(first: 50) { edges { node { id operationID state attempts connectorName createdAt watch { id verificationStatus } } } pageInfo { hasNextPage } } }`;
const CLAIM = `mutation($input: ClaimOperationInput!) { claimOperation(input: $input) { __typename ... on ClaimOperationPayload { outcome operation { id state } lease { token version expiresAt } } } }`;
const START = `mutation($input: StartOperationAttemptInput!) { startOperationAttempt(input: $input) { __typename ... on OperationPayload { operation { id attempts } } } }`;
const SENT = `mutation($input: MarkOperationSentInput!) { markOperationSent(input: $input) { __typename ... on OperationPayload { operation { id } } } }`;
const FINALIZE = `mutation($input: FinalizeOperationInput!) { finalizeOperation(input: $input) { __typename ... on FinalizeOperationPayload { finalized operation { id state documentID } watch { id } } } }`;
const ENQUEUE = `mutation($input: EnqueueOperationsInput!) { enqueueOperations(input: $input) { __typename ... on EnqueueOperationsPayload { conflicts results { __typename ... on EnqueueOperationPayload { outcome operation { id } } } } } }`;
/** Operations per request of the enqueue batch scenario. */
const ENQUEUE_BATCH = 100;
/** A batch of new write intents (a claim's input without the lease). */
const enqueueBatch = () =>
  Array.from({ length: ENQUEUE_BATCH }, () => {
    const { leaseMs: _, ...intent } = claimInput(nextID('batch'));
    return intent;
  });
/** PostGraphile's closest document to DASHBOARD_LIST (bench/peers/postgraphile/server.ts; its fields are the columns' names). */
export const POSTGRAPHILE_LIST = `query { allKubunConnectorOperations(first: 50, orderBy: [CREATED_AT_DESC, NODE_KEY_DESC]) { edges { node { id operationId state attempts connectorName createdAt watch { id verificationStatus } } } pageInfo { hasNextPage } } }`;

const claimInput = (operationID: string) => ({
  operationID,
  connectorName: 'google',
  model: 'calendar.event',
  op: 'CREATE',
  accountKey: 'account-1',
  target: 'primary',
  deterministicEventID: `event-${operationID}`,
  payloadHash: `hash-${operationID}`,
  reissueIntent: 'none',
  leaseMs: 30_000,
});

/** The app's and the raw baseline's request sequences of one scenario (and PostGraphile's, where it has one). */
export function scenarios(): {
  name: string;
  perUnit: number;
  app: () => Request[];
  baseline: 'yoga' | 'raw';
  raw: () => Request[];
  floor?: boolean;
  postgraphile?: () => Request[];
  /** Whether fastify + mercurius (bench/baselines/mercurius.ts) answers this scenario, with the app's requests. */
  mercurius?: boolean;
}[] {
  const fenced = (c: Record<string, any>) => ({ id: c.id, version: c.version, leaseToken: c.token });
  const keep = (field: string) => (body: any, c: Record<string, any>) => {
    const payload = body.data?.[field];
    if (payload?.lease !== undefined) Object.assign(c, { id: payload.operation.id, version: payload.lease.version, token: payload.lease.token });
  };
  const rawKeep = (body: any, c: Record<string, any>) => {
    const payload = body.data?.claimOperation;
    if (payload?.lease !== undefined) Object.assign(c, { id: payload.operation.id, version: payload.lease.version, token: payload.lease.token });
  };
  return [
    {
      name: '`{ __typename }`',
      perUnit: 1,
      baseline: 'yoga',
      app: () => [post(() => ({ query: '{ __typename }' }))],
      raw: () => [post(() => ({ query: '{ __typename }' }))],
      postgraphile: () => [post(() => ({ query: '{ __typename }' }))],
    },
    {
      name: 'dashboard list, 50 rows + watches',
      perUnit: 1,
      baseline: 'raw',
      floor: true,
      app: () => [post(() => ({ query: DASHBOARD_LIST }))],
      raw: () => [post(() => ({ op: 'list', first: 50 }))],
      postgraphile: () => [post(() => ({ query: POSTGRAPHILE_LIST }))],
      mercurius: true,
    },
    {
      name: 'claim, new keys',
      perUnit: 1,
      baseline: 'raw',
      floor: true,
      app: () => [post(() => ({ query: CLAIM, variables: { input: claimInput(nextID('claim')) } }))],
      raw: () => [post(() => ({ op: 'claim', operationID: nextID('claim') }))],
    },
    {
      name: 'write-back sequence (claim → start → sent → finalize), per sequence',
      perUnit: 4,
      baseline: 'raw',
      floor: true,
      app: () => [
        post((c) => ({ query: CLAIM, variables: { input: claimInput((c.operationID = nextID('seq'))) } }), keep('claimOperation')),
        post((c) => ({ query: START, variables: { input: fenced(c) } })),
        post((c) => ({ query: SENT, variables: { input: { ...fenced(c), sendMarker: `marker-${c.operationID}` } } })),
        post((c) => ({ query: FINALIZE, variables: { input: { ...fenced(c), documentID: `doc-${c.operationID}`, sourceID: `src-${c.operationID}`, resultEntity: { id: 'remote-1' } } } })),
      ],
      raw: () => [
        post((c) => ({ op: 'claim', operationID: (c.operationID = nextID('seq')) }), rawKeep),
        post((c) => ({ op: 'start', ...fenced(c) })),
        post((c) => ({ op: 'sent', ...fenced(c), sendMarker: `marker-${c.operationID}` })),
        post((c) => ({ op: 'finalize', ...fenced(c), documentID: `doc-${c.operationID}`, sourceID: `src-${c.operationID}` })),
      ],
    },
    {
      name: `enqueue batch of ${ENQUEUE_BATCH} new operations, per batch`,
      perUnit: 1,
      baseline: 'raw',
      floor: true,
      app: () => [post(() => ({ query: ENQUEUE, variables: { input: { operations: enqueueBatch() } } }))],
      raw: () => [post(() => ({ op: 'enqueue', operationIDs: enqueueBatch().map((o) => o.operationID) }))],
    },
  ];
}

/** 10 000 operations (one in four committed to a document with a watch), by SQL in one statement each. */
export async function seed(dialect: string, url: string, owner: string): Promise<void> {
  const operations = `insert into kubun_connector_operation
      (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
       payload_hash, reissue_intent, document_id, state, attempts, version, created_at, updated_at)
    select '${owner}', 'seed-' || i, 'seed' || i, '${owner}', 'google', 'calendar.event', 'create', 'account-1', 'primary', 'e-' || i, 'h-' || i, 'none',
      case when i % 4 = 0 then 'doc-seed-' || i end, case when i % 4 = 0 then 'committed' else 'attempted' end, 1, 0, 1700000000000 + i, 1700000000000 + i`;
  const watches = `insert into kubun_connector_projection_watch
      (owner_did, connector_name, model, account_key, source_id, node_key, document_id, verification_status, created_at, updated_at)
    select '${owner}', 'google', 'calendar.event', 'account-1', 'src-' || i, 'wseed' || i, 'doc-seed-' || i, 'verified', 1700000000000, 1700000000000`;
  if (dialect === 'postgres') {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    await client.query(`${operations} from generate_series(1, ${ROWS}) as i`);
    await client.query(`${watches} from generate_series(4, ${ROWS}, 4) as i`);
    await client.query('analyze');
    await client.end();
  } else {
    const db = new SQLite(url.slice('sqlite:'.length));
    db.exec(`with recursive s(i) as (select 1 union all select i + 1 from s where i < ${ROWS}) ${operations} from s`);
    db.exec(`with recursive s(i) as (select 4 union all select i + 4 from s where i + 4 <= ${ROWS}) ${watches} from s`);
    db.close();
  }
}

export async function scratchDatabase(dialect: string): Promise<{ url: string; drop: () => Promise<void> } | undefined> {
  if (dialect === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'cs-bench-'));
    return { url: `sqlite:${join(dir, 'bench.sqlite')}`, drop: async () => rmSync(dir, { recursive: true, force: true }) };
  }
  const admin = process.env.PG_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const client = new pg.Client({ connectionString: admin, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
  } catch {
    return undefined;
  }
  const name = `cs_throughput_${randomBytes(4).toString('hex')}`;
  await client.query(`create database ${name}`);
  // The server's cost is measured, not the disk's: a commit's WAL flush on this VM varies 5× between runs
  // and would set the pace of every write scenario (app and baselines alike).
  await client.query(`alter database ${name} set synchronous_commit = off`);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      await client.query(`drop database if exists ${name} with (force)`);
      await client.end();
    },
  };
}

/** Resident and peak resident memory of a process in MiB (VmRSS, VmHWM of /proc/PID/status). */
export function memoryMiB(child: ChildProcess): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
  const kB = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: kB('VmRSS') / 1024, peak: kB('VmHWM') / 1024 };
}

/**
 * Both answers of the dashboard list name the same 50 operations in the same
 * order (newest first), with a watch on the same ones; throws otherwise, so the
 * peer's number is for the same page.
 */
async function checkPeerList(app: Target, peer: Target, headers: Record<string, string>): Promise<void> {
  const ask = async (target: Target, query: string) => {
    const response = await fetch(target.url + '/graphql', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ query }) });
    return (await response.json()) as { data?: any; errors?: unknown };
  };
  const mine = await ask(app, DASHBOARD_LIST);
  const theirs = await ask(peer, POSTGRAPHILE_LIST);
  if (mine.errors !== undefined || theirs.errors !== undefined) throw new Error(`dashboard list: ${JSON.stringify(mine.errors ?? theirs.errors)}`);
  const rows = (edges: { node: Record<string, any> }[], key: string) => edges.map((e) => `${e.node[key]}:${e.node.watch === null ? '-' : e.node.watch.verificationStatus.toLowerCase()}`);
  const a = rows(mine.data.operations.edges, 'operationID');
  const b = rows(theirs.data.allKubunConnectorOperations.edges, 'operationId');
  if (a.length !== 50 || a.join() !== b.join() || !a.some((r) => !r.endsWith(':-'))) {
    throw new Error(`dashboard list: PostGraphile's page differs from the app's\napp:          ${a.join(' ')}\nPostGraphile: ${b.join(' ')}`);
  }
  if (mine.data.operations.pageInfo.hasNextPage !== theirs.data.allKubunConnectorOperations.pageInfo.hasNextPage) throw new Error('dashboard list: hasNextPage differs');
}

/** The dashboard list's answer as bytes, from `target`. */
async function listAnswer(target: Target, headers: Record<string, string>): Promise<string> {
  const response = await fetch(target.url + '/graphql', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ query: DASHBOARD_LIST }) });
  const text = await response.text();
  if (response.status !== 200) throw new Error(`dashboard list: ${target.url} answered ${response.status}: ${text.slice(0, 300)}`);
  return text;
}

/**
 * The environment of fastify + mercurius on the app's very SQL
 * (bench/baselines/mercurius.ts). The statements the app runs for one
 * dashboard list are captured on the wire (bench/sql-capture.ts) from a
 * second app process started through the capture proxy; the baseline gets
 * them, is captured the same way, and its environment is returned only if it
 * ran the same statements (names, texts, parameters) and answered the same
 * bytes as `app`.
 */
export async function mercuriusOnAppSQL(app: Target, appScript: string, appEnvironment: Record<string, string>, databaseURL: string, headers: Record<string, string>): Promise<Record<string, string>> {
  const capture = await startSQLCapture(databaseURL);
  // The second request of each: the first one's connections set their session up (`set plan_cache_mode …`) as they open.
  const captured = async (target: Target) => {
    try {
      await listAnswer(target, headers);
      capture.mark();
      const answer = await listAnswer(target, headers);
      return { answer, statements: capture.since() };
    } finally {
      target.process.kill('SIGKILL');
    }
  };
  try {
    const mine = await captured(await startProcess(appScript, { ...appEnvironment, DATABASE_URL: capture.url }, '/readyz'));
    const env = { DATABASE_URL: databaseURL, LIST_STATEMENTS: JSON.stringify(mine.statements.map(({ name, text }) => ({ name, text }))) };
    const theirs = await captured(await startProcess('bench/baselines/mercurius.ts', { ...env, DATABASE_URL: capture.url }, '/graphql?query=%7B__typename%7D'));
    if (JSON.stringify(theirs.statements) !== JSON.stringify(mine.statements)) {
      throw new Error(`dashboard list: mercurius ran other statements than the app\napp:       ${JSON.stringify(mine.statements)}\nmercurius: ${JSON.stringify(theirs.statements)}`);
    }
    const answer = await listAnswer(app, headers);
    if (theirs.answer !== answer) throw new Error(`dashboard list: mercurius answered other bytes than the app\napp:       ${answer.slice(0, 400)}\nmercurius: ${theirs.answer.slice(0, 400)}`);
    return env;
  } finally {
    await capture.close();
  }
}

/** fastify + mercurius on the app's very SQL ({@link mercuriusOnAppSQL}), started on the database directly as every other target. */
export async function startMercuriusOnAppSQL(
  app: Target,
  appScript: string,
  appEnvironment: Record<string, string>,
  databaseURL: string,
  headers: Record<string, string>,
  nodeArgs: string[] = [],
): Promise<Target> {
  const env = await mercuriusOnAppSQL(app, appScript, appEnvironment, databaseURL, headers);
  return startProcess('bench/baselines/mercurius.ts', env, '/graphql?query=%7B__typename%7D', nodeArgs);
}

/** Runs the benchmark and prints its markdown table. */
export async function runThroughputBench(): Promise<void> {
  const key = generateLocalKey();
  const token = await mintToken({ privateKey: key.privateKey, audience: AUDIENCE, ttlSeconds: 3_600 });
  const headers = { authorization: `Bearer ${token}` };
  const rows: string[] = [];
  const floorRows: string[] = [];
  const peerRows: string[] = [];
  const mercuriusRows: string[] = [];
  const memoryRows: string[] = [];
  for (const dialect of DIALECTS) {
    const database = await scratchDatabase(dialect);
    if (database === undefined) {
      console.log(`\nThroughput on ${dialect} skipped: no Postgres reachable (set PG_TEST_URL).`);
      continue;
    }
    const targets: Target[] = [];
    try {
      const common = { DATABASE_URL: database.url, NODE_ENV: 'production', BENCH_CALLER: key.did, BASELINE_UNNAMED: process.env.BASELINE_UNNAMED ?? '' };
      // As `npm start` runs it: the bundle of scripts/start.mjs (the baselines run their sources through tsx).
      const appEnvironment = { ...common, ...appEnv(key.did), ...APP_ENV };
      const app = await startProcess('scripts/start.mjs', appEnvironment, '/readyz');
      targets.push(app);
      await seed(dialect, database.url, key.did);
      // On Postgres the list's baselines run the app's very statements, captured on the wire and checked on
      // fastify + mercurius (mercuriusOnAppSQL): the raw handler and the floors get them too (LIST_STATEMENTS).
      const onAppSQL = dialect === 'postgres' ? await mercuriusOnAppSQL(app, 'scripts/start.mjs', appEnvironment, database.url, headers) : undefined;
      const baselineEnv = { ...common, LIST_STATEMENTS: onAppSQL?.LIST_STATEMENTS ?? '' };
      const raw = await startProcess('bench/baselines/raw-sql.ts', baselineEnv, '/');
      const yoga = await startProcess('bench/baselines/bare-yoga.ts', {}, '/graphql?query=%7B__typename%7D');
      // The same SQL served by a bare yoga: what any yoga server doing this work costs.
      const floor = await startProcess('bench/baselines/raw-sql.ts', { ...baselineEnv, BASELINE: 'yoga' }, '/graphql?query=%7B__typename%7D');
      // The same with graphql-jit, as the app executes: the best-built bare server on this SQL (issue 21).
      const jitFloor = await startProcess('bench/baselines/raw-sql.ts', { ...baselineEnv, BASELINE: 'yoga-jit' }, '/graphql?query=%7B__typename%7D');
      targets.push(raw, yoga, floor, jitFloor);
      // The peer, on Postgres only: PostGraphile v5 in its own process over the same database (bench/peers/postgraphile/).
      let peer: Target | undefined;
      let mercurius: Target | undefined;
      if (dialect === 'postgres') {
        installPeer('postgraphile');
        peer = await startProcess('bench/peers/postgraphile/server.ts', { DATABASE_URL: database.url, NODE_ENV: 'production', GRAPHILE_ENV: 'production' }, '/');
        targets.push(peer);
        await checkPeerList(app, peer, headers);
        // fastify + mercurius with graphql-jit on the app's captured statements (issue 40 item 6).
        // MERCURIUS_NODE_ARGS='--max-semi-space-size=32': the peer under node flags of its own (as GC_NODE_ARGS).
        mercurius = await startProcess('bench/baselines/mercurius.ts', onAppSQL!, '/graphql?query=%7B__typename%7D', nodeArgsFrom('MERCURIUS_NODE_ARGS'));
        targets.push(mercurius);
      }
      for (const scenario of scenarios().filter((s) => ONLY.length === 0 || ONLY.some((o) => s.name.includes(o)))) {
        const baseline = scenario.baseline === 'yoga' ? yoga : raw;
        const results = { app: [] as Measured[], base: [] as Measured[], floor: [] as Measured[], jit: [] as Measured[], peer: [] as Measured[], mercurius: [] as Measured[] };
        const peerRequests = peer === undefined ? undefined : scenario.postgraphile;
        const onMercurius = mercurius !== undefined && scenario.mercurius === true;
        // Warm-up of each, then interleaved rounds.
        await load(app, scenario.app(), scenario.perUnit, headers);
        await load(baseline, scenario.raw(), scenario.perUnit, headers);
        if (scenario.floor) await load(floor, scenario.app(), scenario.perUnit, headers);
        if (scenario.floor) await load(jitFloor, scenario.app(), scenario.perUnit, headers);
        if (peerRequests !== undefined) await load(peer!, peerRequests(), scenario.perUnit, headers);
        if (onMercurius) await load(mercurius!, scenario.app(), scenario.perUnit, headers);
        for (let round = 0; round < ROUNDS; round++) {
          results.app.push(await load(app, scenario.app(), scenario.perUnit, headers));
          results.base.push(await load(baseline, scenario.raw(), scenario.perUnit, headers));
          if (scenario.floor) results.floor.push(await load(floor, scenario.app(), scenario.perUnit, headers));
          if (scenario.floor) results.jit.push(await load(jitFloor, scenario.app(), scenario.perUnit, headers));
          if (peerRequests !== undefined) results.peer.push(await load(peer!, peerRequests(), scenario.perUnit, headers));
          if (onMercurius) results.mercurius.push(await load(mercurius!, scenario.app(), scenario.perUnit, headers));
        }
        const m = (list: Measured[], field: keyof Measured) => median(list.map((r) => r[field]));
        const dbCPU = (list: Measured[]) => (dialect === 'postgres' ? m(list, 'dbCpuMsPerRequest').toFixed(2) : '–');
        const ratio = m(results.app, 'rps') / m(results.base, 'rps');
        if (scenario.floor) {
          floorRows.push(
            `| ${dialect} | ${scenario.name} | ${m(results.floor, 'rps').toFixed(0)} | ${m(results.jit, 'rps').toFixed(0)} | **${(m(results.jit, 'rps') / m(results.base, 'rps')).toFixed(2)}×** | **${(m(results.app, 'rps') / m(results.jit, 'rps')).toFixed(2)}×** | ${(m(results.app, 'rps') / m(results.floor, 'rps')).toFixed(2)}× | ${m(results.jit, 'cpuMsPerRequest').toFixed(2)} | ${m(results.jit, 'p99').toFixed(1)} | ${dbCPU(results.app)} / ${dbCPU(results.jit)} |`,
          );
        }
        if (peerRequests !== undefined) {
          peerRows.push(
            `| ${dialect} | ${scenario.name} | ${m(results.app, 'rps').toFixed(0)} | ${m(results.peer, 'rps').toFixed(0)} | **${(m(results.app, 'rps') / m(results.peer, 'rps')).toFixed(2)}×** | ${m(results.app, 'p99').toFixed(1)} | ${m(results.peer, 'p99').toFixed(1)} | ${m(results.app, 'cpuMsPerRequest').toFixed(2)} | ${m(results.peer, 'cpuMsPerRequest').toFixed(2)} | ${dbCPU(results.app)} / ${dbCPU(results.peer)} |`,
          );
        }
        if (onMercurius) {
          const p99OverFloor = scenario.floor ? `${(m(results.app, 'p99') / m(results.jit, 'p99')).toFixed(2)}×` : '–';
          mercuriusRows.push(
            `| ${dialect} | ${scenario.name} | ${m(results.app, 'rps').toFixed(0)} | ${m(results.mercurius, 'rps').toFixed(0)} | **${(m(results.app, 'rps') / m(results.mercurius, 'rps')).toFixed(2)}×** | ${m(results.app, 'p99').toFixed(1)} | ${m(results.mercurius, 'p99').toFixed(1)} | ${p99OverFloor} | ${m(results.app, 'cpuMsPerRequest').toFixed(2)} | ${m(results.mercurius, 'cpuMsPerRequest').toFixed(2)} | ${dbCPU(results.app)} / ${dbCPU(results.mercurius)} |`,
          );
        }
        rows.push(
          `| ${dialect} | ${scenario.name} | ${scenario.baseline === 'yoga' ? 'bare yoga' : 'raw SQL'} | ${m(results.app, 'rps').toFixed(0)} | ${m(results.base, 'rps').toFixed(0)} | **${ratio.toFixed(2)}×** | ${m(results.app, 'p50').toFixed(1)} / ${m(results.app, 'p99').toFixed(1)} | ${m(results.base, 'p50').toFixed(1)} / ${m(results.base, 'p99').toFixed(1)} | ${m(results.app, 'cpuMsPerRequest').toFixed(2)} | ${m(results.base, 'cpuMsPerRequest').toFixed(2)} |`,
        );
      }
      const mib = (target: Target | undefined) => {
        if (target === undefined) return '–';
        const { rss, peak } = memoryMiB(target.process);
        return `${rss.toFixed(0)} / ${peak.toFixed(0)}`;
      };
      const right = [mib(app), mib(jitFloor), mib(peer)];
      // Then idle: what each process gives back when the load stops (V8's memory reducer starts only after a full collection).
      await new Promise((r) => setTimeout(r, IDLE_SECONDS * 1_000));
      const rss = (target: Target | undefined) => (target === undefined ? '–' : memoryMiB(target.process).rss.toFixed(0));
      memoryRows.push(`| ${dialect} | ${right[0]} | ${rss(app)} | ${right[1]} | ${rss(jitFloor)} | ${right[2]} | ${rss(peer)} |`);
    } finally {
      for (const target of targets) target.process.kill('SIGKILL');
      await new Promise((r) => setTimeout(r, 300));
      await database.drop();
    }
  }
  printTable(
    `Throughput vs baselines (autocannon, ${CONNECTIONS} connections, ${ROUNDS} interleaved rounds × ${SECONDS} s, median)`,
    '| dialect | scenario | baseline | app req/s | baseline req/s | app ÷ baseline | app p50 / p99 ms | baseline p50 / p99 ms | app CPU ms/req | baseline CPU ms/req |',
    '|---|---|---|--:|--:|--:|--:|--:|--:|--:|',
    rows,
  );
  printTable(
    'The framework floor: a bare yoga over the same SQL (same GraphQL documents, no plugins, no auth), with graphql-js and with graphql-jit',
    '| dialect | scenario | floor (graphql-js) req/s | jit floor req/s | jit floor ÷ raw SQL | app ÷ jit floor | app ÷ graphql-js floor | jit floor CPU ms/req | jit floor p99 ms | Postgres CPU ms/req, app / jit floor |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|',
    floorRows,
  );
  printTable(
    'Peer: PostGraphile v5 (5.1.5, amber preset, own process, same database; its closest document, see the header of bench/throughput.ts)',
    '| dialect | scenario | app req/s | PostGraphile req/s | app ÷ PostGraphile | app p99 ms | PostGraphile p99 ms | app CPU ms/req | PostGraphile CPU ms/req | Postgres CPU ms/req, app / PostGraphile |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|',
    peerRows,
  );
  printTable(
    'Peer: fastify 5 + mercurius 16 with graphql-jit on the app\'s captured statements (bench/baselines/mercurius.ts; same statements and answer bytes checked)',
    '| dialect | scenario | app req/s | mercurius req/s | app ÷ mercurius | app p99 ms | mercurius p99 ms | app p99 ÷ jit floor p99 | app CPU ms/req | mercurius CPU ms/req | Postgres CPU ms/req, app / mercurius |',
    '|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
    mercuriusRows,
  );
  printTable(
    `Memory after the run, and after ${IDLE_SECONDS} s idle (MiB, VmRSS / VmHWM peak of /proc/PID/status; issue 21 goal for the app: RSS after the run <= 200 MiB)`,
    '| dialect | app RSS / peak | app RSS idle | jit floor RSS / peak | jit floor RSS idle | PostGraphile RSS / peak | PostGraphile RSS idle |',
    '|---|--:|--:|--:|--:|--:|--:|',
    memoryRows,
  );
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await runThroughputBench();
