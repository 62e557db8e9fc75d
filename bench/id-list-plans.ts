/**
 * How an id-list read is cheapest to send (issue 40 item 5), Postgres only:
 * the watch read of a 50-row page's document ids, as the store sent it
 * (padded to 64 with 14 duplicates), padded with NULLs instead, and as one
 * array parameter (`= any($1::text[])`), each planned per run (custom, the
 * server's `force_custom_plan`) and once (generic). Seeds 200 000 watches by
 * SQL in a scratch database, runs each form as a named statement 400 times
 * on one connection, interleaved, and prints the median of `EXPLAIN
 * (ANALYZE, BUFFERS)`'s planning and execution times and the buffers.
 *
 *   PG_TEST_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/id-list-plans.ts
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrator.js';
import { PROJECTION_WATCH_COLUMNS } from '../src/db/tables.js';

const WATCHES = Number(process.env.BENCH_ROWS ?? 200_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 400);
const PAGE = 50;
const PADDED = 64;

const admin = new pg.Client({ connectionString: process.env.PG_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres' });
await admin.connect();
const name = `cs_idlist_${randomBytes(4).toString('hex')}`;
await admin.query(`create database ${name}`);
const url = new URL(process.env.PG_TEST_URL ?? "postgres://postgres@127.0.0.1:5432/postgres");
url.pathname = `/${name}`;
try {
  const database = openDatabase({ dialect: 'postgres', connectionString: url.toString(), display: name });
  await migrateToLatest(database.db, 'postgres');
  await database.close();
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  await client.query(
    `insert into kubun_connector_projection_watch
       (owner_did, connector_name, model, account_key, source_id, node_key, document_id, verification_status, created_at, updated_at)
     select 'did:key:zOwner' || (i % 1000), 'google', 'calendar.event', 'a', 's-' || i, md5('w' || i), 'doc-' || i,
            (array['pending_verification','verified','failed'])[1 + i % 3], 1700000000000 + i, 1700000000000 + i
     from generate_series(1, ${WATCHES}) as i`,
  );
  await client.query('analyze');
  const columns = PROJECTION_WATCH_COLUMNS.map((c) => `"${c}"`).join(', ');
  const from = `select ${columns} from "kubun_connector_projection_watch"`;
  const order = 'order by "created_at" desc, "node_key" desc';
  const inList = `${from} where "document_id" in (${Array.from({ length: PADDED }, (_, i) => `$${i + 1}`).join(', ')}) ${order}`;
  const anyArray = `${from} where "document_id" = any($1::text[]) ${order}`;
  const ids = () => Array.from({ length: PAGE }, () => `doc-${1 + Math.floor(Math.random() * WATCHES)}`);
  const forms: { label: string; text: string; values: (page: string[]) => unknown[] }[] = [
    { label: `in (64): 50 ids + 14 duplicates (before)`, text: inList, values: (page) => [...page, ...Array(PADDED - PAGE).fill(page.at(-1))] },
    { label: `in (64): 50 ids + 14 NULLs`, text: inList, values: (page) => [...page, ...Array(PADDED - PAGE).fill(null)] },
    { label: '= any($1::text[]): 50 ids', text: anyArray, values: (page) => [page] },
  ];
  const results = new Map<string, { planning: number[]; execution: number[]; buffers: number[] }>();
  for (const mode of ['force_custom_plan', 'force_generic_plan'] as const) {
    await client.query(`set plan_cache_mode = ${mode}`);
    for (let run = 0; run < RUNS; run++) {
      const page = ids();
      for (const form of forms) {
        const key = `${form.label}, ${mode === 'force_custom_plan' ? 'custom' : 'generic'} plan`;
        // EXPLAIN EXECUTE of a prepared statement: the plan cache decides custom or generic, as for the server's named statements.
        const statement = `s_${forms.indexOf(form)}_${mode}`;
        if (run === 0) await client.query(`prepare ${statement} as ${form.text}`);
        const literal = form.values(page).map((v) => (v === null ? 'null' : Array.isArray(v) ? `array[${v.map((x) => `'${x}'`).join(',')}]` : `'${v}'`));
        const { rows } = await client.query(`explain (analyze, buffers, format json) execute ${statement}(${literal.join(', ')})`);
        const plan = rows[0]['QUERY PLAN'][0];
        const entry = results.get(key) ?? { planning: [], execution: [], buffers: [] };
        entry.planning.push(plan['Planning Time']);
        entry.execution.push(plan['Execution Time']);
        entry.buffers.push(plan.Plan['Shared Hit Blocks'] + plan.Plan['Shared Read Blocks']);
        results.set(key, entry);
      }
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  console.log(`\n### The watch read of a 50-row page (${WATCHES.toLocaleString('en')} watches, ${RUNS} runs of each, interleaved; medians)\n`);
  console.log('| form | planning ms | execution ms | planning + execution ms | buffers |\n|---|--:|--:|--:|--:|');
  for (const [key, r] of results) {
    console.log(`| ${key} | ${median(r.planning).toFixed(3)} | ${median(r.execution).toFixed(3)} | ${(median(r.planning) + median(r.execution)).toFixed(3)} | ${median(r.buffers)} |`);
  }
  await client.end();
} finally {
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.end();
}
