/**
 * Server configuration from the environment, validated once at start-up.
 * Every problem is reported at once, one line each, naming the variable.
 */
import { parseCorsOrigins } from './cors.js';
import { z } from 'zod';
import { DEFAULT_AUDIENCE, isDID } from '../auth/index.js';
import { parseDatabaseURL, type DatabaseTarget } from '../db/connect.js';



const int = (min: number, max: number) => z.coerce.number().int().min(min).max(max);
const bool = z
  .enum(['true', 'false', '1', '0', 'yes', 'no'])
  .transform((v) => v === 'true' || v === '1' || v === 'yes');

const EnvSchema = z.object({
  NODE_ENV: z.enum(['development', 'production', 'test']).default('development'),
  PORT: int(0, 65_535).default(4000),
  HOST: z.string().min(1).default('127.0.0.1'),
  DATABASE_URL: z.string().optional(),
  LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  LOG_FORMAT: z.enum(['json', 'pretty']).optional(),
  SLOW_REQUEST_MS: int(1, 3_600_000).default(1_000),
  METRICS: bool.default(true),
  METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').regex(/^[\x21-\x7e]+$/, 'printable ASCII without spaces').optional(),
  METRICS_CACHE_MS: int(0, 600_000).default(5_000),
  AUTH_AUDIENCE: z.string().min(1).default(DEFAULT_AUDIENCE),
  SERVICE_DIDS: z
    .string()
    .default('')
    .transform((s) => s.split(',').map((d) => d.trim()).filter((d) => d !== ''))
    .pipe(z.array(z.string().refine(isDID, 'each entry must be a DID (did:method:identifier)'))),
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
  MAX_TOKENS: int(100, 1_000_000).default(5_000),
  MAX_BODY_BYTES: int(1_024, 50_000_000).default(1_000_000),
  MAX_RESPONSE_BYTES: int(1_024, 1_000_000_000).default(8_000_000),
  MAX_SUBSCRIPTIONS_PER_VIEWER: int(1, 10_000).default(20),
  MAX_SUBSCRIPTIONS: int(1, 1_000_000).default(1_000),
  MAX_WEBSOCKET_CONNECTIONS: int(1, 1_000_000).default(1_000),
  WS_CONNECTION_INIT_TIMEOUT_MS: int(100, 60_000).default(3_000),
  // Floods, not traffic: ~1 000 requests/s per viewer and ~2 000/s per address, sustained over a minute.
  RATE_LIMIT_PER_VIEWER: int(0, 100_000_000).default(60_000),
  RATE_LIMIT_PER_IP: int(0, 100_000_000).default(120_000),
  RATE_LIMIT_STORE: z.enum(['memory', 'postgres']).default('memory'),
  RATE_LIMIT_WINDOW_SECONDS: int(1, 86_400).default(60),
  HTTP_HEADERS_TIMEOUT_MS: int(1_000, 600_000).default(10_000),
  HTTP_REQUEST_TIMEOUT_MS: int(1_000, 3_600_000).default(30_000),
  HTTP_KEEP_ALIVE_TIMEOUT_MS: int(1_000, 600_000).default(65_000),
  RETENTION_INTERVAL_MS: int(0, 86_400_000).default(300_000),
  IDEMPOTENCY_WINDOW_MS: int(60_000, 30 * 86_400_000).default(86_400_000),
  DEAD_RETENTION_MS: int(60_000, 365 * 86_400_000).default(7 * 86_400_000),
  SHUTDOWN_GRACE_MS: int(0, 600_000).default(10_000),
  SHUTDOWN_DRAIN_MS: int(0, 600_000).optional(),
});

