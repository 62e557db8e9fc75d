/**
 * The Node transport of the store client (client/node-http.ts, issue 40 item
 * 4): requests through `node:http` with kept-alive sockets, answers inflated
 * as `fetch` would, headers and statuses read, aborts honoured; and
 * `storeClientFromKeyFile` posting through it.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { brotliCompressSync, gzipSync } from 'node:zlib';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { parse } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nodeHTTPTransport } from '../../client/key-file.js';
import { createStoreClient, StoreRequestError } from '../../client/runtime/index.js';

const QUERY = parse('query Read { ok }') as TypedDocumentNode<{ ok: boolean }, Record<string, never>>;

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
});
