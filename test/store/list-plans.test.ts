/**
 * List queries keep their intended index whatever the statistics say (issue
 * 21 item 4), on both dialects. The tables are analyzed while the viewer's
 * rows are most of them; then 60 000 newer rows of another caller and owner
 * arrive behind the planner's back (a busy tenant on a young table). A
 * viewer's first page must still be read from the indexes that hold only the
 * viewer's rows, in order, never by walking the newest-first index of every
 * row past the other tenant's 60 000 (13.7 ms and 3 466 buffers at 1 M rows
 * before, bench/plans.ts). A service's page reads the newest-first index.
 */
import { CompiledQuery } from 'kysely';
import { expect, it } from 'vitest';
import { listOperations } from '../../src/store/operations/index.js';
import { listWatches } from '../../src/store/projection-watches/index.js';
import { listSweepReceipts } from '../../src/store/sweeps/index.js';
import { listSyncStates } from '../../src/store/sync-state/index.js';
import { describeEachDialect, type DialectSuite } from '../helpers/databases.js';
import { accessPaths, overSeries, recordingStatements } from '../helpers/query-plans.js';

const VIEWER = 'did:key:z6MkViewer';
const TENANT = 'did:key:z6MkBusyTenant';
const ANALYZED_ROWS = 3_000;
const NEWER_ROWS = 60_000;

/** `rows` operations called by `caller` for `owner`, created from `createdFrom` on, and as many watches and sweep receipts of `owner`. */
async function insertRows(suite: DialectSuite, prefix: string, caller: string, owner: string, rows: number, createdFrom: number) {
  const run = (body: string) => suite.store.db.executeQuery(overSeries(suite.dialect, rows, body));
  await run(`insert into kubun_connector_operation
      (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
       payload_hash, reissue_intent, state, attempts, version, next_attempt_at, created_at, updated_at)
      select '${caller}', '${prefix}-' || i, '${prefix}' || i, '${owner}', 'google', 'calendar.event', 'create', 'account-1', 'primary',
        'e-${prefix}-' || i, 'h', 'none', 'committed', 1, 0, ${createdFrom} + i, ${createdFrom} + i, ${createdFrom} + i`);
  await run(`insert into kubun_connector_projection_watch
      (owner_did, connector_name, model, account_key, source_id, node_key, document_id, verification_status, next_attempt_at, created_at, updated_at)
      select '${owner}', 'google', 'calendar.event', 'account-1', 'src-${prefix}-' || i, 'w${prefix}' || i, 'doc-${prefix}-' || i,
        'verified', ${createdFrom} + i, ${createdFrom} + i, ${createdFrom} + i`);
  await run(`insert into kubun_connector_sync_state
      (connector_name, owner_did, node_key, last_synced_at, status, version, incarnation, entity_count)
      select 'c-${prefix}-' || i, '${owner}', 's${prefix}' || i, '2026-01-01T00:00:00Z', 'idle', 0, 'inc', 0`);
  await run(`insert into kubun_connector_sweep_receipt
      (owner_did, connector_name, partition, provenance, node_key, sequence, model_id, scope, keep, source_fetch_hlc, kind, complete, created_at)
      select '${owner}', 'google', 'p-${prefix}-' || i, 'prov', 'r${prefix}' || i, i, 'calendar.event', '{}', '[]', 'hlc', 'full', 1, ${createdFrom} + i`);
}

const EXPECTED: Record<string, { viewer: string[]; service: string[] }> = {
  kubun_connector_operation: { viewer: ['idx_connector_operation_caller_created', 'idx_connector_operation_owner_foreign_created'], service: ['idx_connector_operation_created'] },
  kubun_connector_projection_watch: { viewer: ['idx_connector_watch_owner_created'], service: ['idx_connector_watch_created'] },
  kubun_connector_sweep_receipt: { viewer: ['idx_connector_sweep_receipt_owner_created'], service: ['idx_connector_sweep_receipt_created'] },
  kubun_connector_sync_state: { viewer: ['idx_connector_sync_state_owner'], service: ['kubun_connector_sync_state_pkey', 'sqlite_autoindex_kubun_connector_sync_state_1'] },
};

