/**
 * Compressed answers from the client package (issue 40 item 4): a store
 * client asks a server on loopback for answers as they are (`identity`:
 * compressing and inflating each answer costs both processes CPU and saves
 * no wire), and leaves any other server to compress as fetch asks it to;
 * `compressedAnswers` overrides either way.
 */
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { createStoreClient, type StoreClientOptions } from '../../client/runtime/index.js';
import { isLoopbackURL } from '../../client/runtime/store-client.js';

const QUERY = parse('query Read { ok }') as TypedDocumentNode<{ ok: boolean }, Record<string, never>>;

/** The `Accept-Encoding` the client sets on a request to `url` (null: none, fetch's own). */
async function acceptEncoding(url: string, options: Partial<StoreClientOptions> = {}): Promise<string | null> {
  let header: string | null = 'not sent';
  const client = createStoreClient({
    url,
    tokens: 'a-token',
    maxRetries: 0,
    ...options,
    fetch: (async (_url: string, init: RequestInit) => {
      header = new Headers(init.headers).get('accept-encoding');
      return new Response(JSON.stringify({ data: { ok: true } }), { headers: { 'content-type': 'application/json' } });
    }) as typeof fetch,
  });
  await client.request(QUERY, {});
  client.dispose();
  return header;
}

describe('store client: answer encoding', () => {
  it('asks a server on loopback for identity, any other server for nothing of its own', async () => {
    for (const url of ['http://127.0.0.1:4000/graphql', 'http://localhost/graphql', 'http://[::1]:4000/graphql', 'http://127.8.9.10/graphql']) expect(await acceptEncoding(url), url).toBe('identity');
    for (const url of ['https://store.example.com/graphql', 'http://10.0.0.2/graphql', 'http://127.0.0.1.example.com/graphql']) expect(await acceptEncoding(url), url).toBeNull();
  });

  it('compressedAnswers overrides the default either way', async () => {
    expect(await acceptEncoding('http://127.0.0.1:4000/graphql', { compressedAnswers: true })).toBeNull();
    expect(await acceptEncoding('https://store.example.com/graphql', { compressedAnswers: false })).toBe('identity');
  });

  it('knows loopback URLs', () => {
    expect(isLoopbackURL('not a url')).toBe(false);
    expect(isLoopbackURL('http://localhost:4000/')).toBe(true);
  });
});
