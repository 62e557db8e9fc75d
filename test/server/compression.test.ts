/**
 * Compressed answers (issue 39 item 3, src/server/compression.ts), over real
 * HTTP with raw sockets (node:http: nothing inflates behind the test's back):
 * GraphQL answers over the threshold on POST and GET /graphql and by a
 * persisted document's id, and GraphiQL's page, come back in the coding the
 * request prefers; small answers and refused codings do not; event
 * streams (yoga's SSE, graphql-sse) stay uncompressed and deliver each event
 * as it happens even when the client accepts gzip and br; a compressed
 * request body is refused (415).
 */
import { request as httpRequest, createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { brotliDecompressSync, gunzipSync, gzipSync } from 'node:zlib';
import { getIntrospectionQuery } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { COMPRESSION_MIN_BYTES, negotiateEncoding } from '../../src/server/compression.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { DEFAULT_MANIFEST } from '../../src/server/persisted-documents.js';
import { describeEachDialect } from '../helpers/databases.js';

const AUDIENCE = 'connector-store-compression';
const INTROSPECTION = getIntrospectionQuery({ inputValueDeprecation: true });
const manifest = JSON.parse(readFileSync(DEFAULT_MANIFEST, 'utf8')) as Record<string, string>;
const OPERATIONS_QUERY = Object.entries(manifest).find(([, document]) => /(^|\n| )query Operations\(/.test(document))![0];

interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  /** The bytes as they came over the wire. */
  body: Buffer;
}

/** One request over a raw socket: the answer's bytes exactly as sent. */
function raw(url: string, options: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers ?? {} }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** The answer's body inflated per its Content-Encoding. */
function inflated(answer: RawAnswer): string {
  const encoding = answer.headers['content-encoding'];
  if (encoding === 'br') return brotliDecompressSync(answer.body).toString('utf8');
  if (encoding === 'gzip') return gunzipSync(answer.body).toString('utf8');
  return answer.body.toString('utf8');
}

describe('negotiateEncoding (RFC 9110 §12.5.3)', () => {
  it.each([
    [null, undefined],
    ['', undefined],
    ['gzip, br', 'br'],
    ['br, gzip', 'br'],
    ['gzip', 'gzip'],
    ['x-gzip', 'gzip'],
    ['GZIP;q=0.8, BR;q=0.9', 'br'],
    ['gzip;q=1.0, br;q=0.5', 'gzip'],
    ['br;q=0, gzip', 'gzip'],
    ['gzip, deflate', 'gzip'],
    ['deflate', undefined],
    ['identity', undefined],
    ['*', 'br'],
    ['*;q=0.5, gzip', 'gzip'],
    ['*;q=0', undefined],
    ['br;q=0, gzip;q=0', undefined],
    ['  gzip ;  q=0.3 ,  zstd ', 'gzip'],
  ])('%j → %s', (header, expected) => {
    expect(negotiateEncoding(header)).toBe(expected);
  });
});

describeEachDialect('compressed answers over HTTP', (suite) => {
  let app: ServerApp;
  let server: Server;
  let origin: string;
  let token: string;
  const service = generateLocalKey();
  const json = (extra: Record<string, string> = {}) => ({ 'content-type': 'application/json', authorization: `Bearer ${token}`, ...extra });

  beforeAll(async () => {
    const config = loadConfig({
      NODE_ENV: 'test',
      AUTH_AUDIENCE: AUDIENCE,
      RETENTION_INTERVAL_MS: '0',
      SERVICE_DIDS: service.did,
      PERSISTED_DOCUMENTS: 'allow',
      GRAPHIQL: 'true',
    });
    app = createServerApp({ config, database: suite.database.open, logger: createLogger('silent'), storeDeps: { now: suite.clock.now } });
    server = createServer(app.yoga);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    token = await mintToken({ privateKey: service.privateKey, audience: AUDIENCE, now: suite.clock.now(), ttlSeconds: 3_600 });
  });
  afterAll(async () => {
    app.closeSubscriptions();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await app.changes.close();
  });

  const introspection = (acceptEncoding?: string) =>
    raw(`${origin}/graphql`, {
      method: 'POST',
      headers: json(acceptEncoding === undefined ? {} : { 'accept-encoding': acceptEncoding }),
      body: JSON.stringify({ query: INTROSPECTION }),
    });

  it('POST /graphql: an answer over the threshold in the coding preferred (br on a tie), the same JSON inflated, Vary and length set', async () => {
    const plain = await introspection();
    expect(plain.status).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.headers.vary).toMatch(/accept-encoding/i);
    const text = plain.body.toString('utf8');
    expect(text.length).toBeGreaterThan(100_000);
    for (const [accept, coding] of [
      ['gzip, br', 'br'],
      ['gzip', 'gzip'],
      ['br;q=0, gzip', 'gzip'],
      ['gzip;q=0.5, br;q=0.4', 'gzip'],
    ] as const) {
      const answer = await introspection(accept);
      expect(answer.status, accept).toBe(200);
      expect(answer.headers['content-encoding'], accept).toBe(coding);
      expect(answer.headers.vary, accept).toMatch(/accept-encoding/i);
      expect(Number(answer.headers['content-length']), accept).toBe(answer.body.length);
      expect(answer.body.length, accept).toBeLessThan(text.length / 5);
      expect(JSON.parse(inflated(answer)), accept).toEqual(JSON.parse(text));
    }
    for (const refused of ['identity', 'deflate', 'br;q=0, gzip;q=0']) expect((await introspection(refused)).headers['content-encoding'], refused).toBeUndefined();
  });

  it('GET /graphql and a persisted document by id are compressed too', async () => {
    // Rows for a list answer over the threshold (each test starts with empty tables).
    for (let i = 0; i < 30; i++) await change();
    const get = await raw(`${origin}/graphql?query=${encodeURIComponent(INTROSPECTION)}`, { headers: { ...json(), accept: 'application/json', 'accept-encoding': 'gzip' } });
    expect(get.status).toBe(200);
    expect(get.headers['content-encoding']).toBe('gzip');
    expect(JSON.parse(inflated(get)).data.__schema.queryType.name).toBe('Query');

    const persisted = await raw(`${origin}/graphql`, {
      method: 'POST',
      headers: json({ 'accept-encoding': 'br' }),
      body: JSON.stringify({ documentId: OPERATIONS_QUERY, variables: { first: 30 } }),
    });
    expect(persisted.status).toBe(200);
    expect(persisted.headers['content-encoding']).toBe('br');
    const answer = JSON.parse(inflated(persisted));
    expect(answer.errors).toBeUndefined();
    expect(answer.data.operations.edges).toHaveLength(30);
    expect(Buffer.byteLength(inflated(persisted))).toBeGreaterThan(COMPRESSION_MIN_BYTES);
  });

  it('leaves small answers alone (Vary still says they may differ)', async () => {
    const small = await raw(`${origin}/graphql`, { method: 'POST', headers: json({ 'accept-encoding': 'gzip, br' }), body: JSON.stringify({ query: '{ __typename }' }) });
    expect(small.status).toBe(200);
    expect(small.body.length).toBeLessThan(COMPRESSION_MIN_BYTES);
    expect(small.headers['content-encoding']).toBeUndefined();
    expect(small.headers.vary).toMatch(/accept-encoding/i);
    expect(JSON.parse(small.body.toString('utf8'))).toEqual({ data: { __typename: 'Query' } });
  });

  it("GraphiQL's page is compressed, and under 1 kB so", async () => {
    const page = await raw(`${origin}/graphql`, { headers: { accept: 'text/html', 'accept-encoding': 'gzip, br' } });
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.headers['content-encoding']).toBe('br');
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.body.length).toBeLessThan(1_024);
    expect(inflated(page)).toContain('renderYogaGraphiQL');
  });

  it('refuses a compressed request body (415): bodies are never inflated past MAX_BODY_BYTES', async () => {
    const answer = await raw(`${origin}/graphql`, {
      method: 'POST',
      headers: json({ 'content-encoding': 'gzip' }),
      body: gzipSync(JSON.stringify({ query: '{ __typename }' })),
    });
    expect(answer.status).toBe(415);
    expect(JSON.parse(answer.body.toString('utf8')).errors[0].extensions.code).toBe('UNSUPPORTED_MEDIA_TYPE');
  });

  /**
   * Opens an event stream with `Accept-Encoding: gzip, br` on a raw socket and
   * resolves with its headers and a reader of its `next` events, each stamped
   * with when it arrived.
   */
  function openStream(path: string): Promise<{ headers: IncomingHttpHeaders; status: number; next: () => Promise<{ at: number; data: any }>; close: () => void }> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(`${origin}${path}`, {
        method: 'POST',
        headers: json({ accept: 'text/event-stream', 'accept-encoding': 'gzip, br' }),
      });
      req.on('response', (res) => {
        const queue: { at: number; data: any }[] = [];
        const waiting: ((event: { at: number; data: any }) => void)[] = [];
        let buffered = '';
        res.setEncoding('utf8').on('data', (chunk: string) => {
          buffered += chunk;
          let end: number;
          while ((end = buffered.indexOf('\n\n')) >= 0) {
            const block = buffered.slice(0, end);
            buffered = buffered.slice(end + 2);
            const data = block.split('\n').filter((line) => line.startsWith('data:')).map((line) => line.slice(5).trim()).join('\n');
            if (!/^event: next$/m.test(block) || data === '') continue;
            const event = { at: performance.now(), data: JSON.parse(data) };
            const waiter = waiting.shift();
            if (waiter !== undefined) waiter(event);
            else queue.push(event);
          }
        });
        resolve({
          headers: res.headers,
          status: res.statusCode ?? 0,
          next: () => {
            const ready = queue.shift();
            if (ready !== undefined) return Promise.resolve(ready);
            return new Promise((resolveEvent, rejectEvent) => {
              const timer = setTimeout(() => rejectEvent(new Error(`no event on ${path} within 3 s`)), 3_000);
              waiting.push((event) => {
                clearTimeout(timer);
                resolveEvent(event);
              });
            });
          },
          close: () => req.destroy(),
        });
      });
      req.on('error', reject);
      req.end(JSON.stringify({ query: 'subscription { operationsChanged { operationID } }' }));
    });
  }

  const ENQUEUE = `mutation E($input: EnqueueOperationInput!) { enqueueOperation(input: $input) { __typename } }`;
  let sequence = 0;
  /** Makes one change the subscription reports, and says when it committed. */
  async function change(): Promise<number> {
    const operationID = `streamed-${suite.database.dialect}-${++sequence}`;
    const answer = await raw(`${origin}/graphql`, {
      method: 'POST',
      headers: json(),
      body: JSON.stringify({
        query: ENQUEUE,
        variables: {
          input: {
            operationID,
            ownerDID: service.did,
            connectorName: 'google',
            model: 'calendar.event',
            op: 'CREATE',
            accountKey: 'account-1',
            target: 'primary',
            deterministicEventID: `e-${operationID}`,
            payloadHash: `h-${operationID}`,
            reissueIntent: 'none',
          },
        },
      }),
    });
    const body = JSON.parse(answer.body.toString('utf8'));
    expect(body.data?.enqueueOperation?.__typename, JSON.stringify(body)).toBe('EnqueueOperationPayload');
    return performance.now();
  }

  it.each(['/graphql', '/graphql/stream'])('%s: an event stream is not compressed and delivers each event as it happens', async (path) => {
    const stream = await openStream(path);
    try {
      expect(stream.status).toBe(200);
      expect(stream.headers['content-type']).toMatch(/^text\/event-stream/);
      expect(['none', undefined]).toContain(stream.headers['content-encoding']);
      // Let the subscription start listening.
      await new Promise((resolve) => setTimeout(resolve, 200));
      for (let i = 0; i < 3; i++) {
        const committed = await change();
        const event = await stream.next();
        expect(event.data.data?.operationsChanged?.operationID ?? event.data.payload?.data?.operationsChanged?.operationID).toMatch(/^streamed-/);
        // Promptly: well under a second after the write answered (a compressor would hold it until its buffer filled).
        expect(event.at - committed).toBeLessThan(1_000);
      }
    } finally {
      stream.close();
    }
  });
});
