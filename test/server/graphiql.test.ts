/**
 * The GraphiQL page through `app.yoga.fetch` (issue 12 item 4): its example
 * query runs as is, in development a page asked for over loopback carries a
 * fresh token of the local key (which works, and is never logged), and no
 * token is put in the page in production, in tests, for a request from
 * another machine or when none can be minted. The page is the same on every
 * dialect, so SQLite alone serves here.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { verifyBearerToken } from '../../src/auth/index.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { loadDevelopmentCredentials, type DevelopmentCredentials } from '../../src/server/dev-credentials.js';
import { EXAMPLE_QUERY_BODY } from '../../src/server/graphiql.js';
import { createLogger, type Logger } from '../../src/server/logger.js';
import { createTestDatabase, type TestDatabase } from '../helpers/databases.js';
import { captureLogs } from './log-capture.js';

const AUDIENCE = 'connector-store-graphiql';
/** What node's HTTP server puts in yoga's server context, for a client at `address`. */
const peer = (address: string) => ({ req: { socket: { remoteAddress: address } } });

/** The options object the page hands to GraphiQL (the one JSON argument of `renderYogaGraphiQL`). */
function pageOptions(html: string): Record<string, unknown> {
  const match = /renderYogaGraphiQL\(\s*(?:window\.)?document\.querySelector\('#root'\),\s*(\{.*\}),?\s*\);/s.exec(html);
  if (match === null) throw new Error('no renderYogaGraphiQL call in the page');
  return JSON.parse(match[1]!) as Record<string, unknown>;
}

