import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../src/store/errors.js';
import {
  getOperationByKey,
  listDueOperations,
  markOperationSent,
  recordOperationOutcome,
  releaseOperationLease,
  resumeDeferred,
  SEND_WINDOW_MARGIN_MS,
  startOperationAttempt,
  type OperationFence,
} from '../../src/store/operations/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { claimFresh, claimInput, commitDirectly, keyOf, LEASE_MS, setColumns } from '../helpers/operation-claim-fixtures.js';
import { getOperationRow, OWNER } from '../helpers/row-fixtures.js';

describeEachDialect('operations: scheduling', (suite) => {
  async function deferred(operationID: string, kind: 'offline' | 'auth', overrides: Parameters<typeof claimInput>[0] = {}): Promise<OperationFence> {
    const { fence } = await claimFresh(suite.store, { operationID, ...overrides });
    await startOperationAttempt(suite.store, fence);
    await recordOperationOutcome(suite.store, { ...fence, kind });
    await releaseOperationLease(suite.store, fence);
    return fence;
  }

  describe('resumeDeferred', () => {
    it("'offline' makes every owner's offline-deferred live operations due now, and nothing else", async () => {
      const a = await deferred('a', 'offline');
      const b = await deferred('b', 'offline', { ownerDID: 'did:key:z6MkOtherOwner', connectorName: 'github' });
      const auth = await deferred('c', 'auth');
      const dead = await deferred('d', 'offline');
      await setColumns(suite.store, dead.key, { state: 'dead' });
      const authBefore = await getOperationRow(suite.store, auth.key);
      suite.clock.advance(1_000);
      const now = suite.clock.now();

      expect(await resumeDeferred(suite.store, { reason: 'offline' })).toHaveLength(2);
      for (const fence of [a, b]) {
        expect(await getOperationByKey(suite.store, fence.key)).toMatchObject({ nextAttemptAt: now, deferReason: null, attempts: 0, version: 0 });
      }
      expect(await getOperationRow(suite.store, auth.key)).toEqual(authBefore);
      expect((await getOperationByKey(suite.store, dead.key))?.deferReason).toBe('offline');
      expect(await resumeDeferred(suite.store, { reason: 'offline' })).toHaveLength(0);
    });

    it("'offline' with an owner resumes only that owner's offline-deferred operations", async () => {
      const mine = await deferred('a', 'offline');
      const theirs = await deferred('b', 'offline', { ownerDID: 'did:key:z6MkOtherOwner' });
      suite.clock.advance(1_000);

      expect(await resumeDeferred(suite.store, { reason: 'offline', ownerDID: OWNER })).toHaveLength(1);
      expect(await getOperationByKey(suite.store, mine.key)).toMatchObject({ nextAttemptAt: suite.clock.now(), deferReason: null });
      expect((await getOperationByKey(suite.store, theirs.key))?.deferReason).toBe('offline');
    });

    it("'auth' resumes only that owner's connector", async () => {
      const mine = await deferred('a', 'auth');
      const otherConnector = await deferred('b', 'auth', { connectorName: 'github' });
      const otherOwner = await deferred('c', 'auth', { ownerDID: 'did:key:z6MkOtherOwner' });
      const offline = await deferred('d', 'offline');
      suite.clock.advance(1_000);

      expect(await resumeDeferred(suite.store, { reason: 'auth', ownerDID: OWNER, connectorName: 'google' })).toHaveLength(1);
      expect(await getOperationByKey(suite.store, mine.key)).toMatchObject({ nextAttemptAt: suite.clock.now(), deferReason: null });
      for (const fence of [otherConnector, otherOwner]) expect((await getOperationByKey(suite.store, fence.key))?.deferReason).toBe('auth');
      expect((await getOperationByKey(suite.store, offline.key))?.deferReason).toBe('offline');
    });

    it('keeps a holder’s lease and fence intact', async () => {
      const { fence } = await claimFresh(suite.store);
      await startOperationAttempt(suite.store, fence);
      await recordOperationOutcome(suite.store, { ...fence, kind: 'offline' });
      expect(await resumeDeferred(suite.store, { reason: 'offline' })).toHaveLength(1);
      expect(await startOperationAttempt(suite.store, fence)).toMatchObject({ attempts: 1, version: 0 });
    });

    it('refuses an unknown reason and an incomplete auth scope', async () => {
      await expect(resumeDeferred(suite.store, { reason: 'later' } as never)).rejects.toBeInstanceOf(InvalidInputError);
      await expect(resumeDeferred(suite.store, { reason: 'auth', ownerDID: '', connectorName: 'google' })).rejects.toBeInstanceOf(InvalidInputError);
    });
  });

  describe('listDueOperations', () => {
    it('lists live, due, undeferred operations without a live lease, oldest first', async () => {
      const start = suite.clock.now();
      // Due at start, lease released.
      const released = await claimFresh(suite.store, { operationID: 'released' });
      await releaseOperationLease(suite.store, released.fence);
      // Due at start, lease expired (checked below, once time has moved).
      await claimFresh(suite.store, { operationID: 'expired' });
      // Live lease: not listed.
      suite.clock.advance(10);
      await claimFresh(suite.store, { operationID: 'held', leaseMs: LEASE_MS * 10 });
      // Backed off into the future.
      const later = await claimFresh(suite.store, { operationID: 'later' });
      await startOperationAttempt(suite.store, later.fence);
      await recordOperationOutcome(suite.store, { ...later.fence, kind: 'retryable' }, { baseDelayMs: 60_000, maxDelayMs: 60_000, random: () => 0 });
      await releaseOperationLease(suite.store, later.fence);
      // Deferred: never listed until resumed.
      const offline = await claimFresh(suite.store, { operationID: 'offline' });
      await recordOperationOutcome(suite.store, { ...offline.fence, kind: 'offline' }, { deferralDelayMs: 1 });
      await releaseOperationLease(suite.store, offline.fence);
      // reconcile_only, released: listed.
      const reconcile = await claimFresh(suite.store, { operationID: 'reconcile' });
      await startOperationAttempt(suite.store, reconcile.fence);
      // A 100 ms send window: the UNKNOWN is due once it closed (+100 + the 2 s margin), well before start + LEASE_MS.
      await markOperationSent(suite.store, { ...reconcile.fence, sendMarker: 'run', sendTimeoutMs: 100 });
      await recordOperationOutcome(suite.store, { ...reconcile.fence, kind: 'unknown' }, { random: () => 0 });
      expect((await getOperationByKey(suite.store, reconcile.fence.key))?.nextAttemptAt).toBe(start + 10 + 100 + SEND_WINDOW_MARGIN_MS);
      await releaseOperationLease(suite.store, reconcile.fence);
      // Terminal: never listed.
      const committed = await claimFresh(suite.store, { operationID: 'committed' });
      await commitDirectly(suite.store, committed.fence.key, 'doc-1', null);
      await releaseOperationLease(suite.store, committed.fence);

      const ids = async (now?: number, limit = 100) => (await listDueOperations(suite.store, { limit, now })).map((op) => op.operationID);

      expect(await ids()).toEqual(['released']); // 'expired' still holds its lease
      suite.clock.set(start + LEASE_MS);
      // 'expired' and 'released' tie on next_attempt_at: node_key breaks the tie.
      await setColumns(suite.store, keyOf(claimInput({ operationID: 'expired' })), { node_key: 'node-1' });
      await setColumns(suite.store, released.fence.key, { node_key: 'node-2' });
      const tie = ['expired', 'released'];
      expect(await ids()).toEqual([...tie, 'reconcile']);
      expect(await ids(start + 60_000 + 10)).toEqual([...tie, 'reconcile', 'later']);
      expect(await ids(undefined, 1)).toEqual([tie[0]]);
      expect(await ids(undefined, 0)).toEqual([]);
      expect(await resumeDeferred(suite.store, { reason: 'offline' })).toHaveLength(1);
      expect(await ids()).toEqual([...tie, 'reconcile', 'offline']);
    });

    it('orders by next attempt time before node key', async () => {
      const first = await claimFresh(suite.store, { operationID: 'first' });
      await setColumns(suite.store, first.fence.key, { next_attempt_at: suite.clock.now() - 1_000, node_key: 'zzz', lease_token: null, lease_expires_at: null });
      const second = await claimFresh(suite.store, { operationID: 'second' });
      await setColumns(suite.store, second.fence.key, { next_attempt_at: suite.clock.now() - 10, node_key: 'aaa', lease_token: null, lease_expires_at: null });
      expect((await listDueOperations(suite.store, { limit: 10 })).map((op) => op.operationID)).toEqual(['first', 'second']);
    });

    it('refuses a negative limit', async () => {
      await expect(listDueOperations(suite.store, { limit: -1 })).rejects.toBeInstanceOf(InvalidInputError);
    });

    it('with a connector name lists only that connector’s due operations, in the same order', async () => {
      const due = async (operationID: string, connectorName: string, nextAttemptAt: number, nodeKey: string) => {
        const { fence } = await claimFresh(suite.store, { operationID, connectorName });
        await setColumns(suite.store, fence.key, { next_attempt_at: nextAttemptAt, node_key: nodeKey, lease_token: null, lease_expires_at: null });
      };
      const now = suite.clock.now();
      await due('a-late', 'a', now - 10, 'node-1');
      await due('b-early', 'b', now - 1_000, 'node-2');
      await due('a-tie-2', 'a', now - 500, 'node-4');
      await due('a-tie-1', 'a', now - 500, 'node-3');
      const ids = async (input: { connectorName?: string; limit?: number }) =>
        (await listDueOperations(suite.store, { limit: 10, ...input })).map((op) => op.operationID);

      expect(await ids({ connectorName: 'a' })).toEqual(['a-tie-1', 'a-tie-2', 'a-late']);
      expect(await ids({ connectorName: 'a', limit: 1 })).toEqual(['a-tie-1']);
      expect(await ids({ connectorName: 'b' })).toEqual(['b-early']);
      expect(await ids({ connectorName: 'no-such-connector' })).toEqual([]);
      expect(await ids({})).toEqual(['b-early', 'a-tie-1', 'a-tie-2', 'a-late']);
    });

    it('refuses an empty connector name', async () => {
      await expect(listDueOperations(suite.store, { limit: 10, connectorName: '' })).rejects.toBeInstanceOf(InvalidInputError);
      await expect(listDueOperations(suite.store, { limit: 0, connectorName: '' })).rejects.toBeInstanceOf(InvalidInputError);
    });
  });
});
