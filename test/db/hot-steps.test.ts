/**
 * A holder's start and mark sent are HOT updates on Postgres (issue 40 item
 * 4, migration 0017): they change no column any index of the operation table
 * names, so Postgres writes the row's new version on its page and no index
 * entry. A new index over `updated_at`, `attempts`, `send_marker` or
 * `send_deadline_at` (or one naming them in its predicate) would make every
 * such step write every index again; this test fails then. The steps run as
 * the write-back runtime sends them: gathered batches of the store's step
 * functions with request keys, on one connection, so that
 * `pg_stat_force_next_flush()` flushes the counters of the backend that
 * wrote (a backend's counters reach pg_stat_user_tables only when it flushes
 * them, at most once a second otherwise). Four operations fit on one page
 * with all their versions, so every eligible update is HOT whatever else
 * runs on the server.
 */
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { sql } from 'kysely';
import { openDatabase, parseDatabaseURL, type OpenDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { createStoreContext, type StoreContext } from '../../src/store/context.js';
import { finalizeOperationStep } from '../../src/store/finalize/index.js';
import { enqueueOperations, leaseDueOperations, markSentStep, startAttemptStep } from '../../src/store/operations/index.js';
import { testDialects } from '../helpers/databases.js';
import { createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';

const runs = testDialects().includes('postgres') && inject('postgresAvailable');
const OPERATIONS = 4;
const CALLER = 'did:key:z6MkHotSteps';

describe.skipIf(!runs)('postgres: HOT write-back steps', () => {
  let scratch: ScratchPostgresDatabase;
  let database: OpenDatabase;
  let store: StoreContext;

  beforeAll(async () => {
    scratch = await createScratchPostgresDatabase('cs_hot');
    database = openDatabase(parseDatabaseURL(scratch.url), { poolMax: 1 });
    await migrateToLatest(database.db, 'postgres');
    store = createStoreContext(database.db, 'postgres');
  });
  afterAll(async () => {
    await database?.close();
    await scratch?.drop();
  });

  /** The operation table's updates and HOT updates so far, this (only) backend's pending counters flushed first. */
  async function updates(): Promise<{ all: number; hot: number }> {
    await sql`select pg_stat_force_next_flush()`.execute(database.db);
    const { rows } = await sql<{ all: string; hot: string }>`
      select n_tup_upd as all, n_tup_hot_upd as hot from pg_stat_user_tables where relname = 'kubun_connector_operation'`.execute(database.db);
    return { all: Number(rows[0]!.all), hot: Number(rows[0]!.hot) };
  }

  /** What `step` added to the counters. */
  async function counted(step: () => Promise<unknown>): Promise<{ all: number; hot: number }> {
    const before = await updates();
    await step();
    const after = await updates();
    return { all: after.all - before.all, hot: after.hot - before.hot };
  }

  it('start and mark sent write no index entry; lease and finalize (lease, state and document are indexed) do', async () => {
    const items = Array.from({ length: OPERATIONS }, (_, i) => ({
      callerDID: CALLER, operationID: `op-${i}`, ownerDID: CALLER, connectorName: 'hot', model: 'contact', op: 'create' as const,
      accountKey: 'account', target: 'contacts', deterministicEventID: `event-${i}`, payloadHash: 'hash', reissueIntent: 'none',
    }));
    await enqueueOperations(store, items);
    let leased: Awaited<ReturnType<typeof leaseDueOperations>> = [];
    const lease = await counted(async () => {
      leased = await leaseDueOperations(store, { connectorName: 'hot', limit: OPERATIONS, leaseMs: 60_000 });
    });
    expect(leased).toHaveLength(OPERATIONS);
    const calls = leased.map(({ operation, lease }, i) => ({ nodeKey: operation.nodeKey, visibleTo: null, version: lease.version, leaseToken: lease.token, i }));
    const start = await counted(() => Promise.all(calls.map((c) => startAttemptStep(store, { ...c, request: { requestKey: `start-${c.i}`, input: {} } }))));
    const mark = await counted(() =>
      Promise.all(calls.map((c) => markSentStep(store, { ...c, request: { requestKey: `mark-${c.i}`, input: { sendMarker: `m-${c.i}` } } }, { sendMarker: `m-${c.i}` }))),
    );
    const finalize = await counted(() =>
      Promise.all(
        leased.map(({ operation, lease }, i) =>
          finalizeOperationStep(
            store,
            {
              key: { callerDID: operation.callerDID, operationID: operation.operationID }, version: lease.version, leaseToken: lease.token,
              documentID: `doc-${i}`, resultEntity: null, currentWinnerDigest: null,
              watchIdentity: { ownerDID: CALLER, connectorName: 'hot', model: 'contact', accountKey: 'account', sourceID: `src-${i}` },
            },
            { requestKey: `finalize-${i}`, input: { documentID: `doc-${i}` } },
          ),
        ),
      ),
    );
    expect({ lease, start, mark, finalize }).toEqual({
      lease: { all: OPERATIONS, hot: 0 },
      start: { all: OPERATIONS, hot: OPERATIONS },
      mark: { all: OPERATIONS, hot: OPERATIONS },
      finalize: { all: OPERATIONS, hot: 0 },
    });
    const { rows } = await sql<{ state: string; attempts: number }>`select state, attempts from kubun_connector_operation`.execute(database.db);
    expect(rows).toEqual(Array.from({ length: OPERATIONS }, () => ({ state: 'committed', attempts: 1 })));
  });

  it('keeps room on each page for a row’s next version (fillfactor 80; the attempt history 90)', async () => {
    const { rows } = await sql<{ relname: string; reloptions: string[] | null }>`
      select relname, reloptions from pg_class where relname in ('kubun_connector_operation', 'kubun_connector_operation_history') order by relname`.execute(database.db);
    expect(rows).toEqual([
      { relname: 'kubun_connector_operation', reloptions: ['fillfactor=80'] },
      { relname: 'kubun_connector_operation_history', reloptions: ['fillfactor=90'] },
    ]);
  });
});
