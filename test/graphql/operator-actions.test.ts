/**
 * retryOperation / cancelOperation / requeueOperation through yoga.fetch
 * (issue 11 item 3): who may act, typed errors for a stale version, a wrong
 * state and an invisible operation, the holder fenced out, the action in the
 * history with who did it, and the counts following.
 */
import { expect, it } from 'vitest';
import { describeGraphQL, type Principal } from '../helpers/graphql.js';
import { claimed, mutate, mutateOK } from '../helpers/operation-graphql.js';
import { operationRowValues } from '../helpers/row-fixtures.js';

const ACTION = (name: string, input: string) => `mutation A($input: ${input}!) {
  ${name}(input: $input) {
    __typename
    ... on Error { code message }
    ... on OperationPayload { operation { id state version attempts lastError nextAttemptAt
      attemptHistory(first: 5) { edges { node { kind actorDID message } } } } }
  }
}`;
const RETRY = ACTION('retryOperation', 'RetryOperationInput');
const CANCEL = ACTION('cancelOperation', 'CancelOperationInput');
const REQUEUE = ACTION('requeueOperation', 'RequeueOperationInput');

describeGraphQL('graphql operations: operator actions', (suite) => {
  async function act(query: string, input: Record<string, unknown>, as: Principal = 'alice') {
    const res = await suite.gql(query, { input }, { as });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    return Object.values(res.data as Record<string, any>)[0] as Record<string, any>;
  }

  async function dead(operationID = 'op-1') {
    const { fence, operation } = await claimed(suite, { operationID });
    await mutateOK(suite, 'startOperationAttempt', fence);
    await mutateOK(suite, 'recordOperationAttempt', { ...fence, kind: 'FATAL', message: 'bad request' });
    return { fence, id: operation.id, version: fence.version };
  }

  it('the owner retries a dead operation; the retry is in its history with who did it; counts follow', async () => {
    const { id, version } = await dead();
    const result = await act(RETRY, { id, version });
    expect(result).toMatchObject({ __typename: 'OperationPayload', operation: { state: 'ATTEMPTED', attempts: 0, version: version + 1, lastError: null } });
    expect(result.operation.attemptHistory.edges.map((e: any) => [e.node.kind, e.node.actorDID])).toEqual([
      ['RETRY', suite.keys.alice.did],
      ['ATTEMPT', null],
    ]);
    const counts = await suite.gql('{ operationCounts { state count } }', {}, { as: 'alice' });
    expect(counts.data.operationCounts).toContainEqual({ state: 'ATTEMPTED', count: 1 });
    expect(counts.data.operationCounts).toContainEqual({ state: 'DEAD', count: 0 });
  });

  it('a service cancels with a reason and fences the holder out; requeue makes it due now', async () => {
    const { fence, operation } = await claimed(suite);
    await mutateOK(suite, 'startOperationAttempt', fence);
    const requeued = await act(REQUEUE, { id: operation.id, version: fence.version }, 'worker');
    expect(requeued.operation).toMatchObject({ state: 'ATTEMPTED', version: fence.version + 1 });
    // The holder's lease went with the requeue: its writes are stale now.
    const late = await mutate(suite, 'markOperationSent', { ...fence, sendMarker: 'late' });
    expect(late.__typename).toBe('StaleLeaseError');
    const cancelled = await act(CANCEL, { id: operation.id, version: fence.version + 1, reason: 'duplicate of another change' }, 'worker');
    expect(cancelled.operation).toMatchObject({ state: 'DEAD', lastError: 'cancelled: duplicate of another change' });
    expect(cancelled.operation.attemptHistory.edges[0].node).toEqual({ kind: 'CANCEL', actorDID: suite.keys.worker.did, message: 'duplicate of another change' });
  });

  it('typed errors: a stale version, a wrong state, an empty reason, and a stranger who cannot see it', async () => {
    const { id, version } = await dead();
    expect(await act(RETRY, { id, version: version + 7 })).toMatchObject({ __typename: 'StaleVersionError', code: 'STALE_VERSION' });
    expect(await act(REQUEUE, { id, version })).toMatchObject({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });
    expect(await act(CANCEL, { id, version, reason: '' })).toMatchObject({ __typename: 'InputValidationError' });
    expect(await act(RETRY, { id, version }, 'bob')).toMatchObject({ __typename: 'NotFoundError' });
    // Nothing changed on the way.
    const still = await act(RETRY, { id, version });
    expect(still).toMatchObject({ __typename: 'OperationPayload', operation: { version: version + 1 } });
  });

  it('bulk: retryOperations with a filter and a cap, only the viewer’s own; an empty filter is refused', async () => {
    for (let i = 0; i < 3; i++) await dead(`bulk-${i}`);
    const BULK = `mutation B($input: RetryOperationsInput!) { retryOperations(input: $input) {
      __typename ... on Error { code message } ... on BulkOperationActionPayload { changed more operations { state attemptHistory(first: 1) { edges { node { kind actorDID } } } } } } }`;
    const bulk = async (input: Record<string, unknown>, as: Principal = 'alice') => (await suite.gql(BULK, { input }, { as })).data.retryOperations;
    expect(await bulk({ filter: {} })).toMatchObject({ __typename: 'InvalidInputError', message: expect.stringMatching(/at least one condition/) });
    expect(await bulk({ filter: { states: ['DEAD'] } }, 'bob')).toMatchObject({ changed: 0, more: false, operations: [] });
    const first = await bulk({ filter: { states: ['DEAD'] }, cap: 2 });
    expect(first).toMatchObject({ __typename: 'BulkOperationActionPayload', changed: 2, more: true });
    expect(first.operations[0]).toEqual({ state: 'ATTEMPTED', attemptHistory: { edges: [{ node: { kind: 'RETRY', actorDID: suite.keys.alice.did } }] } });
    expect(await bulk({ filter: { lastKinds: ['FATAL'] }, cap: 1000 })).toMatchObject({ changed: 1, more: false });
    const refused = await suite.gql(BULK, { input: { filter: { states: ['DEAD'] }, cap: 1001 } }, { as: 'alice' });
    expect(refused.data.retryOperations.__typename).toBe('InputValidationError');
  });

  it('retrying an operation whose request may have been sent makes it RECONCILE_ONLY, never a blind resend', async () => {
    const { fence, operation } = await claimed(suite, { operationID: 'sent-1' });
    await mutateOK(suite, 'startOperationAttempt', fence);
    await mutateOK(suite, 'markOperationSent', { ...fence, sendMarker: 'm-1' });
    await mutateOK(suite, 'recordOperationAttempt', { ...fence, kind: 'FATAL' });
    const result = await act(RETRY, { id: operation.id, version: fence.version }, 'worker');
    expect(result.operation).toMatchObject({ state: 'RECONCILE_ONLY', attempts: 0 });
  });
});

