/**
 * Failure filters and grouped counts (issue 11 item 2) through yoga.fetch:
 * every new `OperationFilter` field narrows `operations`, its `totalCount`
 * and `operationCounts` alike; `operationCounts(groupBy:)` groups by each
 * dimension; and the change streams' in-memory filter agrees with the SQL
 * one on every filter (so `operationsChanged` takes the same filters).
 */
import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { listOperations, matchesOperationFilter, type OperationFilter } from '../../src/store/operations/index.js';
import { describeGraphQL } from '../helpers/graphql.js';
import { claimed, mutateOK } from '../helpers/operation-graphql.js';
import { setColumns } from '../helpers/operation-claim-fixtures.js';

const LIST = `query L($filter: OperationFilter) {
  operations(first: 100, filter: $filter) { totalCount edges { node { operationID } } }
  operationCounts(filter: $filter, groupBy: []) { count capped }
}`;
const GROUPS = `query G($groupBy: [OperationCountDimension!], $filter: OperationFilter) {
  operationCounts(groupBy: $groupBy, filter: $filter) { state lastKind connectorName deferReason ownerDID count capped }
}`;

describeGraphQL('graphql operations: failure filters and grouped counts', (suite) => {
  /**
   * alice: r (retryable 503, 2 attempts), f (fatal: dead), o (offline-deferred),
   * u (unknown: reconcile-only), s (lease expired long ago: stuck), g (github, model m2, fresh).
   */
  async function seed() {
    const t0 = suite.clock.current;
    const r = await claimed(suite, { operationID: 'r' });
    for (let i = 0; i < 2; i++) {
      await mutateOK(suite, 'startOperationAttempt', r.fence);
      await mutateOK(suite, 'recordOperationAttempt', { ...r.fence, kind: 'RETRYABLE', lastHTTPStatus: 503 });
    }
    const f = await claimed(suite, { operationID: 'f' });
    await mutateOK(suite, 'startOperationAttempt', f.fence);
    await mutateOK(suite, 'recordOperationAttempt', { ...f.fence, kind: 'FATAL' });
    const o = await claimed(suite, { operationID: 'o' });
    await mutateOK(suite, 'startOperationAttempt', o.fence);
    await mutateOK(suite, 'recordOperationAttempt', { ...o.fence, kind: 'OFFLINE' });
    const u = await claimed(suite, { operationID: 'u' });
    await mutateOK(suite, 'startOperationAttempt', u.fence);
    await mutateOK(suite, 'recordOperationAttempt', { ...u.fence, kind: 'UNKNOWN' });
    suite.clock.advance(60_000);
    await claimed(suite, { operationID: 's' });
    suite.clock.advance(3_600_000); // every lease (30 s) has lapsed; s was due an hour ago
    const t1 = suite.clock.current;
    await claimed(suite, { operationID: 'g', connectorName: 'github', model: 'm2' });
    return { t0, t1 };
  }

  async function list(filter: Record<string, unknown>) {
    const res = await suite.gql(LIST, { filter }, { as: 'alice' });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    const ids = (res.data.operations.edges as { node: { operationID: string } }[]).map((e) => e.node.operationID).sort();
    expect(res.data.operations.totalCount, JSON.stringify(filter)).toBe(ids.length);
    expect(res.data.operationCounts, JSON.stringify(filter)).toEqual([{ count: ids.length, capped: false }]);
    return ids;
  }

  it('each filter narrows the listing, its totalCount and operationCounts alike', async () => {
    const { t0, t1 } = await seed();
    const iso = (ms: number) => new Date(ms).toISOString();
    expect(await list({})).toEqual(['f', 'g', 'o', 'r', 's', 'u']);
    expect(await list({ lastKinds: ['RETRYABLE', 'FATAL'] })).toEqual(['f', 'r']);
    expect(await list({ lastKinds: [] })).toEqual([]);
    expect(await list({ deferReasons: ['OFFLINE'] })).toEqual(['o']);
    expect(await list({ model: 'm2' })).toEqual(['g']);
    expect(await list({ minAttempts: 2 })).toEqual(['r']);
    expect(await list({ minAttempts: 1, states: ['ATTEMPTED'] })).toEqual(['r']);
    // Stuck: live, and a lease that lapsed or due for 15 minutes with none live (g was just claimed).
    expect(await list({ stuck: true })).toEqual(['o', 'r', 's', 'u']);
    expect(await list({ stuck: false })).toEqual(['f', 'g']);
    expect(await list({ createdAfter: iso(t1) })).toEqual(['g']);
    expect(await list({ createdBefore: iso(t0 + 1) })).toEqual(['f', 'o', 'r', 'u']);
    expect(await list({ updatedAfter: iso(t1), updatedBefore: iso(t1 + 1) })).toEqual(['g']);
    // Due before t1: every live one claimed before it (a dead one is never due; g is due exactly at t1).
    expect(await list({ dueBefore: iso(t1) })).toEqual(['o', 'r', 's', 'u']);
  });

  it('groups counts by each dimension, and by several', async () => {
    await seed();
    const groups = async (groupBy: string[], filter?: Record<string, unknown>) => {
      const res = await suite.gql(GROUPS, { groupBy, filter }, { as: 'alice' });
      expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
      return (res.data.operationCounts as Record<string, unknown>[]).map((g) => Object.fromEntries(Object.entries(g).filter(([, v]) => v !== null)));
    };
    expect(await groups(['LAST_KIND'])).toEqual([
      { count: 2, capped: false }, // no outcome yet: lastKind null
      { lastKind: 'FATAL', count: 1, capped: false },
      { lastKind: 'OFFLINE', count: 1, capped: false },
      { lastKind: 'RETRYABLE', count: 1, capped: false },
      { lastKind: 'UNKNOWN', count: 1, capped: false },
    ]);
    expect(await groups(['CONNECTOR'])).toEqual([
      { connectorName: 'google', count: 5, capped: false },
      { connectorName: 'github', count: 1, capped: false },
    ]);
    expect(await groups(['DEFER_REASON'], { deferReasons: ['OFFLINE'] })).toEqual([{ deferReason: 'OFFLINE', count: 1, capped: false }]);
    expect(await groups(['OWNER'])).toEqual([{ ownerDID: suite.keys.alice.did, count: 6, capped: false }]);
    expect(await groups(['STATE', 'CONNECTOR'], { stuck: false })).toEqual([
      { state: 'ATTEMPTED', connectorName: 'github', count: 1, capped: false },
      { state: 'DEAD', connectorName: 'google', count: 1, capped: false },
    ]);
    // The default groups by state and lists every state.
    expect((await groups(['STATE'])).map((g) => g.state)).toEqual(['ATTEMPTED', 'RECONCILE_ONLY', 'COMMITTED', 'DEAD']);
    // Another viewer counts none of alice's.
    const res = await suite.gql(GROUPS, { groupBy: ['CONNECTOR'] }, { as: 'bob' });
    expect(res.data.operationCounts).toEqual([]);
  });

  it('refuses a negative minAttempts as input validation', async () => {
    const res = await suite.gql(LIST, { filter: { minAttempts: -1 } }, { as: 'alice' });
    expect(res.data).toBeNull();
    expect(res.errors?.[0]?.message).toMatch(/filter\.minAttempts: Too small/);
  });

  it('the change streams’ filter matches exactly what the listing returns, for every filter', async () => {
    const { t0, t1 } = await seed();
    await setColumns(suite.store, { callerDID: suite.keys.alice.did, operationID: 'g' }, { document_id: 'doc-g' });
    const filters: OperationFilter[] = [
      {},
      { states: ['dead', 'reconcile_only'] },
      { lastKinds: ['retryable'] },
      { deferReasons: ['offline'] },
      { model: 'm2' },
      { connectorName: 'github' },
      { documentID: 'doc-g' },
      { operationID: 'r' },
      { operationID: 'nope' },
      { minAttempts: 1 },
      { stuck: true },
      { stuck: false },
      { dueBefore: t1 },
      { createdAfter: t0 + 1 },
      { createdBefore: t1 },
      { updatedAfter: t1 },
      { updatedBefore: t1 },
    ];
    const all = (await listOperations(suite.store, { visibleTo: null, first: 100 })).operations;
    for (const filter of filters) {
      const listed = (await listOperations(suite.store, { visibleTo: null, first: 100, filter })).operations.map((op) => op.operationID).sort();
      const matched = all.filter((op) => matchesOperationFilter(op, filter, suite.clock.now())).map((op) => op.operationID).sort();
      expect(matched, JSON.stringify(filter)).toEqual(listed);
    }
  });

  it('the "what’s stuck and why" query of docs/api.md runs and finds the stuck operations', async () => {
    await seed();
    const docs = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
    const query = /What's stuck and why[\s\S]*?```graphql\n([\s\S]*?)```/.exec(docs)?.[1];
    expect(query).toBeDefined();
    const res = await suite.gql(query!, {}, { as: 'alice' });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    expect(res.data.operations.totalCount).toBe(4);
    expect((res.data.operationCounts as { count: number }[]).reduce((sum, g) => sum + g.count, 0)).toBe(4);
  });
});
