/**
 * Database failures a client should retry, told apart from defects: a
 * statement that ran out of time, a pool with no connection to spare, a
 * database that went away (restart, failover, a terminated backend). The API
 * answers these with a typed, retryable error instead of the generic mask.
 */

/** What kind of retryable failure a driver error is. */
export type DatabaseFailureCode = 'DATABASE_TIMEOUT' | 'OVERLOADED' | 'DATABASE_UNAVAILABLE';

/** A retryable database failure, in words a client can show. */
export interface DatabaseFailure {
  code: DatabaseFailureCode;
  message: string;
  /** A sensible wait before retrying, in seconds (the `Retry-After` header). */
  retryAfterSeconds: number;
}

/** Postgres SQLSTATEs (https://www.postgresql.org/docs/current/errcodes-appendix.html). */
const TIMEOUT_STATES = new Set(['57014', '55P03']); // query_canceled (statement_timeout), lock_not_available
const UNAVAILABLE_STATES = new Set(['57P01', '57P02', '57P03', '53300', '08000', '08001', '08003', '08004', '08006', '08007']);
/** serialization_failure, deadlock_detected: the transaction was rolled back whole and can simply run again. */
const CONFLICT_STATES = new Set(['40001', '40P01']);
const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENOTFOUND']);
/** pg and pg-pool raise these as plain Errors, without a code. */
const UNAVAILABLE_MESSAGES = [/Connection terminated/i, /not queryable/i, /Client was closed/i, /connection is closed/i];
const POOL_TIMEOUT_MESSAGE = /timeout exceeded when trying to connect/i;
/** pg's own deadlines: a statement past `query_timeout`, a connection attempt past `connectionTimeoutMillis`. */
const CLIENT_DEADLINE_MESSAGES = [/^Query read timeout$/, /Connection terminated due to connection timeout/i];
/** better-sqlite3: another process (or a long transaction) held the lock past busy_timeout. */
const SQLITE_BUSY_CODES = new Set(['SQLITE_BUSY', 'SQLITE_LOCKED', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_TIMEOUT']);

/** Classifies a thrown error (or anything in its `cause` chain); null when it is not a retryable database failure. */
export function classifyDatabaseError(error: unknown): DatabaseFailure | null {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') {
      if (TIMEOUT_STATES.has(code)) return { code: 'DATABASE_TIMEOUT', message: 'The database did not answer in time; retry shortly.', retryAfterSeconds: 1 };
      if (UNAVAILABLE_STATES.has(code) || NETWORK_CODES.has(code)) {
        return { code: 'DATABASE_UNAVAILABLE', message: 'The database connection was lost; retry shortly.', retryAfterSeconds: 1 };
      }
      if (CONFLICT_STATES.has(code)) return { code: 'OVERLOADED', message: 'A concurrent write got in the way; retry.', retryAfterSeconds: 1 };
      if (SQLITE_BUSY_CODES.has(code)) return { code: 'OVERLOADED', message: 'The database is busy; retry shortly.', retryAfterSeconds: 1 };
    }
    if (CLIENT_DEADLINE_MESSAGES[0]!.test(current.message)) {
      return { code: 'DATABASE_TIMEOUT', message: 'The database did not answer in time; retry shortly.', retryAfterSeconds: 1 };
    }
    if (POOL_TIMEOUT_MESSAGE.test(current.message)) {
      return { code: 'OVERLOADED', message: 'The server has no database connection free; retry shortly.', retryAfterSeconds: 1 };
    }
    if (UNAVAILABLE_MESSAGES.some((pattern) => pattern.test(current.message))) {
      return { code: 'DATABASE_UNAVAILABLE', message: 'The database connection was lost; retry shortly.', retryAfterSeconds: 1 };
    }
  }
  return null;
}

/**
 * Whether `error` is one of the client's own deadlines (pg's `query_timeout`
 * or `connectionTimeoutMillis`): the server gave no answer at all, which a
 * server-side `statement_timeout` cannot catch when the host is frozen.
 */
export function isClientDeadline(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth++) {
    const { message } = current;
    if (CLIENT_DEADLINE_MESSAGES.some((pattern) => pattern.test(message))) return true;
  }
  return false;
}

/**
 * Whether `error` is Postgres's unique violation (23505), on `constraint`
 * when named: a statement that collided on a key, and wrote nothing.
 */
export function isUniqueViolation(error: unknown, constraint?: string): boolean {
  const failure = error as { code?: unknown; constraint?: unknown } | null;
  return failure !== null && typeof failure === 'object' && failure.code === '23505' && (constraint === undefined || failure.constraint === constraint);
}

/**
 * Whether a statement that carried many callers' items and failed with
 * `error` should be run again item by item: yes when one item can have
 * caused the failure (a key recorded already, a concurrent history entry, a
 * deadlock or serialization failure between its rows and another writer's,
 * or anything unclassified); no when the database itself failed (a statement
 * past its timeout, a lost connection, no connection free), where a hundred
 * statements in its place would only add to the load: every item then gets
 * that failure, typed and retryable ({@link classifyDatabaseError}).
 */
export function isItemLevelFailure(error: unknown): boolean {
  if (classifyDatabaseError(error) === null) return true;
  for (let current = error, depth = 0; current instanceof Error && depth < 5; current = current.cause, depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && CONFLICT_STATES.has(code)) return true;
  }
  return false;
}
