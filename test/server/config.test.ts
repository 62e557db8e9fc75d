import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/server/config.js';

/** The problems `loadConfig(env)` reports (fails the test if it accepts `env`). */
function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as ConfigError).problems;
  }
  throw new Error(`configuration was accepted: ${JSON.stringify(env)}`);
}

describe('server configuration', () => {
  it('has working defaults for a fresh machine', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      env: 'development',
      port: 4000,
      host: '127.0.0.1',
      database: { dialect: 'sqlite', path: './data/connector-store.sqlite' },
      auth: { audience: 'connector-store', insecureHeaderAuth: false },
      graphiql: true,
      introspection: true,
      jobs: { retentionIntervalMs: 300_000, idempotencyWindowMs: 86_400_000 },
    });
    expect(config.auth.serviceDIDs.size).toBe(0);
    expect(loadConfig({ NODE_ENV: 'production' }).graphiql).toBe(false);
  });

  it.each([
    ['not a number', 'eighty'],
    ['too large', '70000'],
    ['negative', '-1'],
    ['fractional', '80.5'],
  ])('names PORT when it is %s', (_what, value) => {
    const problems = problemsOf({ PORT: value });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^PORT: /);
  });

  it.each([
    ['another scheme', 'mysql://localhost/db', /must start with postgres:\/\/, postgresql:\/\/ or sqlite:/],
    ['a sqlite URL without a path', 'sqlite:', /needs a file path/],
    ['a postgres URL without a host', 'postgres:///db', /has no host/],
  ])('names DATABASE_URL for %s', (_what, value, message) => {
    const problems = problemsOf({ DATABASE_URL: value });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^DATABASE_URL: /);
    expect(problems[0]).toMatch(message);
  });

  it('never echoes a database password in a problem', () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://app:s3cret@db.internal:5432/store' });
    expect(config.database.display).not.toContain('s3cret');
  });

  it('takes the direct CHANGE_FEED_DATABASE_URL (default DATABASE_URL) and DATABASE_POOL_MODE (default direct)', () => {
    const direct = loadConfig({ DATABASE_URL: 'postgres://app@db.internal:5432/store' });
    expect(direct.db.poolMode).toBe('direct');
    expect(direct.directDatabase).toEqual(direct.database);
    expect(loadConfig({}).directDatabase).toMatchObject({ dialect: 'sqlite' });
    const pooled = loadConfig({
      DATABASE_URL: 'postgres://app@pgbouncer.internal:6432/store',
      DATABASE_POOL_MODE: 'transaction',
      CHANGE_FEED_DATABASE_URL: 'postgres://app:s3cret@db.internal:5432/store',
    });
    expect(pooled.db.poolMode).toBe('transaction');
    expect(pooled.database).toMatchObject({ dialect: 'postgres', connectionString: 'postgres://app@pgbouncer.internal:6432/store' });
    expect(pooled.directDatabase).toMatchObject({ dialect: 'postgres', connectionString: 'postgres://app:s3cret@db.internal:5432/store' });
    expect(pooled.directDatabase.display).not.toContain('s3cret');
    // Also allowed without a pooler, e.g. a listener on another route to the same server.
    expect(loadConfig({ DATABASE_URL: 'postgres://a@x/store', CHANGE_FEED_DATABASE_URL: 'postgres://a@y/store' }).directDatabase).toMatchObject({ connectionString: 'postgres://a@y/store' });
  });

  it('refuses a transaction pool mode without a distinct direct URL, and CHANGE_FEED_DATABASE_URL that is not Postgres', () => {
    const pgbouncer = 'postgres://app@127.0.0.1:6432/store';
    expect(problemsOf({ DATABASE_URL: pgbouncer, DATABASE_POOL_MODE: 'transaction' })).toEqual([expect.stringMatching(/^CHANGE_FEED_DATABASE_URL: required with DATABASE_POOL_MODE=transaction: a direct postgres:\/\/ URL .*LISTEN/)]);
    expect(problemsOf({ DATABASE_URL: pgbouncer, DATABASE_POOL_MODE: 'transaction', CHANGE_FEED_DATABASE_URL: pgbouncer })).toEqual([
      'CHANGE_FEED_DATABASE_URL: must be a direct connection to Postgres, not the pooled DATABASE_URL',
    ]);
    expect(problemsOf({ DATABASE_POOL_MODE: 'transaction' })).toEqual([expect.stringMatching(/^DATABASE_POOL_MODE: transaction is for a postgres:\/\/ DATABASE_URL/)]);
    expect(problemsOf({ DATABASE_POOL_MODE: 'session' })).toEqual([expect.stringMatching(/^DATABASE_POOL_MODE: /)]);
    expect(problemsOf({ CHANGE_FEED_DATABASE_URL: 'postgres://a@db/store' })).toEqual([expect.stringMatching(/^CHANGE_FEED_DATABASE_URL: only for a postgres:\/\/ DATABASE_URL/)]);
    expect(problemsOf({ DATABASE_URL: pgbouncer, CHANGE_FEED_DATABASE_URL: 'sqlite:./x.sqlite' })).toEqual([expect.stringMatching(/^CHANGE_FEED_DATABASE_URL: only for/)]);
    expect(problemsOf({ DATABASE_URL: pgbouncer, CHANGE_FEED_DATABASE_URL: 'mysql://db/store' })).toEqual([
      expect.stringMatching(/^CHANGE_FEED_DATABASE_URL: CHANGE_FEED_DATABASE_URL must start with postgres:\/\//),
    ]);
  });

  it('refuses INSECURE_HEADER_AUTH with a non-loopback HOST, and in production', () => {
    expect(problemsOf({ INSECURE_HEADER_AUTH: 'true', HOST: '0.0.0.0' })).toEqual([
      'INSECURE_HEADER_AUTH: only allowed when HOST is a loopback address, got 0.0.0.0',
    ]);
    expect(problemsOf({ INSECURE_HEADER_AUTH: 'true', NODE_ENV: 'production' })).toEqual([
      'INSECURE_HEADER_AUTH: never allowed with NODE_ENV=production',
    ]);
    for (const host of ['127.0.0.1', '::1', 'localhost']) {
      expect(loadConfig({ INSECURE_HEADER_AUTH: 'true', HOST: host }).auth.insecureHeaderAuth).toBe(true);
    }
    expect(problemsOf({ INSECURE_HEADER_AUTH: 'maybe' })[0]).toMatch(/^INSECURE_HEADER_AUTH: /);
  });

  it('logs pretty in development and JSON elsewhere unless LOG_FORMAT says otherwise', () => {
    expect(loadConfig({ NODE_ENV: 'development' }).logFormat).toBe('pretty');
    expect(loadConfig({ NODE_ENV: 'production' }).logFormat).toBe('json');
    expect(loadConfig({ NODE_ENV: 'development', LOG_FORMAT: 'json' }).logFormat).toBe('json');
    expect(loadConfig({}).slowRequestMs).toBe(1_000);
    expect(problemsOf({ LOG_FORMAT: 'xml' })).toEqual([expect.stringMatching(/^LOG_FORMAT/)]);
  });

  it('reads CORS_ORIGINS as exact origins (none by default) and names anything else', () => {
    expect(loadConfig({}).corsOrigins).toEqual([]);
    expect(loadConfig({ CORS_ORIGINS: 'https://dash.example.com, http://127.0.0.1:5173' }).corsOrigins).toEqual(['https://dash.example.com', 'http://127.0.0.1:5173']);
    for (const bad of ['*', 'https://dash.example.com/', 'dash.example.com', 'https://a.example/path', 'ftp://a.example']) {
      expect(problemsOf({ CORS_ORIGINS: bad }), bad).toEqual([expect.stringMatching(/^CORS_ORIGINS: .* is not an origin/)]);
    }
  });

  it('names SERVICE_DIDS entries that are not DIDs, and accepts a list of DIDs', () => {
    const problems = problemsOf({ SERVICE_DIDS: 'did:key:z6MkWorker, not-a-did' });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^SERVICE_DIDS/);
    expect(problems[0]).toMatch(/must be a DID/);
    const config = loadConfig({ SERVICE_DIDS: ' did:key:z6MkA , did:web:worker.example ,' });
    expect([...config.auth.serviceDIDs]).toEqual(['did:key:z6MkA', 'did:web:worker.example']);
  });

  it('names limits and job intervals out of range', () => {
    expect(problemsOf({ MAX_BODY_BYTES: '10' })[0]).toMatch(/^MAX_BODY_BYTES: /);
    expect(problemsOf({ MAX_QUERY_DEPTH: '0' })[0]).toMatch(/^MAX_QUERY_DEPTH: /);
    expect(problemsOf({ RETENTION_INTERVAL_MS: '-5' })[0]).toMatch(/^RETENTION_INTERVAL_MS: /);
    expect(problemsOf({ IDEMPOTENCY_WINDOW_MS: '1000' })[0]).toMatch(/^IDEMPOTENCY_WINDOW_MS: /);
    expect(loadConfig({ RETENTION_INTERVAL_MS: '0' }).jobs.retentionIntervalMs).toBe(0);
  });

  it('reports every problem at once, one line each, in the error message too', () => {
    const problems = problemsOf({ PORT: 'eighty', SERVICE_DIDS: 'nope', DATABASE_URL: 'mysql://x', INSECURE_HEADER_AUTH: 'true', HOST: '10.0.0.1' });
    expect(problems.map((p) => p.split(/[:.]/)[0]).sort()).toEqual(['DATABASE_URL', 'INSECURE_HEADER_AUTH', 'PORT', 'SERVICE_DIDS']);
    expect(() => loadConfig({ PORT: 'eighty', DATABASE_URL: 'mysql://x' })).toThrow(/^invalid configuration:\n {2}- PORT: .*\n {2}- DATABASE_URL: /);
  });
});
