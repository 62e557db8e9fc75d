/**
 * Admission of long-lived streams against a flood of fresh did:keys (issue 19
 * item 5; src/server/admission.ts), in process through `yoga.fetch` with the
 * socket address a node server would pass, on both dialects (the ownership
 * probe reads the database). Small caps: 2 per viewer, 8 in total, of which
 * fresh keys may hold half, and 3 per address for them.
 * - Many keys from many addresses fill the fresh keys' share: the next is
 *   503 OVERLOADED (retryable), and an owner of rows and a service DID still
 *   reserve a graphql-sse stream and subscribe on /graphql.
 * - Many keys from one address stop at its cap (429
 *   TOO_MANY_SUBSCRIPTIONS_PER_IP); an owner at that address, and a fresh key
 *   elsewhere, still get in.
 * - One IPv6 /64 is one address (issue 41): keys from many addresses of one
 *   /64 share its cap; IPv4-mapped IPv6 is the IPv4 address.
 * graphql-ws (connections and subscriptions) over a real server: test/e2e/admission.test.ts.
 */
import { afterEach, expect, it } from 'vitest';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { describeGraphQL, TEST_AUDIENCE, type GraphQLSuite } from '../helpers/graphql.js';
import { CLAIM, claimInput } from '../helpers/operation-graphql.js';
import { subscribeSSE, type SSESubscription } from '../helpers/sse.js';

const OPERATIONS_CHANGED = 'subscription { operationsChanged { operationID } }';
const ENV = {
  MAX_SUBSCRIPTIONS_PER_VIEWER: '2',
  MAX_SUBSCRIPTIONS: '8',
  UNKNOWN_VIEWER_SHARE_PERCENT: '50',
  MAX_SUBSCRIPTIONS_PER_IP: '3',
};
/** Fresh keys in a flood: more than enough to fill the share. */
const FLOOD_KEYS = 6;

interface Refusal {
  errors: { extensions: { code: string; retryable?: boolean } }[];
}

/** What one suite's tests share: requests from an address, fresh keys, and cleanup. */
function helpers(suite: GraphQLSuite) {
  const open: SSESubscription[] = [];
  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });
  const peer = (ip: string) => ({ req: { socket: { remoteAddress: ip } } });
  const freshToken = async () => `Bearer ${await mintToken({ privateKey: generateLocalKey().privateKey, audience: TEST_AUDIENCE, now: suite.clock.now() })}`;
  const as = async (who: 'alice' | 'worker') => `Bearer ${await suite.token(who)}`;
  /** PUT /graphql/stream: a graphql-sse reservation. */
  const reserve = async (authorization: string, ip: string) => {
    const response = await suite.app.yoga.fetch('http://localhost/graphql/stream', { method: 'PUT', headers: { authorization } }, peer(ip));
    return { status: response.status, body: response.status === 201 ? undefined : ((await response.json()) as Refusal) };
  };
  /** A /graphql SSE subscription; `code` is its refusal's, if refused. */
  const subscribe = async (authorization: string, ip: string) => {
    const sub = await subscribeSSE(async (url, init) => suite.app.yoga.fetch(url, init, peer(ip)), 'http://localhost/graphql', OPERATIONS_CHANGED, {}, { authorization });
    open.push(sub);
    await new Promise((r) => setTimeout(r, 20));
    const code = sub.events[0]?.errors?.[0]?.extensions?.code as string | undefined;
    return { sub, code, retryable: sub.events[0]?.errors?.[0]?.extensions?.retryable };
  };
  /** The owner of a row: alice claims one, and the clock moves past KNOWN_VIEWER_ROW_AGE_MS (so she is a known viewer). */
  const ownARow = async () => {
    const claimed = await suite.gql(CLAIM, { input: claimInput({ operationID: 'op-owned' }) }, { as: 'alice' });
    expect(claimed.data.claimOperation.outcome).toBe('CLAIMED');
    suite.clock.advance(2 * 3_600_000);
  };
  return { freshToken, as, reserve, subscribe, ownARow, open };
}

