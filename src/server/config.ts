/**
 * Server configuration from the environment, validated once at start-up.
 * Every problem is reported at once, one line each, in words:
 * `PORT: must be an integer from 0 to 65535 (got "abc")`: the variable, the
 * form it must have and the value got (never a secret's).
 */
import { parseCorsOrigins } from './cors.js';
import { z } from 'zod';
import { DEFAULT_AUDIENCE, isDID } from '../auth/index.js';
import { DatabaseConfigError, maskDatabaseURL, parseDatabaseURL, type DatabaseTarget, type PoolMode, type PostgresTarget } from '../db/connect.js';
import { DEFAULT_REPLICA_TIMEOUT_MS } from '../db/read-replicas.js';

/**
 * A variable whose value `read` turns into the setting, or refuses with
 * undefined; the refusal reads `must be ${expected}`.
 */
function variable<T>(expected: string | ((raw: string) => string), read: (raw: string) => T | undefined) {
  return z.string().transform((raw, ctx): T => {
    const value = read(raw);
    if (value !== undefined) return value;
    ctx.issues.push({ code: 'custom', message: `must be ${typeof expected === 'string' ? expected : expected(raw)}`, input: raw });
    return z.NEVER;
  });
}

const int = (min: number, max: number) =>
  variable(`an integer from ${min} to ${max}`, (raw) => {
    const value = /^\s*\d+\s*$/.test(raw) ? Number(raw) : Number.NaN;
    return value >= min && value <= max ? value : undefined;
  });
const BOOLEANS: Readonly<Record<string, boolean>> = { true: true, false: false, 1: true, 0: false, yes: true, no: false };
const bool = variable('true or false (or 1/0, yes/no)', (raw) => BOOLEANS[raw.trim().toLowerCase()]);
const oneOf = <const T extends readonly string[]>(values: T) => variable(`one of ${values.join(', ')}`, (raw) => values.find((v): v is T[number] => v === raw.trim()));
const text = (expected: string) => variable(expected, (raw) => (raw.trim() === '' ? undefined : raw.trim()));
const listed = (raw: string) => raw.split(',').map((d) => d.trim()).filter((d) => d !== '');
const didList = variable(
  (raw) => {
    const bad = listed(raw).filter((d) => !isDID(d));
    return `comma-separated DIDs (did:method:identifier); ${bad.map((d) => JSON.stringify(d)).join(', ')} ${bad.length === 1 ? 'is not one' : 'are not'}`;
  },
  (raw) => (listed(raw).every(isDID) ? listed(raw) : undefined),
);

/**
 * Every variable the schema reads, with its form and default (CORS_ORIGINS is
 * read on its own). Exported for docs/configuration.md's test.
 */
