/**
 * Operation counts from the counter table (migration 0004): the triggers keep
 * it equal to the operations table through every write path, counting never
 * reads the operations table unless a filter needs a column the counters lack,
 * and then at most the cap; on Postgres the counters stay exact under
 * concurrent writers and never deadlock.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createStoreContext, type StoreContext } from '../../src/store/context.js';
import { countUpTo } from '../../src/store/count.js';
import { sweepDocumentRows } from '../../src/store/document-sweep/index.js';
import {
  claimOperation,
  countOperationGroups,
  countOperations,
  countOperationsByState,
  recordOperationOutcome,
  startOperationAttempt,
} from '../../src/store/operations/index.js';
import { runRetention } from '../../src/store/retention/index.js';
import { describeEachDialect, TEST_POOL_SIZE } from '../helpers/databases.js';
import { claimFresh, claimInput, commitDirectly, keyOf, setColumns } from '../helpers/operation-claim-fixtures.js';
import { insertOperationRow } from '../helpers/row-fixtures.js';

const COUNTED = ['caller_did', 'owner_did', 'connector_name', 'model', 'state'] as const;

/** The operations table grouped by every counted column, as the counters should say. */
async function truth(store: StoreContext): Promise<string[]> {
  const rows = await store.db
    .selectFrom('kubun_connector_operation')
    .select([...COUNTED, sql<string>`coalesce(last_kind, '')`.as('last_kind'), sql<string>`coalesce(defer_reason, '')`.as('defer_reason'), (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy([...COUNTED, 'last_kind', 'defer_reason'])
    .execute();
  return rows.map((r) => JSON.stringify([r.caller_did, r.owner_did, r.connector_name, r.model, r.state, r.last_kind, r.defer_reason, Number(r.n)])).sort();
}

/** The counter table summed over shards, zero rows left out. */
async function counters(store: StoreContext): Promise<string[]> {
  const rows = await store.db
    .selectFrom('kubun_connector_operation_count')
    .select([...COUNTED, 'last_kind', 'defer_reason', (eb) => eb.fn.sum<number>('n').as('n')])
    .groupBy([...COUNTED, 'last_kind', 'defer_reason'])
    .execute();
  return rows
    .filter((r) => Number(r.n) !== 0)
    .map((r) => JSON.stringify([r.caller_did, r.owner_did, r.connector_name, r.model, r.state, r.last_kind, r.defer_reason, Number(r.n)]))
    .sort();
}

/** The totals table summed over shards, against the operations table without caller and owner. */
async function totalsMatch(store: StoreContext): Promise<[string[], string[]]> {
  const dims = ['connector_name', 'model', 'state'] as const;
  const table = await store.db
    .selectFrom('kubun_connector_operation')
    .select([...dims, sql<string>`coalesce(last_kind, '')`.as('last_kind'), sql<string>`coalesce(defer_reason, '')`.as('defer_reason'), (eb) => eb.fn.countAll<number>().as('n')])
    .groupBy([...dims, 'last_kind', 'defer_reason'])
    .execute();
  const totals = await store.db
    .selectFrom('kubun_connector_operation_total')
    .select([...dims, 'last_kind', 'defer_reason', (eb) => eb.fn.sum<number>('n').as('n')])
    .groupBy([...dims, 'last_kind', 'defer_reason'])
    .execute();
  const show = (rows: typeof table) => rows.filter((r) => Number(r.n) !== 0).map((r) => JSON.stringify([r.connector_name, r.model, r.state, r.last_kind, r.defer_reason, Number(r.n)])).sort();
  return [show(totals), show(table)];
}

describeEachDialect('operations: counts', (suite) => {
  async function expectCountersExact(): Promise<void> {
    expect(await counters(suite.store)).toEqual(await truth(suite.store));
    const [totals, table] = await totalsMatch(suite.store);
    expect(totals).toEqual(table);
  }

  it('the counters follow every write path: claim, attempt, outcome, deferral, commit, direct updates, retention, document sweep', async () => {
    const a = await claimFresh(suite.store, { operationID: 'a' });
    const b = await claimFresh(suite.store, { operationID: 'b', connectorName: 'github' });
    await claimFresh(suite.store, { operationID: 'c', ownerDID: 'did:key:zOther', callerDID: 'did:key:zOther' });
    await expectCountersExact();
    expect(await counters(suite.store)).toHaveLength(3);

    await startOperationAttempt(suite.store, a.fence);
    await recordOperationOutcome(suite.store, { ...a.fence, kind: 'offline' });
    await expectCountersExact();
    expect((await countOperationGroups(suite.store, { visibleTo: null }, ['deferReason'])).groups).toContainEqual({ key: { deferReason: 'offline' }, count: 1 });

    await startOperationAttempt(suite.store, b.fence);
    await recordOperationOutcome(suite.store, { ...b.fence, kind: 'fatal', lastHTTPStatus: 400 });
    await commitDirectly(suite.store, keyOf({ callerDID: claimInput().callerDID, operationID: 'a' }), 'doc-a', { id: 1 });
    await expectCountersExact();
    expect((await countOperationsByState(suite.store, { visibleTo: null })).counts).toEqual({ attempted: 1, reconcile_only: 0, committed: 1, dead: 1 });

    // A write that changes no counted column leaves the counters alone; one that does moves one row.
    await setColumns(suite.store, keyOf({ callerDID: 'did:key:zOther', operationID: 'c' }), { lease_expires_at: 1 });
    await setColumns(suite.store, keyOf({ callerDID: 'did:key:zOther', operationID: 'c' }), { state: 'reconcile_only', last_kind: 'unknown' });
    await expectCountersExact();

    // Many rows in one statement (SQL insert of 30, one update of all, one delete).
    for (let i = 0; i < 30; i++) await insertOperationRow(suite.store, { operation_id: `bulk-${i}`, state: i % 2 === 0 ? 'dead' : 'committed', document_id: `doc-${i % 3}`, updated_at: 0 });
    await expectCountersExact();
    await suite.store.db.updateTable('kubun_connector_operation').set({ model: 'renamed' }).where('operation_id', 'like', 'bulk-%').execute();
    await expectCountersExact();

    await sweepDocumentRows(suite.store, 'doc-1');
    await expectCountersExact();
    suite.clock.advance(400 * 24 * 3_600_000);
    const retention = await runRetention(suite.store);
    expect(retention.operations).toBeGreaterThan(0);
    await expectCountersExact();
    await suite.store.db.deleteFrom('kubun_connector_operation').execute();
    expect(await counters(suite.store)).toEqual([]);
    expect((await totalsMatch(suite.store))[0]).toEqual([]);
    expect(await countOperations(suite.store, { visibleTo: null })).toEqual({ count: 0, capped: false });
  });

  it('counts from the counters without reading the operations table, unless the filter is on the document', async () => {
    const statements: string[] = [];
    const logged = suite.database.dialect === 'postgres' ? suite.database.connectAgain({ log: (e) => void statements.push(e.query.sql) }) : undefined;
    try {
      await claimFresh(suite.store, { operationID: 'x' });
      const store = logged !== undefined ? createStoreContext(logged.db, 'postgres', { now: suite.clock.now }) : suite.store;
      if (logged === undefined) return; // the SQLite suite has one connection; the SQL is the same text
      await countOperations(store, { visibleTo: 'did:key:zSomeone', filter: { states: ['attempted'], connectorName: 'google' } });
      await countOperationsByState(store, { visibleTo: null });
      expect(statements).toHaveLength(2);
      // A viewer's counts read the viewer counters; a service's over everyone read the totals.
      expect(statements[0]).toContain('"kubun_connector_operation_count"');
      expect(statements[1]).toContain('"kubun_connector_operation_total"');
      for (const text of statements) expect(text).not.toMatch(/"kubun_connector_operation"(?!_)/);
      statements.length = 0;
      expect(await countOperations(store, { visibleTo: null, filter: { documentID: 'doc-x' } })).toEqual({ count: 0, capped: false });
      expect(statements[0]).toMatch(/limit/i);
    } finally {
      await logged?.close();
    }
  });

  it('counts viewer, owner, connector, state, last kind and defer reason like the table does', async () => {
    const me = 'did:key:zMe';
    await claimFresh(suite.store, { operationID: '1', callerDID: me, ownerDID: me });
    await claimFresh(suite.store, { operationID: '2', callerDID: 'did:key:zWorker', ownerDID: me, connectorName: 'github' });
    await claimFresh(suite.store, { operationID: '3', callerDID: me, ownerDID: 'did:key:zClient' });
    await claimFresh(suite.store, { operationID: '4', callerDID: 'did:key:zWorker', ownerDID: 'did:key:zClient' });
    const mine = await countOperationGroups(suite.store, { visibleTo: me }, ['connectorName', 'ownerDID']);
    expect(mine.groups).toEqual([
      { key: { connectorName: 'github', ownerDID: me }, count: 1 },
      { key: { connectorName: 'google', ownerDID: 'did:key:zClient' }, count: 1 },
      { key: { connectorName: 'google', ownerDID: me }, count: 1 },
    ]);
    expect(await countOperations(suite.store, { visibleTo: me })).toEqual({ count: 3, capped: false });
    expect(await countOperations(suite.store, { visibleTo: me, filter: { ownerDID: 'did:key:zClient' } })).toEqual({ count: 1, capped: false });
    expect((await countOperationGroups(suite.store, { visibleTo: null }, ['lastKind'])).groups).toEqual([{ key: { lastKind: null }, count: 4 }]);
    expect(await countOperations(suite.store, { visibleTo: 'did:key:zNobody' })).toEqual({ count: 0, capped: false });
  });

  it('a count outside the counters stops at the cap and says so', async () => {
    for (let i = 0; i < 5; i++) await insertOperationRow(suite.store, { operation_id: `d-${i}`, document_id: 'doc-1' });
    const query = suite.store.db.selectFrom('kubun_connector_operation').where('document_id', '=', 'doc-1');
    expect(await countUpTo(suite.store, query, 5)).toEqual({ count: 5, capped: false });
    expect(await countUpTo(suite.store, query, 4)).toEqual({ count: 4, capped: true });
    expect(await countOperations(suite.store, { visibleTo: null, filter: { documentID: 'doc-1' } })).toEqual({ count: 5, capped: false });
  });

  describe.runIf(suite.dialect === 'postgres')('on real parallel connections', () => {
    it('stay exact under 200 concurrent claims and outcomes of one caller, owner and connector', async () => {
      const again = suite.database.connectAgain();
      try {
        const pools = [suite.store, createStoreContext(again.db, 'postgres', { now: suite.clock.now })];
        await Promise.all(pools.flatMap((store) => Array.from({ length: TEST_POOL_SIZE }, () => sql`select pg_sleep(0.02)`.execute(store.db))));
        const results = await Promise.all(
          Array.from({ length: 200 }, async (_, i) => {
            const store = pools[i % 2]!;
            const claim = await claimOperation(store, claimInput({ operationID: `p-${i}` }));
            const fence = { key: keyOf({ callerDID: claimInput().callerDID, operationID: `p-${i}` }), version: claim.lease!.version, leaseToken: claim.lease!.token };
            await startOperationAttempt(store, fence);
            await recordOperationOutcome(store, { ...fence, kind: (['retryable', 'fatal', 'unknown', 'offline'] as const)[i % 4]! });
            return claim.outcome;
          }),
        );
        expect(results.every((outcome) => outcome === 'CLAIMED')).toBe(true);
        await expectCountersExact();
        expect((await countOperationsByState(suite.store, { visibleTo: null })).counts).toEqual({ attempted: 100, reconcile_only: 50, committed: 0, dead: 50 });
      } finally {
        await again.close();
      }
    });

    it('state flips in both directions from parallel connections never deadlock on counter rows', async () => {
      // One shard (node keys with one first character), so every flip touches the same two counter rows.
      for (let i = 0; i < 40; i++) await insertOperationRow(suite.store, { operation_id: `f-${i}`, node_key: `A-${i}`, state: i % 2 === 0 ? 'attempted' : 'dead' });
      const again = suite.database.connectAgain();
      try {
        const pools = [suite.store, createStoreContext(again.db, 'postgres', { now: suite.clock.now })];
        // attempted → dead decrements one counter row and increments the other; dead → attempted the
        // reverse: without one lock order, two such statements wait on each other.
        await Promise.all(
          Array.from({ length: 800 }, (_, n) =>
            pools[n % 2]!.db
              .updateTable('kubun_connector_operation')
              .set((eb) => ({ state: eb.case().when('state', '=', 'dead').then('attempted').else('dead').end() }))
              .where('caller_did', '=', claimInput().callerDID)
              .where('operation_id', '=', `f-${n % 40}`)
              .execute(),
          ),
        );
        await expectCountersExact();
      } finally {
        await again.close();
      }
    });
  });
});
