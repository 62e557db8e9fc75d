import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, ConfigError, isSecretVariable, loadConfig } from '../../src/server/config.js';

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
      limits: { maxSubscriptionsPerViewer: 20, maxSubscriptions: 1_000, maxSubscriptionsPerIP: 100, unknownViewerPercent: 50 },
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
    ['a sqlite URL without a path', 'sqlite:', /must name a file after "sqlite:"/],
    ['a postgres URL without a host', 'postgres:///db', /must name a host/],
  ])('names DATABASE_URL for %s', (_what, value, message) => {
    const problems = problemsOf({ DATABASE_URL: value });
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatch(/^DATABASE_URL: /);
    expect(problems[0]).toMatch(message);
  });

  it('never echoes a database password in a problem', () => {
    const config = loadConfig({ DATABASE_URL: 'postgres://app:s3cret@db.internal:5432/store' });
    expect(config.database.display).not.toContain('s3cret');
    expect(loadConfig({ DATABASE_URL: 'postgres://app@db.internal/store?password=s3cret&sslmode=require' }).database.display).toBe(
      'postgres://app@db.internal/store?password=***&sslmode=require',
    );
    expect(problemsOf({ DATABASE_URL: 'mysql://app:s3cret@db.internal/store' })).toEqual([
      'DATABASE_URL: must start with postgres://, postgresql:// or sqlite: (unset uses the embedded SQLite file) (got "mysql://app:***@db.internal/store")',
    ]);
    expect(problemsOf({ DATABASE_URL: 'postgres://app:s3cret@[oops/store' })).toEqual([
      'DATABASE_URL: must be a valid URL, e.g. postgres://USER@HOST:5432/DATABASE (got "postgres://app:***@[oops/store")',
    ]);
  });

  it('says PORT=abc in words: the variable, the expected form and the value got', () => {
    expect(problemsOf({ PORT: 'abc' })).toEqual(['PORT: must be an integer from 0 to 65535 (got "abc")']);
    expect(problemsOf({ PORT: '' })).toEqual(['PORT: must be an integer from 0 to 65535 (got "")']);
  });

  // One bad value per variable the server reads, and the line it must give.
  const BAD_VALUES: Record<string, [string, string]> = {
    NODE_ENV: ['prod', 'must be one of development, production, test (got "prod")'],
    PORT: ['80.5', 'must be an integer from 0 to 65535 (got "80.5")'],
    HOST: [' ', 'must be a host name or address to listen on, e.g. 127.0.0.1 or 0.0.0.0 (got " ")'],
    DATABASE_URL: ['sqlite:', 'must name a file after "sqlite:", e.g. sqlite:./data/store.sqlite (got "sqlite:")'],
    DATABASE_POOL_MODE: ['session', 'must be one of direct, transaction (got "session")'],
    DATABASE_NAMED_STATEMENTS: ['sometimes', 'must be true or false (or 1/0, yes/no) (got "sometimes")'],
    CHANGE_FEED_DATABASE_URL: ['mysql://app:s3cret@db/store', 'must start with postgres://, postgresql:// or sqlite: (unset uses the embedded SQLite file) (got "mysql://app:***@db/store")'],
    PERSISTED_DOCUMENTS: ['yes', 'must be one of off, allow, only (got "yes")'],
    PERSISTED_DOCUMENTS_FILE: [' ', 'must be a path to a persisted-documents manifest (JSON) (got " ")'],
    LOG_LEVEL: ['loud', 'must be one of fatal, error, warn, info, debug, trace, silent (got "loud")'],
    LOG_FORMAT: ['xml', 'must be one of json, pretty (got "xml")'],
    SLOW_REQUEST_MS: ['1s', 'must be an integer from 1 to 3600000 (got "1s")'],
    METRICS: ['maybe', 'must be true or false (or 1/0, yes/no) (got "maybe")'],
    METRICS_TOKEN: ['short secret', 'must be at least 16 printable ASCII characters without spaces (got 12 characters, not shown)'],
    METRICS_CACHE_MS: ['-1', 'must be an integer from 0 to 600000 (got "-1")'],
    AUTH_AUDIENCE: ['', 'must be a non-empty string (got "")'],
    SERVICE_DIDS: ['did:key:z6MkA, worker, ops', 'must be comma-separated DIDs (did:method:identifier); "worker", "ops" are not (got "did:key:z6MkA, worker, ops")'],
    INSECURE_HEADER_AUTH: ['on', 'must be true or false (or 1/0, yes/no) (got "on")'],
    CORS_ORIGINS: ['*', 'must be comma-separated origins (scheme://host[:port], e.g. https://dash.example.com); "*" is not an origin (got "*")'],
    CONSOLE: ['sometimes', 'must be true or false (or 1/0, yes/no) (got "sometimes")'],
    GRAPHIQL: ['2', 'must be true or false (or 1/0, yes/no) (got "2")'],
    INTROSPECTION: ['nope', 'must be true or false (or 1/0, yes/no) (got "nope")'],
    DB_STATEMENT_TIMEOUT_MS: ['10', 'must be an integer from 100 to 600000 (got "10")'],
    DB_POOL_MAX: ['0', 'must be an integer from 1 to 500 (got "0")'],
    MAX_QUERY_DEPTH: ['0x10', 'must be an integer from 1 to 100 (got "0x10")'],
    MAX_QUERY_COST: ['1e9', 'must be an integer from 100 to 1000000 (got "1e9")'],
    MAX_ALIASES: ['lots', 'must be an integer from 1 to 1000 (got "lots")'],
    MAX_BULK_ROWS_PER_REQUEST: ['0', 'must be an integer from 1 to 1000000 (got "0")'],
    MAX_TOKENS: ['10', 'must be an integer from 100 to 1000000 (got "10")'],
    MAX_BODY_BYTES: ['1mb', 'must be an integer from 1024 to 50000000 (got "1mb")'],
    MAX_RESPONSE_BYTES: ['1000', 'must be an integer from 1024 to 1000000000 (got "1000")'],
    MAX_SUBSCRIPTIONS_PER_VIEWER: ['0', 'must be an integer from 1 to 10000 (got "0")'],
    MAX_SUBSCRIPTIONS: ['none', 'must be an integer from 1 to 1000000 (got "none")'],
    MAX_SUBSCRIPTIONS_PER_IP: ['-1', 'must be an integer from 0 to 1000000 (got "-1")'],
    UNKNOWN_VIEWER_SHARE_PERCENT: ['101', 'must be an integer from 0 to 100 (got "101")'],
    MAX_WEBSOCKET_CONNECTIONS: ['0', 'must be an integer from 1 to 1000000 (got "0")'],
    WS_CONNECTION_INIT_TIMEOUT_MS: ['3s', 'must be an integer from 100 to 60000 (got "3s")'],
    MAX_WEBSOCKET_CONNECTIONS_PER_VIEWER: ['0', 'must be an integer from 1 to 1000000 (got "0")'],
    MAX_PENDING_SOCKETS_PER_IP: ['-1', 'must be an integer from 0 to 1000000 (got "-1")'],
    MAX_PENDING_SOCKETS: ['0', 'must be an integer from 1 to 1000000 (got "0")'],
    IPV6_PREFIX_BITS: ['129', 'must be an integer from 1 to 128 (got "129")'],
    KNOWN_VIEWER_ROW_AGE_MS: ['1h', 'must be an integer from 0 to 2592000000 (got "1h")'],
    RATE_LIMIT_PER_VIEWER: ['-5', 'must be an integer from 0 to 100000000 (got "-5")'],
    RATE_LIMIT_PER_IP: ['x', 'must be an integer from 0 to 100000000 (got "x")'],
    RATE_LIMIT_STORE: ['redis', 'must be one of memory, postgres (got "redis")'],
    RATE_LIMIT_WINDOW_SECONDS: ['0', 'must be an integer from 1 to 86400 (got "0")'],
    HTTP_HEADERS_TIMEOUT_MS: ['10', 'must be an integer from 1000 to 600000 (got "10")'],
    HTTP_REQUEST_TIMEOUT_MS: ['10', 'must be an integer from 1000 to 3600000 (got "10")'],
    HTTP_KEEP_ALIVE_TIMEOUT_MS: ['10', 'must be an integer from 1000 to 600000 (got "10")'],
    RETENTION_INTERVAL_MS: ['5m', 'must be an integer from 0 to 86400000 (got "5m")'],
    BACKLOG_SAMPLE_INTERVAL_MS: ['7200000', 'must be an integer from 0 to 3600000 (got "7200000")'],
    IDEMPOTENCY_WINDOW_MS: ['1000', 'must be an integer from 60000 to 2592000000 (got "1000")'],
    DEAD_RETENTION_MS: ['1000', 'must be an integer from 60000 to 31536000000 (got "1000")'],
    SHUTDOWN_GRACE_MS: ['-1', 'must be an integer from 0 to 600000 (got "-1")'],
    SHUTDOWN_DRAIN_MS: ['soon', 'must be an integer from 0 to 600000 (got "soon")'],
    READ_DATABASE_URLS: ['postgres://a@standby/store', 'read standbys need a Postgres DATABASE_URL (SQLite has none)'],
    MAX_REPLICA_LAG_MS: ['-1', 'must be an integer from 0 to 3600000 (got "-1")'],
    REPLICA_CHECK_INTERVAL_MS: ['10', 'must be an integer from 50 to 60000 (got "10")'],
    READ_YOUR_WRITES_WAIT_MS: ['a while', 'must be an integer from 0 to 10000 (got "a while")'],
    REPLICA_TIMEOUT_MS: ['0', 'must be an integer from 50 to 60000 (got "0")'],
  };

  it('covers every variable it reads in that table', () => {
    expect(Object.keys(BAD_VALUES).sort()).toEqual([...CONFIG_VARIABLES].sort());
  });

  it.each(Object.entries(BAD_VALUES))('%s: one human line naming the variable, the expected form and the value got', (name, [value, message]) => {
    expect(problemsOf({ [name]: value })).toEqual([`${name}: ${message}`]);
  });

  it('never prints the value of a secret: TOKEN, KEY, SECRET or PASSWORD in the name, or a DATABASE_URL password', () => {
    for (const name of ['METRICS_TOKEN', 'API_KEY', 'CLIENT_SECRET', 'PGPASSWORD', 'metrics_token']) expect(isSecretVariable(name), name).toBe(true);
    for (const name of ['PORT', 'DATABASE_URL', 'MAX_TOKENS', 'HOST']) expect(isSecretVariable(name), name).toBe(false);
    const problems = problemsOf({ METRICS_TOKEN: 'hunter2 hunter2 hunter2', DATABASE_URL: 'pg://me:hunter2@x/y' });
    expect(problems.join('\n')).not.toContain('hunter2');
    expect(problems).toContain('METRICS_TOKEN: must be at least 16 printable ASCII characters without spaces (got 23 characters, not shown)');
  });

  it('accepts booleans in any case and integers with surrounding spaces', () => {
    expect(loadConfig({ METRICS: 'FALSE', GRAPHIQL: ' Yes ', PORT: ' 8080 ' })).toMatchObject({ metrics: { enabled: false }, graphiql: true, port: 8080 });
  });

  it('takes the direct CHANGE_FEED_DATABASE_URL (default DATABASE_URL) and DATABASE_POOL_MODE (default direct)', () => {
    const direct = loadConfig({ DATABASE_URL: 'postgres://app@db.internal:5432/store' });
    expect(direct.db.poolMode).toBe('direct');
    expect(direct.db.namedStatements).toBe(true);
    expect(loadConfig({ DATABASE_URL: 'postgres://app@db.internal:5432/store', DATABASE_NAMED_STATEMENTS: 'false' }).db.namedStatements).toBe(false);
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

  it('takes READ_DATABASE_URLS (hot standbys, none by default) with their lag, check, read-your-writes and deadline settings', () => {
    expect(loadConfig({}).readReplicas).toEqual({ standbys: [], maxLagMs: 5_000, checkIntervalMs: 1_000, readYourWritesWaitMs: 500, timeoutMs: 1_000 });
    const config = loadConfig({
      DATABASE_URL: 'postgres://app@db.internal/store',
      READ_DATABASE_URLS: ' postgres://app:s3cret@standby-1/store , postgresql://app@standby-2:5433/store',
      MAX_REPLICA_LAG_MS: '2000',
      REPLICA_CHECK_INTERVAL_MS: '250',
      READ_YOUR_WRITES_WAIT_MS: '0',
      REPLICA_TIMEOUT_MS: '750',
    });
    expect(config.readReplicas.standbys.map((standby) => standby.connectionString)).toEqual(['postgres://app:s3cret@standby-1/store', 'postgresql://app@standby-2:5433/store']);
    expect(config.readReplicas.standbys[0]!.display).not.toContain('s3cret');
    expect(config.readReplicas).toMatchObject({ maxLagMs: 2_000, checkIntervalMs: 250, readYourWritesWaitMs: 0, timeoutMs: 750 });
  });

  it('refuses READ_DATABASE_URLS with SQLite, or listing anything but Postgres URLs, without showing a password', () => {
    expect(problemsOf({ READ_DATABASE_URLS: 'postgres://a@standby/store' })).toEqual(['READ_DATABASE_URLS: read standbys need a Postgres DATABASE_URL (SQLite has none)']);
    const problems = problemsOf({ DATABASE_URL: 'postgres://a@db/store', READ_DATABASE_URLS: 'postgres://a:s3cret@ok/store,sqlite:./x.sqlite,mysql://a:s3cret@db/x' });
    expect(problems).toEqual([
      'READ_DATABASE_URLS: URL 2 must list postgres:// URLs of hot standbys',
      expect.stringMatching(/^READ_DATABASE_URLS: URL 3 must start with postgres:\/\//),
    ]);
    expect(problems.join('\n')).not.toContain('s3cret');
    expect(problemsOf({ DATABASE_URL: 'postgres://a@db/store', REPLICA_CHECK_INTERVAL_MS: '10' })).toEqual([expect.stringMatching(/^REPLICA_CHECK_INTERVAL_MS: /)]);
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
      expect.stringMatching(/^CHANGE_FEED_DATABASE_URL: must start with postgres:\/\//),
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
    expect(problems[0]).toMatch(/must be comma-separated DIDs .*; "not-a-did" is not one/);
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
