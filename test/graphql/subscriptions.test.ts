import { afterEach, expect, it } from 'vitest';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { describeGraphQL, TEST_AUDIENCE, type Principal } from '../helpers/graphql.js';
import { subscribeSSE, type SSESubscription } from '../helpers/sse.js';
import { CLAIM, claimInput, operationMutationDocument } from '../helpers/operation-graphql.js';

const START = operationMutationDocument('startOperationAttempt');
// Narrower than operation-graphql's FINALIZE: the refused finalize below is compared whole.
const FINALIZE = `mutation($input: FinalizeOperationInput!) {
  finalizeOperation(input: $input) { __typename ... on FinalizeOperationPayload { finalized watch { id } } ... on Error { code } }
}`;
const OPERATION_CHANGED = `subscription($id: ID!) { operationChanged(id: $id) { id state attempts version } }`;
const OPERATIONS_CHANGED = `subscription($filter: OperationFilter) { operationsChanged(filter: $filter) { id operationID state attempts } }`;
const WATCHES_CHANGED = `subscription { watchesChanged { id documentID repairGeneration } }`;

/** No event arrives within this long after the write that would have caused it. */
const QUIET_MS = 150;

describeGraphQL('subscriptions (in process)', (suite) => {
  const open: SSESubscription[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });

  async function subscribe(query: string, variables: Record<string, unknown> = {}, as: Principal = 'alice') {
    const headers: Record<string, string> = as === 'anonymous' ? {} : { authorization: `Bearer ${await suite.token(as)}` };
    const sub = await subscribeSSE(suite.app.yoga.fetch as never, 'http://localhost/graphql', query, variables, headers);
    open.push(sub);
    // The subscription is registered once the stream has started.
    await new Promise((r) => setTimeout(r, 20));
    return sub;
  }

  async function claim(operationID: string, as: Principal = 'alice', extra: Record<string, unknown> = {}) {
    const res = await suite.gql(CLAIM, { input: claimInput({ operationID, ...extra }) }, { as });
    return res.data.claimOperation as { outcome: string; operation: { id: string }; lease: { token: string; version: number } };
  }

  it('operationChanged delivers each committed change of the operation', async () => {
    const { operation, lease } = await claim('op-1');
    const sub = await subscribe(OPERATION_CHANGED, { id: operation.id });
    await suite.gql(START, { input: { id: operation.id, version: lease.version, leaseToken: lease.token } });
    await sub.waitFor(1);
    expect(sub.events[0]).toEqual({ data: { operationChanged: { id: operation.id, state: 'ATTEMPTED', attempts: 1, version: 0 } } });
  });

  it('a stranger subscribing to the operation receives nothing, exactly like an unknown id', async () => {
    const { operation, lease } = await claim('op-2');
    const stranger = await subscribe(OPERATION_CHANGED, { id: operation.id }, 'mallory');
    const unknown = await subscribe(OPERATION_CHANGED, { id: Buffer.from('ConnectorOperation:AAAAAAAAAAAAAAAAAAAAAA').toString('base64url') }, 'mallory');
    const owner = await subscribe(OPERATION_CHANGED, { id: operation.id });
    await suite.gql(START, { input: { id: operation.id, version: lease.version, leaseToken: lease.token } });
    await owner.waitFor(1);
    await new Promise((r) => setTimeout(r, QUIET_MS));
    expect(stranger.status).toBe(unknown.status);
    expect(stranger.events).toEqual([]);
    expect(unknown.events).toEqual([]);
  });

  it('operationsChanged applies the filter and visibility', async () => {
    const mine = await subscribe(OPERATIONS_CHANGED, { filter: { states: ['ATTEMPTED'], connectorName: 'google' } });
    const otherConnector = await subscribe(OPERATIONS_CHANGED, { filter: { connectorName: 'github' } });
    const bobs = await subscribe(OPERATIONS_CHANGED, {}, 'bob');
    const service = await subscribe(OPERATIONS_CHANGED, {}, 'worker');
    await claim('op-3');
    await mine.waitFor(1);
    await service.waitFor(1);
    await new Promise((r) => setTimeout(r, QUIET_MS));
    expect(mine.events.map((e) => e.data.operationsChanged.operationID)).toEqual(['op-3']);
    expect(service.events).toHaveLength(1);
    expect(otherConnector.events).toEqual([]);
    expect(bobs.events).toEqual([]);
  });

  it('operationsChanged takes the failure filters too: lastKinds and stuck', async () => {
    const failing = await subscribe(OPERATIONS_CHANGED, { filter: { lastKinds: ['FATAL'] } });
    const stuck = await subscribe(OPERATIONS_CHANGED, { filter: { stuck: true } });
    const { operation, lease } = await claim('op-f');
    const fence = { id: operation.id, version: lease.version, leaseToken: lease.token };
    for (const [name, input] of [['startOperationAttempt', fence], ['recordOperationAttempt', { ...fence, kind: 'FATAL', message: 'no' }]] as const) {
      const res = await suite.gql(operationMutationDocument(name), { input });
      expect(res.data[name].__typename).toBe('OperationPayload');
    }
    await failing.waitFor(1);
    await new Promise((r) => setTimeout(r, QUIET_MS));
    // Only the FATAL outcome matched (not the claim or the start); a dead operation is never stuck.
    expect(failing.events.map((e) => [e.data.operationsChanged.operationID, e.data.operationsChanged.state])).toEqual([['op-f', 'DEAD']]);
    expect(stuck.events).toEqual([]);
  });

  it('a refused or lost write emits nothing', async () => {
    const { operation, lease } = await claim('op-4');
    const sub = await subscribe(OPERATIONS_CHANGED);
    const watches = await subscribe(WATCHES_CHANGED);
    // Conflicting claim (another payload under the same key): refused, row untouched.
    expect((await claim('op-4', 'alice', { payloadHash: 'other' })).outcome).toBeUndefined();
    // Replayed claim while in flight: nothing written.
    expect((await claim('op-4')).outcome).toBe('IN_FLIGHT');
    // Finalize with a stale token: finalized false, nothing written.
    const lost = await suite.gql(FINALIZE, { input: { id: operation.id, version: lease.version, leaseToken: 'stale-token', documentID: 'doc-4', sourceID: 'src-4' } });
    expect(lost.data.finalizeOperation).toEqual({ __typename: 'FinalizeOperationPayload', finalized: false, watch: null });
    await new Promise((r) => setTimeout(r, QUIET_MS));
    expect(sub.events).toEqual([]);
    expect(watches.events).toEqual([]);
    // The real finalize announces the operation and the armed watch.
    const won = await suite.gql(FINALIZE, { input: { id: operation.id, version: lease.version, leaseToken: lease.token, documentID: 'doc-4', sourceID: 'src-4' } });
    expect(won.data.finalizeOperation.finalized).toBe(true);
    await sub.waitFor(1);
    await watches.waitFor(1);
    expect(sub.events[0]?.data.operationsChanged.state).toBe('COMMITTED');
    expect(watches.events[0]?.data.watchesChanged).toMatchObject({ documentID: 'doc-4', repairGeneration: 0 });
  });

  it('refuses anonymous subscribers', async () => {
    const sub = await subscribe(OPERATIONS_CHANGED, {}, 'anonymous');
    await sub.waitFor(1);
    expect(sub.events[0]?.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  // A subscriber that stops reading is closed by its own backlog: over real HTTP in
  // subscriptions-bulk.test.ts (in process, yoga.fetch keeps pulling the stream for it).
  it('a burst of one node merges for its reader, who ends on the latest state and is still served', async () => {
    const { operation, lease } = await claim('op-slow');
    const nodeKey = Buffer.from(operation.id, 'base64url').toString('utf8').split(':')[1]!;
    const reading = await subscribe(OPERATION_CHANGED, { id: operation.id });
    await new Promise((r) => setTimeout(r, 20));
    // A burst of one node: waiting events of that node merge, so the reader ends on the latest state.
    await suite.gql(START, { input: { id: operation.id, version: lease.version, leaseToken: lease.token } });
    await suite.app.changes.publish(Array.from({ length: 1_500 }, () => ({ kind: 'operation' as const, nodeKey })));
    await reading.waitFor(2, 10_000);
    const last = () => reading.events.at(-1)?.data.operationChanged.attempts;
    await expect.poll(last, { timeout: 10_000 }).toBe(1);
    const started = await suite.gql(START, { input: { id: operation.id, version: lease.version, leaseToken: lease.token } });
    expect(started.data.startOperationAttempt.operation.attempts).toBe(2);
    await expect.poll(last, { timeout: 10_000 }).toBe(2);
    expect(reading.events.length).toBeLessThan(1_000);
  }, 60_000);

  it('200 subscribers each receive a burst of 100 changes, in order', async () => {
    const { operation, lease } = await claim('op-burst');
    const subs: SSESubscription[] = [];
    // Spread over principals who may see it (owner, service) to stay under the per-viewer cap.
    const token = { alice: await suite.token('alice'), worker: await suite.token('worker') };
    for (let i = 0; i < 200; i++) {
      const as = i % 2 === 0 ? 'alice' : 'worker';
      subs.push(await subscribeSSE(suite.app.yoga.fetch as never, 'http://localhost/graphql', OPERATION_CHANGED, { id: operation.id }, { authorization: `Bearer ${token[as]}` }));
    }
    open.push(...subs);
    await new Promise((r) => setTimeout(r, 50));
    for (let i = 0; i < 100; i++) {
      await suite.gql(START, { input: { id: operation.id, version: lease.version, leaseToken: lease.token } });
    }
    await Promise.all(subs.map((s) => s.waitFor(100, 60_000)));
    for (const sub of subs) {
      const attempts = sub.events.map((e) => e.data.operationChanged.attempts as number);
      expect(attempts).toHaveLength(100);
      // Each event shows the operation as it is after (or later than) its change: never backwards.
      expect(attempts).toEqual([...attempts].sort((a, b) => a - b));
      expect(attempts.at(-1)).toBe(100);
    }
  }, 120_000);
}, { env: { MAX_SUBSCRIPTIONS_PER_VIEWER: '100' } });

describeGraphQL('subscription limits', (suite) => {
  const open: SSESubscription[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });

  async function subscribe(as: Principal) {
    const sub = await subscribeSSE(suite.app.yoga.fetch as never, 'http://localhost/graphql', OPERATIONS_CHANGED, {}, {
      authorization: `Bearer ${await suite.token(as as Exclude<Principal, 'anonymous'>)}`,
    });
    open.push(sub);
    await new Promise((r) => setTimeout(r, 20));
    return sub;
  }

  it('caps open subscriptions per viewer and frees them on disconnect', async () => {
    const subs = [await subscribe('bob'), await subscribe('bob'), await subscribe('bob')];
    const refused = await subscribe('bob');
    await refused.waitFor(1);
    expect(refused.events[0]?.errors?.[0]?.extensions?.code).toBe('TOO_MANY_SUBSCRIPTIONS');
    // Another viewer is unaffected.
    const alice = await subscribe('alice');
    expect(alice.ended).toBe(false);
    // Disconnecting frees a slot.
    await subs[0]!.close();
    await new Promise((r) => setTimeout(r, 50));
    const again = await subscribe('bob');
    expect(again.ended).toBe(false);
    const claimed = await suite.gql(CLAIM, { input: claimInput({ operationID: 'op-cap' }) }, { as: 'bob' });
    expect(claimed.data.claimOperation.outcome).toBe('CLAIMED');
    await again.waitFor(1);
    expect(again.events[0]?.data.operationsChanged.operationID).toBe('op-cap');
  });
}, { env: { MAX_SUBSCRIPTIONS_PER_VIEWER: '3' } });

describeGraphQL('subscription limits across viewers and time', (suite) => {
  const open: SSESubscription[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });

  async function subscribe(token: string) {
    const sub = await subscribeSSE(suite.app.yoga.fetch as never, 'http://localhost/graphql', OPERATIONS_CHANGED, {}, { authorization: `Bearer ${token}` });
    open.push(sub);
    await new Promise((r) => setTimeout(r, 20));
    return sub;
  }

  it('caps open subscriptions per replica whatever the number of identities: the next is OVERLOADED (retryable)', async () => {
    const first = await subscribe(await suite.token('alice'));
    await subscribe(await suite.token('bob'));
    // A fresh did:key is a new viewer, but not a new allowance.
    const fresh = generateLocalKey();
    const refused = await subscribe(await mintToken({ privateKey: fresh.privateKey, audience: TEST_AUDIENCE, now: suite.clock.now() }));
    await refused.waitFor(1);
    expect(refused.events[0]?.errors?.[0]?.extensions).toMatchObject({ code: 'OVERLOADED', retryable: true });
    await first.close();
    await new Promise((r) => setTimeout(r, 50));
    expect((await subscribe(await suite.token('mallory'))).ended).toBe(false);
  });

  it('a subscription ends with TOKEN_EXPIRED when its bearer token expires', async () => {
    const shortLived = await mintToken({ privateKey: suite.keys.alice.privateKey, audience: TEST_AUDIENCE, now: suite.clock.now(), ttlSeconds: 1 });
    const sub = await subscribe(shortLived);
    expect(sub.ended).toBe(false);
    await sub.waitFor(1, 5_000);
    expect(sub.events[0]?.errors?.[0]).toMatchObject({ message: 'the bearer token expired: subscribe again with a fresh token', extensions: { code: 'TOKEN_EXPIRED' } });
    await expect.poll(() => sub.ended, { timeout: 2_000 }).toBe(true);
  });
  // The total alone: no share kept for known viewers here (test/server/admission-flood.test.ts has that).
}, { env: { MAX_SUBSCRIPTIONS: '2', UNKNOWN_VIEWER_SHARE_PERCENT: '100' } });