describeGraphQL('admission: fresh keys from many addresses', (suite) => {
  const { freshToken, as, reserve, subscribe, ownARow } = helpers(suite);

  it('fill only their share of graphql-sse reservations: then 503 OVERLOADED, while an owner and a service DID still reserve', async () => {
    await ownARow();
    const statuses: number[] = [];
    let refusal: Refusal | undefined;
    for (let i = 0; i < FLOOD_KEYS; i++) {
      const key = await freshToken();
      for (let j = 0; j < 2; j++) {
        const { status, body } = await reserve(key, `10.0.0.${i + 1}`);
        statuses.push(status);
        if (status !== 201) refusal = body;
      }
    }
    // Half of 8 for keys that own nothing; the rest answered 503, retryable.
    expect(statuses.filter((s) => s === 201)).toHaveLength(4);
    expect(statuses.filter((s) => s === 503)).toHaveLength(FLOOD_KEYS * 2 - 4);
    expect(refusal?.errors[0]?.extensions).toEqual({ code: 'OVERLOADED', retryable: true });
    // Known identities keep the other half.
    expect((await reserve(await as('alice'), '10.0.0.1')).status).toBe(201);
    expect((await reserve(await as('worker'), '10.0.0.1')).status).toBe(201);
  });

  it('fill only their share of /graphql subscriptions: then OVERLOADED, while an owner and a service DID subscribe and receive changes', async () => {
    await ownARow();
    const codes: (string | undefined)[] = [];
    for (let i = 0; i < FLOOD_KEYS; i++) {
      const key = await freshToken();
      for (let j = 0; j < 2; j++) {
        const { code, retryable } = await subscribe(key, `10.0.1.${i + 1}`);
        codes.push(code);
        if (code !== undefined) expect(retryable).toBe(true);
      }
    }
    expect(codes.filter((c) => c === undefined)).toHaveLength(4);
    expect(codes.filter((c) => c === 'OVERLOADED')).toHaveLength(FLOOD_KEYS * 2 - 4);
    const owner = await subscribe(await as('alice'), '10.0.1.1');
    const service = await subscribe(await as('worker'), '10.0.1.1');
    expect([owner.code, service.code]).toEqual([undefined, undefined]);
    const claimed = await suite.gql(CLAIM, { input: claimInput({ operationID: 'op-after-flood' }) }, { as: 'alice' });
    expect(claimed.data.claimOperation.outcome).toBe('CLAIMED');
    await owner.sub.waitFor(1);
    await service.sub.waitFor(1);
    expect(owner.sub.events[0]?.data.operationsChanged.operationID).toBe('op-after-flood');
  });
}, { env: ENV });

describeGraphQL('admission: fresh keys from one address', (suite) => {
  const { freshToken, as, reserve, subscribe, ownARow } = helpers(suite);

  it('stop at the address cap for graphql-sse reservations (429 TOO_MANY_SUBSCRIPTIONS_PER_IP); an owner there and a fresh key elsewhere reserve', async () => {
    await ownARow();
    const statuses: number[] = [];
    let refusal: Refusal | undefined;
    for (let i = 0; i < 3; i++) {
      const key = await freshToken();
      for (let j = 0; j < 2; j++) {
        const { status, body } = await reserve(key, '10.0.2.1');
        statuses.push(status);
        if (status !== 201) refusal = body;
      }
    }
    expect(statuses).toEqual([201, 201, 201, 429, 429, 429]);
    expect(refusal?.errors[0]?.extensions).toEqual({ code: 'TOO_MANY_SUBSCRIPTIONS_PER_IP' });
    expect((await reserve(await as('alice'), '10.0.2.1')).status).toBe(201);
    expect((await reserve(await as('worker'), '10.0.2.1')).status).toBe(201);
    expect((await reserve(await freshToken(), '10.0.2.2')).status).toBe(201);
  });

  it('stop at the address cap for /graphql subscriptions; an owner there and a fresh key elsewhere subscribe', async () => {
    await ownARow();
    const codes: (string | undefined)[] = [];
    for (let i = 0; i < 3; i++) {
      const key = await freshToken();
      for (let j = 0; j < 2; j++) codes.push((await subscribe(key, '10.0.3.1')).code);
    }
    expect(codes).toEqual([undefined, undefined, undefined, 'TOO_MANY_SUBSCRIPTIONS_PER_IP', 'TOO_MANY_SUBSCRIPTIONS_PER_IP', 'TOO_MANY_SUBSCRIPTIONS_PER_IP']);
    expect((await subscribe(await as('alice'), '10.0.3.1')).code).toBeUndefined();
    expect((await subscribe(await as('worker'), '10.0.3.1')).code).toBeUndefined();
    expect((await subscribe(await freshToken(), '10.0.3.2')).code).toBeUndefined();
  });
}, { env: ENV });

describeGraphQL('admission: per address, IPv6 by /64', (suite) => {
  const { freshToken, reserve } = helpers(suite);

  it('counts fresh keys from every address of one IPv6 /64 together, and an IPv4-mapped address as the IPv4 one', async () => {
    const statuses: number[] = [];
    for (let i = 1; i <= 4; i++) statuses.push((await reserve(await freshToken(), `2001:db8:0:1::${i}`)).status);
    expect(statuses).toEqual([201, 201, 201, 429]);
    expect((await reserve(await freshToken(), '2001:db8:0:1:ffff:ffff:ffff:ffff')).status).toBe(429);
    expect((await reserve(await freshToken(), '2001:db8:0:2::1')).status).toBe(201);
    for (let i = 0; i < 3; i++) expect((await reserve(await freshToken(), '10.0.4.1')).status).toBe(201);
    expect((await reserve(await freshToken(), '::ffff:10.0.4.1')).status).toBe(429);
  });
}, { env: { ...ENV, MAX_SUBSCRIPTIONS: '100' } });