export const EnvSchema = z.object({
  NODE_ENV: oneOf(['development', 'production', 'test']).default('development'),
  PORT: int(0, 65_535).default(4000),
  HOST: text('a host name or address to listen on, e.g. 127.0.0.1 or 0.0.0.0').default('127.0.0.1'),
  DATABASE_URL: z.string().optional(),
  DATABASE_POOL_MODE: oneOf(['direct', 'transaction']).default('direct'),
  DATABASE_NAMED_STATEMENTS: bool.default(true),
  CHANGE_FEED_DATABASE_URL: z.string().optional(),
  READ_DATABASE_URLS: z.string().optional(),
  MAX_REPLICA_LAG_MS: int(0, 3_600_000).default(5_000),
  REPLICA_CHECK_INTERVAL_MS: int(50, 60_000).default(1_000),
  READ_YOUR_WRITES_WAIT_MS: int(0, 10_000).default(500),
  REPLICA_TIMEOUT_MS: int(50, 60_000).default(DEFAULT_REPLICA_TIMEOUT_MS),
  LOG_LEVEL: oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FORMAT: oneOf(['json', 'pretty']).optional(),
  SLOW_REQUEST_MS: int(1, 3_600_000).default(1_000),
  METRICS: bool.default(true),
  METRICS_TOKEN: variable('at least 16 printable ASCII characters without spaces', (raw) => (/^[\x21-\x7e]{16,}$/.test(raw) ? raw : undefined)).optional(),
  METRICS_CACHE_MS: int(0, 600_000).default(5_000),
  PERSISTED_DOCUMENTS: oneOf(['off', 'allow', 'only']).default('off'),
  PERSISTED_DOCUMENTS_FILE: text('a path to a persisted-documents manifest (JSON)').optional(),
  AUTH_AUDIENCE: text('a non-empty string').default(DEFAULT_AUDIENCE),
  SERVICE_DIDS: didList.default([]),
  INSECURE_HEADER_AUTH: bool.default(false),
  GRAPHIQL: bool.optional(),
  CONSOLE: bool.default(true),
  INTROSPECTION: bool.default(true),
  DB_STATEMENT_TIMEOUT_MS: int(100, 600_000).default(10_000),
  DB_POOL_MAX: int(1, 500).default(10),
  MAX_QUERY_DEPTH: int(1, 100).default(12),
  // A dashboard page of 100 operations with every field costs ~10 000.
  MAX_QUERY_COST: int(100, 1_000_000).default(20_000),
  MAX_ALIASES: int(1, 1_000).default(30),
  // The largest single bulk action fits (a sweep receipt's 10 000 candidates); that is ten operator actions at their 1 000 cap.
  MAX_BULK_ROWS_PER_REQUEST: int(1, 1_000_000).default(10_000),
  MAX_TOKENS: int(100, 1_000_000).default(5_000),
  MAX_BODY_BYTES: int(1_024, 50_000_000).default(1_000_000),
  MAX_RESPONSE_BYTES: int(1_024, 1_000_000_000).default(8_000_000),
  MAX_SUBSCRIPTIONS_PER_VIEWER: int(1, 10_000).default(20),
  MAX_SUBSCRIPTIONS: int(1, 1_000_000).default(1_000),
  // For viewers who own nothing yet, per remote address (0: no cap; behind a proxy every client shares its address).
  MAX_SUBSCRIPTIONS_PER_IP: int(0, 1_000_000).default(100),
  // The share of MAX_SUBSCRIPTIONS (and of reserved streams, WebSocket connections) such viewers may hold together.
  UNKNOWN_VIEWER_SHARE_PERCENT: int(0, 100).default(50),
  MAX_WEBSOCKET_CONNECTIONS: int(1, 1_000_000).default(1_000),
  // One socket carries many subscriptions: a viewer needs a few (one per tab), not the replica's.
  MAX_WEBSOCKET_CONNECTIONS_PER_VIEWER: int(1, 1_000_000).default(20),
  WS_CONNECTION_INIT_TIMEOUT_MS: int(100, 60_000).default(3_000),
  // Sockets still sending headers or before connection_init (waiting-sockets.ts): per address (0: no cap), and in all.
  MAX_PENDING_SOCKETS_PER_IP: int(0, 1_000_000).default(32),
  MAX_PENDING_SOCKETS: int(1, 1_000_000).default(1_000),
  // One IPv6 host usually holds a /64: per-address limits count IPv6 clients by this prefix.
  IPV6_PREFIX_BITS: int(1, 128).default(64),
  // A viewer is known (admission.ts) by a row older than this, or as a service DID; 0: any row, at once.
  KNOWN_VIEWER_ROW_AGE_MS: int(0, 30 * 86_400_000).default(3_600_000),
  // Floods, not traffic: ~1 000 requests/s per viewer and ~2 000/s per address, sustained over a minute.
  RATE_LIMIT_PER_VIEWER: int(0, 100_000_000).default(60_000),
  RATE_LIMIT_PER_IP: int(0, 100_000_000).default(120_000),
  RATE_LIMIT_STORE: oneOf(['memory', 'postgres']).default('memory'),
  RATE_LIMIT_WINDOW_SECONDS: int(1, 86_400).default(60),
  HTTP_HEADERS_TIMEOUT_MS: int(1_000, 600_000).default(10_000),
  HTTP_REQUEST_TIMEOUT_MS: int(1_000, 3_600_000).default(30_000),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: int(1_000, 600_000).default(65_000),
  RETENTION_INTERVAL_MS: int(0, 86_400_000).default(300_000),
  BACKLOG_SAMPLE_INTERVAL_MS: int(0, 3_600_000).default(300_000),
  IDEMPOTENCY_WINDOW_MS: int(60_000, 30 * 86_400_000).default(86_400_000),
  DEAD_RETENTION_MS: int(60_000, 365 * 86_400_000).default(7 * 86_400_000),
  SHUTDOWN_GRACE_MS: int(0, 600_000).default(10_000),
  SHUTDOWN_DRAIN_MS: int(0, 600_000).optional(),
});

