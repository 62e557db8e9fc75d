/**
 * The batch forms of the fenced steps through yoga.fetch (issue 40 item 3):
 * `startOperationAttempts`, `markOperationsSent`, `recordOperationAttempts`
 * and `finalizeOperations` answer one typed result per item, in input order,
 * each as its single step would (a stale fence is that item's
 * StaleLeaseError, the others go through); a resent batch is answered by
 * each item's request key; invalid input or one operation twice refuses the
 * whole batch.
 */
import { afterEach, expect, it } from 'vitest';
import { describeGraphQL } from '../helpers/graphql.js';
import { claimed, readOperation } from '../helpers/operation-graphql.js';
import { subscribeSSE, type SSESubscription } from '../helpers/sse.js';

const RESULT = `
  __typename
  ... on Error { code message }
  ... on InputValidationError { issues { path message } }`;
const ITEM = `
  __typename
  ... on Error { code message }`;

const START = `mutation($input: StartOperationAttemptsInput!) {
  startOperationAttempts(input: $input) { ${RESULT} ... on StartOperationAttemptsPayload { results { ${ITEM} ... on OperationPayload { replayed operation { id attempts version } } } } }
}`;
const MARK = `mutation($input: MarkOperationsSentInput!) {
  markOperationsSent(input: $input) { ${RESULT} ... on MarkOperationsSentPayload { results { ${ITEM} ... on OperationPayload { operation { id sendMarkerSet } } } } }
}`;
const RECORD = `mutation($input: RecordOperationAttemptsInput!) {
  recordOperationAttempts(input: $input) { ${RESULT} ... on RecordOperationAttemptsPayload { results { ${ITEM} ... on OperationPayload { operation { id state lastKind } } } } }
}`;
const FINALIZE = `mutation($input: FinalizeOperationsInput!) {
  finalizeOperations(input: $input) { ${RESULT} ... on FinalizeOperationsPayload { results { ${ITEM} ... on FinalizeOperationPayload { finalized replayed operation { id state documentID } watch { id } } } } }
}`;

describeGraphQL('graphql fenced step batches', (suite) => {
  const open: SSESubscription[] = [];
  afterEach(() => {
    for (const sub of open.splice(0)) sub.close();
  });

  async function send(document: string, field: string, items: Record<string, unknown>[], as: 'alice' | 'bob' | 'worker' = 'alice') {
    const res = await suite.gql(document, { input: { items } }, { as });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    return res.data[field];
  }

  it('runs start → mark → finalize for several operations, one result per item in input order', async () => {
    const held = [await claimed(suite, { operationID: 'a' }), await claimed(suite, { operationID: 'b' }), await claimed(suite, { operationID: 'c' })];
    const fences = held.map((h) => h.fence);
    const started = await send(START, 'startOperationAttempts', fences);
    expect(started.__typename).toBe('StartOperationAttemptsPayload');
    expect(started.results.map((r: { operation: { id: string; attempts: number } }) => [r.operation.id, r.operation.attempts])).toEqual(fences.map((f) => [f.id, 1]));
    const marked = await send(MARK, 'markOperationsSent', fences.map((f, i) => ({ ...f, sendMarker: `run-${i}` })));
    expect(marked.results.every((r: { operation: { sendMarkerSet: boolean } }) => r.operation.sendMarkerSet)).toBe(true);
    const finalized = await send(FINALIZE, 'finalizeOperations', fences.slice(0, 2).map((f, i) => ({ ...f, documentID: `doc-${i}`, sourceID: `src-${i}` })));
    expect(finalized.results).toEqual([
      { __typename: 'FinalizeOperationPayload', finalized: true, replayed: false, operation: { id: fences[0]!.id, state: 'COMMITTED', documentID: 'doc-0' }, watch: { id: expect.any(String) } },
      { __typename: 'FinalizeOperationPayload', finalized: true, replayed: false, operation: { id: fences[1]!.id, state: 'COMMITTED', documentID: 'doc-1' }, watch: { id: expect.any(String) } },
    ]);
    const recorded = await send(RECORD, 'recordOperationAttempts', [{ ...fences[2], kind: 'UNKNOWN' }]);
    expect(recorded.results).toEqual([{ __typename: 'OperationPayload', operation: { id: fences[2]!.id, state: 'RECONCILE_ONLY', lastKind: 'UNKNOWN' } }]);
  });

  it('answers a refused item with its typed error and lets the others through', async () => {
    const good = await claimed(suite, { operationID: 'good' });
    const other = await claimed(suite, { operationID: 'other' });
    const results = (await send(START, 'startOperationAttempts', [good.fence, { ...other.fence, leaseToken: 'not-the-token' }])).results;
    expect(results[0]).toMatchObject({ __typename: 'OperationPayload', operation: { id: good.fence.id, attempts: 1 } });
    expect(results[1]).toMatchObject({ __typename: 'StaleLeaseError', code: 'STALE_LEASE' });
    expect((await readOperation(suite, other.fence.id))?.attempts).toBe(0);
    // Someone else's operation is not found for them, item by item.
    const bobs = (await send(START, 'startOperationAttempts', [other.fence], 'bob')).results;
    expect(bobs[0]).toMatchObject({ __typename: 'NotFoundError' });
  });

  it('answers a resent batch item by item from the request keys: nothing written twice', async () => {
    const held = [await claimed(suite, { operationID: 'x' }), await claimed(suite, { operationID: 'y' })];
    const items = held.map((h, i) => ({ ...h.fence, requestKey: `start-${i}` }));
    await send(START, 'startOperationAttempts', items);
    const again = await send(START, 'startOperationAttempts', items);
    expect(again.results.map((r: { replayed: boolean; operation: { attempts: number } }) => [r.replayed, r.operation.attempts])).toEqual([
      [true, 1],
      [true, 1],
    ]);
  });

  it('refuses the whole batch for invalid input, an empty or oversized list, or one operation twice', async () => {
    const held = await claimed(suite);
    const twice = await send(START, 'startOperationAttempts', [held.fence, held.fence]);
    expect(twice).toMatchObject({ __typename: 'InvalidInputError', code: 'INVALID_INPUT' });
    expect(await send(START, 'startOperationAttempts', [])).toMatchObject({ __typename: 'InputValidationError' });
    expect(await send(START, 'startOperationAttempts', Array.from({ length: 101 }, () => held.fence))).toMatchObject({ __typename: 'InputValidationError' });
    expect(await send(MARK, 'markOperationsSent', [{ ...held.fence, sendMarker: '' }])).toMatchObject({ __typename: 'InputValidationError' });
    expect((await readOperation(suite, held.fence.id))?.attempts).toBe(0);
  });

  it('publishes every item that wrote to operationsChanged, in one publish after the items', async () => {
    const held = [await claimed(suite, { operationID: 'p' }), await claimed(suite, { operationID: 'q' })];
    const sub = await subscribeSSE(suite.app.yoga.fetch as never, 'http://localhost/graphql', `subscription { operationsChanged(filter: { connectorName: "google" }) { id attempts } }`, {}, {
      authorization: `Bearer ${await suite.token('worker')}`,
    });
    open.push(sub);
    await new Promise((r) => setTimeout(r, 20));
    await send(START, 'startOperationAttempts', [held[0]!.fence, { ...held[1]!.fence, leaseToken: 'stale' }]);
    await sub.waitFor(1, 1_000);
    await new Promise((r) => setTimeout(r, 150));
    expect(sub.events.map((e) => e.data.operationsChanged)).toEqual([{ id: held[0]!.fence.id, attempts: 1 }]);
  });
});
