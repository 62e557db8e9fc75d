import { describe, expect, it } from 'vitest';
import { InvalidInputError, InvalidStateError, NotFoundError, StaleLeaseError } from '../../src/store/errors.js';
import {
  acquireOperationLease,
  claimOperation,
  getOperationByKey,
  markOperationSent,
  recordOperationOutcome,
  recordReconcileResult,
  releaseOperationLease,
  renewOperationLease,
  startOperationAttempt,
  type OperationFence,
} from '../../src/store/operations/index.js';
import type { StoreContext } from '../../src/store/context.js';
import { describeEachDialect } from '../helpers/databases.js';
import { claimFresh, claimInput, commitDirectly, keyOf, LEASE_MS, PAST_SEND_WINDOW_MS } from '../helpers/operation-claim-fixtures.js';
import { getOperationRow } from '../helpers/row-fixtures.js';

const KEY = keyOf(claimInput());

/** Every holder write, with the fence it is given. */
function holderWrites(store: StoreContext, fence: OperationFence): [string, () => Promise<unknown>][] {
  return [
    ['startOperationAttempt', () => startOperationAttempt(store, fence)],
    ['markOperationSent', () => markOperationSent(store, { ...fence, sendMarker: 'stale-run' })],
    ['recordOperationOutcome', () => recordOperationOutcome(store, { ...fence, kind: 'retryable', lastHTTPStatus: 503 })],
    ['recordReconcileResult', () => recordReconcileResult(store, { ...fence, landed: false })],
    ['renewOperationLease', () => renewOperationLease(store, { ...fence, leaseMs: LEASE_MS })],
    ['releaseOperationLease', () => releaseOperationLease(store, fence)],
  ];
}

