import { describe, expect, it } from 'vitest';
import { IdempotencyConflictError, InvalidInputError, InvalidStateError } from '../../src/store/errors.js';
import {
  DEFAULT_OPERATION_RETRY_POLICY,
  claimOperation,
  getOperationByKey,
  markOperationSent,
  operationBackoffDelay,
  recordOperationOutcome,
  recordReconcileResult,
  resolveRetryPolicy,
  startOperationAttempt,
  type OperationFence,
} from '../../src/store/operations/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { claimFresh, claimInput, keyOf, LEASE_MS, withHookAfterSelects } from '../helpers/operation-claim-fixtures.js';
import { getOperationRow } from '../helpers/row-fixtures.js';

const KEY = keyOf(claimInput());
/** Jitter pinned to its lowest point: the delay is exactly half the exponential step. */
const NO_JITTER = { random: () => 0 };

describe('operationBackoffDelay', () => {
  const policy = resolveRetryPolicy({ baseDelayMs: 1_000, maxDelayMs: 60_000, random: () => 0 });

  it('doubles per attempt up to the cap (equal jitter: [step/2, step))', () => {
    expect([1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => operationBackoffDelay(n, policy))).toEqual([
      500, 1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000,
    ]);
    const top = resolveRetryPolicy({ baseDelayMs: 1_000, maxDelayMs: 60_000, random: () => 0.999999 });
    expect(operationBackoffDelay(3, top)).toBe(3_999);
    expect(operationBackoffDelay(100, top)).toBe(59_999);
    expect(operationBackoffDelay(5_000, top)).toBe(59_999); // 2^4999 overflows to Infinity: still capped
  });

  it('uses the retry-after when it is longer, the backoff otherwise', () => {
    expect(operationBackoffDelay(1, policy, 90_000)).toBe(90_000);
    expect(operationBackoffDelay(5, policy, 10)).toBe(8_000);
  });

  it('has documented defaults and checks policies', () => {
    expect(DEFAULT_OPERATION_RETRY_POLICY).toMatchObject({ baseDelayMs: 1_000, maxDelayMs: 300_000, maxAttempts: 8, deferralDelayMs: 900_000 });
    expect(() => resolveRetryPolicy({ maxAttempts: 0 })).toThrow(InvalidInputError);
    expect(() => resolveRetryPolicy({ baseDelayMs: 10, maxDelayMs: 5 })).toThrow(InvalidInputError);
  });
});

