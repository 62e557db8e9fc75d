/**
 * The Node transport of the store client (client/node-http.ts, issue 40 item
 * 4): requests through `node:http` with kept-alive sockets, answers inflated
 * as `fetch` would, headers and statuses read, aborts honoured; the
 * subscription stream through `nodeHTTPStreamFetch`; and
 * `storeClientFromKeyFile` posting and subscribing through them, never
 * through `fetch`.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { parse } from 'graphql';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { nodeHTTPStreamFetch, nodeHTTPTransport, storeClientFromKeyFile } from '../../client/key-file.js';
import { createStoreClient, StoreRequestError, type StoreClient } from '../../client/runtime/index.js';
import { generateLocalKey, writeKeyFile } from '../../src/auth/index.js';

const QUERY = parse('query Read { ok }') as TypedDocumentNode<{ ok: boolean }, Record<string, never>>;
const CHANGES = parse('subscription Changes { changed }') as TypedDocumentNode<{ changed: number }, Record<string, never>>;

/** Answers a graphql-sse stream (distinct connections): `next` for each value, then `complete`, each chunk on its own. */
function streamAnswer(values: number[], closed: () => void) {
  return (_request: IncomingMessage, response: ServerResponse) => {
    response.on('close', closed);
    response.writeHead(200, { 'content-type': 'text/event-stream', connection: 'keep-alive' });
    response.flushHeaders();
    let i = 0;
    const timer = setInterval(() => {
      if (i < values.length) response.write(`event: next\ndata: ${JSON.stringify({ data: { changed: values[i++] } })}\n\n`);
      else {
        clearInterval(timer);
        response.end('event: complete\ndata:\n\n');
      }
    }, 10);
    response.on('close', () => clearInterval(timer));
  };
}

/** Subscribes and collects what the stream gives until it completes or fails. */
function collect(client: StoreClient): Promise<{ values: number[]; error?: unknown }> {
  return new Promise((resolve) => {
    const values: number[] = [];
    client.subscribe(CHANGES, {}, { next: (data) => values.push(data.changed), error: (error) => resolve({ values, error }), complete: () => resolve({ values }) });
  });
}

