/**
 * Attempt history (issue 11 item 1): a row per attempt written in the
 * transaction of the holder write it records, closed by the outcome with a
 * bounded, redacted message; `lastError` on the operation; history goes with
 * its operation.
 */
import { expect, it } from 'vitest';
import { StaleLeaseError } from '../../src/store/errors.js';
import { finalizeOperationAndArmWatch } from '../../src/store/finalize/index.js';
import {
  getAttemptHistories,
  getOperationByKey,
  markOperationSent,
  MAX_ATTEMPT_MESSAGE,
  recordOperationOutcome,
  redactAttemptMessage,
  startOperationAttempt,
} from '../../src/store/operations/index.js';
import { runRetention } from '../../src/store/retention/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { claimFresh, claimInput, keyOf } from '../helpers/operation-claim-fixtures.js';
import { countRows } from '../helpers/row-fixtures.js';

const KEY = keyOf(claimInput());

describeEachDialect('operations: attempt history', (suite) => {
  const history = async (first = 50) => (await getAttemptHistories(suite.store, [{ key: KEY, first }]))[0]!;

  it('opens a row per attempt, stamps it sent, closes it with the outcome; newest first', async () => {
    const { fence } = await claimFresh(suite.store);
    const t0 = suite.clock.current;
    await startOperationAttempt(suite.store, fence);
    suite.clock.advance(1_000);
    await markOperationSent(suite.store, { ...fence, sendMarker: 'marker-1' });
    suite.clock.advance(1_000);
    await recordOperationOutcome(suite.store, { ...fence, kind: 'retryable', lastHTTPStatus: 503, retryAfterMs: 30_000, message: 'provider said 503' });
    suite.clock.advance(10_000);
    await startOperationAttempt(suite.store, fence);
    const open = await history();
    expect(open.attempts.map((a) => [a.seq, a.attempt, a.endedAt])).toEqual([
      [2, 2, null],
      [1, 1, t0 + 2_000],
    ]);
    expect(open.attempts[1]).toEqual({
      seq: 1,
      kind: 'attempt',
      actorDID: null,
      attempt: 1,
      startedAt: t0,
      sentAt: t0 + 1_000,
      endedAt: t0 + 2_000,
      outcome: 'retryable',
      httpStatus: 503,
      retryAfterMs: 30_000,
      deferReason: null,
      message: 'provider said 503',
    });
    await recordOperationOutcome(suite.store, { ...fence, kind: 'fatal', lastHTTPStatus: 400, message: 'invalid event' });
    const done = await history();
    expect(done.attempts[0]).toMatchObject({ seq: 2, outcome: 'fatal', httpStatus: 400, sentAt: null, message: 'invalid event' });
    expect(done.hasMore).toBe(false);
    expect((await getOperationByKey(suite.store, KEY))?.lastError).toBe('invalid event');
  });

  it('a deferral gives the attempt back: its row records the deferral, the next start repeats the number', async () => {
    const { fence } = await claimFresh(suite.store);
    await startOperationAttempt(suite.store, fence);
    await recordOperationOutcome(suite.store, { ...fence, kind: 'offline' });
    await startOperationAttempt(suite.store, fence);
    const { attempts } = await history();
    expect(attempts.map((a) => [a.seq, a.attempt, a.outcome, a.deferReason])).toEqual([
      [2, 1, null, null],
      [1, 1, 'offline', 'offline'],
    ]);
  });

  it('an outcome without an open attempt is kept as a row of its own; a second outcome does not rewrite the first', async () => {
    const { fence } = await claimFresh(suite.store);
    await recordOperationOutcome(suite.store, { ...fence, kind: 'unknown', message: 'timed out' });
    await recordOperationOutcome(suite.store, { ...fence, kind: 'retryable', message: 'still unknown' });
    const { attempts } = await history();
    expect(attempts.map((a) => [a.seq, a.outcome, a.message, a.startedAt === a.endedAt])).toEqual([
      [2, 'retryable', 'still unknown', true],
      [1, 'unknown', 'timed out', true],
    ]);
  });

  it('a refused write leaves no history: the transaction rolls back whole', async () => {
    const { fence } = await claimFresh(suite.store);
    await expect(startOperationAttempt(suite.store, { ...fence, leaseToken: 'not-the-token' })).rejects.toBeInstanceOf(StaleLeaseError);
    await expect(recordOperationOutcome(suite.store, { ...fence, version: fence.version + 1, kind: 'fatal', message: 'x' })).rejects.toBeInstanceOf(StaleLeaseError);
    expect(await countRows(suite.store, 'kubun_connector_operation_history')).toBe(0);
    expect((await getOperationByKey(suite.store, KEY))?.lastError).toBeNull();
  });

  it('messages never keep the lease token, the send marker or bearer tokens, and stop at 2 000 characters', async () => {
    const { fence } = await claimFresh(suite.store);
    await startOperationAttempt(suite.store, fence);
    await markOperationSent(suite.store, { ...fence, sendMarker: 'marker-secret-42' });
    const jwt = 'eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJkaWQ6a2V5In0.c2lnbmF0dXJl';
    const message = `lease ${fence.leaseToken} marker marker-secret-42 header Authorization: Bearer abc.def-ghi token ${jwt}\u0000\u0007 end ${'x'.repeat(5_000)}`;
    await recordOperationOutcome(suite.store, { ...fence, kind: 'retryable', message });
    const stored = (await history()).attempts[0]!.message!;
    const lastError = (await getOperationByKey(suite.store, KEY))!.lastError!;
    for (const text of [stored, lastError]) {
      expect(text).not.toContain(fence.leaseToken);
      expect(text).not.toContain('marker-secret-42');
      expect(text).not.toContain('abc.def-ghi');
      expect(text).not.toContain(jwt);
      expect(text).not.toMatch(/[\u0000\u0007]/);
      expect(text).toContain('lease [redacted] marker [redacted] header Authorization: Bearer [redacted] token [redacted] end x');
      expect([...text]).toHaveLength(MAX_ATTEMPT_MESSAGE);
      expect(text.endsWith('…')).toBe(true);
    }
    expect(redactAttemptMessage('  \u0001 ', [])).toBeNull();
    expect(redactAttemptMessage('😀'.repeat(3_000), [])).toHaveLength(2 * (MAX_ATTEMPT_MESSAGE - 1) + 1);
  });

  it('finalize clears lastError; history goes with its operation when retention deletes it', async () => {
    const { fence } = await claimFresh(suite.store);
    await startOperationAttempt(suite.store, fence);
    await recordOperationOutcome(suite.store, { ...fence, kind: 'retryable', message: 'try again' });
    await startOperationAttempt(suite.store, fence);
    const identity = { ownerDID: claimInput().ownerDID, connectorName: claimInput().connectorName, model: claimInput().model, accountKey: claimInput().accountKey, sourceID: 's-1' };
    const result = await finalizeOperationAndArmWatch(suite.store, { ...fence, documentID: 'doc-1', resultEntity: null, currentWinnerDigest: null, watchIdentity: identity });
    expect(result.finalized).toBe(true);
    expect(result.operation?.lastError).toBeNull();
    expect(await countRows(suite.store, 'kubun_connector_operation_history')).toBe(2);
    suite.clock.advance(400 * 86_400_000);
    await runRetention(suite.store);
    expect(await getOperationByKey(suite.store, KEY)).toBeNull();
    expect(await countRows(suite.store, 'kubun_connector_operation_history')).toBe(0);
  });

  it('reads several operations’ pages in one call: first, before and hasMore per operation', async () => {
    const a = await claimFresh(suite.store, { operationID: 'a' });
    const b = await claimFresh(suite.store, { operationID: 'b' });
    for (let i = 0; i < 3; i++) {
      await startOperationAttempt(suite.store, a.fence);
      await recordOperationOutcome(suite.store, { ...a.fence, kind: 'offline' });
    }
    await startOperationAttempt(suite.store, b.fence);
    const [pageA, pageB, olderA] = await getAttemptHistories(suite.store, [
      { key: a.fence.key, first: 2 },
      { key: b.fence.key, first: 2 },
      { key: a.fence.key, first: 2, after: { seq: 2 } },
    ]);
    expect(pageA!.attempts.map((x) => x.seq)).toEqual([3, 2]);
    expect(pageA!.hasMore).toBe(true);
    expect(pageB!.attempts.map((x) => x.seq)).toEqual([1]);
    expect(pageB!.hasMore).toBe(false);
    expect(olderA!.attempts.map((x) => x.seq)).toEqual([1]);
    expect(olderA!.hasMore).toBe(false);
    expect(await getAttemptHistories(suite.store, [])).toEqual([]);
  });
});