describeEachDialect('operations: attempts', (suite) => {
  async function attempt(fence: OperationFence, kind: 'retryable' | 'unknown' | 'fatal' | 'offline' | 'auth', extra: object = {}, policy: object = NO_JITTER) {
    await startOperationAttempt(suite.store, fence);
    return recordOperationOutcome(suite.store, { ...fence, kind, ...extra }, policy);
  }

  describe('startOperationAttempt and markOperationSent', () => {
    it('start counts an attempt and clears the send marker and last outcome; mark sets the marker', async () => {
      const { fence } = await claimFresh(suite.store);
      await startOperationAttempt(suite.store, fence);
      await markOperationSent(suite.store, { ...fence, sendMarker: 'run-1' });
      expect((await getOperationRow(suite.store, KEY))?.send_marker).toBe('run-1');
      await recordOperationOutcome(suite.store, { ...fence, kind: 'retryable', lastHTTPStatus: 503 }, NO_JITTER);

      const second = await startOperationAttempt(suite.store, fence);
      expect(second).toMatchObject({ attempts: 2, sendMarkerSet: false, lastKind: null, lastHTTPStatus: null, version: 0 });
      expect((await getOperationRow(suite.store, KEY))?.send_marker).toBeNull();
    });

    it('refuses to start or send on a reconcile_only operation: it must reconcile first', async () => {
      const { fence } = await claimFresh(suite.store);
      await startOperationAttempt(suite.store, fence);
      await markOperationSent(suite.store, { ...fence, sendMarker: 'run-1' });
      await recordOperationOutcome(suite.store, { ...fence, kind: 'unknown' }, NO_JITTER);
      const before = await getOperationRow(suite.store, KEY);
      await expect(startOperationAttempt(suite.store, fence)).rejects.toBeInstanceOf(InvalidStateError);
      await expect(markOperationSent(suite.store, { ...fence, sendMarker: 'run-2' })).rejects.toBeInstanceOf(InvalidStateError);
      expect(await getOperationRow(suite.store, KEY)).toEqual(before);
    });

    it('refuses a start after a marked send with no outcome recorded, and writes nothing (issue 37)', async () => {
      const { fence } = await claimFresh(suite.store);
      await startOperationAttempt(suite.store, fence);
      await markOperationSent(suite.store, { ...fence, sendMarker: 'run-1' });
      const before = await getOperationRow(suite.store, KEY);
      await expect(startOperationAttempt(suite.store, fence)).rejects.toThrow(/marked sent and no outcome is recorded \(record the outcome, or reconcile\)/);
      await expect(startOperationAttempt(suite.store, fence)).rejects.toBeInstanceOf(InvalidStateError);
      expect(await getOperationRow(suite.store, KEY)).toEqual(before);
      // Once an outcome is recorded the next attempt may start (a retryable answer came back: nothing landed).
      await recordOperationOutcome(suite.store, { ...fence, kind: 'retryable', lastHTTPStatus: 503 }, NO_JITTER);
      await expect(startOperationAttempt(suite.store, fence)).resolves.toMatchObject({ attempts: 2, sendMarkerSet: false });
    });

    it('the same marker again is answered and writes nothing; another marker in the same attempt is a conflict (issue 37)', async () => {
      const { fence } = await claimFresh(suite.store);
      await startOperationAttempt(suite.store, fence);
      suite.clock.advance(10);
      const marked = await markOperationSent(suite.store, { ...fence, sendMarker: 'run-1' });
      const before = await getOperationRow(suite.store, KEY);
      suite.clock.advance(10);
      await expect(markOperationSent(suite.store, { ...fence, sendMarker: 'run-1' })).resolves.toEqual(marked);
      expect(await getOperationRow(suite.store, KEY)).toEqual(before);
      const conflict = await markOperationSent(suite.store, { ...fence, sendMarker: 'run-2' }).catch((error: unknown) => error);
      expect(conflict).toBeInstanceOf(IdempotencyConflictError);
      expect(conflict).toMatchObject({ fields: ['sendMarker'] });
      expect(String((conflict as Error).message)).not.toContain('run-1');
      expect(await getOperationRow(suite.store, KEY)).toEqual(before);
    });

    it('refuses an empty send marker', async () => {
      const { fence } = await claimFresh(suite.store);
      await expect(markOperationSent(suite.store, { ...fence, sendMarker: '' })).rejects.toBeInstanceOf(InvalidInputError);
    });
  });

  describe('recordOperationOutcome', () => {
    it('retryable: backoff grows with attempts; status and etag recorded; version unchanged', async () => {
      const { fence } = await claimFresh(suite.store);
      const delays: number[] = [];
      for (let i = 0; i < 4; i++) {
        const now = suite.clock.now();
        const op = await attempt(fence, 'retryable', { lastHTTPStatus: 503, providerEtag: `etag-${i}` });
        expect(op).toMatchObject({ state: 'attempted', lastKind: 'retryable', lastHTTPStatus: 503, providerEtag: `etag-${i}`, deferReason: null, version: 0 });
        delays.push((op.nextAttemptAt as number) - now);
        suite.clock.advance(10);
      }
      expect(delays).toEqual([500, 1_000, 2_000, 4_000]);
    });

    it('retryable: jitter comes from the policy random source', async () => {
      const { fence } = await claimFresh(suite.store);
      const now = suite.clock.now();
      const op = await attempt(fence, 'retryable', {}, { random: () => 0.5 });
      expect(op.nextAttemptAt).toBe(now + 750);
    });

    it('retryable: a longer retry-after wins', async () => {
      const { fence } = await claimFresh(suite.store);
      const now = suite.clock.now();
      const op = await attempt(fence, 'retryable', { lastHTTPStatus: 429, retryAfterMs: 120_000 });
      expect(op.nextAttemptAt).toBe(now + 120_000);
    });

    it('retryable: dead once the attempts reach maxAttempts (default 8)', async () => {
      const { fence } = await claimFresh(suite.store);
      for (let i = 1; i < 8; i++) expect((await attempt(fence, 'retryable')).state).toBe('attempted');
      const last = await attempt(fence, 'retryable', { lastHTTPStatus: 500 });
      expect(last).toMatchObject({ state: 'dead', attempts: 8, nextAttemptAt: null, lastKind: 'retryable', lastHTTPStatus: 500 });
      expect((await claimOperation(suite.store, claimInput())).outcome).toBe('DEAD');
    });

    it('retryable: maxAttempts is configurable', async () => {
      const { fence } = await claimFresh(suite.store);
      expect((await attempt(fence, 'retryable', {}, { maxAttempts: 2, random: () => 0 })).state).toBe('attempted');
      expect((await attempt(fence, 'retryable', {}, { maxAttempts: 2, random: () => 0 })).state).toBe('dead');
    });

    it('fatal: dead at once, not due', async () => {
      const { fence } = await claimFresh(suite.store);
      const op = await attempt(fence, 'fatal', { lastHTTPStatus: 422 });
      expect(op).toMatchObject({ state: 'dead', attempts: 1, nextAttemptAt: null, lastKind: 'fatal', lastHTTPStatus: 422 });
    });

    it('unknown: reconcile_only after the backoff, even with no attempt left', async () => {
      const { fence } = await claimFresh(suite.store);
      const now = suite.clock.now();
      const op = await attempt(fence, 'unknown');
      expect(op).toMatchObject({ state: 'reconcile_only', nextAttemptAt: now + 500, lastKind: 'unknown' });

      const { fence: other } = await claimFresh(suite.store, { operationID: 'op-2' });
      const exhausted = await attempt(other, 'unknown', {}, { maxAttempts: 1, random: () => 0 });
      expect(exhausted.state).toBe('reconcile_only');
    });

    for (const kind of ['offline', 'auth'] as const) {
      it(`${kind}: deferred with defer_reason '${kind}', without spending the attempt`, async () => {
        const { fence } = await claimFresh(suite.store);
        await attempt(fence, 'retryable', { providerEtag: 'etag-1' });
        const now = suite.clock.now();
        const op = await attempt(fence, kind, {}, { deferralDelayMs: 60_000 });
        expect(op).toMatchObject({
          state: 'attempted',
          attempts: 1,
          deferReason: kind,
          nextAttemptAt: now + 60_000,
          lastKind: kind,
          providerEtag: 'etag-1', // no etag given: the stored one is kept
        });
        // Default deferral delay.
        const again = await attempt(fence, kind, {}, {});
        expect(again.nextAttemptAt).toBe(now + DEFAULT_OPERATION_RETRY_POLICY.deferralDelayMs);
        expect(again.attempts).toBe(1);
      });
    }

    it('offline deferrals never exhaust the attempts', async () => {
      const { fence } = await claimFresh(suite.store);
      for (let i = 0; i < 20; i++) await attempt(fence, 'offline');
      expect(await getOperationByKey(suite.store, KEY)).toMatchObject({ state: 'attempted', attempts: 0 });
      expect((await attempt(fence, 'retryable', {}, { maxAttempts: 2, random: () => 0 })).state).toBe('attempted');
    });

    it('gives back only the attempt that is open: a second record, or one without a start, gives nothing back', async () => {
      const { fence } = await claimFresh(suite.store);
      await attempt(fence, 'retryable');
      await attempt(fence, 'retryable');
      expect((await recordOperationOutcome(suite.store, { ...fence, kind: 'offline' })).attempts).toBe(2);
      await startOperationAttempt(suite.store, fence);
      expect((await recordOperationOutcome(suite.store, { ...fence, kind: 'auth' })).attempts).toBe(2);
      expect((await recordOperationOutcome(suite.store, { ...fence, kind: 'auth' })).attempts).toBe(2);
    });

    it('on reconcile_only: offline defers, retryable backs off, both keep the state; fatal kills', async () => {
      const { fence } = await claimFresh(suite.store);
      await attempt(fence, 'unknown');
      const offline = await recordOperationOutcome(suite.store, { ...fence, kind: 'offline' });
      expect(offline).toMatchObject({ state: 'reconcile_only', attempts: 1, deferReason: 'offline' });
      const retry = await recordOperationOutcome(suite.store, { ...fence, kind: 'retryable' }, { maxAttempts: 1, random: () => 0 });
      expect(retry).toMatchObject({ state: 'reconcile_only', deferReason: null });
      expect((await recordOperationOutcome(suite.store, { ...fence, kind: 'fatal' })).state).toBe('dead');
    });

    it('refuses terminal operations and bad input', async () => {
      const { fence } = await claimFresh(suite.store);
      await attempt(fence, 'fatal');
      await expect(recordOperationOutcome(suite.store, { ...fence, kind: 'retryable' })).rejects.toBeInstanceOf(InvalidStateError);
      await expect(recordOperationOutcome(suite.store, { ...fence, kind: 'success' as never })).rejects.toMatchObject({ field: 'kind' });
      await expect(recordOperationOutcome(suite.store, { ...fence, kind: 'retryable', retryAfterMs: -5 })).rejects.toBeInstanceOf(InvalidInputError);
    });

    it('recomputes when the row changed between its read and its write', async () => {
      const { fence } = await claimFresh(suite.store);
      await attempt(fence, 'retryable');
      // The same holder opens another attempt between the record's read and write.
      const racing = withHookAfterSelects(suite.store, async (n) => {
        if (n === 1) await startOperationAttempt(suite.store, fence);
      });
      const op = await recordOperationOutcome(racing, { ...fence, kind: 'offline' });
      // Computed from the fresh row: attempt 2 was open, so it is given back.
      expect(op).toMatchObject({ attempts: 1, deferReason: 'offline' });
    });
  });

  describe('recordReconcileResult', () => {
    async function reconcileOnly(): Promise<OperationFence> {
      const { fence } = await claimFresh(suite.store);
      await startOperationAttempt(suite.store, fence);
      await markOperationSent(suite.store, { ...fence, sendMarker: 'run-1' });
      await recordOperationOutcome(suite.store, { ...fence, kind: 'unknown', providerEtag: 'etag-0' }, NO_JITTER);
      return fence;
    }

    it('landed: attempted, due now, send marker kept, etag recorded', async () => {
      const fence = await reconcileOnly();
      suite.clock.advance(100);
      const op = await recordReconcileResult(suite.store, { ...fence, landed: true, providerEtag: 'etag-1' });
      expect(op).toMatchObject({ state: 'attempted', nextAttemptAt: suite.clock.now(), sendMarkerSet: true, providerEtag: 'etag-1', version: 0 });
      // A holder that crashes before finalizing is followed by another reconcile, not a resend.
      suite.clock.advance(LEASE_MS);
      expect((await claimOperation(suite.store, claimInput())).operation.state).toBe('reconcile_only');
    });

    it('not landed: attempted, send marker cleared, due now, may be sent again', async () => {
      const fence = await reconcileOnly();
      suite.clock.advance(100);
      const op = await recordReconcileResult(suite.store, { ...fence, landed: false });
      expect(op).toMatchObject({ state: 'attempted', nextAttemptAt: suite.clock.now(), sendMarkerSet: false, providerEtag: 'etag-0', deferReason: null });
      expect(await startOperationAttempt(suite.store, fence)).toMatchObject({ attempts: 2 });
    });

    it('not landed with no attempt left: dead', async () => {
      const fence = await reconcileOnly();
      const op = await recordReconcileResult(suite.store, { ...fence, landed: false }, { maxAttempts: 1 });
      expect(op).toMatchObject({ state: 'dead', nextAttemptAt: null, sendMarkerSet: false });
    });

    it('only on reconcile_only operations', async () => {
      const { fence } = await claimFresh(suite.store);
      const before = await getOperationRow(suite.store, KEY);
      await expect(recordReconcileResult(suite.store, { ...fence, landed: true })).rejects.toBeInstanceOf(InvalidStateError);
      expect(await getOperationRow(suite.store, KEY)).toEqual(before);
    });
  });
});
