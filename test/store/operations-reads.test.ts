import { beforeEach, describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../src/store/errors.js';
import {
  claimOperation,
  countOperations,
  countOperationsByState,
  getOperationByKey,
  getOperationByNodeKey,
  getOperationsByDocumentIDs,
  getOperationsByNodeKeys,
  listOperations,
  recordOperationOutcome,
  type ConnectorOperation,
  type ListOperationsInput,
  type OperationScope,
} from '../../src/store/operations/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { claimFresh, claimInput, commitDirectly, keyOf, setColumns } from '../helpers/operation-claim-fixtures.js';
import { withStatementCounter } from '../helpers/statement-counter.js';
import { NEWEST_FIRST, type NewestFirstCursor } from '../../src/store/page.js';

const VIEWER = 'did:key:z6MkViewer';
const SOMEONE = 'did:key:z6MkSomeone';
const ELSE = 'did:key:z6MkElse';

describeEachDialect('operations: reads and listings', (suite) => {
  describe('point and batched reads', () => {
    it('reads by key and by node key; null when absent', async () => {
      const { operation } = await claimFresh(suite.store);
      expect(await getOperationByKey(suite.store, keyOf(claimInput()))).toEqual(operation);
      expect(await getOperationByNodeKey(suite.store, operation.nodeKey)).toEqual(operation);
      expect(await getOperationByKey(suite.store, { callerDID: 'did:key:zX', operationID: 'op-1' })).toBeNull();
      expect(await getOperationByNodeKey(suite.store, 'no-such-node')).toBeNull();
    });

    it('getOperationsByNodeKeys: one statement, aligned with the input', async () => {
      const a = (await claimFresh(suite.store, { operationID: 'a' })).operation;
      const b = (await claimFresh(suite.store, { operationID: 'b' })).operation;
      const { store, statements } = withStatementCounter(suite.store);
      const result = await getOperationsByNodeKeys(store, [b.nodeKey, 'missing', a.nodeKey, b.nodeKey]);
      expect(result).toEqual([b, null, a, b]);
      expect(statements).toEqual(['SelectQueryNode']);
      expect(await getOperationsByNodeKeys(store, [])).toEqual([]);
      expect(statements).toHaveLength(1);
    });

    it('getOperationsByDocumentIDs: one statement, every id a key, newest first', async () => {
      const made: ConnectorOperation[] = [];
      for (const [id, doc] of [['a', 'doc-1'], ['b', 'doc-2'], ['c', 'doc-1'], ['d', null]] as const) {
        suite.clock.advance(1_000);
        made.push((await claimFresh(suite.store, { operationID: id })).operation);
        if (doc !== null) await commitDirectly(suite.store, keyOf(claimInput({ operationID: id })), doc, { id });
      }
      const { store, statements } = withStatementCounter(suite.store);
      const byDocument = await getOperationsByDocumentIDs(store, ['doc-1', 'doc-3', 'doc-2', 'doc-1']);
      expect(statements).toHaveLength(1);
      expect([...byDocument.keys()]).toEqual(['doc-1', 'doc-3', 'doc-2']);
      expect(byDocument.get('doc-1')?.map((op) => op.operationID)).toEqual(['c', 'a']);
      expect(byDocument.get('doc-1')?.[0]).toMatchObject({ state: 'committed', documentID: 'doc-1', resultEntity: { id: 'c' } });
      expect(byDocument.get('doc-2')?.map((op) => op.operationID)).toEqual(['b']);
      expect(byDocument.get('doc-3')).toEqual([]);
      expect((await getOperationsByDocumentIDs(store, [])).size).toBe(0);
      expect(statements).toHaveLength(1);
    });
  });

    it('a listed operation is the one read by key: the same values, keys in the same order, secrets left out (every page shape)', async () => {
      const plain = (await claimFresh(suite.store, { operationID: 'plain', callerDID: VIEWER, ownerDID: SOMEONE })).operation;
      suite.clock.advance(1_000);
      await claimFresh(suite.store, { operationID: 'full', callerDID: SOMEONE, ownerDID: VIEWER });
      const full = keyOf({ callerDID: SOMEONE, operationID: 'full' });
      await commitDirectly(suite.store, full, 'doc-1', { nested: { list: [1, 'two', null] } });
      await setColumns(suite.store, full, {
        send_marker: 'marker',
        last_error: 'boom',
        last_kind: 'retryable',
        last_http_status: 503,
        defer_reason: 'rate_limited',
        next_attempt_at: suite.clock.now() + 5_000,
        provider_etag: 'etag-1',
      });
      const expected = [await getOperationByKey(suite.store, full), await getOperationByKey(suite.store, keyOf(plain))];
      expect(expected[0]).toMatchObject({ sendMarkerSet: true, resultEntity: { nested: { list: [1, 'two', null] } }, lastHTTPStatus: 503 });
      expect(expected[1]).toMatchObject({ sendMarkerSet: false, resultEntity: null });
      const pages = [
        await listOperations(suite.store, { visibleTo: null, first: 5 }),
        await listOperations(suite.store, { visibleTo: VIEWER, first: 5 }),
        await listOperations(suite.store, { visibleTo: VIEWER, first: 5, filter: { connectorName: plain.connectorName } }),
        await listOperations(suite.store, { visibleTo: null, last: 5 }),
      ];
      for (const page of pages) {
        expect(page.operations).toEqual(expected);
        for (const [i, op] of page.operations.entries()) {
          expect(Object.keys(op)).toEqual(Object.keys(expected[i]!));
          expect(Object.keys(op)).not.toContain('leaseToken');
          expect(JSON.stringify(op)).not.toContain('marker"');
        }
      }
    });

  describe('listOperations and counts', () => {
    /** 24 operations over 8 instants (three share each), mixed callers, owners, connectors, states. */
    let all: ConnectorOperation[];
    beforeEach(async () => {
      const start = suite.clock.now();
      for (let i = 0; i < 24; i++) {
        suite.clock.set(start + Math.floor(i / 3) * 1_000);
        const input = claimInput({
          callerDID: i % 3 === 0 ? VIEWER : SOMEONE,
          ownerDID: i % 2 === 0 ? VIEWER : ELSE,
          operationID: `op-${i}`,
          connectorName: i % 4 === 0 ? 'github' : 'google',
        });
        const claimed = await claimOperation(suite.store, input);
        if (i % 5 === 0) await commitDirectly(suite.store, keyOf(input), `doc-${i % 2}`, null);
        if (i % 7 === 0 && i % 5 !== 0 && claimed.lease !== undefined) {
          await recordOperationOutcome(suite.store, { key: keyOf(input), version: 0, leaseToken: claimed.lease.token, kind: 'fatal' });
        }
      }
      all = (await listOperations(suite.store, { visibleTo: null, first: 100 })).operations;
    });

    const visibleToViewer = (op: ConnectorOperation) => op.callerDID === VIEWER || op.ownerDID === VIEWER;

    async function pageForward(input: Omit<ListOperationsInput, 'first' | 'after'>, size: number): Promise<{ pages: ConnectorOperation[][]; flags: boolean[] }> {
      const pages: ConnectorOperation[][] = [];
      const flags: boolean[] = [];
      let after: NewestFirstCursor | undefined;
      for (;;) {
        const page = await listOperations(suite.store, { ...input, first: size, after });
        pages.push(page.operations);
        flags.push(page.hasMore);
        if (!page.hasMore) return { pages, flags };
        after = NEWEST_FIRST.cursorOf(page.operations.at(-1)!);
      }
    }

    it('lists every row for the service, newest first, each once', () => {
      expect(all).toHaveLength(24);
      expect(new Set(all.map((op) => op.nodeKey)).size).toBe(24);
      for (let i = 1; i < all.length; i++) expect(all[i - 1]!.createdAt).toBeGreaterThanOrEqual(all[i]!.createdAt);
      expect(all[0]!.createdAt).toBe(all[2]!.createdAt); // ties exist, so node_key order matters
    });

    it('pages forward without duplicates or gaps', async () => {
      const { pages, flags } = await pageForward({ visibleTo: null }, 5);
      expect(pages.map((p) => p.length)).toEqual([5, 5, 5, 5, 4]);
      expect(flags).toEqual([true, true, true, true, false]);
      expect(pages.flat()).toEqual(all);
      // An exact fit reports no more.
      const exact = await pageForward({ visibleTo: null }, 8);
      expect(exact.flags).toEqual([true, true, false]);
      expect(exact.pages.flat()).toEqual(all);
    });

    it('pages backward (last/before) without duplicates or gaps, each page newest first', async () => {
      const pages: ConnectorOperation[][] = [];
      let before: NewestFirstCursor | undefined;
      for (;;) {
        const page = await listOperations(suite.store, { visibleTo: null, last: 5, before });
        pages.unshift(page.operations);
        if (!page.hasMore) break;
        before = NEWEST_FIRST.cursorOf(page.operations[0]!);
      }
      expect(pages.map((p) => p.length)).toEqual([4, 5, 5, 5, 5]);
      expect(pages.flat()).toEqual(all);
      // The oldest page first: last without a cursor.
      expect((await listOperations(suite.store, { visibleTo: null, last: 3 })).operations).toEqual(all.slice(-3));
    });

    it('bounds by after and before together', async () => {
      const page = await listOperations(suite.store, { visibleTo: null, first: 100, after: NEWEST_FIRST.cursorOf(all[3]!), before: NEWEST_FIRST.cursorOf(all[10]!) });
      expect(page.operations).toEqual(all.slice(4, 10));
      expect(page.hasMore).toBe(false);
    });

    it('shows a viewer the rows where they are caller or owner, each once, in the same order', async () => {
      const expected = all.filter(visibleToViewer);
      expect(expected.some((op) => op.callerDID === VIEWER && op.ownerDID === VIEWER)).toBe(true);
      expect(expected.some((op) => op.callerDID !== VIEWER)).toBe(true);
      const { pages } = await pageForward({ visibleTo: VIEWER }, 3);
      expect(pages.flat()).toEqual(expected);
      expect((await listOperations(suite.store, { visibleTo: 'did:key:zNobody', first: 10 })).operations).toEqual([]);
      expect(await countOperations(suite.store, { visibleTo: VIEWER })).toEqual({ count: expected.length, capped: false });
    });

    const filters: [string, OperationScope['filter'], (op: ConnectorOperation) => boolean][] = [
      ['states', { states: ['committed', 'dead'] }, (op) => op.state === 'committed' || op.state === 'dead'],
      ['connectorName', { connectorName: 'github' }, (op) => op.connectorName === 'github'],
      ['ownerDID', { ownerDID: ELSE }, (op) => op.ownerDID === ELSE],
      ['documentID', { documentID: 'doc-0' }, (op) => op.documentID === 'doc-0'],
      ['operationID', { operationID: 'op-6' }, (op) => op.operationID === 'op-6'],
      ['several', { states: ['attempted'], connectorName: 'google', ownerDID: VIEWER }, (op) => op.state === 'attempted' && op.connectorName === 'google' && op.ownerDID === VIEWER],
    ];
    for (const [name, filter, matches] of filters) {
      it(`filters by ${name}, for the service and for a viewer, with matching counts`, async () => {
        for (const visibleTo of [null, VIEWER]) {
          const expected = all.filter((op) => matches(op) && (visibleTo === null || visibleToViewer(op)));
          expect(expected.length, `${name} ${visibleTo}`).toBeGreaterThan(0);
          const { pages } = await pageForward({ visibleTo, filter }, 2);
          expect(pages.flat()).toEqual(expected);
          expect(await countOperations(suite.store, { visibleTo, filter })).toEqual({ count: expected.length, capped: false });
        }
      });
    }

    it('finds an idempotency key whoever called it: the service sees every caller’s, a viewer the ones they may see', async () => {
      const shared = 'shared-key';
      await claimOperation(suite.store, claimInput({ callerDID: VIEWER, ownerDID: VIEWER, operationID: shared }));
      await claimOperation(suite.store, claimInput({ callerDID: SOMEONE, ownerDID: ELSE, operationID: shared }));
      await claimOperation(suite.store, claimInput({ callerDID: ELSE, ownerDID: VIEWER, operationID: shared }));
      const found = async (visibleTo: string | null) =>
        (await listOperations(suite.store, { visibleTo, first: 10, filter: { operationID: shared } })).operations.map((op) => `${op.callerDID}→${op.ownerDID}`).sort();
      expect(await found(null)).toEqual([`${ELSE}→${VIEWER}`, `${SOMEONE}→${ELSE}`, `${VIEWER}→${VIEWER}`].sort());
      expect(await found(VIEWER)).toEqual([`${ELSE}→${VIEWER}`, `${VIEWER}→${VIEWER}`].sort());
      expect(await found('did:key:zNobody')).toEqual([]);
      expect(await countOperations(suite.store, { visibleTo: null, filter: { operationID: shared } })).toEqual({ count: 3, capped: false });
      expect((await listOperations(suite.store, { visibleTo: null, first: 10, filter: { operationID: 'no-such-key' } })).operations).toEqual([]);
    });

    it('counts per state as numbers, every state present', async () => {
      const tally = (ops: ConnectorOperation[]) => ({
        attempted: ops.filter((op) => op.state === 'attempted').length,
        reconcile_only: 0,
        committed: ops.filter((op) => op.state === 'committed').length,
        dead: ops.filter((op) => op.state === 'dead').length,
      });
      const { counts: service, capped } = await countOperationsByState(suite.store, { visibleTo: null });
      expect(capped).toBe(false);
      expect(service).toEqual(tally(all));
      expect(service.dead).toBeGreaterThan(0);
      expect(typeof service.attempted).toBe('number');
      expect((await countOperationsByState(suite.store, { visibleTo: VIEWER, filter: { connectorName: 'google' } })).counts).toEqual(
        tally(all.filter((op) => visibleToViewer(op) && op.connectorName === 'google')),
      );
      const total = await countOperations(suite.store, { visibleTo: null });
      expect(total).toEqual({ count: 24, capped: false });
      expect(typeof total.count).toBe('number');
    });

    it('an empty states filter matches nothing', async () => {
      expect(await listOperations(suite.store, { visibleTo: null, first: 10, filter: { states: [] } })).toEqual({ operations: [], hasMore: false });
      expect(await countOperations(suite.store, { visibleTo: null, filter: { states: [] } })).toEqual({ count: 0, capped: false });
      expect((await countOperationsByState(suite.store, { visibleTo: null, filter: { states: [] } })).counts).toEqual({ attempted: 0, reconcile_only: 0, committed: 0, dead: 0 });
    });

    it('first: 0 returns an empty page that says whether rows exist', async () => {
      expect(await listOperations(suite.store, { visibleTo: null, first: 0 })).toEqual({ operations: [], hasMore: true });
    });

    it('refuses first with last, neither, negative sizes, unknown states and bad cursors', async () => {
      await expect(listOperations(suite.store, { visibleTo: null, first: 1, last: 1 })).rejects.toBeInstanceOf(InvalidInputError);
      await expect(listOperations(suite.store, { visibleTo: null })).rejects.toBeInstanceOf(InvalidInputError);
      await expect(listOperations(suite.store, { visibleTo: null, first: -1 })).rejects.toBeInstanceOf(InvalidInputError);
      await expect(listOperations(suite.store, { visibleTo: null, first: 1, filter: { states: ['done' as never] } })).rejects.toBeInstanceOf(InvalidInputError);
      await expect(listOperations(suite.store, { visibleTo: null, first: 1, after: { createdAt: 'x' as never, nodeKey: 'n' } })).rejects.toBeInstanceOf(
        InvalidInputError,
      );
    });
  });
});
