/**
 * Query plans at scale (Postgres only). Seeds, by SQL in a scratch database
 * (seconds, not through the API), 10 000 and then 1 000 000 operations (and a
 * fifth as many watches and sync states), captures the SQL the store issues
 * for each listing (service and ordinary viewer; page 1 and a page deep down
 * the order), for the console's search (issue 22), for `totalCount`, and for a key lookup and a fenced write, runs
 * `EXPLAIN (ANALYZE, BUFFERS)` on each and prints the execution time, whether
 * the plan has a sequential scan on a store table, and the ratios the issue
 * sets goals for (median of five runs): deep page ÷ page 1, 1 M ÷ 10 k, and count ÷ page. Key
 * lookups are also explained before ANALYZE, when the statistics do not yet
 * know any caller, and must use the primary key then too. Lists are explained
 * in the column shape their readers select (src/store/operations/list.ts):
 * the dashboard's pages `brief`, the console's filters and search `summary`.
 *
 *   PG_TEST_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/plans.ts
 *   BENCH_ROWS=200000 …   (default 1 000 000; about a minute on this machine kind)
 *   PLANS_SHOW=gauges …   (also prints the whole plan of each statement whose label matches)
 */
import { readStoreGauges } from '../src/store/gauges.js';
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { openDatabase, type OpenDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrator.js';
import { createStoreContext, type StoreContext } from '../src/store/context.js';
import { countOperations, listOperations, startOperationAttempt, type OperationFilter } from '../src/store/operations/index.js';
import { selectOperationRow } from '../src/store/operations/row.js';
import { listWatches } from '../src/store/projection-watches/index.js';
import { listSyncStates } from '../src/store/sync-state/index.js';

const ROWS = Number(process.env.BENCH_ROWS ?? 1_000_000);
const SMALL = 10_000;
const OWNERS = 1_000;
const ORDINARY = 'did:key:zOwner7';
/** Newer rows of another tenant inserted after the last ANALYZE. */
const STALE_ROWS = 60_000;
const STALE_LABEL = '60 000 newer rows of another tenant unanalyzed';

function adminURL(): string {
  if (process.env.PG_TEST_URL) return process.env.PG_TEST_URL;
  if (process.env.DATABASE_URL?.startsWith('postgres')) return process.env.DATABASE_URL;
  return 'postgres://postgres@127.0.0.1:5432/postgres';
}

interface Plan {
  ms: number;
  seqScan: boolean;
  indexes: string[];
  /** EXPLAIN's text of the first run. */
  text: string;
}

/** `PLANS_SHOW=regex`: the labels whose whole plan (at the larger size) is printed after the table. */
const SHOW = process.env.PLANS_SHOW ? new RegExp(process.env.PLANS_SHOW, 'i') : null;

/** A scratch database seeded with `rows` operations; statements the store runs are captured. */
async function seeded(admin: pg.Client, rows: number) {
  const name = `cs_plans_${randomBytes(4).toString('hex')}`;
  await admin.query(`create database ${name}`);
  const url = new URL(adminURL());
  url.pathname = `/${name}`;
  const captured: { sql: string; parameters: readonly unknown[] }[] = [];
  const database: OpenDatabase = openDatabase({ dialect: 'postgres', connectionString: url.toString(), display: name }, {
    log: (event) => {
      if (event.level === 'query') captured.push({ sql: event.query.sql, parameters: event.query.parameters });
    },
  });
  await migrateToLatest(database.db, 'postgres');
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  const started = Date.now();
  // Owner i % 1000; the caller is the owner for 9 rows in 10, a worker otherwise. 2 % live (half of them
  // holding a lease, some lapsed), 10 % dead, the rest committed: a store that keeps up.
  await client.query(
    `insert into kubun_connector_operation
       (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
        payload_hash, reissue_intent, state, attempts, version, created_at, updated_at)
     select case when i % 10 = 0 then 'did:key:zWorker' else 'did:key:zOwner' || (i % ${OWNERS}) end, 'op-' || i, md5(i::text),
            'did:key:zOwner' || (i % ${OWNERS}), 'google', 'calendar.event', 'create', 'a', 't', 'e-' || i, 'h-' || i, 'none',
            case when i % 100 = 0 then 'attempted' when i % 100 = 1 then 'reconcile_only' when i % 10 = 2 then 'dead' else 'committed' end,
            1 + i % 5, 0, 1700000000000 + i, 1700000000000 + i
     from generate_series(1, ${rows}) as i`,
  );
  await client.query(
    `update kubun_connector_operation set next_attempt_at = created_at + 60000,
       lease_token = case when created_at % 200 = 0 then 'lease' end,
       lease_expires_at = case when created_at % 200 = 0 then created_at + 30000 end
     where state in ('attempted', 'reconcile_only')`,
  );
  const side = Math.max(1, Math.floor(rows / 5));
  await client.query(
    `insert into kubun_connector_projection_watch
       (owner_did, connector_name, model, account_key, source_id, node_key, document_id, verification_status, created_at, updated_at)
     select 'did:key:zOwner' || (i % ${OWNERS}), 'google', 'calendar.event', 'a', 's-' || i, md5('w' || i), 'doc-' || i,
            (array['pending_verification','verified','failed'])[1 + i % 3], 1700000000000 + i, 1700000000000 + i
     from generate_series(1, ${side}) as i`,
  );
  await client.query(
    `insert into kubun_connector_sync_state (connector_name, owner_did, node_key, last_synced_at, status)
     select 'connector-' || (i / ${OWNERS}), 'did:key:zOwner' || (i % ${OWNERS}), md5('s' || i), '2026-01-01T00:00:00Z', 'idle'
     from generate_series(0, ${side - 1}) as i`,
  );
  const seconds = (Date.now() - started) / 1_000;
  const store = createStoreContext(database.db, 'postgres');
  return {
    store,
    client,
    seconds,
    /** The plan of the last statement `run` issued. */
    async explain(run: (store: StoreContext) => Promise<unknown>, analyze = true, pick: RegExp = /^(?!begin|commit|rollback)/i): Promise<Plan> {
      captured.length = 0;
      await run(store);
      const query = captured.filter((q) => pick.test(q.sql)).at(pick.source.startsWith('^update') ? 0 : -1)!;
      // Five runs, the median time: the first one also pays for reading cold pages, and one more may meet a checkpoint.
      const runs: string[] = [];
      for (let i = 0; i < (analyze ? 5 : 1); i++) {
        const lines = (await client.query(`explain (${analyze ? 'analyze, buffers' : 'costs'}) ${query.sql}`, query.parameters as unknown[])).rows.map(
          (r: { 'QUERY PLAN': string }) => r['QUERY PLAN'],
        );
        runs.push(lines.join('\n'));
      }
      const text = runs[0]!;
      const times = runs.map((run) => Number(/Execution Time: ([\d.]+) ms/.exec(run)?.[1] ?? Number.NaN)).sort((a, b) => a - b);
      return {
        ms: times[Math.floor(times.length / 2)]!,
        seqScan: /Seq Scan on kubun_connector_(operation|projection_watch|sync_state)\b/.test(text),
        indexes: [...new Set([...text.matchAll(/(?:Index(?: Only)? Scan(?: Backward)?|Bitmap Index Scan) (?:using|on) (\w+)/g)].map((m) => m[1]!))],
        text,
      };
    },
    async drop() {
      await client.end().catch(() => {});
      await database.close();
      await admin.query(`drop database if exists ${name} with (force)`);
    },
  };
}

type Seeded = Awaited<ReturnType<typeof seeded>>;

/** The cursor about `depth` rows down a viewer's newest-first operations, read by SQL (OFFSET is fine for the bench itself). */
async function operationCursorAt(db: Seeded, visibleTo: string | null, depth: number) {
  const { rows } = await db.client.query(
    visibleTo === null
      ? 'select created_at, node_key from kubun_connector_operation order by created_at desc, node_key desc offset $1 limit 1'
      : 'select created_at, node_key from kubun_connector_operation where caller_did = $2 or owner_did = $2 order by created_at desc, node_key desc offset $1 limit 1',
    visibleTo === null ? [depth] : [depth, visibleTo],
  );
  return { createdAt: Number(rows[0].created_at), nodeKey: String(rows[0].node_key) };
}

/** Every measured statement at one table size: name → plan. */
async function measure(db: Seeded, rows: number): Promise<Map<string, Plan>> {
  const plans = new Map<string, Plan>();
  const fakeFence = { key: { callerDID: 'did:key:zWorker', operationID: 'op-10' }, version: 99, leaseToken: 'nope' };
  // Before ANALYZE: the statistics know no caller yet.
  plans.set('key lookup, no statistics yet', await db.explain((s) => selectOperationRow(s, fakeFence.key), false));
  plans.set('fenced write, no statistics yet', await db.explain((s) => startOperationAttempt(s, fakeFence).catch(() => {}), false, /^update/i));
  await db.client.query('analyze');
  plans.set('key lookup', await db.explain((s) => selectOperationRow(s, fakeFence.key)));
  plans.set('fenced write', await db.explain((s) => startOperationAttempt(s, fakeFence).catch(() => {}), true, /^update/i));

  const side = Math.floor(rows / 5);
  for (const [label, visibleTo] of [['service', null], ['ordinary user', ORDINARY]] as const) {
    // 90 % of the way down what the viewer sees (a service: 900 000 rows deep at 1 M, page 18 000).
    const visible = visibleTo === null ? rows : Math.floor(rows / OWNERS);
    const after = await operationCursorAt(db, visibleTo, Math.floor(visible * 0.9));
    plans.set(`operations, ${label}, page 1`, await db.explain((s) => listOperations(s, { visibleTo, first: 50 }, 'brief')));
    plans.set(`operations, ${label}, deep page`, await db.explain((s) => listOperations(s, { visibleTo, first: 50, after }, 'brief')));
    plans.set(`operations, ${label}, totalCount`, await db.explain((s) => countOperations(s, { visibleTo })));
    plans.set(`operations, ${label}, states filter`, await db.explain((s) => listOperations(s, { visibleTo, first: 50, filter: { states: ['dead'] } }, 'summary')));
    if (visibleTo === null) {
      // The failure filters a dashboard combines (issue 11).
      const failureFilters: [string, OperationFilter][] = [
        ['last kinds', { lastKinds: ['fatal'] }],
        ['defer reasons', { deferReasons: ['offline'] }],
        ['stuck', { stuck: true }],
        ['min attempts', { minAttempts: 3 }],
        ['due before', { dueBefore: 1700000000000 + rows / 2 }],
        ['created range', { createdAfter: 1700000000000 + rows / 2, createdBefore: 1700000000000 + rows / 2 + 1000 }],
      ];
      for (const [name, filter] of failureFilters) {
        plans.set(`operations, service, ${name} filter`, await db.explain((s) => listOperations(s, { visibleTo, first: 50, filter }, 'summary')));
        plans.set(`operations, service, ${name} count`, await db.explain((s) => countOperations(s, { visibleTo, filter })));
      }
    }

    const watchDepth = Math.floor((visibleTo === null ? side : side / OWNERS) * 0.9);
    const { rows: [w] } = await db.client.query(
      `select created_at, node_key from kubun_connector_projection_watch ${visibleTo === null ? '' : 'where owner_did = $2'} order by created_at desc, node_key desc offset $1 limit 1`,
      visibleTo === null ? [watchDepth] : [watchDepth, visibleTo],
    );
    plans.set(`watches, ${label}, page 1`, await db.explain((s) => listWatches(s, { visibleTo, first: 50 })));
    if (w !== undefined) {
      plans.set(`watches, ${label}, deep page`, await db.explain((s) => listWatches(s, { visibleTo, first: 50, after: { createdAt: Number(w.created_at), nodeKey: w.node_key } })));
    }
    const { rows: [st] } = await db.client.query(
      `select connector_name, owner_did from kubun_connector_sync_state ${visibleTo === null ? '' : 'where owner_did = $2'} order by connector_name, owner_did offset $1 limit 1`,
      visibleTo === null ? [Math.floor(side * 0.9)] : [Math.floor((side / OWNERS) * 0.9), visibleTo],
    );
    plans.set(`sync states, ${label}, page 1`, await db.explain((s) => listSyncStates(s, { visibleTo, first: 50 })));
    if (st !== undefined) {
      plans.set(`sync states, ${label}, deep page`, await db.explain((s) => listSyncStates(s, { visibleTo, first: 50, after: { connectorName: st.connector_name, ownerDID: st.owner_did } })));
    }
  }
  // /metrics' store gauges: one statement, bounded whatever the table sizes.
  plans.set('metrics store gauges (one statement)', await db.explain((s) => readStoreGauges(s)));
  // The console's search (issue 22 item 3): one text as an idempotency key (any caller's), a document, an owner.
  const searched = `op-${Math.floor(rows / 2) + 7}`; // called by zOwner7, the ordinary user
  for (const [label, visibleTo] of [['service', null], ['ordinary user', ORDINARY]] as const) {
    plans.set(`search, ${label}, operation ID`, await db.explain((s) => listOperations(s, { visibleTo, first: 25, filter: { operationID: searched } }, 'summary')));
    plans.set(`search, ${label}, document ID`, await db.explain((s) => listOperations(s, { visibleTo, first: 25, filter: { documentID: 'doc-search' } }, 'summary')));
  }
  plans.set('search, service, owner DID', await db.explain((s) => listOperations(s, { visibleTo: null, first: 25, filter: { ownerDID: ORDINARY } }, 'summary')));

  // Behind the statistics (issue 21 item 4): a busy tenant's 60 000 newer rows arrive after the last
  // ANALYZE. A user's page 1 must not walk past them (it read the newest-first index of every row).
  await db.client.query(
    `insert into kubun_connector_operation
       (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
        payload_hash, reissue_intent, state, attempts, version, created_at, updated_at)
     select 'did:key:zBusyTenant', 'busy-' || i, md5('busy' || i), 'did:key:zBusyTenant', 'google', 'calendar.event', 'create', 'a', 't',
            'busy-e-' || i, 'h', 'none', 'committed', 1, 0, ${1700000000000 + rows} + i, ${1700000000000 + rows} + i
     from generate_series(1, ${STALE_ROWS}) as i`,
  );
  const deep = await operationCursorAt(db, ORDINARY, Math.floor((rows / OWNERS) * 0.9));
  plans.set(`operations, ordinary user, page 1, ${STALE_LABEL}`, await db.explain((s) => listOperations(s, { visibleTo: ORDINARY, first: 50 }, 'brief')));
  plans.set(`operations, ordinary user, deep page, ${STALE_LABEL}`, await db.explain((s) => listOperations(s, { visibleTo: ORDINARY, first: 50, after: deep }, 'brief')));
  return plans;
}

/** Runs the benchmark and prints its markdown tables (or why it was skipped). */
export async function runPlansBench(): Promise<void> {
  const admin = new pg.Client({ connectionString: adminURL(), connectionTimeoutMillis: 2_000 });
  try {
    await admin.connect();
  } catch {
    console.log('\nQuery plans skipped: no Postgres reachable (set PG_TEST_URL).');
    return;
  }
  try {
    const results: { rows: number; seconds: number; plans: Map<string, Plan> }[] = [];
    for (const rows of [SMALL, ROWS]) {
      const db = await seeded(admin, rows);
      try {
        results.push({ rows, seconds: db.seconds, plans: await measure(db, rows) });
      } finally {
        await db.drop();
      }
    }
    const [small, large] = results as [(typeof results)[0], (typeof results)[0]];
    const fmt = (n: number) => n.toLocaleString('en');
    console.log(`\n### Plans at ${fmt(small.rows)} and ${fmt(large.rows)} operations (${fmt(Math.floor(large.rows / 5))} watches and sync states; seeded by SQL in ${large.seconds.toFixed(0)} s)\n`);
    console.log(`| statement | ms at ${fmt(small.rows)} | ms at ${fmt(large.rows)} | ${fmt(large.rows)} ÷ ${fmt(small.rows)} | seq scan | indexes |`);
    console.log('|---|--:|--:|--:|---|---|');
    for (const [name, plan] of large.plans) {
      const base = small.plans.get(name);
      const ratio = base !== undefined && Number.isFinite(plan.ms) ? (plan.ms / base.ms).toFixed(2) : '';
      const ms = (p: Plan | undefined) => (p === undefined || !Number.isFinite(p.ms) ? '(plan only)' : p.ms.toFixed(3));
      console.log(`| ${name} | ${ms(base)} | ${ms(plan)} | ${ratio} | ${plan.seqScan || base?.seqScan ? '**yes**' : 'no'} | ${plan.indexes.join(', ')} |`);
    }
    for (const [name, plan] of large.plans) if (SHOW?.test(name)) console.log(`\n${name} at ${fmt(large.rows)}:\n\n\`\`\`\n${plan.text}\n\`\`\``);
    console.log(`\n| at ${fmt(large.rows)} | ratio |\n|---|--:|`);
    for (const who of ['service', 'ordinary user']) {
      const page = large.plans.get(`operations, ${who}, page 1`)!.ms;
      console.log(`| operations, ${who}: deep page ÷ page 1 | ${(large.plans.get(`operations, ${who}, deep page`)!.ms / page).toFixed(2)} |`);
      console.log(`| operations, ${who}: totalCount ÷ page 1 | ${(large.plans.get(`operations, ${who}, totalCount`)!.ms / page).toFixed(2)} |`);
    }
    const searches = [...large.plans].filter(([name]) => name.startsWith('search, '));
    const slowest = Math.max(...searches.map(([, plan]) => plan.ms));
    console.log(`| search (operation ID, document ID, owner DID; service and ordinary user): slowest ms (goal < 1 000) | ${slowest.toFixed(3)} |`);
    const stalePage = large.plans.get(`operations, ordinary user, page 1, ${STALE_LABEL}`)!.ms;
    console.log(`| operations, ordinary user, ${STALE_LABEL}: page 1 ÷ deep page (goal ≤ 1.2) | ${(stalePage / large.plans.get(`operations, ordinary user, deep page, ${STALE_LABEL}`)!.ms).toFixed(2)} |`);
  } finally {
    await admin.end();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await runPlansBench();
