/**
 * The write-back runtime of the client package (issue 20 items 2 and 3),
 * against the real app in process (yoga's fetch, both dialects): writeBack's
 * every path (commit, replay, conflict, each outcome kind, a throwing handler
 * before and after markSent, committed without a mark, reconcile found / not
 * found, lease lost, stop), the store client's retries, and runWorker taking
 * due work woken by the subscription and draining. The server keeps the test
 * clock; the runtime's own timers are real. The multi-process kill test is
 * test/e2e/write-back-workers.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { createStoreClient, runWorker, StoreRequestError, writeBack, type StoreClient, type WriteBackEvent, type WriteBackHandler } from '../../client/runtime/index.js';
import { ClaimOperationDocument, ReleaseOperationLeaseDocument, type ClaimOperationInput } from '../../client/generated/graphql.js';
import { describeGraphQL, type GraphQLSuite } from '../helpers/graphql.js';
import { OPERATION_FIELDS } from '../helpers/operation-graphql.js';
import { PAST_SEND_WINDOW_MS } from '../helpers/operation-claim-fixtures.js';

type Who = 'alice' | 'worker';

/** A client of the suite's app as `who`, recording every request body it sends (to find lease tokens later). */
function clientOf(suite: GraphQLSuite, who: Who, sent: string[] = [], wrap?: (request: () => Promise<Response>, body: string) => Promise<Response>): StoreClient {
  return createStoreClient({
    url: 'http://localhost/graphql',
    tokens: { getToken: () => suite.token(who) },
    retryBaseDelayMs: 5,
    fetch: (async (url: string | URL | Request, init?: RequestInit) => {
      const body = typeof init?.body === 'string' ? init.body : '';
      sent.push(body);
      const request = async () => suite.app.yoga.fetch(String(url), init as RequestInit);
      return wrap === undefined ? request() : wrap(request, body);
    }) as typeof fetch,
  });
}

let keys = 0;
function claim(overrides: Partial<ClaimOperationInput> = {}): ClaimOperationInput {
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
    leaseMs: 30_000,
    ...overrides,
  };
}

/** A handler that marks, then answers `outcome`; counts its calls. */
function handlerAnswering(send: Awaited<ReturnType<WriteBackHandler['send']>>, options: { mark?: boolean } = {}) {
  const calls = { send: 0, reconcile: 0 };
  const handler: WriteBackHandler = {
    async send({ markSent }) {
      calls.send++;
      if (options.mark !== false) await markSent();
      return send;
    },
    async reconcile() {
      calls.reconcile++;
      return { kind: 'not-landed' };
    },
  };
  return { handler, calls };
}

const COMMITTED = { kind: 'committed', documentID: 'doc-1', sourceID: 'src-1', resultEntity: { ok: true } } as const;

async function operation(suite: GraphQLSuite, id: string) {
  const res = await suite.gql(`query($id: ID!) { node(id: $id) { ... on ConnectorOperation { ${OPERATION_FIELDS} lastError } } }`, { id }, { as: 'worker' });
  return res.data.node;
}

async function enqueue(suite: GraphQLSuite, input: ClaimOperationInput, as: Who = 'alice'): Promise<string> {
  const claimed = await suite.gql(
    `mutation($input: ClaimOperationInput!) { claimOperation(input: $input) { ... on ClaimOperationPayload { operation { id } lease { token version } } } }`,
    { input },
    { as },
  );
  const { operation: op, lease } = claimed.data.claimOperation;
  await suite.gql(`mutation($input: ReleaseOperationLeaseInput!) { releaseOperationLease(input: $input) { __typename } }`, { input: { id: op.id, version: lease.version, leaseToken: lease.token } }, { as });
  return op.id as string;
}

