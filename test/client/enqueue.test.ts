/**
 * The client package's `enqueue` and `enqueueAll` (issue 39) against the real
 * app in process (yoga's fetch, both dialects): a device enqueues, an idle
 * `runWorker` is woken by the change (its fallback poll is a minute) and
 * commits the operation; `notBefore` holds it back; an
 * answer lost after the commit is resent and answered as the first time; a
 * conflict and a refusal are typed.
 */
import { expect, it } from 'vitest';
import { createStoreClient, enqueue, enqueueAll, runWorker, StoreRequestError, type StoreClient, type WriteBackHandler } from '../../client/runtime/index.js';
import type { EnqueueOperationInput } from '../../client/generated/graphql.js';
import { describeGraphQL, type GraphQLSuite } from '../helpers/graphql.js';
import { OPERATION_FIELDS } from '../helpers/operation-graphql.js';

type Who = 'alice' | 'bob' | 'worker';

/** A client of the suite's app as `who`; `wrap` may stand between it and the app. */
function clientOf(suite: GraphQLSuite, who: Who, wrap?: (request: () => Promise<Response>, body: string) => Promise<Response>): StoreClient {
  return createStoreClient({
    url: 'http://localhost/graphql',
    tokens: { getToken: () => suite.token(who) },
    retryBaseDelayMs: 5,
    fetch: (async (url: string | URL | Request, init?: RequestInit) => {
      const request = async () => suite.app.yoga.fetch(String(url), init as RequestInit);
      return wrap === undefined ? request() : wrap(request, typeof init?.body === 'string' ? init.body : '');
    }) as typeof fetch,
  });
}

let keys = 0;
function write(overrides: Partial<EnqueueOperationInput> = {}): EnqueueOperationInput {
  keys++;
  return {
    operationID: `op-${keys}`,
    connectorName: 'google',
    model: 'contact',
    op: 'CREATE',
    accountKey: 'account-1',
    target: 'contacts',
    deterministicEventID: `event-${keys}`,
    payloadHash: `hash-${keys}`,
    reissueIntent: 'none',
    ...overrides,
  };
}

const committing: WriteBackHandler = {
  async send({ markSent, operation }) {
    await markSent();
    return { kind: 'committed', documentID: `doc-${operation.operationID}`, sourceID: `src-${operation.operationID}` };
  },
  reconcile: async () => ({ kind: 'not-landed' }),
};

async function operation(suite: GraphQLSuite, id: string) {
  const res = await suite.gql(`query($id: ID!) { node(id: $id) { ... on ConnectorOperation { ${OPERATION_FIELDS} } } }`, { id }, { as: 'worker' });
  return res.data.node;
}

describeGraphQL('client: enqueue', (suite) => {
  it('a device enqueues; an idle worker is woken by the change at once (its poll is a minute) and commits it', async () => {
    const device = clientOf(suite, 'alice');
    const acquiredAt = new Map<string, number>();
    const worker = runWorker({
      client: clientOf(suite, 'worker'),
      connector: 'enqueued',
      handler: committing,
      pollIntervalMs: 60_000,
      signals: false,
      onEvent: (event) => event.type === 'acquired' && acquiredAt.set(event.id, Date.now()),
    });
    try {
      // Idle and subscribed: its first read found nothing.
      await expect.poll(() => worker.counters.polls).toBeGreaterThan(0);
      await new Promise((resolve) => setTimeout(resolve, 300));
      const began = Date.now();
      const created = await enqueue(device, write({ connectorName: 'enqueued' }));
      expect(created).toMatchObject({ status: 'created', operation: { state: 'ATTEMPTED', leaseExpiresAt: null, ownerDID: suite.keys.alice.did } });
      if (created.status !== 'created') return;
      await expect.poll(() => worker.counters.committed, { timeout: 5_000, interval: 20 }).toBe(1);
      // Started by the change event: well inside a second on an idle machine (test/graphql/operations-enqueue.test.ts
      // holds the event itself to a second); the bound leaves room for a loaded test machine, the poll is a minute away.
      expect(acquiredAt.get(created.operation.id)! - began).toBeLessThan(2_000);
      expect(await operation(suite, created.operation.id)).toMatchObject({ state: 'COMMITTED', documentID: `doc-${created.operation.operationID}`, attempts: 1 });
      // A batch reaches it the same way.
      const batch = await enqueueAll(device, [write({ connectorName: 'enqueued' }), write({ connectorName: 'enqueued' })]);
      expect(batch.map((r) => r.status)).toEqual(['created', 'created']);
      await expect.poll(() => worker.counters.committed, { timeout: 5_000, interval: 20 }).toBe(3);
      expect(worker.counters).toMatchObject({ started: 3, failed: 0, errors: 0 });
    } finally {
      await worker.stop();
    }
  });

  it('notBefore holds the operation back until then', async () => {
    const device = clientOf(suite, 'alice');
    const later = new Date(suite.clock.now() + 60_000).toISOString();
    const held = await enqueue(device, write({ notBefore: later }));
    expect(held).toMatchObject({ status: 'created', operation: { nextAttemptAt: later } });
    if (held.status !== 'created') return;
    const due = async () => (await suite.gql('{ dueOperations(first: 10) { id } }', {}, { as: 'worker' })).data.dueOperations;
    expect(await due()).toEqual([]);
    suite.clock.advance(60_000);
    expect(await due()).toEqual([{ id: held.operation.id }]);
  });

  it('an answer lost after the server committed is resent and answered as the first time; nothing is written twice', async () => {
    let dropped = 0;
    const lossy = clientOf(suite, 'alice', async (request, body) => {
      const response = await request();
      if (body.includes('EnqueueOperation') && dropped === 0) {
        dropped++;
        return new Response('upstream went away', { status: 502 });
      }
      return response;
    });
    const input = write();
    const resent = await enqueue(lossy, input);
    expect(dropped).toBe(1);
    // The server recorded the first request: the resend is its replay, with the operation as first answered.
    expect(resent.status).toBe('replayed');
    if (resent.status !== 'replayed') return;
    expect(resent.operation).toEqual(await operation(suite, resent.operation.id).then((op) => ({ ...op, lastError: null })));
    expect(await enqueue(clientOf(suite, 'alice'), input)).toEqual(resent);
    const count = await suite.gql('{ operations(first: 1) { totalCount } }', {}, { as: 'worker' });
    expect(count.data.operations.totalCount).toBe(1);
  });

  it('a conflict is a result naming the fields; a refusal rejects with its code', async () => {
    const device = clientOf(suite, 'alice');
    const input = write();
    await enqueue(device, input);
    expect(await enqueue(device, { ...input, payloadHash: 'another' })).toEqual({
      status: 'conflict',
      code: 'IDEMPOTENCY_CONFLICT',
      message: expect.any(String),
      field: 'payloadHash',
      fields: ['payloadHash'],
    });
    const [again, other] = await enqueueAll(device, [input, write()]);
    expect(again).toMatchObject({ status: 'replayed' });
    expect(other).toMatchObject({ status: 'created' });
    const forbidden = await enqueue(device, write({ ownerDID: suite.keys.bob.did })).catch((error: unknown) => error);
    expect(forbidden).toBeInstanceOf(StoreRequestError);
    expect(forbidden).toMatchObject({ code: 'FORBIDDEN', retryable: false });
    const tooMany = await enqueueAll(device, Array.from({ length: 101 }, () => write())).catch((error: unknown) => error);
    expect(tooMany).toMatchObject({ code: 'VALIDATION_FAILED' });
  });
});