describe('GraphiQL page', () => {
  let database: TestDatabase;
  let cwd: string;
  let credentials: DevelopmentCredentials;
  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    cwd = await mkdtemp(join(tmpdir(), 'graphiql-test-'));
    credentials = await loadDevelopmentCredentials(loadConfig({ AUTH_AUDIENCE: AUDIENCE }), cwd);
  });
  afterAll(async () => {
    await database?.destroy();
    await rm(cwd, { recursive: true, force: true });
  });

  const makeApp = (env: Record<string, string>, options: { logger?: Logger; credentials?: Pick<DevelopmentCredentials, 'mintToken'> } = {}): ServerApp =>
    createServerApp({
      config: loadConfig({ AUTH_AUDIENCE: AUDIENCE, RETENTION_INTERVAL_MS: '0', ...env }),
      database: database.open,
      logger: options.logger ?? createLogger('silent'),
      developmentCredentials: options.credentials ?? credentials,
    });

  const openPage = async (app: ServerApp, serverContext?: Record<string, unknown>) => {
    const init = { headers: { accept: 'text/html' } };
    const response = await (serverContext === undefined ? app.yoga.fetch('http://127.0.0.1/graphql', init) : app.yoga.fetch('http://127.0.0.1/graphql', init, serverContext));
    expect(response.status).toBe(200);
    return { response, html: await response.text() };
  };

  it('is a small page linking content-hashed, gzipped, immutable assets (issue 22 item 8); unknown assets are 404, writes 405', async () => {
    const app = makeApp({ NODE_ENV: 'development' });
    const { response, html } = await openPage(app, peer('127.0.0.1'));
    expect(response.headers.get('cache-control')).toBe('no-store');
    // The page was 9.06 MB (everything inline); now it only links the parts.
    expect(Buffer.byteLength(html)).toBeLessThan(100_000);
    const links = [...html.matchAll(/(?:src|href)="(\/graphiql-assets\/[^"]+)"/g)].map((m) => m[1]!);
    const workers = Object.values(JSON.parse(/const workers = (\{[^}]*\});/.exec(html)![1]!) as Record<string, string>);
    const assets = [...links, ...workers];
    expect(assets).toHaveLength(6); // favicon, stylesheet, script, three editor workers
    let gzipped = 0;
    let plain = 0;
    for (const path of assets) {
      expect(path).toMatch(/^\/graphiql-assets\/[a-z.]+-[0-9a-f]{16}\.(js|css|ico)$/);
      const asset = await app.yoga.fetch(`http://127.0.0.1${path}`, { headers: { 'accept-encoding': 'gzip, br' } });
      expect(asset.status, path).toBe(200);
      expect(asset.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      const body = Buffer.from(await asset.arrayBuffer());
      if (!path.endsWith('.ico')) {
        expect(asset.headers.get('content-encoding'), path).toBe('gzip');
        expect(asset.headers.get('content-type')).toMatch(path.endsWith('.css') ? /^text\/css/ : /^text\/javascript/);
        // What came over the wire is the gzip of what the name's hash covers.
        const { gunzipSync } = await import('node:zlib');
        const { createHash } = await import('node:crypto');
        const content = gunzipSync(body);
        expect(path).toContain(createHash('sha256').update(content).digest('hex').slice(0, 16));
        plain += content.length;
      }
      gzipped += body.length;
    }
    // 9 MB of script and style go over the wire as under 2.5 MB, once: then the browser's cache serves them.
    expect(plain).toBeGreaterThan(8_000_000);
    expect(gzipped).toBeLessThan(2_500_000);
    // Without gzip in Accept-Encoding the same bytes come plain.
    const plainScript = await app.yoga.fetch(`http://127.0.0.1${links.find((l) => l.endsWith('.js'))!}`);
    expect(plainScript.headers.get('content-encoding')).toBeNull();
    expect((await plainScript.arrayBuffer()).byteLength).toBeGreaterThan(5_000_000);

    expect((await app.yoga.fetch('http://127.0.0.1/graphiql-assets/graphiql-0000000000000000.js')).status).toBe(404);
    expect((await app.yoga.fetch(`http://127.0.0.1${links[0]}`, { method: 'POST', body: '{}', headers: { 'content-type': 'application/json' } })).status).toBe(405);
    // Off with GraphiQL: no assets either.
    expect((await makeApp({ NODE_ENV: 'production' }).yoga.fetch(`http://127.0.0.1${links[0]}`)).status).toBe(404);
  });

  it('in development, from loopback: the example query and a fresh token of the local key, which runs it; never logged, never cached', async () => {
    const logs = captureLogs('debug');
    const app = makeApp({ NODE_ENV: 'development' }, { logger: logs.logger });
    const { response, html } = await openPage(app, peer('127.0.0.1'));
    expect(response.headers.get('cache-control')).toBe('no-store');
    const options = pageOptions(html);
    expect(options).toMatchObject({ title: 'Connector store', shouldPersistHeaders: false });
    expect(options.defaultQuery).toContain(EXAMPLE_QUERY_BODY);
    expect(options.defaultQuery).toMatch(/^# As the local development key/);

    const headers = JSON.parse(options.headers as string) as Record<string, string>;
    expect(Object.keys(headers)).toEqual(['Authorization']);
    expect(options.defaultHeaders).toBe(options.headers);
    const token = /^Bearer (\S+)$/.exec(headers.Authorization!)?.[1];
    expect(token).toBeDefined();
    const verified = await verifyBearerToken(token!, { audience: AUDIENCE });
    expect(verified.did).toBe(credentials.did);
    // Valid for the full hour from now: minted for this page, not at start-up.
    expect(verified.expiresAt).toBeGreaterThan(Date.now() + 3_500_000);

    // What GraphiQL sends when the user presses run: the page's query with the page's headers.
    const run = await app.yoga.fetch('http://127.0.0.1/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify({ query: options.defaultQuery }),
    });
    const body = (await run.json()) as any;
    expect(body.errors).toBeUndefined();
    expect(body.data.serverInfo).toMatchObject({ dialect: 'sqlite', viewerDID: credentials.did, viewerIsService: false });
    expect(body.data.operations.totalCount).toBe(0);

    // IPv6 loopback, and IPv4 loopback as a dual-stack socket reports it.
    for (const address of ['::1', '::ffff:127.0.0.1']) expect(pageOptions((await openPage(app, peer(address))).html).headers, address).toBeDefined();

    expect(logs.entries().length).toBeGreaterThan(0);
    expect(logs.text).not.toContain(token);
  });

  it('puts no token in the page in production (GRAPHIQL=true), in tests, or for a request from another machine or with no peer', async () => {
    const mint = vi.fn(() => credentials.mintToken());
    const cases: [Record<string, string>, Record<string, unknown> | undefined][] = [
      [{ NODE_ENV: 'production', GRAPHIQL: 'true' }, peer('127.0.0.1')],
      [{ NODE_ENV: 'test', GRAPHIQL: 'true' }, peer('127.0.0.1')],
      [{ NODE_ENV: 'development' }, peer('192.168.1.20')],
      [{ NODE_ENV: 'development', HOST: '0.0.0.0' }, peer('::ffff:10.0.0.7')],
      [{ NODE_ENV: 'development' }, undefined],
    ];
    for (const [env, serverContext] of cases) {
      const what = `${JSON.stringify(env)} from ${JSON.stringify(serverContext)}`;
      const { response, html } = await openPage(makeApp(env, { credentials: { mintToken: mint } }), serverContext);
      const options = pageOptions(html);
      expect(options.headers, what).toBeUndefined();
      expect(options.defaultHeaders, what).toBeUndefined();
      expect(html, what).not.toMatch(/Bearer ey/);
      // Still a useful start: the example query, and where a token goes.
      expect(options.defaultQuery, what).toContain(EXAMPLE_QUERY_BODY);
      expect(options.defaultQuery, what).toContain('npm run -s token');
      expect(response.headers.get('cache-control'), what).toBe('no-store');
    }
    expect(mint).not.toHaveBeenCalled();
  });

  it('puts no token in a page asked for by a DNS name rebound to 127.0.0.1, even over loopback', async () => {
    const mint = vi.fn(() => credentials.mintToken());
    const app = makeApp({ NODE_ENV: 'development' }, { credentials: { mintToken: mint } });
    const response = await app.yoga.fetch('http://evil.example:4000/graphql', { headers: { accept: 'text/html' } }, peer('127.0.0.1'));
    const html = await response.text();
    expect(pageOptions(html).headers).toBeUndefined();
    expect(html).not.toMatch(/Bearer ey/);
    expect(mint).not.toHaveBeenCalled();
    // localhost is a loopback name: its page has the token.
    const local = await app.yoga.fetch('http://localhost:4000/graphql', { headers: { accept: 'text/html' } }, peer('127.0.0.1'));
    expect(pageOptions(await local.text()).headers).toBeDefined();
  });

  it('with GraphiQL off there is no page, and a token that cannot be minted leaves the page without one (logged)', async () => {
    const off = await makeApp({ NODE_ENV: 'development', GRAPHIQL: 'false' }).yoga.fetch('http://127.0.0.1/graphql', { headers: { accept: 'text/html' } }, peer('127.0.0.1'));
    expect(off.headers.get('content-type') ?? '').not.toMatch(/text\/html/);

    const logs = captureLogs('info');
    const failing = makeApp({ NODE_ENV: 'development' }, { logger: logs.logger, credentials: { mintToken: () => Promise.reject(new Error('key went away')) } });
    const options = pageOptions((await openPage(failing, peer('127.0.0.1'))).html);
    expect(options.headers).toBeUndefined();
    expect(options.defaultQuery).toContain(EXAMPLE_QUERY_BODY);
    expect(logs.entries()).toContainEqual(expect.objectContaining({ msg: expect.stringMatching(/could not mint a development token for GraphiQL/) }));
  });
});
