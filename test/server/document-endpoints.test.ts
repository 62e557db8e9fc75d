/**
 * One refusal table, run against every endpoint that executes documents
 * (issue 19 item 1): whatever `/graphql` enforces — persisted documents,
 * depth, alias, token and cost limits, the body limit, rate limits,
 * credentials, CORS, masking, the request log and metrics — holds on `GET`
 * and `POST /graphql`, yoga's SSE, graphql-sse's two modes on
 * `/graphql/stream` and graphql-ws. The endpoints are those
 * `DOCUMENT_ENDPOINTS` names; the first test fails when one is added there
 * without a client here, so no future endpoint can skip a rule.
 *
 * Each server is the real app on a loopback HTTP server with the WebSocket
 * endpoint attached, as main.ts mounts them, over the suite's database.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync } from 'node:fs';
import { afterAll, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { generateLocalKey, mintToken, type LocalKey } from '../../src/auth/index.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { DOCUMENT_ENDPOINTS } from '../../src/server/operation-admission.js';
import { DEFAULT_MANIFEST } from '../../src/server/persisted-documents.js';
import { attachGraphQLWebSocket, type GraphQLWebSocket } from '../../src/server/websocket.js';
import { describeEachDialect } from '../helpers/databases.js';
import { captureLogs, type CapturedLogs } from './log-capture.js';
import { parseServerSentEvent } from '../helpers/sse.js';

type EndpointName = (typeof DOCUMENT_ENDPOINTS)[number];
const AUDIENCE = 'connector-store-document-endpoints';
const FOREIGN = 'https://elsewhere.example';
const LISTED = 'https://dashboard.example';

/** What one request asks for. */
interface Ask {
  query?: string;
  documentId?: string;
  operationName?: string;
  variables?: Record<string, unknown>;
}

/** What came back, in one shape for every transport. */
interface Outcome {
  /** HTTP status (WebSocket: 101 once upgraded, else the refused upgrade's status). */
  status: number;
  /** The first error's `extensions.code`, or `CLOSE_<code>` when a WebSocket was closed. */
  code: string | undefined;
  message: string | undefined;
  /** Whether any data came back (a refusal has none). */
  data: unknown;
  /** `access-control-allow-origin` of the answer (HTTP). */
  allowOrigin: string | null;
}

interface Target {
  app: ServerApp;
  origin: string;
  logs: CapturedLogs;
}

interface Options {
  token: string | null;
  origin?: string;
  /** Subscription endpoints: run after the subscription is accepted (e.g. publish a change). */
  afterSubscribe?: () => Promise<void>;
}

