/**
 * Deep pages cost what page 1 costs (issue 40 item 5), Postgres only, at
 * 1 M operations seeded by SQL (1 000 owners; nine in ten self-called).
 * For a service and an ordinary user, the store's own statements of page 1
 * and of the page after a cursor 90 % down what the viewer sees (row
 * 900 000 for a service) are explained with ANALYZE and BUFFERS: the same
 * plan (node types and indexes) and deep ÷ page 1 ≤ 1.2 in buffers (or at
 * most 2 more: a service's page touches 5–7, and where its 50 rows fall
 * across index and heap pages moves that by one or two). A page
 * with `totalCount` (the connection's count statement) costs ≤ 1.2× the
 * page without it, in buffers. Buffers, not time: they do not depend on the
 * machine's load; the CPU ratios are bench/plans.ts's.
 *
 *   CI=true npx vitest run test/db/deep-page-plans.test.ts
 *   DEEP_PAGE_ROWS=1000000 DEEP_PAGE_REPORT=1 CI=true npx vitest run test/db/deep-page-plans.test.ts   (prints the buffers and plans)
 */
import { CompiledQuery } from 'kysely';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, type OpenDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { createStoreContext, type StoreContext } from '../../src/store/context.js';
import { countOperations, listOperations } from '../../src/store/operations/index.js';
import { testDialects } from '../helpers/databases.js';
import { createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';
import { recordingStatements } from '../helpers/query-plans.js';

// Seeding 1 M rows (counter triggers, then the indexes) takes most of this file's 30–60 s (2 shared cores).
// At 200 000 an ordinary user sees 200 rows, so "90 % down" is 20 rows from the end: a different (and cheaper) plan.
const ROWS = Number(process.env.DEEP_PAGE_ROWS ?? 1_000_000);
const OWNERS = 1_000;
const ORDINARY = 'did:key:zOwner7';

const runs = testDialects().includes('postgres') && inject('postgresAvailable');

/** What EXPLAIN (ANALYZE, BUFFERS) says of a statement: the buffers its execution touched, and its plan's node types and indexes. */
interface Explained {
  buffers: number;
  shape: string[];
}

describe.skipIf(!runs)(`postgres: deep pages at ${ROWS.toLocaleString('en')} operations`, () => {
  let scratch: ScratchPostgresDatabase;
  let open: OpenDatabase;
  let store: StoreContext;

  beforeAll(async () => {
    scratch = await createScratchPostgresDatabase('cs_deep_pages');
    open = openDatabase({ dialect: 'postgres', connectionString: scratch.url, display: 'deep pages' }, { poolMax: 2, statementTimeoutMs: 300_000 });
    await migrateToLatest(open.db, 'postgres');
    store = createStoreContext(open.db, 'postgres');
    // The table's plain indexes are built once after the rows, as migrations would on a full table: a third faster
    // than maintaining 13 indexes row by row (37 s against 25 s for 1 M rows here). Unique ones stay, to hold their constraints.
    const { rows: indexes } = await open.db.executeQuery<{ name: string; definition: string }>(
      CompiledQuery.raw(`select c.relname as name, pg_get_indexdef(x.indexrelid) as definition from pg_index x join pg_class c on c.oid = x.indexrelid
         where x.indrelid = 'kubun_connector_operation'::regclass and not x.indisunique`),
    );
    for (const { name } of indexes) await open.db.executeQuery(CompiledQuery.raw(`drop index ${name}`));
    // As bench/plans.ts seeds: owner i % 1000, the caller a worker for one row in ten.
    await open.db.executeQuery(
      CompiledQuery.raw(`insert into kubun_connector_operation
         (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
          payload_hash, reissue_intent, state, attempts, version, created_at, updated_at)
       select case when i % 10 = 0 then 'did:key:zWorker' else 'did:key:zOwner' || (i % ${OWNERS}) end, 'op-' || i, md5(i::text),
              'did:key:zOwner' || (i % ${OWNERS}), 'google', 'calendar.event', 'create', 'a', 't', 'e-' || i, 'h-' || i, 'none',
              case when i % 10 = 2 then 'dead' else 'committed' end, 1 + i % 5, 0, 1700000000000 + i, 1700000000000 + i
       from generate_series(1, ${ROWS}) as i`),
    );
    for (const { definition } of indexes) await open.db.executeQuery(CompiledQuery.raw(definition));
    await open.db.executeQuery(CompiledQuery.raw('vacuum analyze kubun_connector_operation'));
  }, 300_000);

  afterAll(async () => {
    await open?.close();
    await scratch?.drop();
  });

  /** The last statement `run` issued, explained. */
  async function explainLast(run: (store: StoreContext) => Promise<unknown>): Promise<Explained> {
    const { store: recording, statements } = recordingStatements(store);
    await run(recording);
    const statement = statements.at(-1)!;
    const explain = async () => {
      const { rows } = await store.db.executeQuery<{ 'QUERY PLAN': [{ Plan: Record<string, unknown> }] }>(
        CompiledQuery.raw(`explain (analyze, buffers, format json) ${statement.sql}`, [...statement.parameters]),
      );
      return rows[0]!['QUERY PLAN'][0].Plan;
    };
    // The second run: the first may also read the pages cold (the buffers touched are the same, hit or read).
    await explain();
    const plan = await explain();
    const shape: string[] = [];
    const walk = (node: Record<string, unknown>) => {
      shape.push(`${String(node['Node Type'])}${node['Index Name'] === undefined ? '' : ` ${String(node['Index Name'])}`}`);
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk(plan);
    return { buffers: Number(plan['Shared Hit Blocks']) + Number(plan['Shared Read Blocks']), shape };
  }

  /** The cursor `depth` rows down a viewer's newest-first operations (OFFSET is fine for the test itself). */
  async function cursorAt(visibleTo: string | null, depth: number) {
    const where = visibleTo === null ? '' : `where caller_did = '${visibleTo}' or owner_did = '${visibleTo}'`;
    const { rows } = await store.db.executeQuery<{ created_at: number; node_key: string }>(
      CompiledQuery.raw(`select created_at, node_key from kubun_connector_operation ${where} order by created_at desc, node_key desc offset ${depth} limit 1`),
    );
    return { createdAt: Number(rows[0]!.created_at), nodeKey: rows[0]!.node_key };
  }

  it.each([
    ['a service', null, ROWS],
    ['an ordinary user', ORDINARY, ROWS / OWNERS],
  ] as const)('for %s: the page 90 percent down reads ≤ 1.2× page 1’s buffers with the same plan; totalCount adds ≤ 0.2× a page', async (_label, visibleTo, visible) => {
    const after = await cursorAt(visibleTo, Math.floor(visible * 0.9));
    const page1 = await explainLast((s) => listOperations(s, { visibleTo, first: 50 }, 'brief'));
    const deep = await explainLast((s) => listOperations(s, { visibleTo, first: 50, after }, 'brief'));
    const count = await explainLast((s) => countOperations(s, { visibleTo }));
    const report = JSON.stringify({ page1, deep, count });
    if (process.env.DEEP_PAGE_REPORT === '1') console.log(_label, report);
    expect(deep.shape, report).toEqual(page1.shape);
    expect(deep.buffers, report).toBeLessThanOrEqual(Math.max(1.2 * page1.buffers, page1.buffers + 2));
    expect((page1.buffers + count.buffers) / page1.buffers, report).toBeLessThanOrEqual(1.2);
  }, 120_000);
});