describeGraphQL('client runtime: writeBack', (suite) => {
  it('claims, starts, marks, sends and finalizes; the same key again is a replay without calling the handler', async () => {
    const client = clientOf(suite, 'alice');
    const events: WriteBackEvent[] = [];
    const { handler, calls } = handlerAnswering(COMMITTED);
    const input = claim();
    const result = await writeBack(client, input, handler, { onEvent: (event) => events.push(event) });
    expect(result.status).toBe('committed');
    if (result.status !== 'committed') return;
    expect(result.operation).toMatchObject({ state: 'COMMITTED', documentID: 'doc-1', resultEntity: { ok: true }, attempts: 1 });
    expect(result.watch).toMatchObject({ documentID: 'doc-1', sourceID: 'src-1', verificationStatus: 'PENDING_VERIFICATION' });
    expect(result.reconciled).toBe(false);
    expect(events.map((event) => event.type)).toEqual(['claimed', 'started', 'marked', 'finalized']);
    expect(calls).toEqual({ send: 1, reconcile: 0 });

    const again = await writeBack(client, input, handler);
    expect(again).toMatchObject({ status: 'replayed', documentID: 'doc-1', resultEntity: { ok: true } });
    expect(calls.send).toBe(1);
  });

  it('a payload conflict is a typed refusal and runs nothing', async () => {
    const client = clientOf(suite, 'alice');
    const { handler, calls } = handlerAnswering(COMMITTED);
    const input = claim();
    await writeBack(client, input, handler);
    const conflict = await writeBack(client, { ...input, payloadHash: 'another' }, handler);
    expect(conflict).toMatchObject({ status: 'refused', code: 'IDEMPOTENCY_CONFLICT', field: 'payloadHash' });
    expect(calls.send).toBe(1);
  });

  it('records each failure kind with its details and gives the lease back', async () => {
    const client = clientOf(suite, 'alice');
    const cases = [
      { outcome: { kind: 'retryable', httpStatus: 503, retryAfterMs: 120_000, message: 'provider busy' }, state: 'ATTEMPTED', lastKind: 'RETRYABLE', attempts: 1 },
      { outcome: { kind: 'unknown', message: 'timed out after sending' }, state: 'RECONCILE_ONLY', lastKind: 'UNKNOWN', attempts: 1 },
      { outcome: { kind: 'fatal', httpStatus: 422, message: 'invalid email' }, state: 'DEAD', lastKind: 'FATAL', attempts: 1 },
      { outcome: { kind: 'offline' }, state: 'ATTEMPTED', lastKind: 'OFFLINE', attempts: 0, deferReason: 'OFFLINE' },
      { outcome: { kind: 'auth', httpStatus: 401 }, state: 'ATTEMPTED', lastKind: 'AUTH', attempts: 0, deferReason: 'AUTH' },
    ] as const;
    for (const { outcome, state, lastKind, attempts, ...rest } of cases) {
      const result = await writeBack(client, claim(), handlerAnswering(outcome).handler);
      expect(result.status, outcome.kind).toBe('recorded');
      if (result.status !== 'recorded') continue;
      expect(result.kind).toBe(lastKind);
      const stored = await operation(suite, result.operation.id);
      expect(stored, outcome.kind).toMatchObject({ state, lastKind, attempts, leaseExpiresAt: null, lastHTTPStatus: 'httpStatus' in outcome ? outcome.httpStatus : null });
      if ('message' in outcome) expect(stored.lastError).toBe(outcome.message);
      if ('deferReason' in rest) expect(stored.deferReason).toBe(rest.deferReason);
    }
    // The retry-after wins over the first backoff (≤ 1 s).
    const [retried] = (await suite.gql(`{ operations(first: 10, filter: { lastKinds: [RETRYABLE] }) { edges { node { nextAttemptAt } } } }`)).data.operations.edges;
    expect(Date.parse(retried.node.nextAttemptAt)).toBeGreaterThanOrEqual(suite.clock.now() + 120_000);
  });

  it('a handler that throws: RETRYABLE before markSent, UNKNOWN (reconcile) after it; the message is the lastError', async () => {
    const client = clientOf(suite, 'alice');
    const before = await writeBack(client, claim(), {
      send: async () => {
        throw new Error('boom before');
      },
      reconcile: async () => ({ kind: 'not-landed' }),
    });
    expect(before).toMatchObject({ status: 'recorded', kind: 'RETRYABLE' });
    const after = await writeBack(client, claim(), {
      send: async ({ markSent }) => {
        await markSent();
        throw new TypeError('socket hang up');
      },
      reconcile: async () => ({ kind: 'not-landed' }),
    });
    expect(after).toMatchObject({ status: 'recorded', kind: 'UNKNOWN' });
    if (before.status !== 'recorded' || after.status !== 'recorded') return;
    expect(await operation(suite, before.operation.id)).toMatchObject({ state: 'ATTEMPTED', lastError: 'handler threw: Error: boom before', sendMarkerSet: false });
    expect(await operation(suite, after.operation.id)).toMatchObject({ state: 'RECONCILE_ONLY', lastError: 'handler threw: TypeError: socket hang up', sendMarkerSet: true });
  });

  it('refuses to report committed for a send never marked: UNKNOWN, and nothing is finalized', async () => {
    const client = clientOf(suite, 'alice');
    const result = await writeBack(client, claim(), handlerAnswering(COMMITTED, { mark: false }).handler);
    expect(result).toMatchObject({ status: 'recorded', kind: 'UNKNOWN', reason: 'committed without markSent()' });
    if (result.status !== 'recorded') return;
    expect(await operation(suite, result.operation.id)).toMatchObject({ state: 'RECONCILE_ONLY', documentID: null, lastError: 'handler reported committed without awaiting markSent()' });
  });

  it('a RECONCILE_ONLY operation is reconciled, never sent: found → finalized; not found → sent again in the same lease', async () => {
    const client = clientOf(suite, 'worker');
    const owner = clientOf(suite, 'alice');
    const makeReconcileOnly = async () => {
      const result = await writeBack(owner, claim(), handlerAnswering({ kind: 'unknown' }).handler);
      if (result.status !== 'recorded') throw new Error(`expected recorded, got ${result.status}`);
      // Past its send window: only then may another holder take a marked send over (issue 37).
      suite.clock.advance(PAST_SEND_WINDOW_MS);
      return result.operation.id;
    };
    const found = await makeReconcileOnly();
    let sends = 0;
    let looked: string | undefined;
    const foundResult = await writeBack(client, { id: found, leaseMs: 30_000 }, {
      send: async () => {
        sends++;
        return COMMITTED;
      },
      reconcile: async ({ operation: op }) => {
        looked = op.deterministicEventID;
        return { kind: 'committed', documentID: 'doc-found', sourceID: 'src-found', providerEtag: 'etag-1' };
      },
    });
    expect(foundResult).toMatchObject({ status: 'committed', reconciled: true, operation: { state: 'COMMITTED', documentID: 'doc-found', providerEtag: 'etag-1' } });
    expect(looked).toMatch(/^event-/);
    expect(sends).toBe(0);

    const notFound = await makeReconcileOnly();
    const { handler, calls } = handlerAnswering(COMMITTED);
    const notFoundResult = await writeBack(client, { id: notFound, leaseMs: 30_000 }, handler);
    expect(notFoundResult).toMatchObject({ status: 'committed', reconciled: true, operation: { state: 'COMMITTED', attempts: 2 } });
    expect(calls).toEqual({ send: 1, reconcile: 1 });

    // A reconcile that cannot tell keeps it RECONCILE_ONLY.
    const unsure = await makeReconcileOnly();
    const unsureResult = await writeBack(client, { id: unsure, leaseMs: 30_000 }, {
      send: async () => COMMITTED,
      reconcile: async () => {
        throw new Error('provider down');
      },
    });
    expect(unsureResult).toMatchObject({ status: 'recorded', kind: 'RETRYABLE', operation: { state: 'RECONCILE_ONLY' } });
  });

  it('a lease taken over fires the handler’s signal, markSent refuses, and nothing more is written', async () => {
    const client = clientOf(suite, 'alice');
    let signalReason: unknown;
    let markError: unknown;
    const input = claim({ leaseMs: 5_000 });
    let release!: () => void;
    const blocked = new Promise<void>((resolve) => (release = resolve));
    let started!: () => void;
    const inHandler = new Promise<void>((resolve) => (started = resolve));
    const running = writeBack(
      client,
      input,
      {
        send: async ({ signal, markSent }) => {
          started();
          await blocked;
          await new Promise<void>((resolve) => (signal.aborted ? resolve() : signal.addEventListener('abort', () => resolve(), { once: true })));
          signalReason = signal.reason;
          await markSent().catch((error: unknown) => (markError = error));
          return COMMITTED;
        },
        reconcile: async () => ({ kind: 'not-landed' }),
      },
      { renewEveryMs: 30 },
    );
    await inHandler;
    // The lease lapses on the server's clock and another holder takes it over.
    suite.clock.advance(6_000);
    const { data } = await suite.gql(`mutation($id: ID!) { acquireOperationLease(input: { id: $id, leaseMs: 60000 }) { __typename } }`, { id: (await suite.gql(`query($k: String!) { operationByKey(operationID: $k) { id } }`, { k: input.operationID })).data.operationByKey.id }, { as: 'worker' });
    expect(data.acquireOperationLease.__typename).toBe('OperationPayload');
    release();
    const result = await running;
    expect(result).toMatchObject({ status: 'lease-lost', marked: false });
    expect((signalReason as Error).name).toBe('LeaseLostError');
    expect((markError as Error).name).toBe('SendNotAllowedError');
    if (result.status !== 'lease-lost') return;
    expect(await operation(suite, result.operation.id)).toMatchObject({ state: 'ATTEMPTED', sendMarkerSet: false, documentID: null, version: 1 });
  });

  it('stopped before sending: the lease is released and the handler is not called', async () => {
    const client = clientOf(suite, 'alice');
    const stop = new AbortController();
    stop.abort();
    const { handler, calls } = handlerAnswering(COMMITTED);
    const result = await writeBack(client, claim(), handler, { signal: stop.signal });
    expect(result.status).toBe('released');
    if (result.status !== 'released') return;
    expect(calls.send).toBe(0);
    expect(await operation(suite, result.operation.id)).toMatchObject({ state: 'ATTEMPTED', leaseExpiresAt: null, attempts: 0 });
  });

  it('never puts a lease token or send marker in an event, a result or an error', async () => {
    const sent: string[] = [];
    const client = clientOf(suite, 'alice', sent);
    const seen: unknown[] = [];
    for (const outcome of [COMMITTED, { kind: 'unknown' as const }, { kind: 'fatal' as const }]) {
      seen.push(await writeBack(client, claim(), handlerAnswering(outcome).handler, { onEvent: (event) => seen.push(event) }));
    }
    seen.push(
      await writeBack(client, claim(), {
        send: async ({ markSent }) => {
          await markSent();
          throw new Error('x');
        },
        reconcile: async () => ({ kind: 'not-landed' }),
      }),
    );
    const secrets = sent.flatMap((body) => {
      const input = (JSON.parse(body) as { variables?: { input?: { leaseToken?: string; sendMarker?: string } } }).variables?.input;
      return [input?.leaseToken, input?.sendMarker].filter((value): value is string => typeof value === 'string');
    });
    expect(secrets.length).toBeGreaterThan(8);
    const text = JSON.stringify(seen);
    for (const secret of new Set(secrets)) expect(text).not.toContain(secret);
  });
});