describeEachDialect('operations: leases', (suite) => {
  describe('acquireOperationLease', () => {
    it('takes an expired lease: version + 1, new token', async () => {
      const { lease } = await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS + 5);
      const now = suite.clock.now();
      const result = await acquireOperationLease(suite.store, { key: KEY, leaseMs: 10_000 });
      expect(result.acquired).toBe(true);
      if (!result.acquired) return;
      expect(result.lease).toEqual({ token: expect.any(String), expiresAt: now + 10_000, version: 1 });
      expect(result.lease.token).not.toBe(lease.token);
      expect(result.operation).toMatchObject({ version: 1, leaseExpiresAt: now + 10_000, state: 'attempted' });
    });

    it('takes a released lease, and turns a sent attempt into reconcile_only', async () => {
      const { fence } = await claimFresh(suite.store);
      await markOperationSent(suite.store, { ...fence, sendMarker: 'run-1' });
      await releaseOperationLease(suite.store, fence);
      // Released, but the marked send's window is open: the provider may still be applying it (issue 37).
      expect(await acquireOperationLease(suite.store, { key: KEY, leaseMs: LEASE_MS })).toMatchObject({ acquired: false, operation: { version: 0 } });
      suite.clock.advance(PAST_SEND_WINDOW_MS);
      const result = await acquireOperationLease(suite.store, { key: KEY, leaseMs: LEASE_MS });
      expect(result).toMatchObject({ acquired: true, operation: { state: 'reconcile_only', version: 1 } });
    });

    it('reports a live lease as held (acquired: false) and changes nothing', async () => {
      await claimFresh(suite.store);
      const before = await getOperationRow(suite.store, KEY);
      suite.clock.advance(LEASE_MS - 1);
      const result = await acquireOperationLease(suite.store, { key: KEY, leaseMs: LEASE_MS });
      expect(result).toEqual({ acquired: false, operation: expect.objectContaining({ version: 0 }) });
      expect('lease' in result).toBe(false);
      expect(await getOperationRow(suite.store, KEY)).toEqual(before);
    });

    it('refuses terminal operations and unknown keys', async () => {
      const { fence } = await claimFresh(suite.store);
      await recordOperationOutcome(suite.store, { ...fence, kind: 'fatal' });
      suite.clock.advance(LEASE_MS);
      await expect(acquireOperationLease(suite.store, { key: KEY, leaseMs: LEASE_MS })).rejects.toBeInstanceOf(InvalidStateError);

      await claimFresh(suite.store, { operationID: 'op-2' });
      await commitDirectly(suite.store, keyOf(claimInput({ operationID: 'op-2' })), 'doc-1', null);
      suite.clock.advance(LEASE_MS);
      await expect(acquireOperationLease(suite.store, { key: keyOf(claimInput({ operationID: 'op-2' })), leaseMs: LEASE_MS })).rejects.toBeInstanceOf(
        InvalidStateError,
      );
      await expect(acquireOperationLease(suite.store, { key: { callerDID: 'did:key:zX', operationID: 'nope' }, leaseMs: LEASE_MS })).rejects.toBeInstanceOf(
        NotFoundError,
      );
      await expect(acquireOperationLease(suite.store, { key: KEY, leaseMs: -1 })).rejects.toBeInstanceOf(InvalidInputError);
    });
  });

  describe('renewOperationLease', () => {
    it('extends a live lease and keeps the version', async () => {
      const { fence } = await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS - 1);
      const now = suite.clock.now();
      const renewed = await renewOperationLease(suite.store, { ...fence, leaseMs: 60_000 });
      expect(renewed.lease).toEqual({ token: fence.leaseToken, expiresAt: now + 60_000, version: 0 });
      expect(renewed.operation).toMatchObject({ version: 0, leaseExpiresAt: now + 60_000 });
      suite.clock.advance(LEASE_MS + 1);
      expect((await claimOperation(suite.store, claimInput())).outcome).toBe('IN_FLIGHT');
    });

    it('refuses an expired lease (acquire a new one) and a wrong token', async () => {
      const { fence } = await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS);
      const before = await getOperationRow(suite.store, KEY);
      await expect(renewOperationLease(suite.store, { ...fence, leaseMs: LEASE_MS })).rejects.toBeInstanceOf(StaleLeaseError);
      await expect(renewOperationLease(suite.store, { ...fence, leaseToken: 'guess', leaseMs: LEASE_MS })).rejects.toBeInstanceOf(StaleLeaseError);
      expect(await getOperationRow(suite.store, KEY)).toEqual(before);
    });

    it('refuses a terminal operation with InvalidStateError', async () => {
      const { fence } = await claimFresh(suite.store);
      await recordOperationOutcome(suite.store, { ...fence, kind: 'fatal' });
      await expect(renewOperationLease(suite.store, { ...fence, leaseMs: LEASE_MS })).rejects.toBeInstanceOf(InvalidStateError);
    });
  });

  describe('releaseOperationLease', () => {
    it('clears the lease and keeps the version; a second release is stale', async () => {
      const { fence } = await claimFresh(suite.store);
      const released = await releaseOperationLease(suite.store, fence);
      expect(released).toMatchObject({ version: 0, leaseExpiresAt: null });
      expect((await getOperationRow(suite.store, KEY))?.lease_token).toBeNull();
      await expect(releaseOperationLease(suite.store, fence)).rejects.toBeInstanceOf(StaleLeaseError);
    });

    it('works on an expired lease nobody took over, and on a terminal operation', async () => {
      const { fence } = await claimFresh(suite.store);
      await recordOperationOutcome(suite.store, { ...fence, kind: 'fatal' });
      suite.clock.advance(LEASE_MS * 3);
      expect(await releaseOperationLease(suite.store, fence)).toMatchObject({ state: 'dead', leaseExpiresAt: null });
    });

    it('names an unknown key NotFoundError', async () => {
      await expect(
        releaseOperationLease(suite.store, { key: { callerDID: 'did:key:zX', operationID: 'nope' }, version: 0, leaseToken: 't' }),
      ).rejects.toBeInstanceOf(NotFoundError);
    });
  });

  describe('fencing', () => {
    it('after a takeover the old holder can write nothing: every holder write is StaleLeaseError, row unchanged', async () => {
      const old = await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS);
      const taken = await acquireOperationLease(suite.store, { key: KEY, leaseMs: LEASE_MS });
      expect(taken.acquired).toBe(true);
      const before = await getOperationRow(suite.store, KEY);
      for (const [name, write] of holderWrites(suite.store, old.fence)) {
        const error = await write().catch((e: unknown) => e);
        expect(error, name).toBeInstanceOf(StaleLeaseError);
        expect((error as Error).message).not.toContain(old.fence.leaseToken);
        expect(await getOperationRow(suite.store, KEY), name).toEqual(before);
      }
    });

    it('the old token with the new version is still refused, and so is the new token with the old version', async () => {
      const old = await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS);
      const taken = await acquireOperationLease(suite.store, { key: KEY, leaseMs: LEASE_MS });
      if (!taken.acquired) throw new Error('expected acquired');
      const before = await getOperationRow(suite.store, KEY);
      const mixed: OperationFence[] = [
        { ...old.fence, version: taken.lease.version },
        { key: KEY, version: old.fence.version, leaseToken: taken.lease.token },
      ];
      for (const fence of mixed) {
        for (const [name, write] of holderWrites(suite.store, fence)) {
          await expect(write(), name).rejects.toBeInstanceOf(StaleLeaseError);
        }
      }
      expect(await getOperationRow(suite.store, KEY)).toEqual(before);
    });

    it('an expired holder may still report (outcome, release) until a takeover, but may not start or send', async () => {
      const { fence } = await claimFresh(suite.store);
      await startOperationAttempt(suite.store, fence);
      suite.clock.advance(LEASE_MS);
      await expect(startOperationAttempt(suite.store, fence)).rejects.toBeInstanceOf(StaleLeaseError);
      await expect(markOperationSent(suite.store, { ...fence, sendMarker: 'late' })).rejects.toBeInstanceOf(StaleLeaseError);
      const recorded = await recordOperationOutcome(suite.store, { ...fence, kind: 'retryable', lastHTTPStatus: 503 });
      expect(recorded).toMatchObject({ lastKind: 'retryable', version: 0 });
      expect(await releaseOperationLease(suite.store, fence)).toMatchObject({ leaseExpiresAt: null });
    });

    it('the version advances only on acquire or takeover', async () => {
      const version = async () => (await getOperationByKey(suite.store, KEY))?.version;
      const { fence } = await claimFresh(suite.store);
      expect(await version()).toBe(0);
      await startOperationAttempt(suite.store, fence);
      await markOperationSent(suite.store, { ...fence, sendMarker: 'run-1' });
      await renewOperationLease(suite.store, { ...fence, leaseMs: LEASE_MS });
      await recordOperationOutcome(suite.store, { ...fence, kind: 'unknown' });
      await recordReconcileResult(suite.store, { ...fence, landed: false });
      await startOperationAttempt(suite.store, fence);
      await recordOperationOutcome(suite.store, { ...fence, kind: 'offline' });
      await releaseOperationLease(suite.store, fence);
      expect(await version()).toBe(0);

      const acquired = await acquireOperationLease(suite.store, { key: KEY, leaseMs: LEASE_MS });
      expect(await version()).toBe(1);
      if (!acquired.acquired) throw new Error('expected acquired');
      const second: OperationFence = { key: KEY, version: acquired.lease.version, leaseToken: acquired.lease.token };
      await renewOperationLease(suite.store, { ...second, leaseMs: LEASE_MS });
      expect(await version()).toBe(1);
      suite.clock.advance(LEASE_MS);
      expect((await claimOperation(suite.store, claimInput())).outcome).toBe('CLAIMED');
      expect(await version()).toBe(2);
      // IN_FLIGHT, REPLAYED and DEAD claims do not move it either.
      expect((await claimOperation(suite.store, claimInput())).outcome).toBe('IN_FLIGHT');
      expect(await version()).toBe(2);
    });

    it('refuses malformed fences before touching the database', async () => {
      await claimFresh(suite.store);
      await expect(startOperationAttempt(suite.store, { key: KEY, version: -1, leaseToken: 't' })).rejects.toBeInstanceOf(InvalidInputError);
      await expect(startOperationAttempt(suite.store, { key: KEY, version: 0, leaseToken: '' })).rejects.toBeInstanceOf(InvalidInputError);
    });
  });
});
