/**
 * Subscriptions over WebSocket (graphql-ws) against a real server process,
 * once per dialect: the same authorization and limits as SSE. A change made
 * over HTTP reaches its owner's WebSocket subscriber and nobody else; a bad
 * token fails the connection (4401); anonymous is refused by the auth scope;
 * the per-viewer cap counts WebSocket subscriptions and a disconnect frees
 * the slot; only subscriptions are served; oversized messages close the
 * socket; shutdown closes clients with 1001. The last test stops the server.
 */
import { createClient, type Client } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { DialectName } from '../../src/db/connect.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { e2ePrincipals, postGraphQL, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import { CLAIM, claimInput } from '../helpers/operation-graphql.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { collectResults } from '../helpers/sse.js';

const AUDIENCE = 'connector-store-websocket';
const { keys, tokens, mint } = e2ePrincipals(AUDIENCE, ['alice', 'bob', 'mallory', 'worker']);
type Who = keyof typeof keys;

/** Open WebSocket connections the server under test accepts (MAX_WEBSOCKET_CONNECTIONS). */
const WS_CAP = 4;
const OPERATIONS_CHANGED = `subscription { operationsChanged { id operationID state } }`;

interface Result {
  data?: { operationsChanged?: { operationID: string; state: string } } | null;
  errors?: { message: string; extensions?: { code?: string } }[];
}