describeGraphQL('client runtime: lost answers and hung sends (issue 37)', (suite) => {
  const historyOf = async (id: string) => {
    const res = await suite.gql(`query($id: ID!) { node(id: $id) { ... on ConnectorOperation { attemptHistory(first: 20) { edges { node { attempt sentAt } } } } } }`, { id }, { as: 'worker' });
    return res.data.node.attemptHistory.edges.map((edge: { node: unknown }) => edge.node);
  };

  it('every step whose answer is lost after the server committed (dropped, or a 500) is resent with its key and answered again: one attempt, one send, committed', async () => {
    const lost: string[] = [];
    const seen = new Set<string>();
    const client = clientOf(suite, 'alice', [], async (request, body) => {
      const { operationName } = JSON.parse(body) as { operationName?: string };
      const response = await request();
      if (operationName !== undefined && !seen.has(operationName)) {
        // The server committed; the answer never arrives (every other step), or arrives as a 500.
        seen.add(operationName);
        lost.push(operationName);
        if (lost.length % 2 === 1) throw new TypeError('socket hang up');
        return new Response('{"errors":[{"message":"bad gateway"}]}', { status: 500, headers: { 'content-type': 'application/json' } });
      }
      return response;
    });
    const { handler, calls } = handlerAnswering(COMMITTED);
    const result = await writeBack(client, claim(), handler);
    // The finalize's own answer was lost too: its resend is answered as a replay.
    expect(result).toMatchObject({ status: 'committed', replayed: true });
    expect(calls.send).toBe(1);
    expect(lost).toEqual(expect.arrayContaining(['ClaimOperation', 'RuntimeStartOperationAttempt', 'RuntimeMarkOperationSent', 'RuntimeFinalizeOperation']));
    const op = await operation(suite, (result as { operation: { id: string } }).operation.id);
    expect(op).toMatchObject({ state: 'COMMITTED', attempts: 1, version: 0 });
    const history = await historyOf(op.id);
    expect(history).toHaveLength(1);
    expect(history[0].sentAt).not.toBeNull();
  });

  it('a recorded outcome and a release whose answers are lost are answered again, not refused as a stale lease', async () => {
    const seen = new Set<string>();
    const client = clientOf(suite, 'alice', [], async (request, body) => {
      const { operationName } = JSON.parse(body) as { operationName?: string };
      const response = await request();
      if ((operationName === 'RuntimeRecordOperationAttempt' || operationName === 'RuntimeReleaseOperationLease') && !seen.has(operationName)) {
        seen.add(operationName);
        throw new TypeError('socket hang up');
      }
      return response;
    });
    const events: WriteBackEvent[] = [];
    const result = await writeBack(client, claim(), handlerAnswering({ kind: 'retryable', httpStatus: 503 }).handler, { onEvent: (event) => events.push(event) });
    expect(result).toMatchObject({ status: 'recorded', kind: 'RETRYABLE' });
    expect(events.map((event) => event.type)).toContain('released');
    const op = await operation(suite, (result as { operation: { id: string } }).operation.id);
    expect(op).toMatchObject({ state: 'ATTEMPTED', attempts: 1, leaseExpiresAt: null, lastKind: 'RETRYABLE' });
    expect(await historyOf(op.id)).toHaveLength(1);
  });

  it('a send that never answers is cut at sendTimeoutMs: recorded UNKNOWN (RECONCILE_ONLY), the lease given back, no slot held', async () => {
    const client = clientOf(suite, 'alice');
    let signalReason: unknown;
    const handler: WriteBackHandler = {
      async send({ markSent, signal }) {
        await markSent();
        signal.addEventListener('abort', () => (signalReason = signal.reason));
        return new Promise(() => {}); // applies and never answers, and ignores its signal
      },
      async reconcile() {
        return { kind: 'not-landed' };
      },
    };
    const started = Date.now();
    const result = await writeBack(client, claim(), handler, { sendTimeoutMs: 300 });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(result).toMatchObject({ status: 'recorded', kind: 'UNKNOWN' });
    expect(signalReason).toMatchObject({ name: 'SendTimeoutError' });
    const op = await operation(suite, (result as { operation: { id: string } }).operation.id);
    expect(op).toMatchObject({ state: 'RECONCILE_ONLY', leaseExpiresAt: null, sendMarkerSet: true });
    expect(op.lastError).toMatch(/SendTimeoutError/);
  });
});

