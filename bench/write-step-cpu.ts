/**
 * Postgres CPU per operation of each step of a no-op write-back (issue 40
 * item 4), measured on the backend itself: the store functions the server
 * runs, called in process on a pool of one connection, in batches of B
 * operations at a time as `runWorker` sends them (lease B, start B, mark B,
 * finalize B, each batch's calls made together so they are gathered into one
 * statement), the backend's CPU read from /proc/PID/schedstat around each
 * phase. No HTTP, no other process: what each statement costs Postgres,
 * apart from the machine's noise and lock waits (a backend that waits spends
 * no CPU). Beside it, each step's row updates of the operation, history and
 * request tables, and how many of them were HOT (heap-only: no index entry
 * written), from pg_stat_user_tables after a forced flush of the backend's
 * counters (outside the timed work).
 *
 *   npx tsx bench/write-step-cpu.ts            (WRITE_STEP_OPERATIONS=640, WRITE_STEP_BATCH=16)
 *   WRITE_STEP_DDL='drop index …' npx tsx bench/write-step-cpu.ts   (an experiment: SQL run after migrating)
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openDatabase, parseDatabaseURL } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrator.js';
import { createStoreContext } from '../src/store/context.js';
import { enqueueOperations, leaseDueOperations, markSentStep, startAttemptStep } from '../src/store/operations/index.js';
import { finalizeOperationStep } from '../src/store/finalize/index.js';
import { backendNanoseconds } from './postgres-cpu.js';

const OPERATIONS = Number(process.env.WRITE_STEP_OPERATIONS ?? 640);
const BATCH = Number(process.env.WRITE_STEP_BATCH ?? 16);
/** WRITE_STEP_UNKEYED=1: the steps without request keys (no request records), to see what recording them costs. */
const KEYED = process.env.WRITE_STEP_UNKEYED !== '1';
const admin = process.env.PG_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const name = `cs_write_step_${randomBytes(4).toString('hex')}`;
const client = new pg.Client({ connectionString: admin });
await client.connect();
await client.query(`create database ${name}`);
await client.query(`alter database ${name} set synchronous_commit = off`);
const url = Object.assign(new URL(admin), { pathname: `/${name}` }).toString();
const open = openDatabase(parseDatabaseURL(url), { poolMax: 1 });
try {
  await migrateToLatest(open.db, 'postgres');
  const store = createStoreContext(open.db, 'postgres');
  if (process.env.WRITE_STEP_DDL) await open.pgPool!.query(process.env.WRITE_STEP_DDL);
  const caller = 'did:key:z6MkwriteStepBench';
  // WRITE_STEP_EXPLAIN=1: every statement's plan with its timings in the server's log (auto_explain; a superuser's session).
  if (process.env.WRITE_STEP_EXPLAIN === '1') await open.pgPool!.query("load 'auto_explain'; set auto_explain.log_min_duration = 0; set auto_explain.log_analyze = on; set auto_explain.log_triggers = on; set auto_explain.log_nested_statements = on");
  // WRITE_STEP_PLAN_CACHE_MODE=auto: what custom plans cost, against the server's force_custom_plan (src/db/connect.ts).
  if (process.env.WRITE_STEP_PLAN_CACHE_MODE !== undefined) await open.pgPool!.query(`set plan_cache_mode = ${process.env.WRITE_STEP_PLAN_CACHE_MODE === 'auto' ? 'auto' : 'force_custom_plan'}`);
  // WRITE_STEP_NO_TRIGGERS=1 (an experiment, counts then wrong): what the counting triggers cost, by running without them.
  if (process.env.WRITE_STEP_NO_TRIGGERS === '1') await open.pgPool!.query('set session_replication_role = replica');
  const pid = Number((await open.pgPool!.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid);
  const cpu = () => backendNanoseconds([pid]).get(pid) ?? 0;
  const spent: Record<string, number> = { enqueue: 0, lease: 0, start: 0, mark: 0, finalize: 0 };
  const HOT_TABLES = ['kubun_connector_operation', 'kubun_connector_operation_history', 'kubun_connector_operation_request'];
  const updates: Record<string, Record<string, { all: number; hot: number }>> = {};
  /** The tables' update counters, this backend's pending ones flushed first (PG15: pg_stat_force_next_flush, flushed as the backend goes idle). */
  const counters = async () => {
    await open.pgPool!.query('select pg_stat_force_next_flush()');
    const { rows } = await open.pgPool!.query<{ relname: string; all: string; hot: string }>(
      'select relname, n_tup_upd as all, n_tup_hot_upd as hot from pg_stat_user_tables where relname = any($1)',
      [HOT_TABLES],
    );
    return new Map(rows.map((row) => [row.relname, { all: Number(row.all), hot: Number(row.hot) }]));
  };
  const timed = async <T>(phase: string, work: () => Promise<T>): Promise<T> => {
    const counted = await counters();
    const before = cpu();
    const result = await work();
    spent[phase]! += cpu() - before;
    for (const [table, after] of await counters()) {
      const was = counted.get(table) ?? { all: 0, hot: 0 };
      const sum = ((updates[phase] ??= {})[table] ??= { all: 0, hot: 0 });
      sum.all += after.all - was.all;
      sum.hot += after.hot - was.hot;
    }
    return result;
  };
  for (let first = 0; first < OPERATIONS; first += 100) {
    const items = Array.from({ length: Math.min(100, OPERATIONS - first) }, (_, k) => ({
      callerDID: caller, operationID: `op-${first + k}`, ownerDID: caller, connectorName: 'bench', model: 'contact', op: 'create' as const,
      accountKey: 'account', target: 'contacts', deterministicEventID: `event-${first + k}`, payloadHash: 'hash', reissueIntent: 'none',
    }));
    await timed('enqueue', () => enqueueOperations(store, items));
  }
  let done = 0;
  for (let round = 0; done < OPERATIONS; round++) {
    const leased = await timed('lease', () => leaseDueOperations(store, { connectorName: 'bench', limit: BATCH, leaseMs: 60_000 }));
    const calls = leased.map(({ operation, lease }, i) => ({ nodeKey: operation.nodeKey, visibleTo: null, version: lease.version, leaseToken: lease.token, key: operation, i }));
    await timed('start', () => Promise.all(calls.map((c) => startAttemptStep(store, { ...c, ...(KEYED && { request: { requestKey: `start-${round}-${c.i}`, input: {} } }) }))));
    await timed('mark', () => Promise.all(calls.map((c) => markSentStep(store, { ...c, ...(KEYED && { request: { requestKey: `mark-${round}-${c.i}`, input: { sendMarker: `m-${c.i}` } } }) }, { sendMarker: `m-${c.i}` }))));
    await timed('finalize', () =>
      Promise.all(
        leased.map(({ operation, lease }, i) =>
          finalizeOperationStep(
            store,
            {
              key: { callerDID: operation.callerDID, operationID: operation.operationID }, version: lease.version, leaseToken: lease.token, documentID: `doc-${operation.operationID}`,
              resultEntity: null, currentWinnerDigest: null,
              watchIdentity: { ownerDID: caller, connectorName: 'bench', model: 'contact', accountKey: 'account', sourceID: `src-${operation.operationID}` },
            },
            KEYED ? { requestKey: `finalize-${round}-${i}`, input: { documentID: `doc-${operation.operationID}` } } : undefined,
          ),
        ),
      ),
    );
    done += leased.length;
    if (leased.length === 0) throw new Error('nothing leased');
  }
  const total = Object.values(spent).reduce((a, b) => a + b, 0) - spent.enqueue!;
  console.log(`\nPostgres CPU per operation (ms), ${OPERATIONS} operations in batches of ${BATCH}, one connection:\n`);
  console.log('| enqueue | lease | start | mark sent | finalize | lease → finalize |');
  console.log('|--:|--:|--:|--:|--:|--:|');
  const ms = (ns: number) => (ns / 1e6 / OPERATIONS).toFixed(3);
  console.log(`| ${ms(spent.enqueue!)} | ${ms(spent.lease!)} | ${ms(spent.start!)} | ${ms(spent.mark!)} | ${ms(spent.finalize!)} | ${ms(total)} |`);
  console.log('\nRow updates per operation, HOT (heap-only, no index entry) / all:\n');
  console.log(`| table | lease | start | mark sent | finalize | HOT share |`);
  console.log('|---|--:|--:|--:|--:|--:|');
  for (const table of HOT_TABLES) {
    const cells = ['lease', 'start', 'mark', 'finalize'].map((phase) => updates[phase]?.[table] ?? { all: 0, hot: 0 });
    const all = cells.reduce((n, c) => n + c.all, 0);
    const hot = cells.reduce((n, c) => n + c.hot, 0);
    const per = (n: number) => (n / OPERATIONS).toFixed(2);
    console.log(`| ${table.replace('kubun_connector_', '')} | ${cells.map((c) => `${per(c.hot)} / ${per(c.all)}`).join(' | ')} | ${all === 0 ? '–' : `${Math.round((100 * hot) / all)}%`} |`);
  }
} finally {
  await open.close();
  await client.query(`drop database if exists ${name} with (force)`);
  await client.end();
}