const persistedManifest = JSON.parse(readFileSync(DEFAULT_MANIFEST, 'utf8')) as Record<string, string>;
const persistedIdOf = (pattern: RegExp) => Object.entries(persistedManifest).find(([, document]) => pattern.test(document))![0];
const PERSISTED_QUERY = persistedIdOf(/(^|\n| )query Operations\(/);
const PERSISTED_SUBSCRIPTION = persistedIdOf(/(^|\n| )subscription /);

describeEachDialect('every endpoint that executes documents obeys the rules of /graphql', (suite) => {
  const targets = new Map<string, Promise<Target>>();
  const closers: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const close of closers) await close();
  });

  /** The app under `env` (one per distinct env), listening on a free loopback port. */
  function target(env: Record<string, string> = {}): Promise<Target> {
    const key = JSON.stringify(env);
    let started = targets.get(key);
    if (started === undefined) {
      started = (async () => {
        const logs = captureLogs('info');
        const config = loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, RETENTION_INTERVAL_MS: '0', ...env });
        const app = createServerApp({ config, database: suite.database.open, logger: logs.logger, storeDeps: { now: suite.clock.now } });
        const server: Server = createServer(app.yoga);
        await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
        const ws: GraphQLWebSocket = attachGraphQLWebSocket(server, app, { logger: logs.logger, maxPayloadBytes: config.limits.maxBodyBytes, corsOrigins: config.corsOrigins });
        closers.push(async () => {
          app.closeSubscriptions();
          await ws.close();
          server.closeAllConnections();
          await new Promise<void>((resolve) => server.close(() => resolve()));
          await app.changes.close();
        });
        return { app, origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, logs };
      })();
      targets.set(key, started);
    }
    return started;
  }

  const keys = new Map<string, LocalKey>();
  /** A token of the principal `name` (made on first use), valid an hour on the suite's clock. */
  async function tokenOf(name: string): Promise<string> {
    let key = keys.get(name);
    if (key === undefined) keys.set(name, (key = generateLocalKey()));
    return mintToken({ privateKey: key.privateKey, audience: AUDIENCE, now: suite.clock.now() });
  }

  const endpoints: Record<EndpointName, (t: Target, ask: Ask, options: Options) => Promise<Outcome>> = {
    'POST /graphql': (t, ask, o) => httpJSON(t, '/graphql', 'POST', ask, o),
    'GET /graphql': (t, ask, o) => httpJSON(t, '/graphql', 'GET', ask, o),
    'SSE /graphql': (t, ask, o) => httpEventStream(t, '/graphql', ask, o),
    'graphql-sse /graphql/stream (distinct)': (t, ask, o) => httpEventStream(t, '/graphql/stream', ask, o),
    'graphql-sse /graphql/stream (single connection)': singleConnection,
    'graphql-ws /graphql': webSocket,
  };
  const names = Object.keys(endpoints) as EndpointName[];
  const subscriptionsOnly = (endpoint: EndpointName) => endpoint === 'graphql-ws /graphql';
  const carriesBody = (endpoint: EndpointName) => endpoint !== 'GET /graphql';

  it('has a client for every endpoint the server says executes documents', () => {
    expect([...names].sort()).toEqual([...DOCUMENT_ENDPOINTS].sort());
  });

  const WRITE = 'mutation Write($input: SetSyncStateInput!) { setSyncState(input: $input) { __typename } }';
  const writeVariables = { input: { connectorName: 'refusal-table', entityCount: 1, lastSyncedAt: 'now', status: 'written' } };
  const SUBSCRIBE = 'subscription Watch { operationsChanged { id } }';
  /** The document an endpoint runs for a row: WebSocket serves subscriptions only. */
  const pick = (endpoint: EndpointName, http: Ask, ws: Ask): Ask => (subscriptionsOnly(endpoint) ? ws : http);
  const readOnly = (endpoint: EndpointName) => endpoint === 'GET /graphql';

  async function syncStatesWritten(): Promise<number> {
    const rows = await suite.database.open.db.selectFrom('kubun_connector_sync_state').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    return Number(rows.n);
  }

  for (const endpoint of names) {
    it(`${endpoint}: PERSISTED_DOCUMENTS=only refuses a plain document, and nothing is written`, async () => {
      const t = await target({ PERSISTED_DOCUMENTS: 'only' });
      const ask = pick(endpoint, { query: WRITE, variables: writeVariables }, { query: SUBSCRIBE });
      const outcome = await endpoints[endpoint](t, readOnly(endpoint) ? { query: '{ serverInfo { version } }' } : ask, { token: await tokenOf('worker') });
      expect(outcome).toMatchObject({ code: 'PERSISTED_QUERY_ONLY', data: undefined });
      expect(await syncStatesWritten()).toBe(0);
    });

    it(`${endpoint}: PERSISTED_DOCUMENTS=only refuses an unknown id and runs a known one`, async () => {
      const t = await target({ PERSISTED_DOCUMENTS: 'only' });
      const token = await tokenOf('worker');
      const unknown = await endpoints[endpoint](t, { documentId: `sha256:${'0'.repeat(64)}` }, { token });
      expect(unknown).toMatchObject({ code: 'PERSISTED_QUERY_NOT_FOUND', data: undefined });
      const known = await endpoints[endpoint](t, subscriptionsOnly(endpoint) ? { documentId: PERSISTED_SUBSCRIPTION } : { documentId: PERSISTED_QUERY, variables: { first: 1 } }, { token });
      expect(known.code).toBeUndefined();
      if (!subscriptionsOnly(endpoint)) expect(known.data).toMatchObject({ operations: { edges: [] } });
    });

    it(`${endpoint}: a document deeper than MAX_QUERY_DEPTH is refused`, async () => {
      const t = await target({ MAX_QUERY_DEPTH: '3' });
      const ask = pick(endpoint, { query: '{ operations(first: 1) { edges { node { id } } } }' }, { query: 'subscription { operationsChanged { attemptHistory(first: 1) { edges { node { __typename } } } } }' });
      const outcome = await endpoints[endpoint](t, ask, { token: await tokenOf('worker') });
      expect(outcome.code).toBe('GRAPHQL_VALIDATION_FAILED');
      expect(outcome.message).toMatch(/depth/i);
      expect(outcome.data).toBeUndefined();
    });

    it(`${endpoint}: more aliases than MAX_ALIASES are refused`, async () => {
      const t = await target({ MAX_ALIASES: '3' });
      const ask = pick(endpoint, { query: '{ a: serverInfo { version } b: serverInfo { version } c: serverInfo { version } d: serverInfo { version } }' }, { query: 'subscription { operationsChanged { a: id b: id c: id d: id } }' });
      const outcome = await endpoints[endpoint](t, ask, { token: await tokenOf('worker') });
      expect(outcome.code).toBe('GRAPHQL_VALIDATION_FAILED');
      expect(outcome.message).toMatch(/aliases/i);
    });

    it(`${endpoint}: a document of more than MAX_TOKENS tokens is refused`, async () => {
      const t = await target({ MAX_TOKENS: '200' });
      const many = 'id '.repeat(250);
      const ask = pick(endpoint, { query: `{ serverInfo { ${'version '.repeat(250)} } }` }, { query: `subscription { operationsChanged { ${many} } }` });
      const outcome = await endpoints[endpoint](t, ask, { token: await tokenOf('worker') });
      expect(outcome.code).toBe('GRAPHQL_PARSE_FAILED');
      expect(outcome.message).toMatch(/token limit/i);
    });

    it(`${endpoint}: a document over MAX_QUERY_COST is refused before it runs`, async () => {
      const t = await target({ MAX_QUERY_COST: '100' });
      const ask = pick(
        endpoint,
        { query: 'query Costly($ids: [ID!]!) { nodes(ids: $ids) { id } }', variables: { ids: Array.from({ length: 150 }, (_, i) => `id-${i}`) } },
        { query: 'subscription { operationsChanged { attemptHistory(first: 100) { edges { node { __typename } } } } }' },
      );
      const outcome = await endpoints[endpoint](t, ask, { token: await tokenOf('worker') });
      expect(outcome).toMatchObject({ code: 'QUERY_COMPLEXITY', data: undefined });
    });

    it.skipIf(!carriesBody(endpoint))(`${endpoint}: a body over MAX_BODY_BYTES is refused, and nothing is written`, async () => {
      const t = await target({ MAX_BODY_BYTES: '2048' });
      const pad = 'x'.repeat(4_000);
      const ask = pick(endpoint, { query: WRITE, variables: { ...writeVariables, pad } }, { query: SUBSCRIBE, variables: { pad } });
      const outcome = await endpoints[endpoint](t, ask, { token: await tokenOf('worker') });
      // WebSocket: the message is the body; ws closes a socket whose message is too big (1009).
      expect(outcome.code).toBe(subscriptionsOnly(endpoint) ? 'CLOSE_1009' : 'REQUEST_ENTITY_TOO_LARGE');
      expect(await syncStatesWritten()).toBe(0);
    });

    it(`${endpoint}: past RATE_LIMIT_PER_VIEWER the viewer is refused RATE_LIMITED`, async () => {
      const t = await target({ RATE_LIMIT_PER_VIEWER: '3' });
      const token = await tokenOf(`limited ${endpoint}`);
      const ask = pick(endpoint, { query: '{ serverInfo { version } }' }, { query: SUBSCRIBE });
      const outcomes: Outcome[] = [];
      for (let i = 0; i < 5; i++) outcomes.push(await endpoints[endpoint](t, ask, { token }));
      expect(outcomes[0]!.code).toBeUndefined();
      // graphql-ws: the connection's own context is refused first, with graphql-ws's close code for it and the reason.
      if (subscriptionsOnly(endpoint)) expect(outcomes.at(-1)).toMatchObject({ code: 'CLOSE_4429', message: expect.stringMatching(/^RATE_LIMITED: /) });
      else expect(outcomes.at(-1)!.code).toBe('RATE_LIMITED');
    });

    it(`${endpoint}: a bad bearer token is refused with the same code as /graphql`, async () => {
      const t = await target();
      const ask = pick(endpoint, { query: '{ serverInfo { version } }' }, { query: SUBSCRIBE });
      const outcome = await endpoints[endpoint](t, ask, { token: 'not-a-token' });
      expect(outcome.code).toBe(subscriptionsOnly(endpoint) ? 'CLOSE_4401' : 'TOKEN_MALFORMED');
      if (!subscriptionsOnly(endpoint)) expect(outcome.status).toBe(401);
      expect(outcome.data).toBeUndefined();
    });

    it(`${endpoint}: no credentials, only the open fields answer; a stream needs a viewer to open (docs/api.md, "No token, bad token")`, async () => {
      const t = await target();
      const outcome = await endpoints[endpoint](t, pick(endpoint, { query: '{ serverInfo { version } }' }, { query: SUBSCRIBE }), { token: null });
      if (subscriptionsOnly(endpoint)) expect(outcome.code).toBe('CLOSE_4401');
      else if (endpoint.startsWith('graphql-sse')) expect(outcome).toMatchObject({ status: 401, code: 'UNAUTHENTICATED', data: undefined });
      else expect(outcome).toMatchObject({ status: 200, code: undefined, data: { serverInfo: { version: expect.any(String) } } });
    });

    it(`${endpoint}: no credentials cannot write (or subscribe)`, async () => {
      const t = await target();
      const ask = pick(endpoint, readOnly(endpoint) ? { query: SUBSCRIBE } : { query: WRITE, variables: writeVariables }, { query: SUBSCRIBE });
      const outcome = await endpoints[endpoint](t, ask, { token: null });
      expect(outcome.code).toBe(subscriptionsOnly(endpoint) ? 'CLOSE_4401' : 'UNAUTHENTICATED');
      // Refused whole, before anything runs (never 200 with an error per field).
      if (!subscriptionsOnly(endpoint)) expect(outcome).toMatchObject({ status: 401, data: undefined });
      expect(await syncStatesWritten()).toBe(0);
    });

    it(`${endpoint}: a page of another origin gets no CORS access (WebSocket: no upgrade), a listed one does`, async () => {
      const t = await target({ CORS_ORIGINS: LISTED });
      const ask = pick(endpoint, { query: '{ serverInfo { version } }' }, { query: SUBSCRIBE });
      const token = await tokenOf('worker');
      const foreign = await endpoints[endpoint](t, ask, { token, origin: FOREIGN });
      const listed = await endpoints[endpoint](t, ask, { token, origin: LISTED });
      if (subscriptionsOnly(endpoint)) {
        expect(foreign.status).toBe(403);
        expect(listed).toMatchObject({ status: 101, code: undefined });
      } else {
        expect(foreign.allowOrigin).toBeNull();
        expect(listed.allowOrigin).toBe(LISTED);
      }
    });

    it(`${endpoint}: an unexpected failure is masked, without driver text`, async () => {
      const t = await target();
      const token = await tokenOf('worker');
      const table = 'kubun_connector_operation';
      await suite.database.open.db.schema.alterTable(table).renameTo('kubun_connector_operation_away').execute();
      try {
        const ask = pick(endpoint, { query: '{ operations(first: 1) { edges { node { id } } } }' }, { query: SUBSCRIBE });
        const outcome = await endpoints[endpoint](t, ask, {
          token,
          afterSubscribe: () => t.app.changes.publish([{ kind: 'operation', nodeKey: 'no-such-node' }]),
        });
        expect(outcome).toMatchObject({ code: 'INTERNAL_SERVER_ERROR', message: 'Unexpected error.' });
      } finally {
        await suite.database.open.db.schema.alterTable('kubun_connector_operation_away').renameTo(table).execute();
      }
    });

    it(`${endpoint}: an admitted operation is logged with its name and counted in /metrics`, async () => {
      const t = await target();
      const name = `Probe${names.indexOf(endpoint)}`;
      const ask = pick(endpoint, { query: `query ${name} { serverInfo { version } }`, operationName: name }, { query: `subscription ${name} { operationsChanged { id } }`, operationName: name });
      const outcome = await endpoints[endpoint](t, ask, { token: await tokenOf('worker') });
      expect(outcome.code).toBeUndefined();
      await expect.poll(() => t.logs.entries().some((line) => line.operationName === name && typeof line.requestID === 'string')).toBe(true);
      // A subscription is counted when it ends (here: when the client went away).
      await expect.poll(async () => (await (await fetch(`${t.origin}/metrics`)).text()).match(new RegExp(`graphql_envelop_request\\{operationName="${name}"`)) !== null).toBe(true);
    });
  }

  for (const path of ['/graphql', '/graphql/stream']) {
    it(`POST ${path}: media types are case-insensitive (Content-Type: APPLICATION/JSON runs)`, async () => {
      const t = await target();
      const response = await fetch(`${t.origin}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'APPLICATION/JSON; CHARSET=UTF-8', accept: path === '/graphql' ? 'application/json' : 'text/event-stream', authorization: `Bearer ${await tokenOf('worker')}` },
        body: JSON.stringify({ query: '{ serverInfo { version } }' }),
      });
      expect(response.status).toBe(200);
      expect(await response.text()).toMatch(/"version":/);
    });
  }

  /** A plain GraphQL-over-HTTP request (JSON answer). */
  async function httpJSON(t: Target, path: string, method: 'GET' | 'POST', ask: Ask, o: Options): Promise<Outcome> {
    const headers: Record<string, string> = { accept: 'application/graphql-response+json, application/json', ...authHeaders(o) };
    let url = `${t.origin}${path}`;
    let body: string | undefined;
    if (method === 'GET') {
      const search = new URLSearchParams();
      for (const [name, value] of Object.entries(ask)) search.set(name, typeof value === 'string' ? value : JSON.stringify(value));
      url += `?${search}`;
    } else {
      headers['content-type'] = 'application/json';
      body = JSON.stringify(ask);
    }
    const response = await fetch(url, { method, headers, ...(body !== undefined && { body }) });
    return outcomeOf(response.status, response.headers, await response.json().catch(() => ({})));
  }

  /** An `Accept: text/event-stream` POST (yoga's SSE on /graphql, graphql-sse's distinct mode on /graphql/stream): the first result, or the refusal. */
  async function httpEventStream(t: Target, path: string, ask: Ask, o: Options): Promise<Outcome> {
    const abort = new AbortController();
    try {
      const response = await fetch(`${t.origin}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...authHeaders(o) },
        body: JSON.stringify(ask),
        signal: abort.signal,
      });
      if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream')) return outcomeOf(response.status, response.headers, await response.json().catch(() => ({})));
      const events = eventsOf(response);
      const first = await nextEvent(events, o);
      return outcomeOf(response.status, response.headers, first ?? {});
    } finally {
      abort.abort();
    }
  }

  /** graphql-sse's single-connection mode: reserve (PUT), open (GET), operate (POST); the operation's first result or its refusal. */
  async function singleConnection(t: Target, ask: Ask, o: Options): Promise<Outcome> {
    const url = `${t.origin}/graphql/stream`;
    const reserved = await fetch(url, { method: 'PUT', headers: authHeaders(o) });
    if (reserved.status !== 201) return outcomeOf(reserved.status, reserved.headers, await reserved.json().catch(() => ({})));
    const token = await reserved.text();
    const abort = new AbortController();
    try {
      const stream = await fetch(url, { headers: { accept: 'text/event-stream', 'x-graphql-event-stream-token': token, ...authHeaders(o) }, signal: abort.signal });
      const events = eventsOf(stream);
      const operate = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-graphql-event-stream-token': token, ...authHeaders(o) },
        body: JSON.stringify({ ...ask, extensions: { operationId: 'op' } }),
      });
      if (operate.status !== 202) return outcomeOf(operate.status, operate.headers, await operate.json().catch(() => ({})));
      const first = (await nextEvent(events, o)) as { payload?: unknown } | undefined;
      return outcomeOf(operate.status, operate.headers, first?.payload ?? {});
    } finally {
      abort.abort();
    }
  }

  /** graphql-ws: connection_init with the token, then one subscribe; its first message, or how the socket ended. */
  function webSocket(t: Target, ask: Ask, o: Options): Promise<Outcome> {
    return new Promise((resolve) => {
      const socket = new WebSocket(`${t.origin.replace('http', 'ws')}/graphql`, 'graphql-transport-ws', { ...(o.origin !== undefined && { origin: o.origin }) });
      let settled = false;
      let quiet: ReturnType<typeof setTimeout> | undefined;
      const settle = (outcome: Partial<Outcome>) => {
        if (settled) return;
        settled = true;
        clearTimeout(quiet);
        socket.close();
        resolve({ status: 101, code: undefined, message: undefined, data: undefined, allowOrigin: null, ...outcome });
      };
      socket.on('unexpected-response', (_request, response) => settle({ status: response.statusCode ?? 0, code: `UPGRADE_${response.statusCode}` }));
      socket.on('error', () => settle({ code: 'SOCKET_ERROR' }));
      socket.on('close', (code, reason) => settle({ code: `CLOSE_${code}`, message: reason.toString() }));
      socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: o.token === null ? {} : { authorization: `Bearer ${o.token}` } })));
      socket.on('message', (raw) => {
        const message = JSON.parse(raw.toString()) as { type: string; payload?: any };
        if (message.type === 'connection_ack') {
          const { documentId, ...rest } = ask;
          socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: '', ...rest, ...(documentId !== undefined && { extensions: { persistedQuery: { version: 1, sha256Hash: documentId.slice('sha256:'.length) } } }) } }));
          // Accepted and quiet: a subscription has nothing to say until a change.
          quiet = setTimeout(() => settle({}), 600);
          setTimeout(() => void o.afterSubscribe?.(), 100);
        } else if (message.type === 'error') {
          const error = (message.payload as { message: string; extensions?: { code?: string } }[])[0];
          settle({ code: error?.extensions?.code, message: error?.message });
        } else if (message.type === 'next') {
          const error = message.payload.errors?.[0];
          settle({ code: error?.extensions?.code, message: error?.message, data: error === undefined ? message.payload.data : undefined });
        }
      });
    });
  }

  function authHeaders(o: Options): Record<string, string> {
    return { ...(o.token !== null && { authorization: `Bearer ${o.token}` }), ...(o.origin !== undefined && { origin: o.origin }) };
  }

  /** The `next` events of an event stream, as parsed JSON. */
  async function* eventsOf(response: Response): AsyncGenerator<unknown> {
    const reader = response.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        buffer += decoder.decode(value, { stream: true });
        let at: number;
        while ((at = buffer.indexOf('\n\n')) >= 0) {
          const { event, data } = parseServerSentEvent(buffer.slice(0, at));
          buffer = buffer.slice(at + 2);
          if ((event === 'next' || event === undefined) && data !== '') yield JSON.parse(data);
        }
      }
    } catch {
      // aborted
    }
  }

  /** The first event, or undefined when none came within a moment (an accepted subscription waiting for a change). */
  async function nextEvent(events: AsyncGenerator<unknown>, o: Options): Promise<unknown> {
    const first = events.next();
    // Subscriptions are accepted once the stream opened; give it a moment, then trigger.
    setTimeout(() => void o.afterSubscribe?.(), 100);
    const quiet = new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), 600));
    const result = await Promise.race([first, quiet]);
    return result === undefined ? undefined : (result as IteratorResult<unknown>).value;
  }
});

function outcomeOf(status: number, headers: Headers, body: unknown): Outcome {
  const { data, errors } = (body ?? {}) as { data?: unknown; errors?: { message: string; extensions?: { code?: string } }[] };
  return {
    status,
    code: errors?.[0]?.extensions?.code,
    message: errors?.[0]?.message,
    data: data === null ? undefined : data,
    allowOrigin: headers.get('access-control-allow-origin'),
  };
}

