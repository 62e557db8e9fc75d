/**
 * `enqueueOperation` and `enqueueOperations` through yoga.fetch (issue 39):
 * a due operation with no lease that `dueOperations` lists (or not before
 * `notBefore`), a replay answered byte for byte as the first time, typed
 * conflicts, who may enqueue for whom, the batch's cap, per-item results and
 * all-or-nothing refusals, and the change published to `operationsChanged`.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { describeGraphQL, type Principal } from '../helpers/graphql.js';
import { claimInput, OPERATION_FIELDS, operationCount, operationMutationDocument } from '../helpers/operation-graphql.js';
import { iso } from '../helpers/graphql-seed.js';
import { subscribeSSE, type SSESubscription } from '../helpers/sse.js';

const ERRORS = `
  __typename
  ... on Error { code message }
  ... on InvalidInputError { field }
  ... on InputValidationError { issues { path message } }`;

const ENQUEUE = `mutation Enqueue($input: EnqueueOperationInput!) {
  enqueueOperation(input: $input) {
    ${ERRORS}
    ... on IdempotencyConflictError { field fields }
    ... on EnqueueOperationPayload { outcome operation { ${OPERATION_FIELDS} lastError } }
  }
}`;

const ENQUEUE_MANY = `mutation EnqueueMany($input: EnqueueOperationsInput!) {
  enqueueOperations(input: $input) {
    ${ERRORS}
    ... on EnqueueOperationsPayload {
      created replayed conflicts
      results {
        __typename
        ... on EnqueueOperationPayload { outcome operation { id operationID state nextAttemptAt leaseExpiresAt } }
        ... on IdempotencyConflictError { code field fields }
      }
    }
  }
}`;

const DUE = `query Due($connectorName: String) { dueOperations(first: 100, connectorName: $connectorName) { id operationID } }`;

/** An enqueue input: the claim's write without its lease length. */
function enqueueInput(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const { leaseMs: _lease, ...input } = claimInput(overrides);
  return input;
}

