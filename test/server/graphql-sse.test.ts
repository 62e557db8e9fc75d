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

function makeYoga(options: { maxStreamsPerViewer?: number; maxStreams?: number; reservationTimeoutMs?: number; maxBacklog?: number; stallMs?: number } = {}) {
  const ends = new Set<() => void>();
  const yoga = createYoga({
    schema: createSchema({
      typeDefs: 'type Query { ok: Boolean } type Subscription { ticks: Int burst: Int }',
      resolvers: {
        Query: { ok: () => true },
        Subscription: {
          ticks: {
            subscribe: async function* () {
              yield { ticks: 1 };
              await new Promise(() => {});
            },
          },
          // 200 results over about a second, then silence: a client that does not read falls behind.
          burst: {
            subscribe: async function* () {
              for (let i = 0; i < 200; i++) {
                yield { burst: i };
                await new Promise((resolve) => setTimeout(resolve, 3));
              }
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
        admission: { maxBodyBytes: 1_000_000, persistedDocuments: undefined, noteOperation: () => {}, noteDerived: () => {} },
        now: () => Date.now(),
        maxStreamsPerViewer: options.maxStreamsPerViewer ?? 2,
        maxStreams: options.maxStreams ?? 10,
        reservationTimeoutMs: options.reservationTimeoutMs ?? 100,
        ...(options.maxBacklog !== undefined && { maxBacklog: options.maxBacklog }),
        ...(options.stallMs !== undefined && { stallMs: options.stallMs }),
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

  it('ends a stream whose client stopped reading once maxBacklog results wait for it, in either mode; a reading client gets everything', async () => {
    const { yoga, registered } = makeYoga({ maxBacklog: 20, stallMs: 100 });
    const alice = await tokenOf();
    const readAll = async (response: Response) => {
      const reader = response.body!.getReader();
      let text = '';
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return text;
        text += new TextDecoder().decode(value);
        if (text.includes('"burst":199')) {
          void reader.cancel();
          return text;
        }
      }
    };
    const distinct = () =>
      yoga.fetch(URL_, {
        method: 'POST',
        headers: { authorization: alice, accept: 'text/event-stream', 'content-type': 'application/json' },
        body: JSON.stringify({ query: 'subscription { burst }' }),
      });
    // Not read while the 200 results come: cut off once 20 wait and it has read nothing for 100 ms; far fewer than 200 arrive.
    const stalled = await distinct();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const cut = await readAll(stalled);
    const events = cut.match(/^event: next$/gm)?.length ?? 0;
    expect(events).toBeLessThan(60);
    expect(cut).not.toContain('"burst":199');
    // Single connection: the same for a stream whose client stops reading.
    const { token } = await reserve(yoga, alice);
    const single = await yoga.fetch(`${URL_}?token=${encodeURIComponent(token)}`, { headers: { authorization: alice, accept: 'text/event-stream' } });
    const accepted = await yoga.fetch(URL_, {
      method: 'POST',
      headers: { authorization: alice, 'content-type': 'application/json', 'x-graphql-event-stream-token': token },
      body: JSON.stringify({ query: 'subscription { burst }', extensions: { operationId: 'b' } }),
    });
    expect(accepted.status).toBe(202);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await readAll(single)).match(/^event: next$/gm)?.length ?? 0).toBeLessThan(60);
    await expect.poll(registered).toBe(0);
    // A client that reads as the results come (bursts and all) gets all 200.
    expect(await readAll(await distinct())).toContain('"burst":199');
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