/** Every environment variable the configuration reads. */
export const CONFIG_VARIABLES: readonly string[] = [...Object.keys(EnvSchema.shape), 'CORS_ORIGINS'];

/** Whether a variable holds a secret (TOKEN, KEY, SECRET or PASSWORD in its name), whose value is never printed. */
export function isSecretVariable(name: string): boolean {
  // MAX_TOKENS is a query-size limit (graphql-armor's tokens), not a credential.
  return /TOKEN|KEY|SECRET|PASSWORD/i.test(name) && name.toUpperCase() !== 'MAX_TOKENS';
}

/** The value of `name` as a problem line shows it: quoted, masked or not at all. */
function shownValue(name: string, value: string | undefined): string {
  if (value === undefined) return 'nothing';
  if (isSecretVariable(name)) return `${value.length} characters, not shown`;
  const shown = /DATABASE_URLS?$/.test(name) ? value.split(',').map(maskDatabaseURL).join(',') : value;
  return JSON.stringify(shown.length > 200 ? `${shown.slice(0, 200)}…` : shown);
}

/** One problem line: `NAME: must … (got "value")`. */
function problem(name: string, env: Record<string, string | undefined>, message: string): string {
  return `${name}: ${message} (got ${shownValue(name, env[name])})`;
}

/** The validated configuration the server runs with. */
export interface ServerConfig {
  env: 'development' | 'production' | 'test';
  port: number;
  host: string;
  /** `DATABASE_URL`: requests, jobs and change-feed NOTIFYs (through a pooler when `db.poolMode` is `transaction`). */
  database: DatabaseTarget;
  /**
   * A direct connection to the same database, for what needs a session of its
   * own: the change feed's LISTEN and, behind a transaction pooler, migrations
   * and the Postgres rate-limit store. `CHANGE_FEED_DATABASE_URL`, else `database`.
   */
  directDatabase: DatabaseTarget;
  logLevel: string;
  /** `pretty` (pino-pretty, for a terminal) by default in development, JSON lines otherwise. */
  logFormat: 'json' | 'pretty';
  /** Requests slower than this are logged at warn. */
  slowRequestMs: number;
  /** `GET /metrics` (Prometheus): on by default; `token` makes scrapes send it as a bearer token; store gauges are reused for `cacheMs`. */
  metrics: { enabled: boolean; token: string | undefined; cacheMs: number };
  /** Documents by id (persisted-documents.ts): `off`, `allow` (ids or documents), `only` (ids only); `file`: the manifest, default the generated one. */
  persistedDocuments: { mode: 'off' | 'allow' | 'only'; file: string | undefined };
  auth: {
    audience: string;
    serviceDIDs: ReadonlySet<string>;
    /** Development only: trust an `x-viewer-did` header. Refused unless HOST is loopback. */
    insecureHeaderAuth: boolean;
  };
  /** Origins (scheme://host[:port]) whose pages may call this server from a browser; none by default. */
  corsOrigins: readonly string[];
  graphiql: boolean;
  /** Whether /console is served (built at start when missing or stale). */
  console: boolean;
  introspection: boolean;
  /** `poolMode` `transaction`: `DATABASE_URL` goes through a transaction-pooling PgBouncer (see {@link PoolMode}). */
  db: { statementTimeoutMs: number; poolMax: number; poolMode: PoolMode; namedStatements: boolean };
  /**
   * Hot standbys for reads that may be a moment stale (`READ_DATABASE_URLS`,
   * comma-separated Postgres URLs; none by default): see src/db/read-replicas.ts.
   */
  readReplicas: {
    standbys: PostgresTarget[];
    maxLagMs: number;
    checkIntervalMs: number;
    readYourWritesWaitMs: number;
    /** The client-side deadline of every standby call (connect, statement, replay-position check): past it the standby leaves rotation and the read runs on the primary. */
    timeoutMs: number;
  };
  limits: {
    maxDepth: number;
    maxCost: number;
    /** Rows all bulk fields of one request may write together (a bulk action's cap, a receipt's candidates); past it → QUERY_COMPLEXITY before anything runs. */
    maxBulkRows: number;
    maxAliases: number;
    maxTokens: number;
    maxBodyBytes: number;
    /** Largest answer, roughly in JSON bytes; past it → RESPONSE_TOO_LARGE. */
    maxResponseBytes: number;
    /** Open subscriptions per viewer, per replica. */
    maxSubscriptionsPerViewer: number;
    /** Open subscriptions on this replica, all viewers together (many fresh did:keys must not add up to unbounded). */
    maxSubscriptions: number;
    /** Subscriptions, reserved streams and WebSocket connections that viewers who own nothing may hold from one address (0: no cap); known viewers are not counted. */
    maxSubscriptionsPerIP: number;
    /** Percentage of each process-wide cap that viewers who own nothing (not service DIDs) may hold together; the rest is kept for known viewers. */
    unknownViewerPercent: number;
    /** Open WebSocket connections on this replica; an upgrade past it is refused with 503. */
    maxWebSocketConnections: number;
    /** Initialised WebSocket connections one viewer may hold on this replica (known or not); past it → close 4429. */
    maxWebSocketConnectionsPerViewer: number;
    /** How long a WebSocket client has to send `connection_init` before it is closed (4408). */
    webSocketInitTimeoutMs: number;
    /** Sockets still sending request headers or before `connection_init` one address may hold (0: no cap); past it its oldest is closed (waiting-sockets.ts). */
    maxPendingSocketsPerIP: number;
    /** Such sockets of every address together; past it the oldest anywhere is closed. */
    maxPendingSockets: number;
    /** Per-address limits count an IPv6 client by this many leading bits of its address (client-address.ts); IPv4 per address. */
    ipv6PrefixBits: number;
    /** A viewer who owns a row created at least this long ago is known to admission (as a service DID is); 0: any row (and any sync state) at once. */
    knownViewerRowAgeMs: number;
  };
  jobs: {
    /** How often retention and the pending-auth expiry sweep run; 0 disables. */
    retentionIntervalMs: number;
    idempotencyWindowMs: number;
    /** How long dead operations and their attempt history are kept for operators. */
    deadRetentionMs: number;
    /** Spacing of the due-backlog samples the overview's backlog chart draws (one per slot across replicas); 0 takes none. */
    backlogSampleIntervalMs: number;
  };
  shutdownGraceMs: number;
  /** Requests per window per viewer DID and per client IP (0: no limit); shared by replicas on Postgres. */
  rateLimits: { perViewer: number; perIP: number; windowSeconds: number; store: 'memory' | 'postgres' };
  /** Node HTTP server timeouts: a client slow to send its headers or its request is cut off; idle keep-alive sockets live longer than clients' (and load balancers') own idle timeouts, so the server never closes one a client is about to reuse. */
  http: { headersTimeoutMs: number; requestTimeoutMs: number; keepAliveTimeoutMs: number };
  /** How long the server keeps accepting after readiness fails (0 in development, 5 s in production by default). */
  shutdownDrainMs: number;
}

