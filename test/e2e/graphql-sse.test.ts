/**
 * The graphql-sse protocol at /graphql/stream (issue 13 item 1), driven by
 * the official `graphql-sse` client against a real server process, once per
 * dialect and once per mode (single connection: one stream carries every
 * subscription; distinct connections: one stream each). A claim made over
 * HTTP reaches its owner and nobody else; a bad or missing token is refused
 * (401) before anything is held; the per-viewer subscription cap holds and a
 * completed subscription frees its slot; /metrics counts the subscriptions
 * under transport `sse`; a stream token is bound to the viewer that reserved
 * it; CORS stays closed to unlisted origins.
 */
import { createClient, NetworkError, type Client, type ExecutionResult } from 'graphql-sse';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DialectName } from '../../src/db/connect.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { e2ePrincipals, postGraphQL, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import { CLAIM, claimInput } from '../helpers/operation-graphql.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { collectResults } from '../helpers/sse.js';

const AUDIENCE = 'connector-store-graphql-sse';
const { keys, tokens, mint } = e2ePrincipals(AUDIENCE, ['alice', 'bob', 'mallory', 'worker']);
type Who = keyof typeof keys;
const OPERATIONS_CHANGED = 'subscription { operationsChanged { id operationID state } }';
const ALLOWED_ORIGIN = 'https://console.example.com';

type Result = ExecutionResult<{ operationsChanged?: { operationID: string; state: string } }, { code?: string }>;

/** One subscription on a client, collecting what arrives. */
interface Subscription {
  results: Result[];
  /** Settles with the error, or `'complete'`. */
  ended: Promise<unknown>;
  waitFor(count: number, timeoutMs?: number): Promise<void>;
  stop(): void;
}

const dialects: DialectName[] = testDialects().filter(dialectAvailable);