describeGraphQL('graphql operations: bulk actions progress (issue 19 item 6c)', (suite) => {
  const REQUEUE_MANY = `mutation R($input: RequeueOperationsInput!) { requeueOperations(input: $input) {
    __typename ... on Error { code message } ... on BulkOperationActionPayload { changed more operations { id } } } }`;

  /** `count` operations of alice: live ATTEMPTED ones none due yet (next attempt in an hour), or DEAD ones; no lease; 500 rows per INSERT. */
  async function seedLive(count: number, prefix: string, state: 'attempted' | 'dead' = 'attempted') {
    const store = suite.store;
    const rows = Array.from({ length: count }, (_, i) =>
      operationRowValues(store, {
        caller_did: suite.keys.alice.did,
        owner_did: suite.keys.alice.did,
        operation_id: `${prefix}-${i}`,
        state,
        next_attempt_at: state === 'dead' ? null : store.now() + 3_600_000,
        lease_token: null,
        lease_expires_at: null,
        created_at: store.now() - count + i,
      }),
    );
    for (let i = 0; i < rows.length; i += 500) await store.db.insertInto('kubun_connector_operation').values(rows.slice(i, i + 500)).execute();
  }

  it('requeueOperations with the same filter again covers the next rows, not the same newest 1 000 again', async () => {
    await seedLive(2_500, 'requeue-many');
    const seen = new Set<string>();
    const runs: { changed: number; more: boolean }[] = [];
    for (let call = 0; call < 4; call++) {
      const res = await suite.gql(REQUEUE_MANY, { input: { filter: { states: ['ATTEMPTED'] }, cap: 1_000 } });
      expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
      const payload = res.data.requeueOperations;
      expect(payload.__typename).toBe('BulkOperationActionPayload');
      runs.push({ changed: payload.changed, more: payload.more });
      for (const op of payload.operations as { id: string }[]) seen.add(op.id);
    }
    expect(runs).toEqual([
      { changed: 1_000, more: true },
      { changed: 1_000, more: true },
      { changed: 500, more: false },
      { changed: 0, more: false },
    ]);
    // Three calls covered every one of the 2 500, each once.
    expect(seen.size).toBe(2_500);
  });

  it('retryOperations and cancelOperations with the same filter again move on too (their rows leave the filter)', async () => {
    for (const [field, type, state, extra] of [
      ['retryOperations', 'RetryOperationsInput', 'dead', {}],
      ['cancelOperations', 'CancelOperationsInput', 'attempted', { reason: 'bulk cancel' }],
    ] as const) {
      await suite.database.truncate();
      await seedLive(1_200, `${field}-many`, state);
      const query = `mutation M($input: ${type}!) { ${field}(input: $input) { ... on BulkOperationActionPayload { changed more operations { id } } } }`;
      const seen = new Set<string>();
      const runs: { changed: number; more: boolean }[] = [];
      for (let call = 0; call < 3; call++) {
        const res = await suite.gql(query, { input: { filter: { states: [state.toUpperCase()] }, cap: 1_000, ...extra } });
        expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
        runs.push({ changed: res.data[field].changed, more: res.data[field].more });
        for (const op of res.data[field].operations as { id: string }[]) seen.add(op.id);
      }
      expect(runs, field).toEqual([
        { changed: 1_000, more: true },
        { changed: 200, more: false },
        { changed: 0, more: false },
      ]);
      expect(seen.size, field).toBe(1_200);
    }
  });
});