/** The validated configuration the server runs with. */
export interface ServerConfig {
  env: 'development' | 'production' | 'test';
  port: number;
  host: string;
  database: DatabaseTarget;
  logLevel: string;
  /** `pretty` (pino-pretty, for a terminal) by default in development, JSON lines otherwise. */
  logFormat: 'json' | 'pretty';
  /** Requests slower than this are logged at warn. */
  slowRequestMs: number;
  /** `GET /metrics` (Prometheus): on by default; `token` makes scrapes send it as a bearer token; store gauges are reused for `cacheMs`. */
  metrics: { enabled: boolean; token: string | undefined; cacheMs: number };
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
  db: { statementTimeoutMs: number; poolMax: number };
  limits: {
    maxDepth: number;
    maxCost: number;
    maxAliases: number;
    maxTokens: number;
    maxBodyBytes: number;
    /** Largest answer, roughly in JSON bytes; past it → RESPONSE_TOO_LARGE. */
    maxResponseBytes: number;
    /** Open subscriptions per viewer, per replica. */
    maxSubscriptionsPerViewer: number;
    /** Open subscriptions on this replica, all viewers together (many fresh did:keys must not add up to unbounded). */
    maxSubscriptions: number;
    /** Open WebSocket connections on this replica; an upgrade past it is refused with 503. */
    maxWebSocketConnections: number;
    /** How long a WebSocket client has to send `connection_init` before it is closed (4408). */
    webSocketInitTimeoutMs: number;
  };
  jobs: {
    /** How often retention and the pending-auth expiry sweep run; 0 disables. */
    retentionIntervalMs: number;
    idempotencyWindowMs: number;
    /** How long dead operations and their attempt history are kept for operators. */
    deadRetentionMs: number;
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
  const problems = parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join('.') || 'environment'}: ${i.message}`);
  // The checks below run even when another variable is bad, so one start reports every problem.
  let database: DatabaseTarget | undefined;
  try {
    database = parseDatabaseURL(env.DATABASE_URL);
  } catch (error) {
    problems.push(`DATABASE_URL: ${(error as Error).message}`);
  }
  let corsOrigins: string[] = [];
  try {
    corsOrigins = parseCorsOrigins(env.CORS_ORIGINS);
  } catch (error) {
    problems.push(`CORS_ORIGINS: ${(error as Error).message}`);
  }
  const access = EnvSchema.pick({ NODE_ENV: true, HOST: true, INSECURE_HEADER_AUTH: true }).safeParse(env);
  if (access.success && access.data.INSECURE_HEADER_AUTH && !LOOPBACK.has(access.data.HOST)) {
    problems.push(`INSECURE_HEADER_AUTH: only allowed when HOST is a loopback address, got ${access.data.HOST}`);
  }
  if (access.success && access.data.INSECURE_HEADER_AUTH && access.data.NODE_ENV === 'production') {
    problems.push('INSECURE_HEADER_AUTH: never allowed with NODE_ENV=production');
  }
  if (!parsed.success || problems.length > 0 || database === undefined) throw new ConfigError(problems);
  const e = parsed.data;
  return {
    env: e.NODE_ENV,
    port: e.PORT,
    host: e.HOST,
    database,
    logLevel: e.LOG_LEVEL,
    logFormat: e.LOG_FORMAT ?? (e.NODE_ENV === 'development' ? 'pretty' : 'json'),
    slowRequestMs: e.SLOW_REQUEST_MS,
    metrics: { enabled: e.METRICS, token: e.METRICS_TOKEN, cacheMs: e.METRICS_CACHE_MS },
    auth: { audience: e.AUTH_AUDIENCE, serviceDIDs: new Set(e.SERVICE_DIDS), insecureHeaderAuth: e.INSECURE_HEADER_AUTH },
    corsOrigins,
    graphiql: e.GRAPHIQL ?? e.NODE_ENV !== 'production',
    console: e.CONSOLE,
    introspection: e.INTROSPECTION,
    db: { statementTimeoutMs: e.DB_STATEMENT_TIMEOUT_MS, poolMax: e.DB_POOL_MAX },
    limits: {
      maxDepth: e.MAX_QUERY_DEPTH,
      maxCost: e.MAX_QUERY_COST,
      maxAliases: e.MAX_ALIASES,
      maxTokens: e.MAX_TOKENS,
      maxBodyBytes: e.MAX_BODY_BYTES,
      maxResponseBytes: e.MAX_RESPONSE_BYTES,
      maxSubscriptionsPerViewer: e.MAX_SUBSCRIPTIONS_PER_VIEWER,
      maxSubscriptions: e.MAX_SUBSCRIPTIONS,
      maxWebSocketConnections: e.MAX_WEBSOCKET_CONNECTIONS,
      webSocketInitTimeoutMs: e.WS_CONNECTION_INIT_TIMEOUT_MS,
    },
    jobs: { retentionIntervalMs: e.RETENTION_INTERVAL_MS, idempotencyWindowMs: e.IDEMPOTENCY_WINDOW_MS, deadRetentionMs: e.DEAD_RETENTION_MS },
    shutdownGraceMs: e.SHUTDOWN_GRACE_MS,
    rateLimits: { perViewer: e.RATE_LIMIT_PER_VIEWER, perIP: e.RATE_LIMIT_PER_IP, windowSeconds: e.RATE_LIMIT_WINDOW_SECONDS, store: e.RATE_LIMIT_STORE },
    http: { headersTimeoutMs: e.HTTP_HEADERS_TIMEOUT_MS, requestTimeoutMs: e.HTTP_REQUEST_TIMEOUT_MS, keepAliveTimeoutMs: e.HTTP_KEEP_ALIVE_TIMEOUT_MS },
    shutdownDrainMs: e.SHUTDOWN_DRAIN_MS ?? (e.NODE_ENV === 'production' ? 5_000 : 0),
  };
}
