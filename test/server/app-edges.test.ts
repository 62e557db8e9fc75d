/**
 * The server's edges through `app.yoga.fetch`: health and readiness, body and
 * query limits, introspection, masked unexpected errors with request ids in
 * the response and the log, and no secrets in the logs.
 */
import { SignJWT } from 'jose';
import { sql } from 'kysely';
import { expect, it } from 'vitest';
import { generateLocalKey, mintToken, type LocalKey } from '../../src/auth/index.js';
import { openDatabase, type OpenDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger, type Logger } from '../../src/server/logger.js';
import { describeEachDialect, type DialectSuite } from '../helpers/databases.js';
import { captureLogs } from './log-capture.js';

const AUDIENCE = 'connector-store-edges';

describeEachDialect('server edges', (suite) => {
  const alice = generateLocalKey();
  const worker = generateLocalKey();

  const makeApp = (options: { env?: Record<string, string>; logger?: Logger; database?: OpenDatabase } = {}): ServerApp =>
    createServerApp({
      config: loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, SERVICE_DIDS: worker.did, RETENTION_INTERVAL_MS: '0', ...options.env }),
      database: options.database ?? suite.database.open,
      logger: options.logger ?? createLogger('silent'),
      storeDeps: { now: suite.clock.now },
    });

  const bearer = async (key: LocalKey = alice) =>
    `Bearer ${await mintToken({ privateKey: key.privateKey, audience: AUDIENCE, now: suite.clock.now() })}`;

  const post = async (app: ServerApp, query: string, variables: Record<string, unknown> = {}, headers: Record<string, string> = {}) =>
    app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: await bearer(), ...headers },
      body: JSON.stringify({ query, variables }),
    });

  it('answers 401 with a valid WWW-Authenticate header whatever the token’s iss (non-did:key, non-ASCII, quotes)', async () => {
    const app = makeApp();
    const now = Math.floor(suite.clock.now() / 1_000);
    for (const iss of ['did:web:example.com', 'did:key:zé“quoted”\\', 'not a did at all', '']) {
      const token = await new SignJWT({}).setProtectedHeader({ alg: 'EdDSA' }).setIssuer(iss).setAudience(AUDIENCE).setIssuedAt(now).setExpirationTime(now + 60).sign(alice.privateKey);
      const response = await post(app, '{ serverInfo { dialect } }', {}, { authorization: `Bearer ${token}` });
      expect(response.status, iss).toBe(401);
      const challenge = response.headers.get('www-authenticate') ?? '';
      expect(challenge, iss).toMatch(/^Bearer realm="connector-store", error="invalid_token", error_description="[\x20-\x21\x23-\x5B\x5D-\x7E]*"$/);
      expect(((await response.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code, iss).toBe('TOKEN_ISSUER');
    }
  });

  it('refuses POST bodies that are not JSON (application/graphql, forms, multipart) with 415, running nothing', async () => {
    const app = makeApp();
    const mutation = 'mutation { setSyncState(input: { connectorName: "google", lastSyncedAt: "now", entityCount: 0, status: "idle" }) { __typename } }';
    const form = new FormData();
    form.set('operations', JSON.stringify({ query: mutation }));
    const bodies: [string | undefined, BodyInit][] = [
      ['application/graphql', mutation],
      ['application/x-www-form-urlencoded', new URLSearchParams({ query: mutation }).toString()],
      ['text/plain', JSON.stringify({ query: mutation })],
      [undefined, form],
    ];
    for (const [type, body] of bodies) {
      const headers: Record<string, string> = { authorization: await bearer() };
      if (type !== undefined) headers['content-type'] = type;
      const response = await app.yoga.fetch('http://localhost/graphql', { method: 'POST', headers, body });
      expect(response.status, type ?? 'multipart').toBe(415);
    }
    expect(await suite.database.open.db.selectFrom('kubun_connector_sync_state').selectAll().execute()).toEqual([]);
    const json = await post(app, '{ serverInfo { dialect } }', {}, { 'content-type': 'application/json; charset=utf-8' });
    expect(json.status).toBe(200);
    // Media types are case-insensitive.
    for (const type of ['APPLICATION/JSON', 'Application/Json; Charset=UTF-8']) {
      const shouted = await post(app, '{ serverInfo { dialect } }', {}, { 'content-type': type });
      expect(shouted.status, type).toBe(200);
    }
  });

  it('/healthz answers 200 without touching auth', async () => {
    const response = await makeApp().yoga.fetch('http://localhost/healthz');
    expect(response.status).toBe(200);
  });

  it('/readyz answers 200, then 503 once markNotReady() was called', async () => {
    const app = makeApp();
    expect((await app.yoga.fetch('http://localhost/readyz')).status).toBe(200);
    app.markNotReady();
    expect((await app.yoga.fetch('http://localhost/readyz')).status).toBe(503);
    // Liveness is unaffected: the process is fine, it is only draining.
    expect((await app.yoga.fetch('http://localhost/healthz')).status).toBe(200);
  });

  it('/readyz is answered with a query string too, and only at its own path (the check skips other paths without a URLPattern)', async () => {
    const app = makeApp();
    app.markNotReady();
    expect((await app.yoga.fetch('http://localhost/readyz?probe=1')).status).toBe(503);
    // Any other path reaches the rest of the server: GraphQL still answers while draining, unknown paths are 404.
    const graphql = await app.yoga.fetch('http://localhost/graphql', { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: '{ __typename }' }) });
    expect(graphql.status).toBe(200);
    expect((await app.yoga.fetch('http://localhost/readyz-not')).status).toBe(404);
  });

  it('/readyz answers 503 when the database is gone', async () => {
    const throwaway = await throwawayDatabase(suite);
    const app = makeApp({ database: throwaway });
    expect((await app.yoga.fetch('http://localhost/readyz')).status).toBe(200);
    await throwaway.close();
    const down = await app.yoga.fetch('http://localhost/readyz');
    expect(down.status).toBe(503);
    // Anyone may ask /readyz: a fixed answer, never the driver's text.
    expect(await down.json()).toEqual({ ready: false, database: 'unavailable' });
  });

  it('refuses a body over MAX_BODY_BYTES with 413, with or without a content-length', async () => {
    const app = makeApp({ env: { MAX_BODY_BYTES: '2048' } });
    const big = JSON.stringify({ query: `{ serverInfo { dialect } }${' '.repeat(4096)}` });
    const declared = await app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(big)) },
      body: big,
    });
    expect(declared.status).toBe(413);
    expect((await declared.json()).errors[0].message).toMatch(/too large/i);

    // A length that is not a number is no way around the limit: it is refused as such.
    const bogus = await app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': 'abc' },
      body: big,
    });
    expect(bogus.status).toBe(400);
    expect(await bogus.json()).toEqual({ errors: [{ message: 'Content-Length header is invalid.', extensions: { code: 'BAD_REQUEST' } }] });

    // A chunked upload names no length: the limit must hold all the same.
    const streamed = await app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: streamOf(big),
      duplex: 'half',
    } as RequestInit);
    expect(streamed.status).toBe(413);
    expect((await streamed.json()).errors[0].message).toMatch(/too large/i);

    // Only Node's HTTP parser holds a body to its declared length: a Request built in process that
    // says less than it carries is counted like a chunked one.
    const understated = await app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'content-length': '100' },
      body: streamOf(big),
      duplex: 'half',
    } as RequestInit);
    expect(understated.status).toBe(413);

    const small = await post(app, '{ serverInfo { dialect } }');
    expect(small.status).toBe(200);
  });

  it('rejects a query deeper than MAX_QUERY_DEPTH, with an error and no data', async () => {
    const app = makeApp({ env: { MAX_QUERY_DEPTH: '4' } });
    const shallow = await post(app, '{ operations(first: 1) { edges { node { id } } } }');
    expect((await shallow.json()).errors).toBeUndefined();
    const deep = await (await post(app, '{ operations(first: 1) { edges { node { watch { id } } } } }')).json();
    expect(deep.data).toBeUndefined();
    expect(deep.errors[0].message).toMatch(/depth/i);
  });

  it('rejects too many aliases, with an error and no data', async () => {
    const app = makeApp({ env: { MAX_ALIASES: '2' } });
    const ok = await (await post(app, '{ a: serverInfo { dialect } b: serverInfo { dialect } }')).json();
    expect(ok.errors).toBeUndefined();
    const many = await (await post(app, '{ a: serverInfo { dialect } b: serverInfo { dialect } c: serverInfo { dialect } }')).json();
    expect(many.data).toBeUndefined();
    expect(many.errors[0].message).toMatch(/alias/i);
  });

  it('rejects a query with too many tokens, with an error and no data', async () => {
    const app = makeApp({ env: { MAX_TOKENS: '100' } });
    const fields = Array.from({ length: 120 }, () => 'dialect').join(' ');
    const res = await (await post(app, `{ serverInfo { ${fields} } }`)).json();
    expect(res.data).toBeUndefined();
    expect(res.errors[0].message).toMatch(/token/i);
  });

  it('rejects a query over MAX_QUERY_COST, with an error and no data', async () => {
    const app = makeApp({ env: { MAX_QUERY_COST: '100' } });
    const res = await (await post(app, '{ operations(first: 50) { edges { node { id watch { id documentID } } } } }')).json();
    expect(res.data).toBeUndefined();
    expect(res.errors[0]).toMatchObject({ message: expect.stringMatching(/complexity/i), extensions: { code: 'QUERY_COMPLEXITY' } });
  });

  it('replaces an answer larger than MAX_RESPONSE_BYTES with RESPONSE_TOO_LARGE, and lets smaller ones through', async () => {
    const app = makeApp({ env: { MAX_RESPONSE_BYTES: '1024' } });
    const roots = Array.from({ length: 25 }, (_, i) => `s${i}: serverInfo { dialect viewerDID viewerIsService }`).join(' ');
    const big = await post(app, `{ ${roots} }`);
    expect(big.status).toBe(400);
    const body = (await big.json()) as { data?: unknown; errors: { extensions: { code: string } }[] };
    expect(body.data).toBeUndefined();
    expect(body.errors[0]!.extensions.code).toBe('RESPONSE_TOO_LARGE');
    const small = await post(app, '{ serverInfo { dialect } }');
    expect(small.status).toBe(200);
  });

  it('serves GraphiQL from the installed package, with no script or style from a CDN', async () => {
    const response = await makeApp({ env: { GRAPHIQL: 'true' } }).yoga.fetch('http://localhost/graphql', { headers: { accept: 'text/html' } });
    expect(response.status).toBe(200);
    const html = await response.text();
    expect(html).toContain('<title>Connector store</title>');
    expect(html).not.toMatch(/<script[^>]+src=["']https?:/i);
    expect(html).not.toMatch(/<link[^>]+href=["']https?:/i);
    expect(html).not.toMatch(/unpkg\.com|jsdelivr|esm\.sh/);
  });

  it('answers introspection by default and refuses it with INTROSPECTION=false', async () => {
    const query = '{ __schema { queryType { name } } }';
    const open = await (await post(makeApp(), query)).json();
    expect(open.data.__schema.queryType.name).toBe('Query');
    const closed = await (await post(makeApp({ env: { INTROSPECTION: 'false' } }), query)).json();
    expect(closed.data).toBeUndefined();
    expect(closed.errors[0].message).toMatch(/introspection/i);
    const typeProbe = await (await post(makeApp({ env: { INTROSPECTION: 'false' } }), '{ __type(name: "ConnectorOperation") { name } }')).json();
    expect(typeProbe.data).toBeUndefined();
  });

  it('masks an unexpected error as "Unexpected error." and logs it under the request id it returns', async () => {
    const throwaway = await throwawayDatabase(suite);
    const logs = captureLogs('info');
    const app = makeApp({ database: throwaway, logger: logs.logger });
    await throwaway.close();

    const response = await post(app, '{ operations(first: 1) { totalCount } }');
    const requestID = response.headers.get('x-request-id');
    expect(requestID).toMatch(/^[0-9a-f-]{36}$/);
    const body = await response.json();
    expect(body.errors).toHaveLength(1);
    expect(body.errors[0]).toMatchObject({ message: 'Unexpected error.', extensions: { code: 'INTERNAL_SERVER_ERROR' } });
    // Nothing of the driver's text reaches the client.
    expect(JSON.stringify(body)).not.toMatch(/pool|sqlite|database|connection|destroy/i);

    const logged = logs.entries().filter((e) => e.requestID === requestID && e.level >= 50);
    expect(logged.length).toBeGreaterThan(0);
    expect(logged[0]).toMatchObject({ msg: 'unexpected resolver error', err: { message: expect.any(String) } });
  });

  it('keeps a well-formed x-request-id the client sent, and replaces a malformed one', async () => {
    const app = makeApp();
    const kept = await post(app, '{ serverInfo { dialect } }', {}, { 'x-request-id': 'trace-1234.abc' });
    expect(kept.headers.get('x-request-id')).toBe('trace-1234.abc');
    const replaced = await post(app, '{ serverInfo { dialect } }', {}, { 'x-request-id': 'bad id\twith "quotes"' });
    expect(replaced.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    // Also on refusals before execution (auth, limits).
    const unauthorized = await app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: 'Bearer nope' },
      body: JSON.stringify({ query: '{ serverInfo { dialect } }' }),
    });
    expect(unauthorized.status).toBe(401);
    expect(unauthorized.headers.get('x-request-id')).toBeTruthy();
  });

  it('never logs a lease token, a send marker or a bearer token, even at debug level', async () => {
    const logs = captureLogs('trace');
    const app = makeApp({ logger: logs.logger });
    const authorization = await bearer();
    const call = async (query: string, variables: Record<string, unknown>) => {
      const res = await post(app, query, variables, { authorization });
      return (await res.json()) as any;
    };

    const claimed = await call(
      `mutation ($input: ClaimOperationInput!) { claimOperation(input: $input) {
        __typename ... on ClaimOperationPayload { outcome operation { id version } lease { token version } } } }`,
      {
        input: {
          operationID: 'op-secret-check',
          connectorName: 'google',
          model: 'calendar.event',
          op: 'CREATE',
          accountKey: 'primary',
          target: 'calendar:primary',
          deterministicEventID: 'event-1',
          payloadHash: 'hash-1',
          reissueIntent: 'none',
          leaseMs: 60_000,
        },
      },
    );
    expect(claimed.data.claimOperation.outcome).toBe('CLAIMED');
    const { id } = claimed.data.claimOperation.operation;
    const { token, version } = claimed.data.claimOperation.lease;
    expect(token.length).toBeGreaterThan(10);
    const fence = { id, version, leaseToken: token };
    const sendMarker = 'marker-that-must-stay-secret-5c1f';

    const started = await call(
      'mutation ($input: StartOperationAttemptInput!) { startOperationAttempt(input: $input) { __typename } }',
      { input: fence },
    );
    expect(started.data.startOperationAttempt.__typename).toBe('OperationPayload');
    const sent = await call('mutation ($input: MarkOperationSentInput!) { markOperationSent(input: $input) { __typename } }', {
      input: { ...fence, sendMarker },
    });
    expect(sent.data.markOperationSent.__typename).toBe('OperationPayload');
    // A stale fence: the failure path must not echo the token either.
    const stale = await call('mutation ($input: RenewOperationLeaseInput!) { renewOperationLease(input: $input) { __typename ... on Error { message } } }', {
      input: { ...fence, leaseToken: `${token}-wrong`, leaseMs: 1_000 },
    });
    expect(stale.data.renewOperationLease.__typename).toBe('StaleLeaseError');
    const finalized = await call(
      'mutation ($input: FinalizeOperationInput!) { finalizeOperation(input: $input) { ... on FinalizeOperationPayload { finalized } } }',
      { input: { ...fence, documentID: 'doc-1', sourceID: 'src-1', resultEntity: { ok: true }, currentWinnerDigest: 'd1' } },
    );
    expect(finalized.data.finalizeOperation.finalized).toBe(true);

    expect(logs.entries().length).toBeGreaterThan(0);
    expect(logs.text).not.toContain(token);
    expect(logs.text).not.toContain(sendMarker);
    expect(logs.text).not.toContain(authorization.slice('Bearer '.length));
  });
});

/** A migrated database of the suite's dialect that a test may close under the app. */
async function throwawayDatabase(suite: DialectSuite): Promise<OpenDatabase> {
  if (suite.dialect === 'postgres') {
    const again = suite.database.connectAgain();
    // Kysely's destroy() of a database that never ran a statement is a no-op: use it once first.
    await sql`select 1`.execute(again.db);
    return again;
  }
  const open = openDatabase({ dialect: 'sqlite', path: ':memory:', display: 'sqlite::memory:' });
  await migrateToLatest(open.db, 'sqlite');
  return open;
}

/** A request body that arrives in chunks with no declared length. */
function streamOf(text: string): ReadableStream<Uint8Array> {
  const bytes = new TextEncoder().encode(text);
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= bytes.length) {
        controller.close();
        return;
      }
      controller.enqueue(bytes.subarray(offset, offset + 512));
      offset += 512;
    },
  });
}
