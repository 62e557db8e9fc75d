/**
 * Request-rate limits per viewer (DID) and per client IP, with
 * rate-limiter-flexible: by default counted in each replica's memory (no
 * statement per request); with `RATE_LIMIT_STORE=postgres` the counters live
 * in the database (table `kubun_connector_rate_limit`, created by the
 * library), so every replica counts against the same budget.
 * A request past a limit is refused with `RATE_LIMITED` (HTTP 429,
 * `Retry-After`), before it reads or writes anything.
 */
import { GraphQLError } from 'graphql';
import type pg from 'pg';
import { RateLimiterMemory, RateLimiterPostgres, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';

/** The limits: requests per window; 0 turns one off. */
export interface RateLimitConfig {
  perViewer: number;
  perIP: number;
  windowSeconds: number;
}

/** Counts one request of a viewer and of an IP; throws the 429 error when either is over. */
export interface RequestRateLimiter {
  consume(request: { viewerDID: string | null; ip: string | null }): Promise<void>;
}

const TABLE = 'kubun_connector_rate_limit';

function limiters(config: RateLimitConfig, make: (keyPrefix: string, points: number) => RateLimiterAbstract) {
  return {
    viewer: config.perViewer > 0 ? make('viewer', config.perViewer) : undefined,
    ip: config.perIP > 0 ? make('ip', config.perIP) : undefined,
  };
}

function limiterOver(pair: { viewer: RateLimiterAbstract | undefined; ip: RateLimiterAbstract | undefined }): RequestRateLimiter {
  return {
    async consume({ viewerDID, ip }) {
      try {
        if (pair.ip !== undefined && ip !== null) await pair.ip.consume(ip);
        if (pair.viewer !== undefined && viewerDID !== null) await pair.viewer.consume(viewerDID);
      } catch (error) {
        if (!(error instanceof RateLimiterRes)) throw error;
        const seconds = Math.max(1, Math.ceil(error.msBeforeNext / 1_000));
        throw new GraphQLError(`too many requests: retry in ${seconds} s`, {
          extensions: { code: 'RATE_LIMITED', retryable: true, http: { status: 429, headers: { 'Retry-After': String(seconds) } } },
        });
      }
    },
  };
}

/** Limits counted in this process (SQLite, tests). */
export function createMemoryRateLimiter(config: RateLimitConfig): RequestRateLimiter {
  return limiterOver(limiters(config, (keyPrefix, points) => new RateLimiterMemory({ keyPrefix, points, duration: config.windowSeconds })));
}

/**
 * Limits shared by every replica through Postgres. Resolves once the
 * counters' table exists. Needs a direct connection (the library prepares
 * named statements, which a transaction-pooling PgBouncer cannot keep):
 * behind one, main.ts passes a pool on the direct URL.
 */
export async function createPostgresRateLimiter(pool: pg.Pool, config: RateLimitConfig): Promise<RequestRateLimiter> {
  // One after the other: two concurrent CREATE TABLE IF NOT EXISTS of one table can collide.
  const make = (keyPrefix: string, points: number) =>
    new Promise<RateLimiterPostgres>((resolve, reject) => {
      const limiter: RateLimiterPostgres = new RateLimiterPostgres(
        { storeClient: pool, tableName: TABLE, keyPrefix, points, duration: config.windowSeconds },
        (error?: Error) => (error ? reject(error) : resolve(limiter)),
      );
    });
  const viewer = config.perViewer > 0 ? await make('viewer', config.perViewer) : undefined;
  const ip = config.perIP > 0 ? await make('ip', config.perIP) : undefined;
  return limiterOver({ viewer, ip });
}
