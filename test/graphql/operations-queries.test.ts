/**
 * The operation queries through yoga.fetch (SPEC §4, §5): `operations`
 * (keyset pages both ways, filters, totalCount), `operationCounts`,
 * `operationByKey`, and `node` / `nodes` for operations, each as caller,
 * owner, stranger and service.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { describeGraphQL, type Principal } from '../helpers/graphql.js';
import { unknownNodeID } from '../helpers/graphql-seed.js';
import { claimed, finalize, mutateOK, OPERATION_FIELDS } from '../helpers/operation-graphql.js';
import { operationRowValues } from '../helpers/row-fixtures.js';
import { COUNT_CAP } from '../../src/store/count.js';

interface Edge {
  cursor: string;
  node: { id: string; operationID: string; createdAt: string };
}
interface Page {
  edges: Edge[];
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
  totalCount: number;
  totalCountCapped: boolean;
}

const LIST = `query L($first: Int, $after: String, $last: Int, $before: String, $filter: OperationFilter) {
  operations(first: $first, after: $after, last: $last, before: $before, filter: $filter) {
    totalCount
    totalCountCapped
    pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
    edges { cursor node { id operationID createdAt } }
  }
}`;

const COUNTS = `query C($filter: OperationFilter) { operationCounts(filter: $filter) { state count capped } }`;
const BY_KEY = `query K($operationID: String!, $callerDID: DID) { operationByKey(operationID: $operationID, callerDID: $callerDID) { id operationID callerDID ownerDID } }`;
const NODE = `query N($id: ID!) { node(id: $id) { __typename id ... on ConnectorOperation { operationID } } }`;
const NODES = `query N($ids: [ID!]!) { nodes(ids: $ids) { __typename id ... on ConnectorOperation { operationID } } }`;

describeGraphQL('graphql operations: queries', (suite) => {
  async function page(variables: Record<string, unknown>, as: Principal = 'alice'): Promise<Page> {
    const res = await suite.gql(LIST, variables, { as });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    return res.data.operations as Page;
  }
  const idsOf = (p: Page) => p.edges.map((e) => e.node.operationID);

  async function listError(variables: Record<string, unknown>) {
    const res = await suite.gql(LIST, variables);
    expect(res.data).toBeNull();
    expect(res.errors).toHaveLength(1);
    return res.errors![0]!;
  }

  describe('with a mixed set of operations', () => {
    /** operationID → global id, for the data set below. */
    const ids = new Map<string, string>();

    /**
     * alice: a-0…a-6 one second apart (google), a-7…a-9 at one instant (github);
     * a-1 committed (doc-1), a-2 dead, a-3 reconcile-only. bob: b-0, b-1.
     * worker: w-0 for owner alice, w-1 for owner bob.
     */
    beforeEach(async () => {
      ids.clear();
      const add = async (operationID: string, as: Principal = 'alice', overrides: Record<string, unknown> = {}) => {
        const op = await claimed(suite, { operationID, ...overrides }, as);
        ids.set(operationID, op.operation.id);
        return op;
      };
      for (let i = 0; i <= 6; i++) {
        const op = await add(`a-${i}`);
        if (i === 1) await finalize(suite, op.fence, { documentID: 'doc-1' });
        if (i === 2) await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind: 'FATAL' });
        if (i === 3) {
          await mutateOK(suite, 'startOperationAttempt', op.fence);
          await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind: 'UNKNOWN' });
        }
        suite.clock.advance(1_000);
      }
      for (let i = 7; i <= 9; i++) await add(`a-${i}`, 'alice', { connectorName: 'github' });
      suite.clock.advance(1_000);
      await add('b-0', 'bob');
      await add('b-1', 'bob', { connectorName: 'github' });
      suite.clock.advance(1_000);
      await add('w-0', 'worker', { ownerDID: suite.keys.alice.did });
      await add('w-1', 'worker', { ownerDID: suite.keys.bob.did });
    });

    /** Newest first; a-7…a-9 share an instant, so their order (by node key) is random. */
    const ALICE_SEES = ['w-0', 'a-7', 'a-8', 'a-9', 'a-6', 'a-5', 'a-4', 'a-3', 'a-2', 'a-1', 'a-0'];

    describe('operations', () => {
      it('lists what the viewer may see, newest first, with totalCount', async () => {
        const expected: [Principal, string[]][] = [
          ['alice', ALICE_SEES],
          ['bob', ['w-1', 'b-0', 'b-1']],
          ['mallory', []],
          ['worker', ['w-0', 'w-1', 'b-0', 'b-1', ...ALICE_SEES.slice(1)]],
        ];
        for (const [who, visible] of expected) {
          const all = await page({ first: 100 }, who);
          expect(all.totalCount, who).toBe(visible.length);
          expect(idsOf(all).sort(), who).toEqual([...visible].sort());
          const times = all.edges.map((e) => Date.parse(e.node.createdAt));
          expect(times, who).toEqual([...times].sort((a, b) => b - a));
          expect(all.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: false });
        }
        const order = idsOf(await page({ first: 100 }, 'alice'));
        expect(order[0]).toBe('w-0');
        expect(order.slice(1, 4).sort()).toEqual(['a-7', 'a-8', 'a-9']);
        expect(order.slice(4)).toEqual(ALICE_SEES.slice(4));
        // Within one instant the order is fixed too (node key), so the full list is stable.
        const again = await page({ first: 100 }, 'worker');
        expect(idsOf(again)).toEqual(idsOf(await page({ first: 100 }, 'worker')));
      });

      for (const who of ['alice', 'bob', 'worker'] as const) {
        it(`pages forward and backward without gaps or duplicates, at every page size (${who})`, async () => {
          const full = idsOf(await page({ first: 100 }, who));
          for (let size = 1; size <= 4; size++) {
            const forward: string[] = [];
            let after: string | null = null;
            for (let guard = 0; guard < 20; guard++) {
              const p: Page = await page({ first: size, after }, who);
              expect(p.totalCount).toBe(full.length);
              expect(p.pageInfo.hasPreviousPage).toBe(after !== null);
              forward.push(...idsOf(p));
              if (!p.pageInfo.hasNextPage) break;
              expect(p.edges).toHaveLength(size);
              expect(p.pageInfo.endCursor).toBe(p.edges.at(-1)!.cursor);
              after = p.pageInfo.endCursor;
            }
            expect(forward, `forward, size ${size}`).toEqual(full);

            const backward: string[] = [];
            let before: string | null = null;
            for (let guard = 0; guard < 20; guard++) {
              const p: Page = await page({ last: size, before }, who);
              expect(p.pageInfo.hasNextPage).toBe(before !== null);
              backward.unshift(...idsOf(p));
              if (!p.pageInfo.hasPreviousPage) break;
              expect(p.edges).toHaveLength(size);
              expect(p.pageInfo.startCursor).toBe(p.edges[0]!.cursor);
              before = p.pageInfo.startCursor;
            }
            expect(backward, `backward, size ${size}`).toEqual(full);
          }
        });
      }

      it('bounds a page by both after and before', async () => {
        const full = await page({ first: 100 });
        const order = idsOf(full);
        const after = full.edges[1]!.cursor;
        const before = full.edges[7]!.cursor;
        expect(idsOf(await page({ first: 100, after, before }))).toEqual(order.slice(2, 7));
        expect(idsOf(await page({ first: 2, after, before }))).toEqual(order.slice(2, 4));
        expect(idsOf(await page({ last: 2, after, before }))).toEqual(order.slice(5, 7));
      });

      it('keeps a cursor valid while newer operations arrive', async () => {
        const order = idsOf(await page({ first: 100 }));
        const first = await page({ first: 3 });
        suite.clock.advance(1_000);
        await claimed(suite, { operationID: 'a-new' });
        const rest = await page({ first: 100, after: first.pageInfo.endCursor });
        expect([...idsOf(first), ...idsOf(rest)]).toEqual(order);
        expect(idsOf(await page({ first: 1 }))).toEqual(['a-new']);
        expect(rest.totalCount).toBe(ALICE_SEES.length + 1);
      });

      it('returns an empty page for first: 0', async () => {
        const p = await page({ first: 0 });
        expect(p.edges).toEqual([]);
        expect(p.pageInfo).toMatchObject({ hasNextPage: true, hasPreviousPage: false });
        expect(p.totalCount).toBe(ALICE_SEES.length);
      });

      it('filters by states, connectorName, ownerDID and documentID (AND), and totalCount follows', async () => {
        const cases: [Record<string, unknown>, string[], Principal?][] = [
          [{ states: ['COMMITTED'] }, ['a-1']],
          [{ states: ['DEAD', 'RECONCILE_ONLY'] }, ['a-3', 'a-2']],
          [{ states: ['ATTEMPTED'] }, ['w-0', 'a-7', 'a-8', 'a-9', 'a-6', 'a-5', 'a-4', 'a-0']],
          [{ states: [] }, []],
          [{ connectorName: 'github' }, ['a-7', 'a-8', 'a-9']],
          [{ connectorName: 'google', states: ['ATTEMPTED'] }, ['w-0', 'a-6', 'a-5', 'a-4', 'a-0']],
          [{ connectorName: 'nope' }, []],
          [{ documentID: 'doc-1' }, ['a-1']],
          [{ documentID: 'doc-1', states: ['ATTEMPTED'] }, []],
          [{ ownerDID: suite.keys.alice.did }, ALICE_SEES],
          // bob's rows stay invisible to alice even when she filters for them.
          [{ ownerDID: suite.keys.bob.did }, []],
          [{ ownerDID: suite.keys.bob.did }, ['w-1', 'b-0', 'b-1'], 'worker'],
          [{ ownerDID: suite.keys.bob.did, connectorName: 'github' }, ['b-1'], 'worker'],
        ];
        for (const [filter, expected, who] of cases) {
          const p = await page({ first: 100, filter }, who ?? 'alice');
          const label = JSON.stringify(filter);
          expect(idsOf(p).sort(), label).toEqual([...expected].sort());
          expect(p.totalCount, label).toBe(expected.length);
          expect(p.totalCountCapped, label).toBe(false);
        }
      });

      it('refuses a malformed filter ownerDID as a GraphQL error', async () => {
        const res = await suite.gql(LIST, { first: 10, filter: { ownerDID: 'bob' } });
        expect(res.data).toBeUndefined();
        expect(res.errors?.[0]?.message).toMatch(/DID must look like/);
      });

      it('refuses an invalid cursor instead of returning a first page', async () => {
        const badCursors = [
          'garbage!',
          Buffer.from('{"createdAt":"yesterday","nodeKey":"x"}').toString('base64url'),
          Buffer.from('[1,2]').toString('base64url'),
          Buffer.from('{"createdAt":1,"nodeKey":""}').toString('base64url'),
          // A NUL in the key reached SQL on Postgres (which refuses it in text) and was masked.
          Buffer.from(JSON.stringify({ createdAt: Date.UTC(2026, 0, 1), nodeKey: 'op\u0000key' })).toString('base64url'),
          // A well-formed position without its connection's name (the shape before issue 37), and one named for another list.
          Buffer.from(JSON.stringify({ createdAt: Date.UTC(2026, 0, 1), nodeKey: 'opkey' })).toString('base64url'),
          Buffer.from(JSON.stringify(['watches', { createdAt: Date.UTC(2026, 0, 1), nodeKey: 'opkey' }])).toString('base64url'),
        ];
        for (const cursor of badCursors) {
          for (const args of [{ first: 2, after: cursor }, { last: 2, before: cursor }]) {
            const error = await listError(args);
            expect(error.extensions?.code, cursor).toBe('BAD_USER_INPUT');
            expect(error.message).toMatch(/is not a cursor of this connection/);
          }
        }
      });

      it('a cursor of operations is refused by watches and sweepReceipts (same keyset shape, another list)', async () => {
        const cursor = (await page({ first: 1 }, 'worker')).pageInfo.endCursor as string;
        expect((await page({ first: 1, after: cursor }, 'worker')).edges).toHaveLength(1);
        for (const field of ['watches', 'sweepReceipts']) {
          const res = await suite.gql(`query($after: String) { ${field}(first: 1, after: $after) { edges { cursor } } }`, { after: cursor }, { as: 'worker' });
          expect(res.errors?.[0]?.extensions?.code, field).toBe('BAD_USER_INPUT');
          expect(res.errors?.[0]?.message, field).toBe('after is not a cursor of this connection');
        }
      });

      it('refuses page sizes above 100, negative ones, and first with last', async () => {
        expect((await listError({ first: 101 })).message).toMatch(/first: must be between 0 and 100/);
        expect((await listError({ last: 101 })).message).toMatch(/last: must be between 0 and 100/);
        expect((await listError({ first: -1 })).message).toMatch(/first: must be between 0 and 100/);
        expect((await listError({ first: 1, last: 1 })).message).toMatch(/either first or last/);
        expect((await page({ first: 100 })).edges).toHaveLength(ALICE_SEES.length);
      });
    });

    describe('operationCounts', () => {
      it('lists every state, zeros included, over what the viewer may see', async () => {
        const counts = async (as: Principal, filter?: Record<string, unknown>) => {
          const res = await suite.gql(COUNTS, { filter }, { as });
          expect(res.errors).toBeUndefined();
          return res.data.operationCounts;
        };
        const row = (attempted: number, reconcileOnly: number, committed: number, dead: number) => [
          { state: 'ATTEMPTED', count: attempted, capped: false },
          { state: 'RECONCILE_ONLY', count: reconcileOnly, capped: false },
          { state: 'COMMITTED', count: committed, capped: false },
          { state: 'DEAD', count: dead, capped: false },
        ];
        expect(await counts('alice')).toEqual(row(8, 1, 1, 1));
        expect(await counts('bob')).toEqual(row(3, 0, 0, 0));
        expect(await counts('mallory')).toEqual(row(0, 0, 0, 0));
        expect(await counts('worker')).toEqual(row(11, 1, 1, 1));
        expect(await counts('alice', { connectorName: 'github' })).toEqual(row(3, 0, 0, 0));
        expect(await counts('alice', { states: ['DEAD', 'COMMITTED'] })).toEqual(row(0, 0, 1, 1));
        expect(await counts('alice', { states: [] })).toEqual(row(0, 0, 0, 0));
        expect(await counts('worker', { ownerDID: suite.keys.bob.did })).toEqual(row(3, 0, 0, 0));
        expect(await counts('alice', { documentID: 'doc-1' })).toEqual(row(0, 0, 1, 0));
        const anonymous = await suite.gql(COUNTS, {}, { as: 'anonymous' });
        expect(anonymous.data).toBeUndefined();
        expect(anonymous.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
      });
    });

    describe('operationByKey', () => {
      async function byKey(as: Principal, operationID: string, callerDID?: string) {
        const res = await suite.gql(BY_KEY, { operationID, ...(callerDID !== undefined && { callerDID }) }, { as });
        expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
        return res.data.operationByKey as { id: string; operationID: string; callerDID: string; ownerDID: string } | null;
      }

      it('defaults callerDID to the viewer', async () => {
        expect(await byKey('alice', 'a-4')).toMatchObject({ id: ids.get('a-4'), callerDID: suite.keys.alice.did });
        expect(await byKey('alice', 'a-4', suite.keys.alice.did)).toMatchObject({ id: ids.get('a-4') });
        // bob has no a-4 of his own, and w-0 is not alice's key.
        expect(await byKey('bob', 'a-4')).toBeNull();
        expect(await byKey('alice', 'w-0')).toBeNull();
        expect(await byKey('alice', 'missing')).toBeNull();
      });

      it('finds an operation for its owner and a service, null for a stranger (exactly like a missing key)', async () => {
        expect(await byKey('alice', 'w-0', suite.keys.worker.did)).toMatchObject({ id: ids.get('w-0'), ownerDID: suite.keys.alice.did });
        expect(await byKey('worker', 'a-4', suite.keys.alice.did)).toMatchObject({ id: ids.get('a-4') });
        expect(await byKey('bob', 'a-4', suite.keys.alice.did)).toBeNull();
        expect(await byKey('bob', 'w-0', suite.keys.worker.did)).toBeNull();
        expect(await byKey('mallory', 'a-4', suite.keys.alice.did)).toBeNull();
        expect(await byKey('bob', 'no-such-op', suite.keys.alice.did)).toBeNull();
      });

      it('refuses an empty operationID and a malformed callerDID', async () => {
        const empty = await suite.gql(BY_KEY, { operationID: '' });
        expect(empty.data).toEqual({ operationByKey: null });
        expect(empty.errors?.[0]?.message).toBe('Validation error: operationID: must not be empty');
        const bad = await suite.gql(BY_KEY, { operationID: 'a-4', callerDID: 'alice' });
        expect(bad.data).toBeUndefined();
        expect(bad.errors?.[0]?.message).toMatch(/DID must look like/);
      });
    });

    describe('visibility of a service-claimed operation', () => {
      it('the owner sees it everywhere; another user sees it nowhere', async () => {
        const id = ids.get('w-0')!;
        const node = async (as: Principal) => (await suite.gql(NODE, { id }, { as })).data.node;
        expect(await node('alice')).toMatchObject({ __typename: 'ConnectorOperation', id, operationID: 'w-0' });
        expect(await node('worker')).toMatchObject({ id });
        expect(await node('bob')).toBeNull();
        expect(idsOf(await page({ first: 100 }, 'alice'))).toContain('w-0');
        expect(idsOf(await page({ first: 100 }, 'bob'))).not.toContain('w-0');
        const doc = await suite.gql(`query { document(documentID: "doc-1") { operations { id } } }`, {}, { as: 'bob' });
        expect(doc.data.document.operations).toEqual([]);
      });
    });

    describe('node and nodes', () => {
      it('node: visible → the operation with every field; invisible, unknown or malformed → null', async () => {
        const id = ids.get('a-4')!;
        const full = await suite.gql(`query N($id: ID!) { node(id: $id) { id ... on ConnectorOperation { ${OPERATION_FIELDS} } } }`, { id });
        expect(full.data.node).toMatchObject({ id, operationID: 'a-4', callerDID: suite.keys.alice.did, state: 'ATTEMPTED' });
        const cases: [string, Principal][] = [
          [id, 'bob'],
          [id, 'mallory'],
          [unknownNodeID('ConnectorOperation'), 'alice'],
          [unknownNodeID('ConnectorOperation'), 'worker'],
          ['not-an-id', 'alice'],
          ['', 'alice'],
          [Buffer.from(`ConnectorOperation:${'!'.repeat(22)}`).toString('base64url'), 'alice'],
          [Buffer.from(`ServerInfo:${'A'.repeat(22)}`).toString('base64url'), 'alice'],
        ];
        for (const [nodeID, who] of cases) {
          const res = await suite.gql(NODE, { id: nodeID }, { as: who });
          expect(res, `${nodeID} as ${who}`).toEqual({ data: { node: null } });
        }
      });

      it('nodes: preserves order, null for each invisible, unknown or malformed id, repeats allowed', async () => {
        const a4 = ids.get('a-4')!;
        const a1 = ids.get('a-1')!;
        const b0 = ids.get('b-0')!;
        const w0 = ids.get('w-0')!;
        const list = [a4, b0, unknownNodeID('ConnectorOperation'), 'bogus', w0, a1, a4];
        const res = await suite.gql(NODES, { ids: list });
        expect(res.errors).toBeUndefined();
        expect(res.data.nodes.map((n: { operationID: string } | null) => n?.operationID ?? null)).toEqual(['a-4', null, null, null, 'w-0', 'a-1', 'a-4']);
        const asBob = await suite.gql(NODES, { ids: list }, { as: 'bob' });
        expect(asBob.data.nodes.map((n: { operationID: string } | null) => n?.operationID ?? null)).toEqual([null, 'b-0', null, null, null, null, null]);
        const asWorker = await suite.gql(NODES, { ids: list }, { as: 'worker' });
        expect(asWorker.data.nodes.map((n: { id: string } | null) => n?.id ?? null)).toEqual([a4, b0, null, null, w0, a1, a4]);
        expect((await suite.gql(NODES, { ids: [] })).data.nodes).toEqual([]);
      });

      it('keeps anonymous callers out of node and nodes', async () => {
        for (const [query, vars] of [[NODE, { id: ids.get('a-4') }], [NODES, { ids: [ids.get('a-4')] }]] as const) {
          const res = await suite.gql(query, vars, { as: 'anonymous' });
          expect(res.data?.node ?? res.data?.nodes ?? null).toBeNull();
          expect(res.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
        }
      });
    });
  });

  it('an empty store lists nothing and counts zeros', async () => {
    expect(await page({ first: 10 }, 'worker')).toEqual({
      totalCount: 0,
      totalCountCapped: false,
      edges: [],
      pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null },
    });
  });
  it('counts past the cap: exact from the counters, capped (and said so) where a document filter counts rows', async () => {
    const rows = Array.from({ length: COUNT_CAP + 1 }, () => operationRowValues(suite.store, { document_id: 'doc-big', owner_did: suite.keys.alice.did }));
    for (let i = 0; i < rows.length; i += 500) await suite.store.db.insertInto('kubun_connector_operation').values(rows.slice(i, i + 500)).execute();
    const QUERY = `query Q($filter: OperationFilter) {
      operations(first: 1, filter: $filter) { totalCount totalCountCapped }
      operationCounts(filter: $filter) { state count capped }
    }`;
    const exact = await suite.gql(QUERY, {}, { as: 'worker' });
    expect(exact.data.operations).toEqual({ totalCount: COUNT_CAP + 1, totalCountCapped: false });
    expect(exact.data.operationCounts[0]).toEqual({ state: 'ATTEMPTED', count: COUNT_CAP + 1, capped: false });
    const capped = await suite.gql(QUERY, { filter: { documentID: 'doc-big' } }, { as: 'worker' });
    expect(capped.data.operations).toEqual({ totalCount: COUNT_CAP, totalCountCapped: true });
    expect(capped.data.operationCounts[0]).toMatchObject({ state: 'ATTEMPTED', capped: true });
    expect(capped.data.operationCounts[0].count).toBeGreaterThanOrEqual(COUNT_CAP);
  });
});
