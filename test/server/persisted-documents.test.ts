/**
 * Persisted documents (issue 12 item 5): the manifest GraphQL Code Generator
 * writes from client/operations (ids `sha256:<hex>` of each document), served
 * by id over HTTP (`documentId`, or Apollo's `extensions.persistedQuery`) and
 * over WebSocket; `allow` also runs other documents, `only` refuses them;
 * unknown ids and stale manifests are refused with clear errors.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'graphql-ws';
import { expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { OperationsDocument, SweepProgressDocument } from '../../client/generated/graphql.js';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { createServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { DEFAULT_MANIFEST, PersistedManifestError } from '../../src/server/persisted-documents.js';
import { attachGraphQLWebSocket } from '../../src/server/websocket.js';
import { describeEachDialect } from '../helpers/databases.js';

const AUDIENCE = 'connector-store-persisted';
const worker = generateLocalKey();
const manifest = JSON.parse(readFileSync(DEFAULT_MANIFEST, 'utf8')) as Record<string, string>;
const OPERATIONS_ID = (OperationsDocument as unknown as { __meta__: { hash: string } }).__meta__.hash;

it('the generated manifest holds every client document under the sha256 of its text, as the typed documents name them', () => {
  expect(Object.keys(manifest).length).toBeGreaterThan(30);
  for (const [id, document] of Object.entries(manifest)) expect(id).toBe(`sha256:${createHash('sha256').update(document).digest('hex')}`);
  expect(manifest[OPERATIONS_ID]).toMatch(/query Operations\(/);
});

describeEachDialect('persisted documents', (suite) => {
  function app(env: Record<string, string>) {
    return createServerApp({
      config: loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, SERVICE_DIDS: worker.did, RETENTION_INTERVAL_MS: '0', RATE_LIMIT_PER_VIEWER: '0', ...env }),
      database: suite.database.open,
      logger: createLogger('silent'),
      storeDeps: { now: suite.clock.now },
    });
  }
  async function post(target: ReturnType<typeof app>, body: unknown) {
    const token = await mintToken({ privateKey: worker.privateKey, audience: AUDIENCE, now: suite.clock.now() });
    const response = await target.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify(body),
    });
    return { status: response.status, body: (await response.json()) as { data?: any; errors?: { message: string; extensions?: { code?: string } }[] } };
  }

  it('off (the default): a documentId is an unexpected parameter', async () => {
    const answer = await post(app({}), { documentId: OPERATIONS_ID, variables: { first: 5 } });
    expect(answer.status).toBe(400);
    expect(answer.body.errors?.[0]?.message).toMatch(/documentId/);
  });

  it('allow: runs a persisted document by documentId or by Apollo hash, and other documents too', async () => {
    const target = app({ PERSISTED_DOCUMENTS: 'allow' });
    const byID = await post(target, { documentId: OPERATIONS_ID, variables: { first: 5 } });
    expect(byID.status).toBe(200);
    expect(byID.body.data.operations.edges).toEqual([]);
    const byHash = await post(target, { variables: { first: 5 }, extensions: { persistedQuery: { version: 1, sha256Hash: OPERATIONS_ID.slice('sha256:'.length) } } });
    expect(byHash.body.data.operations.edges).toEqual([]);
    const arbitrary = await post(target, { query: '{ operationCounts { count } }' });
    expect(arbitrary.status).toBe(200);
    expect(arbitrary.body.data.operationCounts).toHaveLength(4);
  });

  it('only: refuses documents that are not persisted and unknown ids, with the reason', async () => {
    const target = app({ PERSISTED_DOCUMENTS: 'only' });
    expect((await post(target, { documentId: OPERATIONS_ID, variables: { first: 1 } })).body.data.operations.edges).toEqual([]);
    const arbitrary = await post(target, { query: '{ operationCounts { count } }' });
    expect(arbitrary.status).toBe(400);
    expect(arbitrary.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_ONLY');
    expect(arbitrary.body.data).toBeUndefined();
    const unknown = await post(target, { documentId: `sha256:${'0'.repeat(64)}` });
    expect(unknown.status).toBe(404);
    expect(unknown.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_NOT_FOUND');
    const neither = await post(target, { variables: {} });
    expect(neither.status).toBe(400);
    expect(neither.body.errors?.[0]?.extensions?.code).toBe('PERSISTED_QUERY_ID_REQUIRED');
  });

  it('only, over WebSocket: a persisted subscription by id is served, any other document refused', async () => {
    const target = app({ PERSISTED_DOCUMENTS: 'only' });
    const server = createServer(target.yoga);
    const websocket = attachGraphQLWebSocket(server, target, { logger: createLogger('silent'), maxPayloadBytes: 1_000_000 });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const token = await mintToken({ privateKey: worker.privateKey, audience: AUDIENCE, now: suite.clock.now() });
    const client = createClient({
      url: `ws://127.0.0.1:${(server.address() as AddressInfo).port}/graphql`,
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams: { authorization: `Bearer ${token}` },
    });
    const first = (payload: Parameters<typeof client.subscribe>[0]) =>
      new Promise<{ kind: 'next' | 'error' | 'complete'; value?: unknown }>((resolve) => {
        const stop = client.subscribe(payload, {
          next: (value) => {
            resolve({ kind: 'next', value });
            stop();
          },
          error: (value) => resolve({ kind: 'error', value }),
          complete: () => resolve({ kind: 'complete' }),
        });
        // A persisted subscription that was accepted just waits for events: accepted means no error in 500 ms.
        setTimeout(() => {
          resolve({ kind: 'complete', value: 'open' });
          stop();
        }, 500);
      });
    try {
      const sweepID = (SweepProgressDocument as unknown as { __meta__: { hash: string } }).__meta__.hash;
      expect(await first({ query: '', extensions: { persistedQuery: { version: 1, sha256Hash: sweepID.slice(7) } } })).toEqual({ kind: 'complete', value: 'open' });
      const refused = await first({ query: 'subscription { operationsChanged { id } }' });
      expect(refused.kind).toBe('error');
      expect(JSON.stringify(refused.value)).toContain('PERSISTED_QUERY_ONLY');
    } finally {
      await client.dispose();
      await websocket.close();
      server.close();
    }
  });

  it('a manifest whose document does not hash to its id stops the start', () => {
    const dir = mkdtempSync(join(tmpdir(), 'cs-persisted-'));
    const file = join(dir, 'manifest.json');
    writeFileSync(file, JSON.stringify({ [OPERATIONS_ID]: '{ __typename }' }));
    expect(() => app({ PERSISTED_DOCUMENTS: 'only', PERSISTED_DOCUMENTS_FILE: file })).toThrow(PersistedManifestError);
    expect(() => app({ PERSISTED_DOCUMENTS: 'only', PERSISTED_DOCUMENTS_FILE: join(dir, 'missing.json') })).toThrow(/cannot read/);
    expect(() => loadConfig({ PERSISTED_DOCUMENTS: 'sometimes' })).toThrow(/PERSISTED_DOCUMENTS/);
  });
});
