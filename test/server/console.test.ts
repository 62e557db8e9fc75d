/**
 * Serving the console through `app.yoga.fetch` (issue 13 items 2 and 4):
 * static files with their content types, the SPA fallback, cache headers,
 * the CSP, gzip, refusals (a missing asset, other methods, no build,
 * CONSOLE=false), and the development sign-in under GraphiQL's rule
 * (development only, loopback peer and host, this server's own pages). A
 * small build made here stands for the real one; the real one is checked
 * for freshness and content types. The pages are the same on every dialect,
 * so SQLite alone serves here.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyBearerToken } from '../../src/auth/index.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { consoleBuildFresh, loadConsoleBuild, type ConsoleBuild, type ConsoleFile } from '../../src/server/console-build.js';
import { CONSOLE_CSP } from '../../src/server/console.js';
import { loadConfig } from '../../src/server/config.js';
import { loadDevelopmentCredentials, type DevelopmentCredentials } from '../../src/server/dev-credentials.js';
import { createLogger } from '../../src/server/logger.js';
import { createTestDatabase, type TestDatabase } from '../helpers/databases.js';

const AUDIENCE = 'connector-store-console-unit';
const peer = (address: string) => ({ req: { socket: { remoteAddress: address } } });
const file = (path: string, contentType: string, text: string): ConsoleFile => {
  const body = Buffer.from(text);
  return { path, contentType, body, gzip: gzipSync(body), immutable: path.startsWith('assets/') };
};
const INDEX = '<!doctype html><title>console</title><script type="module" src="/console/assets/index-abc123.js"></script>'.repeat(3);
const BUILD: ConsoleBuild = {
  files: new Map([
    ['index.html', file('index.html', 'text/html; charset=utf-8', INDEX)],
    ['assets/index-abc123.js', file('assets/index-abc123.js', 'text/javascript; charset=utf-8', 'console.log("console");'.repeat(20))],
  ]),
  built: false,
  buildMs: 0,
};

describe('the console at /console', () => {
  let database: TestDatabase;
  let cwd: string;
  let credentials: DevelopmentCredentials;
  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    cwd = await mkdtemp(join(tmpdir(), 'console-test-'));
    credentials = await loadDevelopmentCredentials(loadConfig({ AUTH_AUDIENCE: AUDIENCE }), cwd);
  });
  afterAll(async () => {
    await database?.destroy();
    await rm(cwd, { recursive: true, force: true });
  });

  const makeApp = (env: Record<string, string> = {}, build: ConsoleBuild | null = BUILD): ServerApp =>
    createServerApp({
      config: loadConfig({ AUTH_AUDIENCE: AUDIENCE, RETENTION_INTERVAL_MS: '0', ...env }),
      database: database.open,
      logger: createLogger('silent'),
      developmentCredentials: credentials,
      ...(build !== null && { consoleBuild: build }),
    });
  const get = (app: ServerApp, path: string, init: RequestInit = {}) => app.yoga.fetch(`http://127.0.0.1:4000${path}`, init);

  it('serves index.html with a self-only CSP and no-store, for /console/ and every route under it (SPA fallback)', async () => {
    const app = makeApp();
    const redirect = await get(app, '/console?x=1');
    expect(redirect.status).toBe(308);
    expect(redirect.headers.get('location')).toBe('/console/?x=1');
    for (const path of ['/console/', '/console/operations', '/console/operations/T3BlcmF0aW9uOmFiYw', '/console/watches?status=FAILED']) {
      const response = await get(app, path);
      expect(response.status, path).toBe(200);
      expect(response.headers.get('content-type'), path).toBe('text/html; charset=utf-8');
      expect(response.headers.get('cache-control'), path).toBe('no-store');
      expect(response.headers.get('content-security-policy'), path).toBe(CONSOLE_CSP);
      expect(response.headers.get('x-content-type-options'), path).toBe('nosniff');
      expect(await response.text(), path).toBe(INDEX);
    }
    expect(CONSOLE_CSP).toMatch(/default-src 'self'/);
    expect(CONSOLE_CSP).not.toMatch(/unsafe|https?:|\*/);
  });

  it('serves hashed assets with their type, cached for a year, gzipped when asked; a missing asset is 404, not the page', async () => {
    const app = makeApp();
    const plain = await get(app, '/console/assets/index-abc123.js');
    expect(plain.status).toBe(200);
    expect(plain.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(plain.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(plain.headers.get('content-encoding')).toBeNull();
    const body = await plain.text();
    // Node's fetch would undo the encoding; yoga.fetch hands back the bytes as sent.
    const zipped = await get(app, '/console/assets/index-abc123.js', { headers: { 'accept-encoding': 'gzip, br' } });
    expect(zipped.headers.get('content-encoding')).toBe('gzip');
    expect(zipped.headers.get('vary')).toBe('accept-encoding');
    expect(gunzipSync(Buffer.from(await zipped.arrayBuffer())).toString()).toBe(body);
    for (const path of ['/console/assets/index-old999.js', '/console/favicon.ico']) expect((await get(app, path)).status, path).toBe(404);
    const head = await get(app, '/console/', { method: 'HEAD' });
    expect(head.status).toBe(200);
    expect((await get(app, '/console/', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).status).toBe(405);
  });

  it('answers 503 with what to do when the build is missing, and nothing at all with CONSOLE=false', async () => {
    const missing = await get(makeApp({}, null), '/console/');
    expect(missing.status).toBe(503);
    expect(await missing.text()).toMatch(/npm run console:build/);
    expect((await get(makeApp({ CONSOLE: 'false' }), '/console/')).status).toBe(404);
  });

  describe('development sign-in (POST /console/dev-token)', () => {
    const ask = (app: ServerApp, options: { url?: string; origin?: string | null; method?: string; from?: string } = {}) => {
      const url = options.url ?? 'http://127.0.0.1:4000/console/dev-token';
      const origin = options.origin === undefined ? new URL(url).origin : options.origin;
      return app.yoga.fetch(url, { method: options.method ?? 'POST', headers: origin === null ? {} : { origin } }, peer(options.from ?? '127.0.0.1'));
    };

    it('in development, to this server’s own page on a loopback address: a fresh token of the local key, never stored', async () => {
      const app = makeApp({ NODE_ENV: 'development' });
      for (const url of ['http://127.0.0.1:4000/console/dev-token', 'http://localhost:4000/console/dev-token']) {
        const response = await ask(app, { url });
        expect(response.status, url).toBe(200);
        expect(response.headers.get('cache-control')).toBe('no-store');
        expect(response.headers.get('access-control-allow-origin')).toBeNull();
        const body = (await response.json()) as { available: boolean; token: string; did: string };
        expect(body).toMatchObject({ available: true, did: credentials.did });
        expect((await verifyBearerToken(body.token, { audience: AUDIENCE })).did).toBe(credentials.did);
      }
      expect((await ask(app, { from: '::1' })).status).toBe(200);
    });

    it('refuses (404) outside development, from another machine, for a rebound DNS name, from another origin, without an Origin, or by GET', async () => {
      const dev = makeApp({ NODE_ENV: 'development' });
      const cases: [string, Response | Promise<Response>][] = [
        ['production', ask(makeApp({ NODE_ENV: 'production' }))],
        ['test', ask(makeApp({ NODE_ENV: 'test' }))],
        ['another machine', ask(dev, { from: '192.168.1.20' })],
        ['a DNS name rebound to 127.0.0.1', ask(dev, { url: 'http://evil.example:4000/console/dev-token' })],
        ['another origin', ask(dev, { origin: 'http://evil.example' })],
        ['no Origin', ask(dev, { origin: null })],
        ['GET', ask(dev, { method: 'GET' })],
      ];
      for (const [what, pending] of cases) {
        const response = await pending;
        expect(response.status, what).toBe(404);
        const body = (await response.json()) as { available: boolean; token?: string };
        expect(body.available, what).toBe(false);
        expect(body.token, what).toBeUndefined();
      }
    });
  });

  it('the real build: fresh after the test run’s global set-up, with an index, hashed assets and their types', async () => {
    expect(await consoleBuildFresh()).toBe(true);
    const build = await loadConsoleBuild();
    expect(build.built).toBe(false);
    expect(build.files.get('index.html')?.contentType).toBe('text/html; charset=utf-8');
    const assets = [...build.files.values()].filter((f) => f.immutable);
    // The page's script and stylesheet, and the SharedWorker holding the shared event stream (console/src/stream-worker.ts).
    expect(assets.map((f) => f.contentType).sort()).toEqual(['text/css; charset=utf-8', 'text/javascript; charset=utf-8', 'text/javascript; charset=utf-8']);
    expect(assets.some((f) => /^assets\/stream-worker-/.test(f.path))).toBe(true);
    for (const asset of assets) expect(asset.path).toMatch(/^assets\/[\w-]+-[\w-]{8}\.(js|css)$/);
    // Everything the page loads is under /console/ on this server.
    const index = build.files.get('index.html')!.body.toString();
    for (const [, url] of index.matchAll(/(?:src|href)="([^"]+)"/g)) expect(url!.startsWith('/console/') || url!.startsWith('data:'), url).toBe(true);
  });
});