/** One graphql-ws client with one subscription, collecting what arrives. */
interface WSSubscription {
  results: Result[];
  /** Settles with the close event / error when the subscription errors, or `'complete'`. */
  ended: Promise<unknown>;
  waitFor(count: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

const dialects: DialectName[] = testDialects().filter(dialectAvailable);

describe.each(dialects)('graphql-ws subscriptions (%s)', (dialect) => {
  let started: E2EServers | undefined;
  let server: ServerProcess | undefined;
  const clients: Client[] = [];

  beforeAll(async () => {
    started = await startE2EServers(dialect, {
      audience: AUDIENCE,
      serviceDID: keys.worker.did,
      name: 'ws',
      // The totals alone: the share kept for known viewers is test/e2e/admission.test.ts's.
      env: { DB_POOL_MAX: '5', MAX_SUBSCRIPTIONS_PER_VIEWER: '2', MAX_WEBSOCKET_CONNECTIONS: String(WS_CAP), UNKNOWN_VIEWER_SHARE_PERCENT: '100', WS_CONNECTION_INIT_TIMEOUT_MS: '500', SHUTDOWN_DRAIN_MS: '200', SHUTDOWN_GRACE_MS: '5000' },
    });
    server = started.server;
    await mint();
  }, 60_000);

  afterAll(async () => {
    await Promise.all(clients.map((c) => c.dispose()));
    await started?.dispose();
  });

  function client(connectionParams?: Record<string, unknown>): Client {
    const c = createClient({
      url: `${server!.origin.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      ...(connectionParams === undefined ? {} : { connectionParams }),
    });
    clients.push(c);
    return c;
  }

  /** Subscribes on a client of its own; resolves once the server has had a moment to register it. */
  async function subscribe(connectionParams: Record<string, unknown> | undefined, query = OPERATIONS_CHANGED): Promise<WSSubscription> {
    const c = client(connectionParams);
    const collected = collectResults<Result>(2_000);
    c.subscribe<Result['data']>({ query }, collected.sink);
    await new Promise((r) => setTimeout(r, 150));
    return {
      results: collected.results,
      ended: collected.ended,
      waitFor: collected.waitFor,
      close: async () => {
        await c.dispose();
      },
    };
  }

  const as = (who: Who) => ({ authorization: `Bearer ${tokens[who]}` });

  async function claim(operationID: string, who: Who) {
    const { body } = await postGraphQL<{ claimOperation: { outcome: string } }>(server!, tokens[who], CLAIM, { input: claimInput({ operationID }) });
    expect(body.data!.claimOperation.outcome).toBe('CLAIMED');
  }

  it('a claim made over HTTP reaches its owner over WebSocket; a stranger receives nothing', async () => {
    const alice = await subscribe(as('alice'));
    // `Authorization` is accepted as well as `authorization`.
    const mallory = await subscribe({ Authorization: `Bearer ${tokens.mallory}` });
    await claim('op-ws-1', 'alice');
    await alice.waitFor(1);
    expect(alice.results[0]).toEqual({ data: { operationsChanged: expect.objectContaining({ operationID: 'op-ws-1', state: 'ATTEMPTED' }) } });
    await new Promise((r) => setTimeout(r, 300));
    expect(mallory.results).toEqual([]);
    // /metrics counts them as WebSocket subscriptions.
    const scrape = async () => (await (await fetch(`${server!.origin}/metrics`)).text()).match(/^connector_store_subscriptions_open\{transport="websocket"\} (\d+)$/m)?.[1];
    expect(await scrape()).toBe('2');
    await Promise.all([alice.close(), mallory.close()]);
    await expect.poll(scrape).toBe('0');
  });

  it('a bad token fails the connection with 4401 (not retried by clients)', async () => {
    const forged = await subscribe({ authorization: `Bearer ${tokens.alice.slice(0, -4)}AAAA` });
    const closed = (await forged.ended) as { code?: number; reason?: string };
    expect(closed.code).toBe(4401);
    expect(closed.reason).toMatch(/^Unauthorized: [A-Z_]+$/);
    const malformed = await subscribe({ authorization: 'Basic abc' });
    expect(((await malformed.ended) as { code?: number }).code).toBe(4401);
    expect(forged.results).toEqual([]);
  });

  it('anonymous (no connectionParams) is refused at connection_init with 4401: no socket is held for nobody', async () => {
    const anonymous = await subscribe(undefined);
    const closed = (await anonymous.ended) as { code?: number; reason?: string };
    expect(closed.code).toBe(4401);
    expect(closed.reason).toMatch(/bearer token is required/);
    expect(anonymous.results).toEqual([]);
  });

  it('a socket that never sends connection_init is closed (4408) after WS_CONNECTION_INIT_TIMEOUT_MS', async () => {
    const socket = new WebSocket(`${server!.origin.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
    const opened = Date.now();
    const code = await new Promise<number>((resolve) => socket.on('close', (closeCode) => resolve(closeCode)));
    expect(code).toBe(4408);
    expect(Date.now() - opened).toBeLessThan(3_000);
  });

  it(`caps open WebSocket connections per replica: past ${WS_CAP} the upgrade is refused (503), and a closed one frees a place`, async () => {
    const held: WSSubscription[] = [];
    for (let i = 0; i < WS_CAP; i++) held.push(await subscribe(as(i % 2 === 0 ? 'alice' : 'bob')));
    const refused = await new Promise<number>((resolve) => {
      const socket = new WebSocket(`${server!.origin.replace(/^http/, 'ws')}/graphql`, 'graphql-transport-ws');
      socket.on('unexpected-response', (_request, response) => resolve(response.statusCode ?? 0));
      socket.on('open', () => resolve(101));
      socket.on('error', () => {});
    });
    expect(refused).toBe(503);
    await held[0]!.close();
    await new Promise((r) => setTimeout(r, 200));
    const again = await subscribe(as('alice'));
    await claim('op-ws-cap', 'alice');
    await again.waitFor(1);
    await Promise.all([...held.slice(1), again].map((s) => s.close()));
    // Let the server see the sockets go before the next test counts places.
    await expect.poll(async () => (await fetch(`${server!.origin}/healthz`)).status).toBe(200);
    await new Promise((r) => setTimeout(r, 300));
  });

  it('the per-viewer cap counts WebSocket subscriptions; a disconnect frees the slot', async () => {
    const held = [await subscribe(as('bob')), await subscribe(as('bob'))];
    const refused = await subscribe(as('bob'));
    await refused.waitFor(1);
    expect(refused.results[0]?.errors?.[0]?.extensions?.code).toBe('TOO_MANY_SUBSCRIPTIONS');
    // Closing the socket (no `complete` message first) frees the slot.
    await held[0]!.close();
    await new Promise((r) => setTimeout(r, 200));
    const again = await subscribe(as('bob'));
    await claim('op-ws-2', 'bob');
    await again.waitFor(1);
    expect(again.results[0]?.data?.operationsChanged?.operationID).toBe('op-ws-2');
    await held[1]!.waitFor(1);
    await Promise.all([held[1]!.close(), again.close()]);
  });

  it('serves only subscriptions, and closes a socket whose message exceeds MAX_BODY_BYTES', async () => {
    const query = await subscribe(as('alice'), '{ __typename }');
    expect(await query.ended).toEqual([expect.objectContaining({ extensions: { code: 'SUBSCRIPTIONS_ONLY' } })]);
    const huge = await subscribe(as('alice'), `subscription { operationsChanged { id } } # ${'x'.repeat(1_100_000)}`);
    expect(((await huge.ended) as { code?: number }).code).toBe(1009);
  });

  it('shutdown closes WebSocket clients with 1001 (clients reconnect elsewhere) and exits 0', async () => {
    const alice = await subscribe(as('alice'));
    server!.child.kill('SIGTERM');
    expect(((await alice.ended) as { code?: number }).code).toBe(1001);
    expect((await server!.exited).code).toBe(0);
  });
});