describeGraphQL('client runtime: store client', (suite) => {
  it('retries 503 OVERLOADED after its Retry-After and a dropped connection, then answers', async () => {
    const retries: { code: string; delayMs: number }[] = [];
    let failures = 0;
    const client = createStoreClient({
      url: 'http://localhost/graphql',
      tokens: { getToken: () => suite.token('alice') },
      retryBaseDelayMs: 5,
      onRetry: (retry) => retries.push(retry),
      fetch: (async (url: string, init: RequestInit) => {
        failures++;
        if (failures === 1) {
          return new Response(JSON.stringify({ errors: [{ message: 'try again', extensions: { code: 'OVERLOADED', retryable: true } }] }), { status: 503, headers: { 'retry-after': '0.05', 'content-type': 'application/json' } });
        }
        if (failures === 2) throw new TypeError('fetch failed');
        return suite.app.yoga.fetch(url, init);
      }) as typeof fetch,
    });
    const { ConsoleServerInfoDocument } = await import('../../client/generated/graphql.js');
    const data = await client.request(ConsoleServerInfoDocument, {});
    expect(data.serverInfo.viewerDID).toBe(suite.keys.alice.did);
    expect(retries.map((retry) => retry.code)).toEqual(['OVERLOADED', 'NETWORK_ERROR']);
    expect(retries[0]!.delayMs).toBeGreaterThanOrEqual(50);
  });

  it('a refusal that is not retryable is thrown at once with its code; a bad token is a 401 code', async () => {
    const { DueOperationsDocument } = await import('../../client/generated/graphql.js');
    const user = clientOf(suite, 'alice');
    const error = await user.request(DueOperationsDocument, { first: 5 }).catch((thrown: unknown) => thrown);
    expect(error).toBeInstanceOf(StoreRequestError);
    expect(error).toMatchObject({ code: 'FORBIDDEN', retryable: false, operationName: 'DueOperations' });

    const bad = createStoreClient({ url: 'http://localhost/graphql', tokens: 'not-a-token', fetch: ((url: string, init: RequestInit) => suite.app.yoga.fetch(url, init)) as typeof fetch });
    await expect(bad.request(DueOperationsDocument, {})).rejects.toMatchObject({ code: 'TOKEN_MALFORMED', status: 401, retryable: false });
  });
});