/** Page 1 and page 2 of every list as `visibleTo`; every statement's access paths must be that kind of viewer's indexes. */
async function expectListPlans(suite: DialectSuite, visibleTo: string | null) {
  const { store, statements } = recordingStatements(suite.store);
  const operations = await listOperations(store, { visibleTo, first: 20 });
  expect(operations.operations).toHaveLength(20);
  const last = operations.operations.at(-1)!;
  await listOperations(store, { visibleTo, first: 20, after: { createdAt: last.createdAt, nodeKey: last.nodeKey } });
  await listOperations(store, { visibleTo, last: 20, before: { createdAt: last.createdAt, nodeKey: last.nodeKey } });
  const watches = await listWatches(store, { visibleTo, first: 20 });
  const lastWatch = watches.watches.at(-1)!;
  await listWatches(store, { visibleTo, first: 20, after: { createdAt: lastWatch.createdAt, nodeKey: lastWatch.nodeKey } });
  const receipts = await listSweepReceipts(store, { visibleTo, first: 20 });
  const lastReceipt = receipts.receipts.at(-1)!;
  await listSweepReceipts(store, { visibleTo, first: 20, after: { createdAt: lastReceipt.createdAt, nodeKey: lastReceipt.nodeKey } });
  await listSyncStates(store, { visibleTo, first: 20 });

  const kind = visibleTo === null ? 'service' : 'viewer';
  const seen = new Set<string>();
  for (const statement of statements) {
    const table = Object.keys(EXPECTED).find((name) => statement.sql.includes(`"${name}"`));
    if (table === undefined) continue;
    seen.add(table);
    const paths = await accessPaths(suite.store, statement, table);
    expect(paths, statement.sql).not.toHaveLength(0);
    for (const path of paths) expect(EXPECTED[table]![kind].some((index) => path.includes(index)), `${kind}: ${path}\n  for ${statement.sql}`).toBe(true);
  }
  expect([...seen].sort()).toEqual(Object.keys(EXPECTED).sort());
}

/** A service's pages narrowed to one owner read that owner's indexes, as a viewer's do (the service states no ACROSS_TENANTS). */
async function expectOwnerFilteredPlans(suite: DialectSuite, ownerDID: string) {
  const { store, statements } = recordingStatements(suite.store);
  const filter = { ownerDID };
  expect((await listOperations(store, { visibleTo: null, first: 20, filter })).operations).toHaveLength(20);
  expect((await listWatches(store, { visibleTo: null, first: 20, filter })).watches).toHaveLength(20);
  expect((await listSweepReceipts(store, { visibleTo: null, first: 20, filter })).receipts).toHaveLength(20);
  const expected: Record<string, string> = {
    kubun_connector_operation: 'idx_connector_operation_owner_created',
    kubun_connector_projection_watch: 'idx_connector_watch_owner_created',
    kubun_connector_sweep_receipt: 'idx_connector_sweep_receipt_owner_created',
  };
  expect(statements).toHaveLength(3);
  for (const statement of statements) {
    const table = Object.keys(expected).find((name) => statement.sql.includes(`"${name}"`))!;
    const paths = await accessPaths(suite.store, statement, table);
    expect(paths, statement.sql).not.toHaveLength(0);
    for (const path of paths) expect(path, statement.sql).toContain(expected[table]);
  }
}

describeEachDialect('list queries keep their index whatever the statistics say', (suite) => {
  it('a viewer’s pages read the viewer’s own indexes after 60 000 newer rows of another tenant arrived unanalyzed; a service’s the newest-first ones', { timeout: 120_000 }, async () => {
    // The viewer calls for themselves, and someone else calls for the viewer (the owner-only branch).
    await insertRows(suite, 'own', VIEWER, VIEWER, ANALYZED_ROWS, 1_700_000_000_000);
    await insertRows(suite, 'for', 'did:key:z6MkOtherCaller', VIEWER, ANALYZED_ROWS / 3, 1_700_000_000_000);
    await suite.store.db.executeQuery(CompiledQuery.raw('analyze'));
    await insertRows(suite, 'busy', TENANT, TENANT, NEWER_ROWS, 1_800_000_000_000);
    await expectListPlans(suite, VIEWER);
    await expectListPlans(suite, null);
    await expectOwnerFilteredPlans(suite, VIEWER);
  });

  it('the same when the statistics were taken before the viewer had any rows (no sort of all of them)', { timeout: 120_000 }, async () => {
    await insertRows(suite, 'busy', TENANT, TENANT, ANALYZED_ROWS, 1_700_000_000_000);
    await suite.store.db.executeQuery(CompiledQuery.raw('analyze'));
    await insertRows(suite, 'own', VIEWER, VIEWER, NEWER_ROWS, 1_800_000_000_000);
    await insertRows(suite, 'for', 'did:key:z6MkOtherCaller', VIEWER, ANALYZED_ROWS, 1_800_000_000_000);
    await expectListPlans(suite, VIEWER);
  });
});
