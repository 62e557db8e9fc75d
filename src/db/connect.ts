/**
 * Opens the database that `DATABASE_URL` names: a pg pool for `postgres://`
 * (or `postgresql://`) URLs, an embedded better-sqlite3 file for `sqlite:PATH`
 * or no URL at all.
 */
import { mkdirSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import SQLite from 'better-sqlite3';
import {
  CompiledQuery,
  Kysely,
  PostgresDialect,
  PostgresDriver,
  SqliteAdapter,
  SqliteDriver,
  SqliteIntrospector,
  SqliteQueryCompiler,
  sql,
  type DatabaseConnection,
  type Dialect,
  type Driver,
  type LogConfig,
  type QueryResult,
  type SqliteDatabase,
  type TransactionSettings,
} from 'kysely';
import { LRUCache } from 'lru-cache';
import pg from 'pg';
import { classifyDatabaseError, isClientDeadline } from './errors.js';
import { CACHED_PLAN_CHANGED, statementName } from './named-statements.js';
import { isPlainStatement, withObjectRows } from './pg-rows.js';
import type { Database } from './tables.js';

export type DialectName = 'postgres' | 'sqlite';

/** Where the embedded database lives when `DATABASE_URL` is unset. */
export const DEFAULT_SQLITE_PATH = './data/connector-store.sqlite';

/** A database location parsed from `DATABASE_URL`. */
export type DatabaseTarget =
  | { dialect: 'postgres'; connectionString: string; display: string }
  | { dialect: 'sqlite'; path: string; display: string };

/** A Postgres database location (the only kind a read standby can be). */
export type PostgresTarget = Extract<DatabaseTarget, { dialect: 'postgres' }>;

/** Thrown for a `DATABASE_URL` that names no database we can open. */
export class DatabaseConfigError extends Error {
  readonly code = 'DATABASE_CONFIG_INVALID';
  /** What the URL must be, without the variable's name: `must name a host, e.g. …`. */
  readonly problem: string;
  constructor(variable: string, problem: string) {
    super(`${variable} ${problem}`);
    this.name = 'DatabaseConfigError';
    this.problem = problem;
  }
}

/**
 * `url` with its password (`scheme://user:PASSWORD@host`) and any secret
 * query parameter (`?password=`, `sslkey=`, `…token=`) replaced by `***`.
 * Works on strings that do not parse as URLs, so an error can show them.
 */
export function maskDatabaseURL(url: string): string {
  let masked = url;
  const scheme = /^[a-z][a-z0-9+.-]*:\/\//i.exec(masked)?.[0];
  if (scheme !== undefined) {
    const rest = masked.slice(scheme.length);
    const authorityEnd = rest.search(/[/?#]/);
    const authority = authorityEnd === -1 ? rest : rest.slice(0, authorityEnd);
    const at = authority.lastIndexOf('@');
    const colon = authority.indexOf(':');
    if (at !== -1 && colon !== -1 && colon < at) masked = `${scheme}${authority.slice(0, colon)}:***${rest.slice(at)}`;
  }
  return masked.replace(/([?&][^=&#]*(?:password|secret|token|key)[^=&#]*=)[^&#]*/gi, '$1***');
}

/** Thrown when the configured database cannot be reached at start-up. */
export class DatabaseUnavailableError extends Error {
  readonly code = 'DATABASE_UNAVAILABLE';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'DatabaseUnavailableError';
  }
}

/**
 * Parses `DATABASE_URL` (or another variable holding a database URL, named in
 * the messages as `variable`). Unset or empty → the default SQLite file;
 * `sqlite:PATH` (or `sqlite://PATH`, `sqlite::memory:`) → that file;
 * `postgres://…` / `postgresql://…` → a Postgres server. Anything else is a
 * {@link DatabaseConfigError}. The `display` form never contains a password
 * ({@link maskDatabaseURL}).
 */
export function parseDatabaseURL(url: string | undefined, variable = 'DATABASE_URL'): DatabaseTarget {
  const value = url?.trim() ?? '';
  if (value === '') {
    return { dialect: 'sqlite', path: DEFAULT_SQLITE_PATH, display: `sqlite:${DEFAULT_SQLITE_PATH}` };
  }
  if (value.startsWith('sqlite:')) {
    const path = value.slice('sqlite:'.length).replace(/^\/\//, '');
    if (path === '') throw new DatabaseConfigError(variable, 'must name a file after "sqlite:", e.g. sqlite:./data/store.sqlite');
    return { dialect: 'sqlite', path, display: `sqlite:${path}` };
  }
  if (/^postgres(ql)?:\/\//.test(value)) {
    let parsed: URL;
    try {
      parsed = new URL(value);
    } catch {
      throw new DatabaseConfigError(variable, 'must be a valid URL, e.g. postgres://USER@HOST:5432/DATABASE');
    }
    if (parsed.hostname === '' && !parsed.searchParams.has('host')) {
      throw new DatabaseConfigError(variable, 'must name a host, e.g. postgres://USER@HOST:5432/DATABASE');
    }
    return { dialect: 'postgres', connectionString: value, display: maskDatabaseURL(value) };
  }
  throw new DatabaseConfigError(variable, 'must start with postgres://, postgresql:// or sqlite: (unset uses the embedded SQLite file)');
}

/**
 * How a Postgres URL reaches the server. `direct`: a connection of its own
 * per client (the server itself, or a pooler that keeps sessions), so the
 * statement timeout travels as a startup parameter. `transaction`: through a
 * transaction-pooling PgBouncer, which refuses startup parameters
 * (`unsupported startup parameter: statement_timeout`) and hands each
 * transaction whichever server connection is free, so nothing may live in
 * the session: the timeout is set with `SET LOCAL` in every transaction,
 * and a statement outside one runs in a transaction of its own.
 */
export type PoolMode = 'direct' | 'transaction';

/** Options for {@link openDatabase}. */
export interface OpenDatabaseOptions {
  /** Kysely's log hook (statement counting in tests, slow-query logs). */
  log?: LogConfig;
  /** Postgres: per-statement timeout in ms. Default 10 000. */
  statementTimeoutMs?: number;
  /** Postgres: see {@link PoolMode}. Default `direct`. */
  poolMode?: PoolMode;
  /**
   * Postgres, direct: run the store's fixed statements named, parsed once per
   * connection (named-statements.ts). Default true; never through a transaction pooler.
   */
  namedStatements?: boolean;
  /** Postgres: how long to wait for a pooled connection in ms. Default 5 000. */
  connectionTimeoutMs?: number;
  /**
   * Postgres: the client's own deadline for a statement's answer, in ms
   * (pg's `query_timeout`), which holds when the server cannot enforce its
   * `statement_timeout` (a frozen host, a partition). A statement past it
   * fails with `Query read timeout` and its connection is destroyed, never
   * returned to the pool. Default: none.
   */
  queryTimeoutMs?: number;
  /** Postgres: pool size. Default 10. */
  poolMax?: number;
  /** SQLite: how long a writer waits for a lock held by another process, in ms. Default 5 000. */
  busyTimeoutMs?: number;
  /**
   * Called with errors of pooled clients, idle or in use (a terminated
   * backend, a dropped connection), which would otherwise crash the process.
   */
  onPoolError?: (error: Error) => void;
}

/** An open database: the Kysely instance, its dialect, and how to close it. */
export interface OpenDatabase {
  db: Kysely<Database>;
  dialect: DialectName;
  target: DatabaseTarget;
  /**
   * Whether the database answers, through a connection budget of its own (on
   * Postgres one extra connection outside the request pool), so readiness
   * still tells the truth while the request pool is exhausted.
   */
  ping(): Promise<void>;
  /** Postgres: the request pool itself, for libraries that keep state in the database (the rate limiter). */
  pgPool?: pg.Pool;
  /**
   * Postgres: a new Kysely driver over the same pool and dialect (a
   * transaction pooler's included), for a database handle that routes some
   * statements here (read-replicas.ts). Destroying it ends the pool.
   */
  createDriver?: () => Driver;
  close(): Promise<void>;
}

const INT8_OID = 20;
const parseInt8 = (value: string) => Number.parseInt(value, 10);
const DEFAULT_STATEMENT_TIMEOUT_MS = 10_000;

/** Opens (without yet connecting to) the database of `target`. */
export function openDatabase(target: DatabaseTarget, options: OpenDatabaseOptions = {}): OpenDatabase {
  if (target.dialect === 'sqlite') {
    const db = new Kysely<Database>({ dialect: sqliteDialect(target.path, options), log: options.log });
    return { db, dialect: 'sqlite', target, ping: async () => void (await sql`select 1`.execute(db)), close: () => db.destroy() };
  }
  const pool = postgresPool(target.connectionString, options);
  const dialect =
    options.poolMode === 'transaction' ? new TransactionPoolDialect(pool, options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS) : new PostgresDialect({ pool });
  const db = new Kysely<Database>({ dialect, log: options.log });
  let health: pg.Pool | undefined;
  return {
    db,
    dialect: 'postgres',
    target,
    pgPool: pool,
    createDriver: () => dialect.createDriver(),
    ping: async () => {
      health ??= postgresPool(target.connectionString, { ...options, poolMax: 1, connectionTimeoutMs: 2_000, statementTimeoutMs: 2_000 });
      await health.query('select 1');
    },
    close: async () => {
      await health?.end();
      await db.destroy();
    },
  };
}

/**
 * Runs one trivial statement so a wrong host, a refused connection or a
 * missing database surfaces at start-up as a {@link DatabaseUnavailableError}
 * with a one-line message instead of on the first request. A Postgres
 * database that does not exist says so, with the `createdb` line that makes it.
 */
export async function checkConnection(open: OpenDatabase): Promise<void> {
  try {
    await sql`select 1`.execute(open.db);
  } catch (error) {
    if (open.target.dialect === 'postgres' && (error as { code?: unknown } | null)?.code === INVALID_CATALOG_NAME) {
      throw new DatabaseUnavailableError(missingDatabaseLine(open.target.connectionString), { cause: error });
    }
    const reason = error instanceof Error ? error.message : String(error);
    // PgBouncer refuses the startup parameters a direct connection sends.
    const hint = /unsupported startup parameter/i.test(reason)
      ? ' (a connection pooler such as PgBouncer? set DATABASE_POOL_MODE=transaction: docs/operations.md, "Behind PgBouncer")'
      : '';
    throw new DatabaseUnavailableError(`cannot reach ${open.target.display}: ${reason}${hint}`, { cause: error });
  }
}

/** SQLSTATE of a connection to a database that does not exist. */
const INVALID_CATALOG_NAME = '3D000';

/** `database "x" does not exist on host:port; create it with: createdb -h … -p … -U … x`, as pg resolves the URL (and PG* variables). */
function missingDatabaseLine(connectionString: string): string {
  // A pg client only resolves its parameters here; it never connects.
  const { host, port, user, database } = new pg.Client({ connectionString });
  const name = database ?? user ?? '';
  const command = ['createdb', '-h', host, '-p', String(port), ...(user ? ['-U', user] : []), name].map(shellWord).join(' ');
  return `database ${JSON.stringify(name)} does not exist on ${host}:${port}; create it with: ${command}`;
}

/** `word` as one shell word (quoted only when it needs to be). */
function shellWord(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `'${word.replace(/'/g, `'\\''`)}'`;
}

/** SQLSTATE of `set` on a setting the server does not have (`plan_cache_mode` before PostgreSQL 12). */
const UNDEFINED_OBJECT = '42704';

function postgresPool(connectionString: string, options: OpenDatabaseOptions): pg.Pool {
  // Named statements (named-statements.ts) on a connection of our own; a transaction pooler cannot keep them.
  const naming = options.poolMode !== 'transaction' && options.namedStatements !== false;
  /** Connections to a server without `plan_cache_mode` (before PostgreSQL 12): they name nothing. */
  const unnamed = new WeakSet<pg.ClientBase>();
  const pool = new pg.Pool({
    connectionString,
    max: options.poolMax ?? 10,
    connectionTimeoutMillis: options.connectionTimeoutMs ?? 5_000,
    ...(options.queryTimeoutMs !== undefined && { query_timeout: options.queryTimeoutMs }),
    // A startup parameter: session state, which a transaction pooler neither accepts nor keeps
    // (TransactionPoolDialect sets it per transaction instead).
    ...(options.poolMode !== 'transaction' && { statement_timeout: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS }),
    // ms-epoch columns are bigint; read them (and count(*)) back as numbers.
    // Per pool, so other pg users in the process keep their parsers.
    types: {
      getTypeParser: ((oid: number, format?: string) => (oid === INT8_OID ? parseInt8 : pg.types.getTypeParser(oid, format as 'text'))) as typeof pg.types.getTypeParser,
    },
    // Before the pool lends a new connection: named statements are planned for each run's values, as unnamed ones are.
    ...(naming && {
      onConnect: async (client: pg.ClientBase) => {
        try {
          await client.query('set plan_cache_mode = force_custom_plan');
        } catch (error) {
          if ((error as { code?: unknown } | null)?.code !== UNDEFINED_OBJECT) throw error;
          unnamed.add(client);
        }
      },
    }),
  });
  // pg-pool listens for errors only on idle clients; a client whose backend is
  // terminated mid-query emits 'error' too, and an unheard 'error' event would
  // end the process. The query itself still fails, and the request with it.
  pool.on('connect', (client) => {
    client.on('error', (error) => options.onPoolError?.(error));
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    const names = naming && !unnamed.has(client);
    client.query = ((...args: unknown[]) => {
      // Plain statements (all of Kysely's) come back as arrays and become objects in pg-rows.ts: the same rows, built faster.
      const name = names && isPlainStatement(args) ? statementName(args[0]) : undefined;
      const result = isPlainStatement(args) ? plainStatement(query, args[0], args[1], name) : query(...args);
      if (result instanceof Promise) {
        result.catch((error: unknown) => {
          // A query that failed because the backend went away (terminated, restarted) leaves a
          // client that may still look usable for a moment; ending it now makes the pool drop it
          // on release instead of lending it to the next request. So does a named statement whose
          // table changed under it: a new connection parses it afresh.
          // A statement past the client's deadline is still running as far as the connection knows: the
          // next one would queue behind it. Ending a client with a statement in flight destroys its socket.
          const stale = name !== undefined && (error as { code?: unknown } | null)?.code === CACHED_PLAN_CHANGED;
          if (stale || isClientDeadline(error) || classifyDatabaseError(error)?.code === 'DATABASE_UNAVAILABLE') void client.end().catch(() => {});
        });
      }
      return result;
    }) as typeof client.query;
  });
  pool.on('error', () => {
    // Idle clients: already reported through the client listener above.
  });
  return pool;
}

/**
 * A plain statement, its rows fetched as arrays and built into objects
 * (pg-rows.ts). pg is called with a callback, not for its promise: on its
 * promise path V8 pretenures some of pg's per-statement objects (allocates
 * them straight into the old generation), and the rows they point to then
 * outlive the young-generation collections until a full one (issue 21:
 * `npx tsx bench/gc-shapes.ts`, 181 MiB promoted by 20 000 statements of 50
 * rows awaited, 4 MiB with the callback, 21 MiB awaited without
 * pretenuring). As pg's promise does, a failure gets a stack trace that
 * leads back to the caller instead of to the socket. `name`: the statement's
 * name on this connection (named-statements.ts), or undefined for unnamed.
 */
function plainStatement(query: (...args: unknown[]) => unknown, text: string, values: unknown[] | undefined, name: string | undefined): Promise<pg.QueryResult | pg.QueryResult[]> {
  return new Promise<pg.QueryResult | pg.QueryResult[]>((resolve, reject) => {
    query({ text, values, rowMode: 'array', name }, (error: Error | null, result: pg.QueryResult | pg.QueryResult[]) => {
      if (error) reject(error);
      else resolve(Array.isArray(result) ? result.map(withObjectRows) : withObjectRows(result));
    });
  }).catch((error: unknown) => {
    if (error instanceof Error) Error.captureStackTrace(error);
    throw error;
  });
}

/**
 * Postgres through a transaction-pooling PgBouncer ({@link PoolMode}): every
 * transaction begins with `SET LOCAL statement_timeout` in the same round
 * trip as its `BEGIN` (one simple-protocol message, so no extra wait), and a
 * statement outside a transaction is wrapped in one (`BEGIN; SET LOCAL …`,
 * the statement, `COMMIT`: two more round trips, the price of a timeout that
 * cannot leak to, or be missing on, the server connection the pooler picks).
 * Statements stay unnamed (Kysely never names them), so the pooler may run
 * each transaction on a different server connection.
 */
class TransactionPoolDialect extends PostgresDialect {
  readonly #pool: pg.Pool;
  readonly #statementTimeoutMs: number;
  constructor(pool: pg.Pool, statementTimeoutMs: number) {
    super({ pool });
    this.#pool = pool;
    this.#statementTimeoutMs = statementTimeoutMs;
  }
  override createDriver(): Driver {
    return new TransactionPoolDriver(this.#pool, this.#statementTimeoutMs);
  }
}

/** Kysely's own Postgres connection (its class is not exported). */
type KyselyPostgresConnection = Parameters<PostgresDriver['releaseConnection']>[0];

/** A pooled connection as {@link TransactionPoolDriver} hands it out: whether it is inside a transaction decides how a statement runs. */
class TransactionPoolConnection implements DatabaseConnection {
  inTransaction = false;
  constructor(
    readonly inner: KyselyPostgresConnection,
    private readonly driver: TransactionPoolDriver,
  ) {}
  executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    return this.inTransaction ? this.inner.executeQuery<R>(query) : this.driver.executeAlone<R>(this, query);
  }
  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    // Unused (no cursor is configured, so Kysely's driver refuses); not wrapped.
    return this.inner.streamQuery<R>(query, chunkSize as number);
  }
}

class TransactionPoolDriver extends PostgresDriver {
  readonly #setTimeout: string;
  readonly #connections = new WeakMap<KyselyPostgresConnection, TransactionPoolConnection>();
  constructor(pool: pg.Pool, statementTimeoutMs: number) {
    super({ pool });
    if (!Number.isSafeInteger(statementTimeoutMs) || statementTimeoutMs < 0) throw new RangeError(`statement timeout ${statementTimeoutMs} is not a whole number of ms`);
    this.#setTimeout = `set local statement_timeout = ${statementTimeoutMs}`;
  }

  override async acquireConnection(): Promise<DatabaseConnection> {
    const inner = (await super.acquireConnection()) as KyselyPostgresConnection;
    let connection = this.#connections.get(inner);
    if (connection === undefined) {
      connection = new TransactionPoolConnection(inner, this);
      this.#connections.set(inner, connection);
    }
    connection.inTransaction = false;
    return connection;
  }

  override async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const own = connection as TransactionPoolConnection;
    let begin = 'begin';
    if (settings.isolationLevel !== undefined || settings.accessMode !== undefined) {
      begin = 'start transaction';
      if (settings.isolationLevel !== undefined) begin += ` isolation level ${settings.isolationLevel}`;
      if (settings.accessMode !== undefined) begin += ` ${settings.accessMode}`;
    }
    // No parameters: pg sends this as one simple query, both statements in one round trip.
    await own.inner.executeQuery(CompiledQuery.raw(`${begin}; ${this.#setTimeout}`));
    own.inTransaction = true;
  }

  override async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const own = connection as TransactionPoolConnection;
    try {
      await super.commitTransaction(own.inner);
    } finally {
      own.inTransaction = false;
    }
  }

  override async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const own = connection as TransactionPoolConnection;
    try {
      // Kysely's driver discards the client when the rollback itself fails.
      await super.rollbackTransaction(own.inner);
    } finally {
      own.inTransaction = false;
    }
  }

  override async savepoint(...[connection, ...rest]: Parameters<PostgresDriver['savepoint']>): Promise<void> {
    await super.savepoint((connection as TransactionPoolConnection).inner, ...rest);
  }

  override async rollbackToSavepoint(...[connection, ...rest]: Parameters<PostgresDriver['rollbackToSavepoint']>): Promise<void> {
    await super.rollbackToSavepoint((connection as TransactionPoolConnection).inner, ...rest);
  }

  override async releaseSavepoint(...[connection, ...rest]: Parameters<PostgresDriver['releaseSavepoint']>): Promise<void> {
    await super.releaseSavepoint((connection as TransactionPoolConnection).inner, ...rest);
  }

  override async releaseConnection(connection: DatabaseConnection): Promise<void> {
    const own = connection as TransactionPoolConnection;
    own.inTransaction = false;
    await super.releaseConnection(own.inner);
  }

  /**
   * One statement outside a transaction, in a transaction of its own so the
   * timeout applies. It runs on the inner connection: the outer one carries
   * Kysely's log hook, which already saw the statement once.
   */
  async executeAlone<R>(connection: TransactionPoolConnection, query: CompiledQuery): Promise<QueryResult<R>> {
    await this.beginTransaction(connection, {});
    let result: QueryResult<R>;
    try {
      result = await connection.inner.executeQuery<R>(query);
    } catch (error) {
      await this.rollbackTransaction(connection).catch(() => {});
      throw error;
    }
    await this.commitTransaction(connection);
    return result;
  }
}

function sqliteDialect(path: string, options: OpenDatabaseOptions): Dialect {
  return {
    createAdapter: () => new SqliteAdapter(),
    createDriver: () =>
      new ImmediateSqliteDriver({
        database: async () => {
          const memory = path === ':memory:';
          if (!memory) mkdirSync(dirname(resolve(path)), { recursive: true });
          const connection = new SQLite(path);
          connection.pragma(`busy_timeout = ${options.busyTimeoutMs ?? 5_000}`);
          if (!memory) connection.pragma('journal_mode = WAL');
          connection.pragma('synchronous = NORMAL');
          return withStatementCache(connection);
        },
      }),
    createIntrospector: (db) => new SqliteIntrospector(db),
    createQueryCompiler: () => new SqliteQueryCompiler(),
  };
}

/** How many prepared statements one SQLite connection keeps (LRU); the store issues a few hundred distinct texts. */
const SQLITE_STATEMENT_CACHE = 500;

/**
 * The connection as Kysely's driver sees it, with `prepare` answered from an
 * LRU of prepared statements keyed by SQL text: Kysely prepares on every
 * execution, and preparing costs about as much as running a key lookup.
 * Reusing a statement is safe: Kysely runs one query at a time per
 * connection and reads each result whole (`all`/`run`).
 */
function withStatementCache(connection: SQLite.Database): SqliteDatabase {
  const statements = new LRUCache<string, SQLite.Statement>({ max: SQLITE_STATEMENT_CACHE });
  return {
    close: () => connection.close(),
    prepare: (sql: string) => {
      let statement = statements.get(sql);
      if (statement === undefined) {
        statement = connection.prepare(sql);
        statements.set(sql, statement);
      }
      return statement;
    },
  };
}

/**
 * Kysely's SQLite driver, but transactions begin `IMMEDIATE`: a transaction
 * that reads and then writes takes the write lock up front, so another process
 * on the same file (a migration, a second server) waits on the busy timeout
 * instead of failing with SQLITE_BUSY halfway through.
 */
class ImmediateSqliteDriver extends SqliteDriver {
  override async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
}
