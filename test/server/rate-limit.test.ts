/**
 * Request-rate limits per viewer and per IP: in process (SQLite, through
 * yoga.fetch) and shared by two replicas through Postgres.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { openDatabase, parseDatabaseURL, type OpenDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { createMemoryRateLimiter, createPostgresRateLimiter } from '../../src/server/rate-limit.js';
import { getSyncState } from '../../src/store/sync-state/index.js';
import { createStoreContext } from '../../src/store/context.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { describeGraphQL } from '../helpers/graphql.js';
import { createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';

const SET = 'mutation($i: SetSyncStateInput!) { setSyncState(input: $i) { __typename } }';
const input = (connectorName: string) => ({ i: { connectorName, lastSyncedAt: 'now', entityCount: 0, status: 'idle' } });

describeGraphQL(
  'rate limits per viewer',
  (suite) => {
    it('the request past the limit is RATE_LIMITED (429, Retry-After), runs nothing, and leaves other viewers alone', async () => {
      for (let i = 0; i < 5; i++) expect((await suite.request(SET, input(`ok-${i}`), { as: 'bob' })).status).toBe(200);
      const refused = await suite.request(SET, input('over'), { as: 'bob' });
      expect(refused.status).toBe(429);
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect(((await refused.json()) as { errors: { extensions: { code: string; retryable: boolean } }[] }).errors[0]!.extensions).toMatchObject({ code: 'RATE_LIMITED', retryable: true });
      expect(await getSyncState(suite.store, 'over', suite.keys.bob.did)).toBeNull();
      expect((await suite.request(SET, input('alice-1'), { as: 'alice' })).status).toBe(200);
    });
  },
  { env: { RATE_LIMIT_PER_VIEWER: '5', RATE_LIMIT_WINDOW_SECONDS: '60' } },
);

describe('rate limits per IP', () => {
  it('counts every viewer (and anonymous) from one address together', async () => {
    const limiter = createMemoryRateLimiter({ perViewer: 0, perIP: 3, windowSeconds: 60 });
    for (const viewerDID of ['did:key:a', 'did:key:b', null]) await limiter.consume({ viewerDID, ip: '203.0.113.7' });
    await expect(limiter.consume({ viewerDID: 'did:key:c', ip: '203.0.113.7' })).rejects.toMatchObject({ extensions: { code: 'RATE_LIMITED' } });
    await limiter.consume({ viewerDID: 'did:key:c', ip: '198.51.100.1' });
  });
});

const postgres = testDialects().includes('postgres') && dialectAvailable('postgres');

describe.skipIf(!postgres)('postgres: rate limits shared by replicas', () => {
  let scratch: ScratchPostgresDatabase;
  const databases: OpenDatabase[] = [];
  beforeAll(async () => {
    scratch = await createScratchPostgresDatabase('cs_rate');
  });
  afterAll(async () => {
    for (const database of databases) await database.close();
    await scratch?.drop();
  });

  it('two replicas over one database count against one budget', async () => {
    const config = loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: 'rate', LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0', RATE_LIMIT_PER_VIEWER: '6' });
    const replicas: ServerApp[] = [];
    for (let i = 0; i < 2; i++) {
      const database = openDatabase(parseDatabaseURL(scratch.url));
      databases.push(database);
      if (i === 0) await migrateToLatest(database.db, 'postgres');
      const rateLimiter = await createPostgresRateLimiter(database.pgPool!, config.rateLimits);
      replicas.push(createServerApp({ config, database, logger: createLogger('silent'), rateLimiter }));
    }
    const key = generateLocalKey();
    const token = await mintToken({ privateKey: key.privateKey, audience: 'rate' });
    const send = (replica: ServerApp, n: number) =>
      replica.yoga.fetch('http://localhost/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
        body: JSON.stringify({ query: SET, variables: input(`c-${n}`) }),
      });
    const statuses: number[] = [];
    for (let n = 0; n < 8; n++) statuses.push((await send(replicas[n % 2]!, n)).status);
    expect(statuses).toEqual([200, 200, 200, 200, 200, 200, 429, 429]);
    expect(await getSyncState(createStoreContext(databases[0]!.db, 'postgres'), 'c-6', key.did)).toBeNull();
  });
});