describeGraphQL('client runtime: runWorker', (suite) => {
  it('runs its connector’s due operations within the concurrency limit, is woken by the subscription, and counts', async () => {
    for (let i = 0; i < 12; i++) await enqueue(suite, claim({ connectorName: 'github' }));
    const other = await enqueue(suite, claim({ connectorName: 'google' }));
    let running = 0;
    let maxRunning = 0;
    const handler: WriteBackHandler = {
      async send({ markSent, operation: op }) {
        running++;
        maxRunning = Math.max(maxRunning, running);
        await markSent();
        await new Promise((resolve) => setTimeout(resolve, 20));
        running--;
        return { kind: 'committed', documentID: `doc-${op.operationID}`, sourceID: `src-${op.operationID}` };
      },
      reconcile: async () => ({ kind: 'not-landed' }),
    };
    // A long fallback poll: after the first read, only the subscription (or a finished operation) wakes it.
    const worker = runWorker({ client: clientOf(suite, 'worker'), connector: 'github', handler, concurrency: 3, pollIntervalMs: 60_000, signals: false });
    try {
      await expect.poll(() => worker.counters.committed, { timeout: 15_000 }).toBe(12);
      expect(maxRunning).toBeLessThanOrEqual(3);
      expect(maxRunning).toBeGreaterThan(1);
      expect((await operation(suite, other)).state).toBe('ATTEMPTED');
      // Idle now; a new operation is started by the change event, not by the 60 s poll.
      await new Promise((resolve) => setTimeout(resolve, 300));
      await enqueue(suite, claim({ connectorName: 'github' }));
      await expect.poll(() => worker.counters.committed, { timeout: 5_000 }).toBe(13);
      expect(worker.counters).toMatchObject({ started: 13, failed: 0, leaseLost: 0, errors: 0 });
    } finally {
      await worker.stop();
    }
  });

  it('holds the subscription only while out of work: closed through a backlog, taken again when the due list runs out', async () => {
    const events: string[] = [];
    const handler: WriteBackHandler = {
      async send({ markSent, operation: op }) {
        await markSent();
        await new Promise((resolve) => setTimeout(resolve, 10));
        return { kind: 'committed', documentID: `doc-${op.operationID}`, sourceID: `src-${op.operationID}` };
      },
      reconcile: async () => ({ kind: 'not-landed' }),
    };
    // One slot, reads of 10: 40 operations are a backlog until the last few.
    const worker = runWorker({
      client: clientOf(suite, 'worker'),
      connector: 'backlog',
      handler,
      concurrency: 1,
      busyUnsubscribeMs: 0,
      pollIntervalMs: 60_000,
      signals: false,
      onEvent: (event) => (event.type === 'subscribed' || event.type === 'unsubscribed') && events.push(event.type),
    });
    try {
      // Nothing to do: subscribed.
      await expect.poll(() => events).toEqual(['subscribed']);
      // The backlog arrives by change events; its full reads close the subscription.
      for (let i = 0; i < 40; i++) await enqueue(suite, claim({ connectorName: 'backlog' }));
      await expect.poll(() => worker.counters.committed, { timeout: 15_000 }).toBe(40);
      expect(events).toContain('unsubscribed');
      await expect.poll(() => events.at(-1)).toBe('subscribed');
      // Idle and subscribed again: new work is started by its change event, not the 60 s poll.
      await enqueue(suite, claim({ connectorName: 'backlog' }));
      await expect.poll(() => worker.counters.committed, { timeout: 5_000 }).toBe(41);
    } finally {
      await worker.stop();
    }
  });

  it('side by side, workers lease disjoint batches and send their steps in batches: every operation sent once, no acquire refused (issue 40 item 3)', async () => {
    for (let i = 0; i < 30; i++) await enqueue(suite, claim({ connectorName: 'shared' }));
    const sent = new Map<string, number>();
    const handler: WriteBackHandler = {
      async send({ markSent, operation: op }) {
        sent.set(op.operationID, (sent.get(op.operationID) ?? 0) + 1);
        await markSent();
        await new Promise((resolve) => setTimeout(resolve, 5));
        return { kind: 'committed', documentID: `doc-${op.operationID}`, sourceID: `src-${op.operationID}` };
      },
      reconcile: async () => ({ kind: 'not-landed' }),
    };
    const bodies: string[] = [];
    const workers = Array.from({ length: 3 }, () => runWorker({ client: clientOf(suite, 'worker', bodies), connector: 'shared', handler, concurrency: 4, pollIntervalMs: 60_000, signals: false }));
    try {
      await expect.poll(() => workers.reduce((sum, w) => sum + w.counters.committed, 0), { timeout: 15_000 }).toBe(30);
      expect([...sent.values()].every((count) => count === 1)).toBe(true);
      expect(sent.size).toBe(30);
      for (const worker of workers) expect(worker.counters).toMatchObject({ contended: 0, leaseLost: 0, errors: 0 });
      expect(workers.reduce((sum, w) => sum + w.counters.leased, 0)).toBe(30);
      // The steps went in batches (startOperationAttempts, …), never one request per step.
      const requests = (name: string) => bodies.filter((body) => body.includes(`"operationName":"${name}"`)).length;
      for (const single of ['AcquireOperationLease', 'RuntimeStartOperationAttempt', 'RuntimeMarkOperationSent', 'RuntimeFinalizeOperation']) expect(requests(single)).toBe(0);
      expect(requests('RuntimeStartOperationAttempts')).toBeGreaterThan(0);
      expect(requests('RuntimeStartOperationAttempts')).toBeLessThan(30);
      expect(requests('RuntimeFinalizeOperations')).toBeLessThan(30);
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
    }
  });

  it('drains on stop: a send in progress past the deadline is aborted and recorded UNKNOWN; every lease is given back', async () => {
    const id = await enqueue(suite, claim({ connectorName: 'slack' }));
    let inSend!: () => void;
    const sending = new Promise<void>((resolve) => (inSend = resolve));
    const handler: WriteBackHandler = {
      async send({ markSent, signal }) {
        await markSent();
        inSend();
        await new Promise((_resolve, reject) => signal.addEventListener('abort', () => reject(signal.reason), { once: true }));
        throw new Error('unreachable');
      },
      reconcile: async () => ({ kind: 'not-landed' }),
    };
    const worker = runWorker({ client: clientOf(suite, 'worker'), connector: 'slack', handler, drainTimeoutMs: 200, signals: false });
    await sending;
    const began = Date.now();
    await worker.stop();
    expect(Date.now() - began).toBeGreaterThanOrEqual(150);
    expect(worker.counters).toMatchObject({ started: 1, retried: 1, committed: 0 });
    expect(await operation(suite, id)).toMatchObject({ state: 'RECONCILE_ONLY', lastKind: 'UNKNOWN', leaseExpiresAt: null, sendMarkerSet: true });
    await worker.done;
  });
});

