/**
 * Tokens minted by client/token.ts against a real server process, once per
 * dialect: keys made the way an integrator makes them (Web Crypto, not the
 * server's code), a user's token and a service worker's token source
 * authenticate over HTTP and WebSocket (a subscription) as their DIDs, and expired, wrong-key
 * and wrong-audience tokens get 401 with their codes.
 */
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { createTokenSource, importSigningKey, mintToken, type SigningKey } from '../../client/token.js';
import type { DialectName } from '../../src/db/connect.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { postGraphQL, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import { CLAIM, claimInput } from '../helpers/operation-graphql.js';

const AUDIENCE = 'connector-store-client-tokens';
const WHO_AM_I = '{ serverInfo { viewerDID viewerIsService } }';
const dialects: DialectName[] = testDialects().filter(dialectAvailable);

// A user's key kept as a JWK (as in a key file), a worker's as a non-extractable
// Web Crypto key pair (as a browser keeps one in IndexedDB).
const aliceJWK = (async () => {
  const pair = (await crypto.subtle.generateKey({ name: 'Ed25519' }, true, ['sign', 'verify'])) as CryptoKeyPair;
  return crypto.subtle.exportKey('jwk', pair.privateKey);
})();
const workerPair = crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']) as Promise<CryptoKeyPair>;

describe.each(dialects)('client tokens end to end (%s)', (dialect) => {
  let started: E2EServers | undefined;
  let alice: SigningKey;
  let worker: SigningKey;

  beforeAll(async () => {
    alice = await importSigningKey(await aliceJWK);
    worker = await importSigningKey(await workerPair);
    started = await startE2EServers(dialect, { audience: AUDIENCE, serviceDID: worker.did, name: 'client_tokens' });
  }, 60_000);
  afterAll(async () => {
    await started?.dispose();
  });

  const server = () => started!.server;

  it('a minted token authenticates as its DID: serverInfo names the viewer, and its data is reachable', async () => {
    const token = await mintToken({ key: await aliceJWK, audience: AUDIENCE, lifetimeSeconds: 300 });
    const { status, body } = await postGraphQL(server(), token, `${WHO_AM_I.slice(0, -1)} operations(first: 1) { totalCount } }`);
    expect(status).toBe(200);
    expect(body).toEqual({ data: { serverInfo: { viewerDID: alice.did, viewerIsService: false }, operations: { totalCount: 0 } } });
  });

  it('a worker’s token source authenticates as the configured service, and hands the same token out again', async () => {
    const source = createTokenSource({ key: await workerPair, audience: AUDIENCE, lifetimeSeconds: 600 });
    const token = await source.getToken();
    const { status, body } = await postGraphQL(server(), token, `${WHO_AM_I.slice(0, -1)} dueOperations { id } }`);
    expect(status).toBe(200);
    expect(body).toEqual({ data: { serverInfo: { viewerDID: worker.did, viewerIsService: true }, dueOperations: [] } });
    expect(await source.getToken()).toBe(token);
  });

  it('over WebSocket, a token source feeds connectionParams: the worker sees the claim the user makes over HTTP', async () => {
    const source = createTokenSource({ key: worker, audience: AUDIENCE });
    const client = createClient({
      url: `${server().origin.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      // Called on every (re)connect, so a reconnecting worker sends a live token.
      connectionParams: async () => ({ authorization: `Bearer ${await source.getToken()}` }),
    });
    try {
      const changes = client.iterate<{ operationsChanged: { operationID: string; state: string } }>({
        query: 'subscription { operationsChanged { operationID state } }',
      });
      const first = changes.next();
      // The subscription registers after the connection is acknowledged.
      await new Promise((resolve) => setTimeout(resolve, 300));
      const token = await mintToken({ key: alice, audience: AUDIENCE });
      const { body } = await postGraphQL(server(), token, CLAIM, { input: claimInput({ operationID: 'op-client-token' }) });
      expect(body.data.claimOperation.outcome).toBe('CLAIMED');
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise((_, reject) => (timer = setTimeout(() => reject(new Error('no change arrived in 5 s')), 5_000)));
      const received = await Promise.race([first, timeout]).finally(() => clearTimeout(timer));
      expect(received).toEqual({ done: false, value: { data: { operationsChanged: { operationID: 'op-client-token', state: 'ATTEMPTED' } } } });
      await changes.return?.();
    } finally {
      await client.dispose();
    }
  });

  it('refuses an expired token, one signed by another key and one for another audience with 401 and their codes', async () => {
    const key = await aliceJWK;
    const expired = await mintToken({ key, audience: AUDIENCE, lifetimeSeconds: 600, now: Date.now() - 3_600_000 });
    const fresh = await mintToken({ key, audience: AUDIENCE });
    const workers = await mintToken({ key: worker, audience: AUDIENCE });
    // Alice's header and claims, the worker's signature.
    const wrongKey = `${fresh.split('.').slice(0, 2).join('.')}.${workers.split('.')[2]}`;
    const otherAudience = await mintToken({ key, audience: 'connector-store' });
    for (const [token, code] of [
      [expired, 'TOKEN_EXPIRED'],
      [wrongKey, 'TOKEN_SIGNATURE'],
      [otherAudience, 'TOKEN_AUDIENCE'],
    ] as const) {
      const response = await fetch(`${server().origin}/graphql`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ query: WHO_AM_I }),
      });
      expect(response.status, code).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer /);
      const body = (await response.json()) as { data?: unknown; errors: { extensions?: { code?: string } }[] };
      expect(body.errors.map((error) => error.extensions?.code)).toEqual([code]);
      expect(body.data ?? null).toBeNull();
    }
  });
});