describeGraphQL('graphql operations: enqueue', (suite) => {
  const open: SSESubscription[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });

  async function enqueue(overrides: Record<string, unknown> = {}, as: Principal = 'alice') {
    const res = await suite.gql(ENQUEUE, { input: enqueueInput(overrides) }, { as });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    return res.data.enqueueOperation;
  }

  async function enqueueMany(items: Record<string, unknown>[], as: Principal = 'alice') {
    const res = await suite.gql(ENQUEUE_MANY, { input: { operations: items } }, { as });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    return res.data.enqueueOperations;
  }

  async function dueIDs(connectorName?: string): Promise<string[]> {
    const res = await suite.gql(DUE, connectorName === undefined ? {} : { connectorName }, { as: 'worker' });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    return res.data.dueOperations.map((op: { operationID: string }) => op.operationID).sort();
  }

  describe('enqueueOperation', () => {
    it('records a due ATTEMPTED operation with no lease for the viewer as caller and owner; dueOperations lists it', async () => {
      const now = suite.clock.now();
      const result = await enqueue({ documentID: 'doc-1' });
      expect(result).toMatchObject({
        __typename: 'EnqueueOperationPayload',
        outcome: 'CREATED',
        operation: {
          operationID: 'op-1',
          callerDID: suite.keys.alice.did,
          ownerDID: suite.keys.alice.did,
          documentID: 'doc-1',
          state: 'ATTEMPTED',
          attempts: 0,
          version: 0,
          nextAttemptAt: iso(now),
          leaseExpiresAt: null,
          sendMarkerSet: false,
          createdAt: iso(now),
        },
      });
      expect(await dueIDs('google')).toEqual(['op-1']);
    });

    it('notBefore in the future: not due until then', async () => {
      const now = suite.clock.now();
      const result = await enqueue({ notBefore: iso(now + 60_000) });
      expect(result.operation.nextAttemptAt).toBe(iso(now + 60_000));
      expect(await dueIDs()).toEqual([]);
      suite.clock.advance(60_000);
      expect(await dueIDs()).toEqual(['op-1']);
    });

    it('a resend (same key, same write) is answered byte for byte as the first time, but REPLAYED, after a worker moved the operation on', async () => {
      const first = await enqueue();
      const acquired = await suite.gql(operationMutationDocument('acquireOperationLease'), { input: { id: first.operation.id, leaseMs: 30_000 } }, { as: 'worker' });
      expect(acquired.data.acquireOperationLease).toMatchObject({ __typename: 'OperationPayload', operation: { version: 1 } });
      const again = await enqueue();
      expect(JSON.stringify({ ...again, outcome: 'CREATED' })).toBe(JSON.stringify(first));
      expect(again.outcome).toBe('REPLAYED');
      expect(await operationCount(suite)).toBe(1);
    });

    it('the same key with another payload is an IdempotencyConflictError naming the fields; nothing written', async () => {
      await enqueue();
      const conflict = await enqueue({ payloadHash: 'hash-2', notBefore: iso(suite.clock.now() + 1_000) });
      expect(conflict).toMatchObject({ __typename: 'IdempotencyConflictError', code: 'IDEMPOTENCY_CONFLICT', field: 'payloadHash' });
      expect([...conflict.fields].sort()).toEqual(['notBefore', 'payloadHash']);
      const res = await suite.gql(`query { operationByKey(operationID: "op-1") { payloadHash nextAttemptAt } }`);
      expect(res.data.operationByKey).toEqual({ payloadHash: 'hash-1', nextAttemptAt: iso(suite.clock.now()) });
    });

    it('a device may not enqueue for another owner (ForbiddenError, nothing written); a service may', async () => {
      const refused = await enqueue({ ownerDID: suite.keys.bob.did }, 'alice');
      expect(refused).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
      expect(await operationCount(suite)).toBe(0);
      const mine = await enqueue({ ownerDID: suite.keys.bob.did }, 'bob');
      expect(mine).toMatchObject({ outcome: 'CREATED', operation: { callerDID: suite.keys.bob.did, ownerDID: suite.keys.bob.did } });
      const service = await enqueue({ ownerDID: suite.keys.alice.did }, 'worker');
      expect(service).toMatchObject({ outcome: 'CREATED', operation: { callerDID: suite.keys.worker.did, ownerDID: suite.keys.alice.did } });
      // The owner sees the operation a service enqueued for them; a stranger does not.
      const node = `query($id: ID!) { node(id: $id) { id } }`;
      expect((await suite.gql(node, { id: service.operation.id }, { as: 'alice' })).data.node).toEqual({ id: service.operation.id });
      expect((await suite.gql(node, { id: service.operation.id }, { as: 'mallory' })).data.node).toBeNull();
    });

    it('refuses bad input at the edge with every invalid field listed, before anything is written', async () => {
      const res = await suite.gql(ENQUEUE, { input: enqueueInput({ operationID: '', sendTimeoutMs: 5, connectorName: ' ' }) });
      expect(res.data.enqueueOperation.__typename).toBe('InputValidationError');
      expect(res.data.enqueueOperation.issues.map((issue: { path: string[] }) => issue.path.join('.')).sort()).toEqual([
        'input.connectorName',
        'input.operationID',
        'input.sendTimeoutMs',
      ]);
      const badTime = await suite.gql(ENQUEUE, { input: enqueueInput({ notBefore: 'tomorrow' }) });
      expect(badTime.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
      expect(await operationCount(suite)).toBe(0);
    });
  });

  describe('enqueueOperations', () => {
    it('answers each item in order (CREATED, REPLAYED, IdempotencyConflictError), the conflict leaving the others written', async () => {
      await enqueue({ operationID: 'b' });
      await enqueue({ operationID: 'c' });
      const result = await enqueueMany([
        enqueueInput({ operationID: 'a' }),
        enqueueInput({ operationID: 'b' }),
        enqueueInput({ operationID: 'c', target: 'calendar' }),
        enqueueInput({ operationID: 'd', notBefore: iso(suite.clock.now() + 1_000) }),
      ]);
      expect(result).toMatchObject({ __typename: 'EnqueueOperationsPayload', created: 2, replayed: 1, conflicts: 1 });
      expect(result.results.map((r: { __typename: string; outcome?: string }) => r.outcome ?? r.__typename)).toEqual([
        'CREATED',
        'REPLAYED',
        'IdempotencyConflictError',
        'CREATED',
      ]);
      expect(result.results[2]).toEqual({ __typename: 'IdempotencyConflictError', code: 'IDEMPOTENCY_CONFLICT', field: 'target', fields: ['target'] });
      expect(await dueIDs()).toEqual(['a', 'b', 'c']);
      // The whole batch again: every written item replayed, the conflict still a conflict.
      const again = await enqueueMany([
        enqueueInput({ operationID: 'a' }),
        enqueueInput({ operationID: 'b' }),
        enqueueInput({ operationID: 'c', target: 'calendar' }),
        enqueueInput({ operationID: 'd', notBefore: iso(suite.clock.now() + 1_000) }),
      ]);
      expect(again).toMatchObject({ created: 0, replayed: 3, conflicts: 1 });
      expect(again.results[3]).toEqual({ ...result.results[3], outcome: 'REPLAYED' });
    });

    it('over the cap of 100: InputValidationError, nothing written', async () => {
      const items = Array.from({ length: 101 }, (_, i) => enqueueInput({ operationID: `op-${i}` }));
      const refused = await enqueueMany(items);
      expect(refused).toMatchObject({ __typename: 'InputValidationError', code: 'VALIDATION_FAILED', issues: [{ path: ['input', 'operations'] }] });
      expect(refused.issues[0].message).toMatch(/at most 100 operations/);
      expect(await operationCount(suite)).toBe(0);
      const atCap = await enqueueMany(items.slice(0, 100), 'worker');
      expect(atCap).toMatchObject({ created: 100, replayed: 0, conflicts: 0 });
    });

    it('is atomic: one item for another owner, one invalid item or a key named twice refuses the whole batch, nothing written', async () => {
      const forbidden = await enqueueMany([enqueueInput({ operationID: 'x' }), enqueueInput({ operationID: 'y', ownerDID: suite.keys.bob.did })]);
      expect(forbidden).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
      const invalid = await enqueueMany([enqueueInput({ operationID: 'x' }), enqueueInput({ operationID: 'y', payloadHash: '' })]);
      expect(invalid).toMatchObject({ __typename: 'InputValidationError', issues: [{ path: ['input', 'operations', '1', 'payloadHash'] }] });
      const twice = await enqueueMany([enqueueInput({ operationID: 'x' }), enqueueInput({ operationID: 'x' })]);
      expect(twice).toMatchObject({ __typename: 'InvalidInputError', code: 'INVALID_INPUT', field: 'operations' });
      expect(await operationCount(suite)).toBe(0);
    });
  });

  describe('the change feed', () => {
    async function subscribe(query: string, variables: Record<string, unknown>, as: Exclude<Principal, 'anonymous'>) {
      const sub = await subscribeSSE(suite.app.yoga.fetch as never, 'http://localhost/graphql', query, variables, { authorization: `Bearer ${await suite.token(as)}` });
      open.push(sub);
      await new Promise((r) => setTimeout(r, 20));
      return sub;
    }

    it('a worker’s operationsChanged hears each new enqueue within a second; a replay publishes nothing', async () => {
      const worker = await subscribe(`subscription($filter: OperationFilter) { operationsChanged(filter: $filter) { id operationID state nextAttemptAt leaseExpiresAt } }`, {
        filter: { connectorName: 'google', states: ['ATTEMPTED', 'RECONCILE_ONLY'] },
      }, 'worker');
      const began = Date.now();
      const first = await enqueue();
      await worker.waitFor(1, 1_000);
      expect(Date.now() - began).toBeLessThan(1_000);
      expect(worker.events[0]).toEqual({
        data: { operationsChanged: { id: first.operation.id, operationID: 'op-1', state: 'ATTEMPTED', nextAttemptAt: first.operation.nextAttemptAt, leaseExpiresAt: null } },
      });
      await enqueue();
      await enqueueMany([enqueueInput({ operationID: 'op-1' }), enqueueInput({ operationID: 'op-2' })]);
      await worker.waitFor(2, 1_000);
      await new Promise((r) => setTimeout(r, 150));
      expect(worker.events.map((e) => e.data.operationsChanged.operationID)).toEqual(['op-1', 'op-2']);
    });
  });
});