describe('client runtime: options', () => {
  it('refuses a worker without a connector or with a bad concurrency', () => {
    const client = createStoreClient({ url: 'http://127.0.0.1:9/graphql', tokens: 't' });
    const handler = handlerAnswering(COMMITTED).handler;
    expect(() => runWorker({ client, connector: '', handler, signals: false })).toThrow(/connector/);
    expect(() => runWorker({ client, connector: 'c', handler, concurrency: 0, signals: false })).toThrow(/concurrency/);
  });
});

describeGraphQL(
  'client runtime: persisted documents only',
  (suite) => {
    it('runs writeBack and a subscribed worker sending document ids alone', async () => {
      const sent: string[] = [];
      const persisted = (who: Who) =>
        createStoreClient({
          url: 'http://localhost/graphql',
          tokens: { getToken: () => suite.token(who) },
          persistedDocuments: true,
          fetch: (async (url: string, init: RequestInit) => {
            if (typeof init.body === 'string') sent.push(init.body);
            return suite.app.yoga.fetch(url, init);
          }) as typeof fetch,
        });
      const result = await writeBack(persisted('alice'), claim({ connectorName: 'persisted' }), handlerAnswering(COMMITTED).handler);
      expect(result.status).toBe('committed');
      // A text document is refused here, so every request went by id.
      const plain = await suite.gql('{ serverInfo { version } }');
      expect(plain.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_ONLY');

      const worker = runWorker({ client: persisted('worker'), connector: 'persisted', handler: handlerAnswering(COMMITTED).handler, pollIntervalMs: 60_000, signals: false });
      try {
        await expect.poll(() => worker.counters.polls).toBeGreaterThan(0);
        await new Promise((resolve) => setTimeout(resolve, 400));
        // Woken by the subscription (also by id), not by the 60 s poll.
        const owner = persisted('alice');
        const { claimOperation: claimed } = await owner.request(ClaimOperationDocument, { input: claim({ connectorName: 'persisted' }) });
        if (claimed.__typename !== 'ClaimOperationPayload' || claimed.lease === null) throw new Error(claimed.__typename);
        await owner.request(ReleaseOperationLeaseDocument, { input: { id: claimed.operation.id, version: claimed.lease.version, leaseToken: claimed.lease.token } });
        await expect.poll(() => worker.counters.committed, { timeout: 5_000 }).toBe(1);
        expect(worker.counters.errors).toBe(0);
      } finally {
        await worker.stop();
      }
      expect(sent.length).toBeGreaterThan(5);
      for (const body of sent) expect(Object.keys(JSON.parse(body) as object)).not.toContain('query');
    });
  },
  { env: { PERSISTED_DOCUMENTS: 'only' } },
);
