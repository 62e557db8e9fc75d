/**
 * The graphql-sse wrapper's own rules (src/server/graphql-sse.ts) on a small
 * yoga app through `yoga.fetch`, with a short reservation timeout: reserved
 * streams are capped per viewer and in total, a reservation nobody opens is
 * dropped (and its place freed) after the timeout, an opened stream frees
 * its place when it ends, and shutdown (what `register` remembered) ends
 * open streams. The transport against the real server, in both modes and on
 * both dialects, is test/e2e/graphql-sse.test.ts.
 */
import { createSchema, createYoga } from 'graphql-yoga';
import { describe, expect, it } from 'vitest';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { GRAPHQL_SSE_ENDPOINT, useGraphQLSSEProtocol } from '../../src/server/graphql-sse.js';

const AUDIENCE = 'connector-store-sse-unit';
const URL_ = `http://127.0.0.1${GRAPHQL_SSE_ENDPOINT}`;

function makeYoga(options: { maxStreamsPerViewer?: number; maxStreams?: number; reservationTimeoutMs?: number } = {}) {
  const ends = new Set<() => void>();
  const yoga = createYoga({
    schema: createSchema({
      typeDefs: 'type Query { ok: Boolean } type Subscription { ticks: Int }',
      resolvers: {
        Query: { ok: () => true },
        Subscription: {
          ticks: {
            subscribe: async function* () {
              yield { ticks: 1 };
              await new Promise(() => {});
            },
          },
        },
      },
    }),
    logging: false,
    plugins: [
      useGraphQLSSEProtocol({
        auth: { audience: AUDIENCE, serviceDIDs: new Set(), insecureHeaderAuth: false },
        now: () => Date.now(),
        maxStreamsPerViewer: options.maxStreamsPerViewer ?? 2,
        maxStreams: options.maxStreams ?? 10,
        reservationTimeoutMs: options.reservationTimeoutMs ?? 100,
        register: (end) => {
          ends.add(end);
          return () => ends.delete(end);
        },
      }),
    ],
  });
  return { yoga, shutdown: () => [...ends].forEach((end) => end()), registered: () => ends.size };
}

const tokenOf = async () => `Bearer ${await mintToken({ privateKey: generateLocalKey().privateKey, audience: AUDIENCE, ttlSeconds: 600 })}`;
const reserve = async (yoga: ReturnType<typeof makeYoga>['yoga'], authorization: string) => {
  const response = await yoga.fetch(URL_, { method: 'PUT', headers: { authorization } });
  return { status: response.status, token: await response.text() };
};

describe('graphql-sse streams: caps, unopened reservations, shutdown', () => {
  it('caps reserved streams per viewer (429) and in total (503, retryable); a reservation never opened is dropped after the timeout', async () => {
    const { yoga } = makeYoga({ maxStreamsPerViewer: 2, maxStreams: 3, reservationTimeoutMs: 150 });
    const alice = await tokenOf();
    const bob = await tokenOf();
    expect((await reserve(yoga, alice)).status).toBe(201);
    expect((await reserve(yoga, alice)).status).toBe(201);
    const third = await yoga.fetch(URL_, { method: 'PUT', headers: { authorization: alice } });
    expect(third.status).toBe(429);
    expect(((await third.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('TOO_MANY_SUBSCRIPTIONS');
    expect((await reserve(yoga, bob)).status).toBe(201);
    const overloaded = await yoga.fetch(URL_, { method: 'PUT', headers: { authorization: bob } });
    expect(overloaded.status).toBe(503);
    expect(((await overloaded.json()) as { errors: { extensions: { code: string; retryable: boolean } }[] }).errors[0]!.extensions).toEqual({ code: 'OVERLOADED', retryable: true });
    // Nobody opened them: after the timeout their places are free again, and the plugin forgot them too.
    const stale = await reserve(yoga, bob);
    expect(stale.status).toBe(503);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const again = await reserve(yoga, alice);
    expect(again.status).toBe(201);
    expect((await reserve(yoga, alice)).status).toBe(201);
  });

  it('an opened stream carries operations, frees its place when it ends, and shutdown ends it', async () => {
    const { yoga, shutdown, registered } = makeYoga({ maxStreamsPerViewer: 1, reservationTimeoutMs: 100 });
    const alice = await tokenOf();
    const { token } = await reserve(yoga, alice);
    const stream = await yoga.fetch(`${URL_}?token=${encodeURIComponent(token)}`, { headers: { authorization: alice, accept: 'text/event-stream' } });
    expect(stream.status).toBe(200);
    expect(registered()).toBe(1);
    const accepted = await yoga.fetch(URL_, {
      method: 'POST',
      headers: { authorization: alice, 'content-type': 'application/json', 'x-graphql-event-stream-token': token },
      body: JSON.stringify({ query: 'subscription { ticks }', extensions: { operationId: 'a' } }),
    });
    expect(accepted.status).toBe(202);
    const reader = stream.body!.getReader();
    let text = '';
    while (!text.includes('"ticks":1')) text += new TextDecoder().decode((await reader.read()).value);
    // Opened streams are not dropped by the reservation timeout, and still count.
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect((await reserve(yoga, alice)).status).toBe(429);
    // Shutdown: the stream ends, and its place is free.
    shutdown();
    for (;;) if ((await reader.read()).done) break;
    expect(registered()).toBe(0);
    expect((await reserve(yoga, alice)).status).toBe(201);
  });

  it('refuses every request without valid credentials (401) before the protocol runs', async () => {
    const { yoga } = makeYoga();
    for (const headers of [{}, { authorization: 'Bearer nope' }] as Record<string, string>[]) {
      for (const method of ['PUT', 'GET', 'POST', 'DELETE']) {
        const response = await yoga.fetch(URL_, { method, headers: { ...headers, ...(method === 'GET' && { accept: 'text/event-stream' }) } });
        expect(response.status, `${method} ${JSON.stringify(headers)}`).toBe(401);
        expect(response.headers.get('www-authenticate'), method).toMatch(/^Bearer /);
      }
    }
  });
});
