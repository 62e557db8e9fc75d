/**
 * Which web pages may talk to the server (issue 12 item 5), against real
 * server processes: by default no origin but its own gets CORS headers, a
 * listed one (CORS_ORIGINS) does, with credentials; WebSocket upgrades from
 * unlisted origins are refused; in the development header mode any request
 * or socket from another origin is refused outright (403), since the header
 * is the identity there.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import type { DialectName } from '../../src/db/connect.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { e2ePrincipals, postGraphQL, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';

const AUDIENCE = 'connector-store-origins';
const { keys } = e2ePrincipals(AUDIENCE, ['worker']);
const LISTED = 'https://dash.example.com';
const FOREIGN = 'https://evil.example';
const dialects: DialectName[] = testDialects().filter(dialectAvailable);

/** Opens a WebSocket with `origin` (or none); resolves with 'open' or the HTTP status it was refused with. */
function upgrade(origin: string, url: string): Promise<'open' | number> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url.replace(/^http/, 'ws') + '/graphql', 'graphql-transport-ws', origin === '' ? {} : { origin });
    socket.once('open', () => {
      socket.close();
      resolve('open');
    });
    socket.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
    socket.once('error', (error) => reject(error));
  });
}

/** `{ __typename }` without credentials, with `headers`. */
const post = (server: E2EServers['server'], headers: Record<string, string>) => postGraphQL(server, null, '{ __typename }', {}, headers);

describe.each(dialects)('origins (%s)', (dialect) => {
  let normal: E2EServers | undefined;
  let headerMode: E2EServers | undefined;

  beforeAll(async () => {
    normal = await startE2EServers(dialect, { audience: AUDIENCE, serviceDID: keys.worker.did, name: 'origins', env: { CORS_ORIGINS: LISTED } });
    headerMode = await startE2EServers(dialect, {
      audience: AUDIENCE,
      serviceDID: keys.worker.did,
      name: 'origins_dev',
      env: { NODE_ENV: 'development', INSECURE_HEADER_AUTH: 'true', CORS_ORIGINS: LISTED },
    });
  }, 60_000);
  afterAll(async () => {
    await normal?.dispose();
    await headerMode?.dispose();
  });

  it('a listed origin gets CORS headers with credentials; any other gets none', async () => {
    const url = normal!.server.origin;
    const preflight = await fetch(`${url}/graphql`, { method: 'OPTIONS', headers: { origin: LISTED, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' } });
    expect(preflight.status).toBe(204);
    expect(preflight.headers.get('access-control-allow-origin')).toBe(LISTED);
    expect(preflight.headers.get('access-control-allow-credentials')).toBe('true');
    expect(preflight.headers.get('access-control-allow-headers')).toMatch(/authorization/);
    const listed = await post(normal!.server, { origin: LISTED });
    expect(listed.headers.get('access-control-allow-origin')).toBe(LISTED);
    for (const origin of [FOREIGN, 'null', `${LISTED}.evil.example`]) {
      const response = await post(normal!.server, { origin });
      expect(response.headers.get('access-control-allow-origin'), origin).toBeNull();
      expect(response.headers.get('access-control-allow-credentials'), origin).toBeNull();
      const refusedPreflight = await fetch(`${url}/graphql`, { method: 'OPTIONS', headers: { origin, 'access-control-request-method': 'POST' } });
      expect(refusedPreflight.headers.get('access-control-allow-origin'), origin).toBeNull();
    }
  });

  it('WebSocket upgrades: own pages, listed origins and non-browser clients connect; other origins are refused (403)', async () => {
    const url = normal!.server.origin;
    expect(await upgrade('', url)).toBe('open');
    expect(await upgrade(url, url)).toBe('open');
    expect(await upgrade(LISTED, url)).toBe('open');
    expect(await upgrade(FOREIGN, url)).toBe(403);
  });

  it('the header mode refuses every other origin, listed or not, over HTTP and WebSocket', async () => {
    const url = headerMode!.server.origin;
    const asAnyone = { 'x-viewer-did': keys.worker.did };
    for (const origin of [FOREIGN, LISTED]) {
      const response = await post(headerMode!.server, { ...asAnyone, origin });
      expect(response.status, origin).toBe(403);
      expect(response.body.errors?.[0]?.extensions?.code).toBe('FORBIDDEN_ORIGIN');
      expect(await upgrade(origin, url)).toBe(403);
    }
    expect((await post(headerMode!.server, { ...asAnyone, origin: url })).status).toBe(200);
    expect((await post(headerMode!.server, asAnyone)).status).toBe(200);
    expect(await upgrade(url, url)).toBe('open');
  });
});
