/**
 * Every step of the write-back sequence is an idempotent request (issue 37):
 * resent with its request key after a lost answer it gets the same answer
 * (`replayed: true`) and writes nothing more; another request under the key
 * is an IdempotencyConflictError naming what differs; a claim or acquire
 * resent by its claimant gets its own lease back, while anyone else still
 * sees IN_FLIGHT. Through yoga.fetch, on both dialects.
 */
import { expect, it } from 'vitest';
import { describeGraphQL } from '../helpers/graphql.js';
import { claim, FINALIZE, mutate, type OperationMutation } from '../helpers/operation-graphql.js';
import { LEASE_MS } from '../helpers/operation-claim-fixtures.js';
import { getOperationRow } from '../helpers/row-fixtures.js';

describeGraphQL('graphql operations: request keys', (suite) => {
  const key = (operationID = 'op-1') => ({ callerDID: suite.keys.alice.did, operationID });
  const historyRows = async (operationID = 'op-1') =>
    (await suite.store.db.selectFrom('kubun_connector_operation_history').selectAll().where('operation_id', '=', operationID).execute()).length;

  async function claimedWithKey(requestKey = 'claim-1') {
    const result = await claim(suite, { requestKey });
    expect(result).toMatchObject({ outcome: 'CLAIMED', replayed: false });
    const { operation, lease } = result as unknown as { operation: { id: string }; lease: { token: string; version: number } };
    return { id: operation.id, fence: { id: operation.id, version: lease.version, leaseToken: lease.token }, lease };
  }

  /** Sends `name` twice with the same key and input: the second is the first's answer, and the row is as the first left it. */
  async function twice(name: OperationMutation, input: Record<string, unknown>, operationID = 'op-1') {
    const first = await mutate(suite, name, input);
    expect(first, JSON.stringify(first)).toMatchObject({ __typename: 'OperationPayload', replayed: false });
    const after = await getOperationRow(suite.store, key(operationID));
    const history = await historyRows(operationID);
    suite.clock.advance(5);
    const second = await mutate(suite, name, input);
    expect(second).toEqual({ ...first, replayed: true });
    expect(await getOperationRow(suite.store, key(operationID))).toEqual(after);
    expect(await historyRows(operationID)).toBe(history);
    return first;
  }

  it('a claim resent with its key gets its own lease back; another request key gets IN_FLIGHT; another payload under the key is a conflict', async () => {
    const { lease } = await claimedWithKey();
    const row = await getOperationRow(suite.store, key());
    const again = await claim(suite, { requestKey: 'claim-1' });
    expect(again).toMatchObject({ outcome: 'CLAIMED', replayed: true, lease: { token: lease.token, version: lease.version } });
    expect(await claim(suite, { requestKey: 'another-worker' })).toMatchObject({ outcome: 'IN_FLIGHT', lease: null, replayed: false });
    expect(await claim(suite)).toMatchObject({ outcome: 'IN_FLIGHT', lease: null });
    expect(await claim(suite, { requestKey: 'claim-1', leaseMs: LEASE_MS * 2 })).toMatchObject({ __typename: 'IdempotencyConflictError', fields: ['leaseMs'] });
    expect(await claim(suite, { requestKey: 'claim-1', payloadHash: 'other' })).toMatchObject({ __typename: 'IdempotencyConflictError' });
    expect(await getOperationRow(suite.store, key())).toEqual(row);
  });

  it('start, mark sent, record outcome and release resent with their keys answer again and write nothing (a start is not a second attempt)', async () => {
    const { fence } = await claimedWithKey();
    const started = await twice('startOperationAttempt', { ...fence, requestKey: 'start-1' });
    expect(started).toMatchObject({ operation: { attempts: 1 } });
    await twice('markOperationSent', { ...fence, sendMarker: 'run-1', requestKey: 'mark-1' });
    await twice('recordOperationAttempt', { ...fence, kind: 'RETRYABLE', lastHTTPStatus: 503, requestKey: 'record-1' });
    await twice('renewOperationLease', { ...fence, leaseMs: LEASE_MS, requestKey: 'renew-1' });
    const released = await twice('releaseOperationLease', { ...fence, requestKey: 'release-1' });
    expect(released).toMatchObject({ operation: { leaseExpiresAt: null } });
    // Without its key the same release is judged afresh: the lease is gone.
    expect(await mutate(suite, 'releaseOperationLease', fence)).toMatchObject({ __typename: 'StaleLeaseError' });
  });

  it('a different request under a used key is a conflict naming the fields (or the mutation), and writes nothing', async () => {
    const { fence } = await claimedWithKey();
    await mutate(suite, 'startOperationAttempt', { ...fence, requestKey: 'step-1' });
    const row = await getOperationRow(suite.store, key());
    expect(await mutate(suite, 'markOperationSent', { ...fence, sendMarker: 'run-1', requestKey: 'step-1' })).toMatchObject({
      __typename: 'IdempotencyConflictError',
      fields: ['mutation'],
    });
    await mutate(suite, 'renewOperationLease', { ...fence, leaseMs: LEASE_MS, requestKey: 'renew-1' });
    const renewed = await getOperationRow(suite.store, key());
    const conflict = await mutate(suite, 'renewOperationLease', { ...fence, leaseMs: LEASE_MS * 2, requestKey: 'renew-1' });
    expect(conflict).toMatchObject({ __typename: 'IdempotencyConflictError', fields: ['leaseMs'] });
    expect(JSON.stringify(conflict)).not.toContain(fence.leaseToken);
    expect(await getOperationRow(suite.store, key())).toEqual(renewed);
    expect(row?.attempts).toBe(1);
  });

  it('an acquire resent with its key gets its lease back; a reconcile result and a finalize resent answer again', async () => {
    const { fence } = await claimedWithKey();
    await mutate(suite, 'startOperationAttempt', fence);
    await mutate(suite, 'markOperationSent', { ...fence, sendMarker: 'run-1', sendTimeoutMs: 100 });
    await mutate(suite, 'recordOperationAttempt', { ...fence, kind: 'UNKNOWN', retryAfterMs: 0 });
    await mutate(suite, 'releaseOperationLease', fence);
    suite.clock.advance(LEASE_MS);
    const acquired = await mutate(suite, 'acquireOperationLease', { id: fence.id, leaseMs: LEASE_MS, requestKey: 'acquire-1' });
    expect(acquired).toMatchObject({ __typename: 'OperationPayload', replayed: false, operation: { state: 'RECONCILE_ONLY', version: 1 } });
    const again = await mutate(suite, 'acquireOperationLease', { id: fence.id, leaseMs: LEASE_MS, requestKey: 'acquire-1' });
    expect(again).toEqual({ ...acquired, replayed: true });
    expect(await mutate(suite, 'acquireOperationLease', { id: fence.id, leaseMs: LEASE_MS, requestKey: 'acquire-2' })).toMatchObject({ __typename: 'InvalidStateError' });
    const lease = (acquired as unknown as { lease: { token: string; version: number } }).lease;
    const holder = { id: fence.id, version: lease.version, leaseToken: lease.token };
    await twice('recordReconcileResult', { ...holder, landed: true, requestKey: 'reconcile-1' });
    const input = { ...holder, documentID: 'doc-1', sourceID: 'src-1', requestKey: 'finalize-1' };
    const first = await suite.gql(FINALIZE, { input });
    expect(first.data.finalizeOperation).toMatchObject({ finalized: true, operation: { state: 'COMMITTED' } });
    const row = await getOperationRow(suite.store, key());
    const second = await suite.gql(FINALIZE, { input });
    expect(second.data.finalizeOperation).toEqual(first.data.finalizeOperation);
    expect(await getOperationRow(suite.store, key())).toEqual(row);
    const other = await suite.gql(FINALIZE, { input: { ...input, sourceID: 'src-2' } });
    expect(other.data.finalizeOperation).toMatchObject({ __typename: 'IdempotencyConflictError', code: 'IDEMPOTENCY_CONFLICT' });
  });

  it('refuses an empty or overlong request key', async () => {
    const { fence } = await claimedWithKey();
    for (const requestKey of ['', 'k'.repeat(201)]) {
      expect(await mutate(suite, 'startOperationAttempt', { ...fence, requestKey })).toMatchObject({ __typename: 'InputValidationError' });
    }
  });
});
