/**
 * Query plans at scale (Postgres only): seeds 1 M operations by SQL in a
 * scratch database (seconds, not through the API), captures the SQL the
 * store issues for the listing pages (service and ordinary viewer, page 1 and
 * a page 50 000 rows deep), runs `EXPLAIN (ANALYZE, BUFFERS)` on each, and
 * prints the execution times, the deep/first ratio and whether any plan has a
 * sequential scan on the operations table.
 *
 *   PG_TEST_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/plans.ts
 *   BENCH_ROWS=200000 …   (default 1 000 000; ~30 s on this machine kind)
 */
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { openDatabase, type OpenDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrator.js';
import { createStoreContext } from '../src/store/context.js';
import { listOperations, operationCursor } from '../src/store/operations/index.js';

const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const OWNERS = 1_000;
const DEPTH = 50_000;

function adminURL(): string | undefined {
  if (process.env.PG_TEST_URL) return process.env.PG_TEST_URL;
  if (process.env.DATABASE_URL?.startsWith('postgres')) return process.env.DATABASE_URL;
  return undefined;
}

/** Runs the benchmark and prints its markdown table (or why it was skipped). */
export async function runPlansBench(): Promise<void> {
  const admin = adminURL() ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const client = new pg.Client({ connectionString: admin, connectionTimeoutMillis: 2_000 });
  try {
    await client.connect();
  } catch {
    console.log('\nQuery plans skipped: no Postgres reachable (set PG_TEST_URL).');
    return;
  }
  const name = `cs_plans_${randomBytes(4).toString('hex')}`;
  await client.query(`create database ${name}`);
  const url = new URL(admin);
  url.pathname = `/${name}`;
  let database: OpenDatabase | undefined;
  const db = new pg.Client({ connectionString: url.toString() });
  try {
    const captured: { sql: string; parameters: readonly unknown[] }[] = [];
    database = openDatabase({ dialect: 'postgres', connectionString: url.toString(), display: name }, {
      log: (event) => {
        if (event.level === 'query') captured.push({ sql: event.query.sql, parameters: event.query.parameters });
      },
    });
    await migrateToLatest(database.db, 'postgres');
    await db.connect();
    const started = Date.now();
    // Owner i % 1000; the caller is the owner for 9 rows in 10, a worker otherwise.
    await db.query(
      `insert into kubun_connector_operation
         (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
          payload_hash, reissue_intent, state, attempts, version, created_at, updated_at)
       select case when i % 10 = 0 then 'did:key:zWorker' else 'did:key:zOwner' || (i % ${OWNERS}) end, 'op-' || i, md5(i::text),
              'did:key:zOwner' || (i % ${OWNERS}), 'google', 'calendar.event', 'create', 'a', 't', 'e-' || i, 'h-' || i, 'none',
              (array['attempted','reconcile_only','committed','dead'])[1 + i % 4], 1, 0, 1700000000000 + i, 1700000000000 + i
       from generate_series(1, ${ROWS}) as i`,
    );
    await db.query('analyze kubun_connector_operation');
    const seededSeconds = (Date.now() - started) / 1_000;

    const store = createStoreContext(database.db, 'postgres');
    const viewers: [string, string | null][] = [
      ['service', null],
      ['ordinary user', 'did:key:zOwner7'],
    ];
    console.log(`\n### Listing plans at ${ROWS.toLocaleString('en')} operations (seeded in ${seededSeconds.toFixed(0)} s)\n`);
    console.log('| viewer | page | execution ms | seq scan on operations |');
    console.log('|---|---|--:|---|');
    for (const [label, visibleTo] of viewers) {
      // Walk to a cursor about DEPTH rows down the viewer's newest-first order.
      const deep = await listOperations(store, { visibleTo, first: 100 });
      let after = operationCursor(deep.operations.at(-1)!);
      const stride = visibleTo === null ? DEPTH : Math.floor(DEPTH / OWNERS);
      const [row] = (
        await db.query(
          visibleTo === null
            ? 'select created_at, node_key from kubun_connector_operation order by created_at desc, node_key desc offset $1 limit 1'
            : 'select created_at, node_key from kubun_connector_operation where caller_did = $2 or owner_did = $2 order by created_at desc, node_key desc offset $1 limit 1',
          visibleTo === null ? [stride] : [stride, visibleTo],
        )
      ).rows as { created_at: number; node_key: string }[];
      if (row !== undefined) after = { createdAt: Number(row.created_at), nodeKey: row.node_key };
      const times: number[] = [];
      for (const [page, cursor] of [['first', undefined], [`~${stride.toLocaleString('en')} rows deep`, after]] as const) {
        captured.length = 0;
        await listOperations(store, { visibleTo, first: 50, ...(cursor !== undefined && { after: cursor }) });
        const query = captured.at(-1)!;
        const plan = (await db.query(`explain (analyze, buffers) ${query.sql}`, query.parameters as unknown[])).rows.map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN']);
        const ms = Number(/Execution Time: ([\d.]+) ms/.exec(plan.join('\n'))?.[1] ?? Number.NaN);
        times.push(ms);
        const seq = plan.some((line) => /Seq Scan on kubun_connector_operation/.test(line));
        console.log(`| ${label} | ${page} | ${ms.toFixed(2)} | ${seq ? '**yes**' : 'no'} |`);
      }
      console.log(`| ${label} | deep / first | ${(times[1]! / times[0]!).toFixed(2)}× | |`);
    }
  } finally {
    await db.end().catch(() => {});
    await database?.close();
    await client.query(`drop database if exists ${name} with (force)`);
    await client.end();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await runPlansBench();