describe.each(dialects)('graphql-sse at /graphql/stream (%s)', (dialect) => {
  let started: E2EServers | undefined;
  let server: ServerProcess;
  const clients: Client[] = [];

  beforeAll(async () => {
    started = await startE2EServers(dialect, {
      audience: AUDIENCE,
      serviceDID: keys.worker.did,
      name: 'gsse',
      env: { DB_POOL_MAX: '5', MAX_SUBSCRIPTIONS_PER_VIEWER: '2', CORS_ORIGINS: ALLOWED_ORIGIN },
    });
    server = started.server;
    await mint();
  }, 60_000);

  afterAll(async () => {
    for (const c of clients) c.dispose();
    await started?.dispose();
  });

  const url = () => `${server.origin}/graphql/stream`;

  function client(singleConnection: boolean, headers: Record<string, string>): Client {
    const c = createClient({ url: url(), singleConnection, headers, retryAttempts: 0 }) as Client;
    clients.push(c);
    return c;
  }

  function subscribe(c: Client, query = OPERATIONS_CHANGED): Subscription {
    const collected = collectResults<Result>(3_000);
    const stop = c.subscribe<Result['data'], Result['extensions']>({ query }, collected.sink);
    return { results: collected.results, ended: collected.ended, stop: () => stop(), waitFor: collected.waitFor };
  }

  const as = (who: Who) => ({ authorization: `Bearer ${tokens[who]}` });
  const scrape = async () => (await (await fetch(`${server.origin}/metrics`)).text()).match(/^connector_store_subscriptions_open\{transport="sse"\} (\d+)$/m)?.[1];
  const scrapeStreams = async () => (await (await fetch(`${server.origin}/metrics`)).text()).match(/^connector_store_event_streams_open (\d+)$/m)?.[1];
  /** Waits until the server holds `count` open subscriptions of transport `sse`. */
  const openSubscriptions = (count: number) => expect.poll(scrape, { timeout: 5_000 }).toBe(String(count));

  async function claim(operationID: string, who: Who) {
    const { body } = await postGraphQL<{ claimOperation: { outcome: string } }>(server, tokens[who], CLAIM, { input: claimInput({ operationID }) });
    expect(body.data!.claimOperation.outcome).toBe('CLAIMED');
  }

  describe.each([
    ['single connection', true],
    ['distinct connections', false],
  ] as const)('%s', (_mode, singleConnection) => {
    const tag = singleConnection ? 'single' : 'distinct';

    it('a claim made over HTTP reaches its owner; a stranger receives nothing; /metrics counts them under sse', async () => {
      const alice = subscribe(client(singleConnection, as('alice')));
      const mallory = subscribe(client(singleConnection, as('mallory')));
      await openSubscriptions(2);
      // One single-connection stream per client (carrying its subscriptions); distinct mode reserves none.
      expect(await scrapeStreams()).toBe(singleConnection ? '2' : '0');
      await claim(`op-gsse-${tag}-1`, 'alice');
      await alice.waitFor(1);
      expect(alice.results[0]).toEqual({ data: { operationsChanged: expect.objectContaining({ operationID: `op-gsse-${tag}-1`, state: 'ATTEMPTED' }) } });
      await new Promise((r) => setTimeout(r, 300));
      expect(mallory.results).toEqual([]);
      alice.stop();
      mallory.stop();
      await openSubscriptions(0);
    });

    it('a bad token, or none, is refused with 401 and nothing is held', async () => {
      const forged = subscribe(client(singleConnection, { authorization: `Bearer ${tokens.alice.slice(0, -4)}AAAA` }));
      const error = await forged.ended;
      expect(error).toBeInstanceOf(NetworkError);
      expect((error as NetworkError).response?.status).toBe(401);
      const anonymous = subscribe(client(singleConnection, {}));
      expect(((await anonymous.ended) as NetworkError).response?.status).toBe(401);
      expect(forged.results).toEqual([]);
      await openSubscriptions(0);
    });

    it('the per-viewer cap (2) holds; stopping one frees its slot', async () => {
      const c = client(singleConnection, as('bob'));
      const held = [subscribe(c), subscribe(c)];
      await openSubscriptions(2);
      const refused = subscribe(c);
      await refused.waitFor(1);
      expect(refused.results[0]?.errors?.[0]?.extensions?.code).toBe('TOO_MANY_SUBSCRIPTIONS');
      expect(await refused.ended).toBe('complete');
      held[0]!.stop();
      await openSubscriptions(1);
      const again = subscribe(c);
      await openSubscriptions(2);
      await claim(`op-gsse-${tag}-cap`, 'bob');
      await again.waitFor(1);
      expect(again.results[0]?.data?.operationsChanged?.operationID).toBe(`op-gsse-${tag}-cap`);
      await held[1]!.waitFor(1);
      held[1]!.stop();
      again.stop();
      await openSubscriptions(0);
    });
  });

  it('a stream token is bound to the viewer that reserved it: another viewer naming it finds no stream', async () => {
    const reserved = await fetch(url(), { method: 'PUT', headers: as('alice') });
    expect(reserved.status).toBe(201);
    const token = await reserved.text();
    const post = (who: Who) =>
      fetch(url(), {
        method: 'POST',
        headers: { ...as(who), 'content-type': 'application/json', 'x-graphql-event-stream-token': token },
        body: JSON.stringify({ query: OPERATIONS_CHANGED, extensions: { operationId: '1' } }),
      });
    expect((await post('mallory')).status).toBe(404);
    // Alice's own operation on it is accepted (202) and waits for her stream.
    expect((await post('alice')).status).toBe(202);
    await openSubscriptions(1);
    const stop = await fetch(`${url()}?operationId=1`, { method: 'DELETE', headers: { ...as('alice'), 'x-graphql-event-stream-token': token } });
    expect(stop.status).toBe(200);
    await openSubscriptions(0);
  });

  it('CORS: a listed origin gets its preflight allowed, another gets no CORS headers', async () => {
    const preflight = (origin: string) =>
      fetch(url(), { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'PUT', 'access-control-request-headers': 'authorization' } });
    const listed = await preflight(ALLOWED_ORIGIN);
    expect(listed.headers.get('access-control-allow-origin')).toBe(ALLOWED_ORIGIN);
    const foreign = await preflight('https://evil.example.com');
    expect(foreign.headers.get('access-control-allow-origin')).toBeNull();
    const put = await fetch(url(), { method: 'PUT', headers: { ...as('alice'), origin: 'https://evil.example.com' } });
    expect(put.headers.get('access-control-allow-origin')).toBeNull();
  });
});