describe('store client: node:http transport', () => {
  const seen: { headers: IncomingMessage['headers']; body: string; socket: unknown }[] = [];
  let answer: (request: IncomingMessage, response: ServerResponse) => void = () => {};
  const server = createServer((request, response) => {
    let body = '';
    request.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
    request.on('end', () => {
      seen.push({ headers: request.headers, body, socket: request.socket });
      answer(request, response);
    });
  });
  let url = '';
  beforeAll(async () => {
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    server.close();
  });

  it('posts the request, keeps its socket alive and reads plain, gzip and brotli answers', async () => {
    seen.length = 0;
    const client = createStoreClient({ url, tokens: 'a-token', transport: nodeHTTPTransport(), maxRetries: 0 });
    const json = JSON.stringify({ data: { ok: true } });
    for (const encoding of ['identity', 'gzip', 'br']) {
      answer = (_request, response) => {
        const body = encoding === 'gzip' ? gzipSync(json) : encoding === 'br' ? brotliCompressSync(json) : Buffer.from(json);
        response.writeHead(200, { 'content-type': 'application/json', ...(encoding !== 'identity' && { 'content-encoding': encoding }) });
        response.end(body);
      };
      expect(await client.request(QUERY, {})).toEqual({ ok: true });
    }
    expect(seen).toHaveLength(3);
    expect(JSON.parse(seen[0]!.body)).toMatchObject({ query: expect.stringContaining('query Read'), variables: {}, operationName: 'Read' });
    expect(seen[0]!.headers).toMatchObject({ authorization: 'Bearer a-token', 'content-type': 'application/json', 'accept-encoding': 'identity' });
    // One socket for all three: kept alive.
    expect(new Set(seen.map((request) => request.socket)).size).toBe(1);
    client.dispose();
  });

  it('asks a server off loopback for compressed answers, as fetch does', async () => {
    seen.length = 0;
    answer = (_request, response) => response.end(JSON.stringify({ data: { ok: true } }));
    const transport = nodeHTTPTransport();
    await transport(url, { headers: {}, body: '{}', signal: new AbortController().signal });
    expect(seen[0]!.headers['accept-encoding']).toBe('gzip, deflate, br');
  });

  it('reads the status and Retry-After of a refusal', async () => {
    answer = (_request, response) => {
      response.writeHead(503, { 'content-type': 'application/json', 'retry-after': '7' });
      response.end(JSON.stringify({ errors: [{ message: 'busy', extensions: { code: 'OVERLOADED' } }] }));
    };
    const client = createStoreClient({ url, tokens: 'a-token', transport: nodeHTTPTransport(), maxRetries: 0 });
    const error = await client.request(QUERY, {}).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(StoreRequestError);
    expect(error).toMatchObject({ code: 'OVERLOADED', status: 503, retryable: true, retryAfterMs: 7_000 });
    client.dispose();
  });

  it('rejects with the signal’s reason when aborted, and as NETWORK_ERROR when nothing answers', async () => {
    answer = () => {}; // never answers
    const client = createStoreClient({ url, tokens: 'a-token', transport: nodeHTTPTransport(), maxRetries: 0, requestTimeoutMs: 200 });
    const stop = new AbortController();
    const reason = new Error('stop');
    setTimeout(() => stop.abort(reason), 50);
    await expect(client.request(QUERY, {}, { signal: stop.signal })).rejects.toBe(reason);
    await expect(client.request(QUERY, {})).rejects.toMatchObject({ code: 'TIMEOUT', retryable: true });
    client.dispose();
    const closed = createStoreClient({ url: 'http://127.0.0.1:1/graphql', tokens: 'a-token', transport: nodeHTTPTransport(), maxRetries: 0 });
    await expect(closed.request(QUERY, {})).rejects.toMatchObject({ code: 'NETWORK_ERROR', retryable: true });
    closed.dispose();
  });

  it('streams a subscription through node:http: events as they arrive, a refusal as a retryable stream error, an unsubscribe closes it', async () => {
    seen.length = 0;
    let closes = 0;
    answer = streamAnswer([1, 2, 3], () => closes++);
    const client = createStoreClient({ url, tokens: 'a-token', transport: nodeHTTPTransport(), fetch: nodeHTTPStreamFetch(), maxRetries: 0 });
    expect(await collect(client)).toEqual({ values: [1, 2, 3] });
    expect(seen[0]!.headers).toMatchObject({ authorization: 'Bearer a-token', accept: 'text/event-stream' });
    expect(seen[0]!.headers['accept-encoding']).toBeUndefined();
    expect(JSON.parse(seen[0]!.body)).toMatchObject({ query: expect.stringContaining('subscription Changes') });

    answer = (_request, response) => {
      response.writeHead(429, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ errors: [{ message: 'too many' }] }));
    };
    expect(await collect(client)).toMatchObject({ values: [], error: { code: 'STREAM_ERROR', retryable: true } });

    closes = 0;
    answer = streamAnswer(Array.from({ length: 1_000 }, (_, i) => i), () => closes++);
    const values: number[] = [];
    const unsubscribe = client.subscribe(CHANGES, {}, { next: (data) => values.push(data.changed), error: () => {}, complete: () => {} });
    await vi.waitFor(() => expect(values.length).toBeGreaterThan(1));
    unsubscribe();
    await vi.waitFor(() => expect(closes).toBe(1));
    client.dispose();
  });

  it('storeClientFromKeyFile posts and subscribes through node:http, never through fetch', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cs-node-http-'));
    const fetchSpy = vi.spyOn(globalThis, 'fetch');
    try {
      const keyFile = join(dir, 'worker.key');
      await writeKeyFile(keyFile, generateLocalKey());
      const client = await storeClientFromKeyFile(keyFile, { url, audience: 'connector-store-test', maxRetries: 0 });
      answer = (_request, response) => response.end(JSON.stringify({ data: { ok: true } }));
      expect(await client.request(QUERY, {})).toEqual({ ok: true });
      answer = streamAnswer([7], () => {});
      expect(await collect(client)).toEqual({ values: [7] });
      expect(fetchSpy).not.toHaveBeenCalled();
      client.dispose();
    } finally {
      fetchSpy.mockRestore();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