/** Thrown with every configuration problem, one per line. */
export class ConfigError extends Error {
  readonly code = 'CONFIG_INVALID';
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

const LOOPBACK = new Set(['127.0.0.1', '::1', 'localhost']);

/** Reads and validates the configuration from `env` (default `process.env`). */
export function loadConfig(env: Record<string, string | undefined> = process.env): ServerConfig {
  const parsed = EnvSchema.safeParse(env);
  const problems: string[] = [];
  // One line per variable, however many of its checks failed.
  const named = new Set<string>();
  for (const issue of parsed.success ? [] : parsed.error.issues) {
    const name = String(issue.path[0] ?? 'environment');
    if (!named.has(name)) problems.push(problem(name, env, issue.message));
    named.add(name);
  }
  // The checks below run even when another variable is bad, so one start reports every problem.
  let database: DatabaseTarget | undefined;
  try {
    database = parseDatabaseURL(env.DATABASE_URL);
  } catch (error) {
    problems.push(problem('DATABASE_URL', env, error instanceof DatabaseConfigError ? error.problem : String(error)));
  }
  const pooling = EnvSchema.shape.DATABASE_POOL_MODE.safeParse(env.DATABASE_POOL_MODE);
  const directDatabase = directTarget(env, database, pooling.success ? pooling.data : 'direct', problems);
  let corsOrigins: string[] = [];
  try {
    corsOrigins = parseCorsOrigins(env.CORS_ORIGINS);
  } catch (error) {
    problems.push(problem('CORS_ORIGINS', env, `must be comma-separated origins (scheme://host[:port], e.g. https://dash.example.com); ${(error as Error).message}`));
  }
  const standbys = readTargets(env, database, problems);
  const access = EnvSchema.pick({ NODE_ENV: true, HOST: true, INSECURE_HEADER_AUTH: true }).safeParse(env);
  if (access.success && access.data.INSECURE_HEADER_AUTH && !LOOPBACK.has(access.data.HOST)) {
    problems.push(`INSECURE_HEADER_AUTH: only allowed when HOST is a loopback address, got ${access.data.HOST}`);
  }
  if (access.success && access.data.INSECURE_HEADER_AUTH && access.data.NODE_ENV === 'production') {
    problems.push('INSECURE_HEADER_AUTH: never allowed with NODE_ENV=production');
  }
  if (!parsed.success || problems.length > 0 || database === undefined || directDatabase === undefined) throw new ConfigError(problems);
  const e = parsed.data;
  return {
    env: e.NODE_ENV,
    port: e.PORT,
    host: e.HOST,
    database,
    directDatabase,
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT ?? (e.NODE_ENV === 'development' ? 'pretty' : 'json'),
    slowRequestMs: e.SLOW_REQUEST_MS,
    metrics: { enabled: e.METRICS, token: e.METRICS_TOKEN, cacheMs: e.METRICS_CACHE_MS },
    persistedDocuments: { mode: e.PERSISTED_DOCUMENTS, file: e.PERSISTED_DOCUMENTS_FILE },
    auth: { audience: e.AUTH_AUDIENCE, serviceDIDs: new Set(e.SERVICE_DIDS), insecureHeaderAuth: e.INSECURE_HEADER_AUTH },
    corsOrigins,
    graphiql: e.GRAPHIQL ?? e.NODE_ENV !== 'production',
    console: e.CONSOLE,
    introspection: e.INTROSPECTION,
    db: { statementTimeoutMs: e.DB_STATEMENT_TIMEOUT_MS, poolMax: e.DB_POOL_MAX, poolMode: e.DATABASE_POOL_MODE, namedStatements: e.DATABASE_NAMED_STATEMENTS },
    readReplicas: { standbys, maxLagMs: e.MAX_REPLICA_LAG_MS, checkIntervalMs: e.REPLICA_CHECK_INTERVAL_MS, readYourWritesWaitMs: e.READ_YOUR_WRITES_WAIT_MS, timeoutMs: e.REPLICA_TIMEOUT_MS },
    limits: {
      maxDepth: e.MAX_QUERY_DEPTH,
      maxCost: e.MAX_QUERY_COST,
      maxBulkRows: e.MAX_BULK_ROWS_PER_REQUEST,
      maxAliases: e.MAX_ALIASES,
      maxTokens: e.MAX_TOKENS,
      maxBodyBytes: e.MAX_BODY_BYTES,
      maxResponseBytes: e.MAX_RESPONSE_BYTES,
      maxSubscriptionsPerViewer: e.MAX_SUBSCRIPTIONS_PER_VIEWER,
      maxSubscriptions: e.MAX_SUBSCRIPTIONS,
      maxSubscriptionsPerIP: e.MAX_SUBSCRIPTIONS_PER_IP,
      unknownViewerPercent: e.UNKNOWN_VIEWER_SHARE_PERCENT,
      maxWebSocketConnections: e.MAX_WEBSOCKET_CONNECTIONS,
      maxWebSocketConnectionsPerViewer: e.MAX_WEBSOCKET_CONNECTIONS_PER_VIEWER,
      webSocketInitTimeoutMs: e.WS_CONNECTION_INIT_TIMEOUT_MS,
      maxPendingSocketsPerIP: e.MAX_PENDING_SOCKETS_PER_IP,
      maxPendingSockets: e.MAX_PENDING_SOCKETS,
      ipv6PrefixBits: e.IPV6_PREFIX_BITS,
      knownViewerRowAgeMs: e.KNOWN_VIEWER_ROW_AGE_MS,
    },
    jobs: { retentionIntervalMs: e.RETENTION_INTERVAL_MS, idempotencyWindowMs: e.IDEMPOTENCY_WINDOW_MS, deadRetentionMs: e.DEAD_RETENTION_MS, backlogSampleIntervalMs: e.BACKLOG_SAMPLE_INTERVAL_MS },
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    rateLimits: { perViewer: e.RATE_LIMIT_PER_VIEWER, perIP: e.RATE_LIMIT_PER_IP, windowSeconds: e.RATE_LIMIT_WINDOW_SECONDS, store: e.RATE_LIMIT_STORE },
    http: { headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS, requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS, keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT_MS },
    shutdownDrainMs: e.SHUTDOWN_DRAIN_MS ?? (e.NODE_ENV === 'production' ? 5_000 : 0),
  };
}

/**
 * `READ_DATABASE_URLS`: comma-separated Postgres URLs of hot standbys of the
 * `DATABASE_URL` database; only with a Postgres `DATABASE_URL`. Problems are
 * pushed to `problems`.
 */
function readTargets(env: Record<string, string | undefined>, database: DatabaseTarget | undefined, problems: string[]): PostgresTarget[] {
  const raw = env.READ_DATABASE_URLS?.trim() ?? '';
  if (raw === '') return [];
  const standbys: PostgresTarget[] = [];
  for (const [index, url] of raw.split(',').map((part) => part.trim()).entries()) {
    try {
      const target = parseDatabaseURL(url, 'READ_DATABASE_URLS');
      if (target.dialect !== 'postgres') throw new DatabaseConfigError('READ_DATABASE_URLS', 'must list postgres:// URLs of hot standbys');
      standbys.push(target);
    } catch (error) {
      const reason = error instanceof DatabaseConfigError ? error.problem : String(error);
      problems.push(`READ_DATABASE_URLS: URL ${index + 1} ${reason}`);
    }
  }
  if (database !== undefined && database.dialect !== 'postgres') problems.push('READ_DATABASE_URLS: read standbys need a Postgres DATABASE_URL (SQLite has none)');
  return standbys;
}

/**
 * The direct connection (`CHANGE_FEED_DATABASE_URL`, default `DATABASE_URL`).
 * Behind a transaction pooler it must be given and differ from
 * `DATABASE_URL`: LISTEN through PgBouncer would be accepted and then never
 * deliver a notification. Problems are pushed to `problems`.
 */
function directTarget(
  env: Record<string, string | undefined>,
  database: DatabaseTarget | undefined,
  poolMode: PoolMode,
  problems: string[],
): DatabaseTarget | undefined {
  const given = env.CHANGE_FEED_DATABASE_URL?.trim() ?? '';
  if (poolMode === 'transaction' && database !== undefined && database.dialect !== 'postgres') {
    problems.push('DATABASE_POOL_MODE: transaction is for a postgres:// DATABASE_URL that goes through PgBouncer');
    return undefined;
  }
  if (given === '') {
    if (poolMode === 'transaction') {
      problems.push(
        'CHANGE_FEED_DATABASE_URL: required with DATABASE_POOL_MODE=transaction: a direct postgres:// URL of the same database (LISTEN, migrations and RATE_LIMIT_STORE=postgres cannot go through a transaction pooler)',
      );
      return undefined;
    }
    return database;
  }
  let direct: DatabaseTarget;
  try {
    direct = parseDatabaseURL(given, 'CHANGE_FEED_DATABASE_URL');
  } catch (error) {
    problems.push(problem('CHANGE_FEED_DATABASE_URL', env, error instanceof DatabaseConfigError ? error.problem : String(error)));
    return undefined;
  }
  if (direct.dialect !== 'postgres' || (database !== undefined && database.dialect !== 'postgres')) {
    problems.push('CHANGE_FEED_DATABASE_URL: only for a postgres:// DATABASE_URL, and itself a postgres:// URL (on SQLite the change feed stays in process)');
    return undefined;
  }
  if (poolMode === 'transaction' && database !== undefined && database.dialect === 'postgres' && database.connectionString === direct.connectionString) {
    problems.push('CHANGE_FEED_DATABASE_URL: must be a direct connection to Postgres, not the pooled DATABASE_URL');
    return undefined;
  }
  return direct;
}
