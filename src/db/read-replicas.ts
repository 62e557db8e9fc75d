/**
 * Reads on Postgres hot standbys (`READ_DATABASE_URLS`): which standbys are in
 * rotation, how far behind each is, and the database handle a read that may
 * be a moment stale is given, with read-your-writes by consistency token.
 *
 * - A **consistency token** is the primary's WAL position after a write
 *   committed (`pg_current_wal_lsn()`, e.g. `0/3000148`). A standby that has
 *   replayed past it holds that write.
 * - **Rotation**: every `checkIntervalMs` the primary's WAL position is
 *   sampled and each standby asked for its replay position. A standby is in
 *   rotation while it answers, is still in recovery, and its lag is at most
 *   `maxLagMs`. Lag is how long ago the primary first held WAL the standby
 *   has not replayed (from the samples, so accurate to one interval); a
 *   standby that has replayed everything the primary had has lag 0, however
 *   long the primary has been idle.
 * - **Deadlines** (issue 41): every call to a standby (connect, statement,
 *   replay-position check) has a deadline of its own on the client side
 *   (`timeoutMs`, pg's `connectionTimeoutMillis` and `query_timeout`), which
 *   holds when the standby cannot enforce its own `statement_timeout` (a
 *   paused VM, a hung host, a partition that drops packets). The first call
 *   past it takes the standby out of rotation and cuts every other call
 *   waiting on it (connections in use are destroyed, waits for a connection
 *   give up), so a standby that stops answering costs the reads in flight at
 *   most one deadline, and later reads nothing. A connection that timed out
 *   is destroyed, never returned to its pool.
 * - **The lag check** reads the primary's WAL position over a connection of
 *   its own (`primaryCheck`), never the request pool, so an exhausted pool
 *   cannot stall it. When it fails, each standby's lag is unknown: out of
 *   rotation for reads without a token; a read with a token may still use a
 *   standby that answers and has replayed past it.
 * - **Failover per statement**: a standby's handle runs each statement on the
 *   standby and, when the standby is unreachable, times out, dies
 *   mid-statement, cancels it for a recovery conflict or refuses it as
 *   read-only, runs it again on the primary (statements outside a
 *   transaction are reads, safe to repeat); the standby leaves rotation until
 *   a check finds it well. A transaction on such a handle runs on the
 *   primary. A read never fails for a standby.
 *
 * Routing is per process; every invariant stays in the primary (writes,
 * fences, CAS never read a standby).
 */
import {
  Kysely,
  PostgresAdapter,
  PostgresIntrospector,
  PostgresQueryCompiler,
  sql,
  type CompiledQuery,
  type DatabaseConnection,
  type Driver,
  type LogConfig,
  type QueryResult,
  type TransactionSettings,
} from 'kysely';
import pg from 'pg';
import type { Logger } from 'pino';
import { openDatabase, type OpenDatabase, type OpenDatabaseOptions, type PostgresTarget } from './connect.js';
import { classifyDatabaseError, isClientDeadline } from './errors.js';
import type { Database } from './tables.js';

/** Options of {@link createReadRouter}. */
export interface ReadRouterOptions {
  /** The primary: writes, fenced reads, and every read no standby may serve. */
  primary: OpenDatabase;
  /**
   * Where the lag check reads the primary's WAL position, over one connection
   * of its own. Default: the primary's own target; behind a transaction
   * pooler, the direct URL (the pooler's server connections may all be taken).
   */
  primaryCheck?: PostgresTarget;
  /** The standbys (`READ_DATABASE_URLS`), Postgres URLs. */
  standbys: readonly PostgresTarget[];
  /** A standby further behind than this leaves rotation. */
  maxLagMs: number;
  /** How often positions are sampled and standbys checked. */
  checkIntervalMs: number;
  /** How long a read with a token waits for a standby to replay past it before reading the primary. */
  readYourWritesWaitMs: number;
  /**
   * The client-side deadline of every standby call (connect, statement,
   * replay-position check) and of the lag check's read of the primary, in ms
   * (`REPLICA_TIMEOUT_MS`). Default {@link DEFAULT_REPLICA_TIMEOUT_MS}.
   */
  timeoutMs?: number;
  /** Pool options of the standbys' request pools (statement timeout, size, pool mode, error hook); their connection and query timeouts are `timeoutMs`. */
  poolOptions: OpenDatabaseOptions;
  /** Kysely's log hook for the standbys' handles (tracing). */
  log?: LogConfig;
  logger: Logger;
}

/** Why a read went where it went (the `reason` label of the routing counter). */
export type RouteReason = 'standby' | 'token_replayed' | 'no_standby_in_rotation' | 'token_wait_timeout' | 'failover';

/** One standby as the router sees it (for `/metrics` and logs). */
export interface StandbyStatus {
  /** The standby's URL without its password. */
  name: string;
  /** Serves reads without a token: answering, and lag known and within the threshold. */
  inRotation: boolean;
  /** Answered its last call within the deadline (in recovery): may serve a read with a token it has replayed. */
  answering: boolean;
  /** Replay lag in ms at the last check; null before the first answer, while unreachable, or while the primary's position cannot be read. */
  lagMs: number | null;
  /** The last check's failure, if it failed. */
  lastError: string | null;
}

/** The router: which database a read may use. */
export interface ReadRouter {
  /**
   * The database a read that may be a moment stale uses: a standby in
   * rotation (round robin), one that has replayed past `readAfter` when a
   * token is given (waiting up to `readYourWritesWaitMs`), else the primary.
   */
  readerFor(readAfter: bigint | null): Promise<Kysely<Database>>;
  /** A consistency token for writes committed so far: the primary's current WAL position. */
  currentToken(): Promise<string>;
  standbys(): StandbyStatus[];
  /** Calls `listener` for every routed read and every statement that failed over. */
  onRoute(listener: (target: 'standby' | 'primary', reason: RouteReason) => void): void;
  /** Runs one round of checks now (tests; the timer runs them every interval). */
  check(): Promise<void>;
  /**
   * Stops the checks, cuts every standby call in flight (its statement runs
   * on the primary) and ends the standbys' pools (not the primary's). Waits
   * on no standby: a connection attempt to one that does not answer ends by
   * itself at its deadline.
   */
  close(): Promise<void>;
}

/**
 * `REPLICA_TIMEOUT_MS` by default: far above a read's usual time on a healthy
 * standby (milliseconds), and short enough that a standby freezing costs the
 * reads it catches one second, once.
 */
export const DEFAULT_REPLICA_TIMEOUT_MS = 1_000;

/** A WAL position (`X/Y`, two hex numbers) as a number, or null when `text` is not one. */
export function parseLsn(text: string): bigint | null {
  const match = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text.trim());
  if (match === null) return null;
  return (BigInt(`0x${match[1]}`) << 32n) + BigInt(`0x${match[2]}`);
}

/** Whether the standby itself is the trouble: it went away, or did not answer a call (a connect, a statement) within its deadline. */
function standbyUnavailable(error: unknown): boolean {
  return classifyDatabaseError(error)?.code === 'DATABASE_UNAVAILABLE' || isClientDeadline(error);
}

/** pg-pool's wait for a free connection ran past its deadline: this process's pool is busy, which says nothing of the standby. */
function standbyPoolBusy(error: unknown): boolean {
  return /timeout exceeded when trying to connect/i.test(String((error as Error | null)?.message));
}

const messageOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** Errors after which a standby's statement runs again on the primary. */
function failsOver(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  // read_only_sql_transaction (a write sent to a standby); a query canceled by a recovery conflict (40001).
  return standbyUnavailable(error) || standbyPoolBusy(error) || code === '25006' || code === '40001';
}

interface Sample {
  at: number;
  lsn: bigint;
}

/** What {@link Standby.whileAnswering} resolves with when the standby was cut first. */
const CUT = Symbol('cut');

class Standby {
  /** Answered its last call within the deadline and is in recovery. */
  answering = false;
  lagMs: number | null = null;
  replayLsn: bigint | null = null;
  lastError: string | null = null;
  /** An in-flight replay-position read shared by concurrent waiters. */
  refreshing: Promise<bigint | null> | null = null;
  readonly db: Kysely<Database>;
  /** Connections of this standby's pools lent out right now: destroyed when it is cut. */
  readonly #inUse = new Set<pg.Client>();
  /** Calls waiting on the standby, told when it is cut. */
  readonly #onCut = new Set<() => void>();
  constructor(
    readonly name: string,
    readonly open: OpenDatabase,
    /** Connections of its own for checks, so a hung standby cannot hold requests' connections. */
    readonly checks: pg.Pool,
    private readonly maxLagMs: number,
    primary: OpenDatabase,
    log: LogConfig | undefined,
    onFailover: (standby: Standby, error: unknown) => void,
  ) {
    for (const pool of [open.pgPool!, checks]) {
      pool.on('acquire', (client) => this.#inUse.add(client as unknown as pg.Client));
      pool.on('release', (_error: unknown, client: pg.PoolClient) => this.#inUse.delete(client as unknown as pg.Client));
    }
    this.db = new Kysely<Database>({
      dialect: {
        createAdapter: () => new PostgresAdapter(),
        createDriver: () => new FailoverDriver(this, open.createDriver!(), primary.createDriver!(), onFailover),
        createIntrospector: (db) => new PostgresIntrospector(db),
        createQueryCompiler: () => new PostgresQueryCompiler(),
      },
      log,
    });
  }

  /** Serves reads without a token: answering, its lag known and within the threshold. */
  get inRotation(): boolean {
    return this.answering && this.lagMs !== null && this.lagMs <= this.maxLagMs;
  }

  /** May serve a read with a token (once it has replayed past it): answering and not known to be too far behind. */
  get servesTokenReads(): boolean {
    return this.answering && (this.lagMs === null || this.lagMs <= this.maxLagMs);
  }

  /**
   * Out of rotation for not answering: every call waiting on it gives up
   * now. Connections lent out are ended (pg destroys the socket of one with a
   * statement in flight, which then fails and runs on the primary); waits
   * for a connection resolve with {@link CUT}.
   */
  cut(reason: string): void {
    this.answering = false;
    this.lagMs = null;
    this.lastError = reason;
    for (const client of this.#inUse) void client.end().catch(() => {});
    for (const listener of [...this.#onCut]) listener();
  }

  /**
   * `call`'s result, or {@link CUT} as soon as the standby is cut, whichever
   * comes first. A result that comes after the cut goes to `late` (a
   * connection to give back).
   */
  whileAnswering<T>(call: Promise<T>, late: (value: T) => unknown = () => {}): Promise<T | typeof CUT> {
    if (!this.answering) {
      void call.then(late).catch(() => {});
      return Promise.resolve(CUT);
    }
    return new Promise<T | typeof CUT>((resolve, reject) => {
      let settled = false;
      const onCut = () => {
        settled = true;
        this.#onCut.delete(onCut);
        resolve(CUT);
      };
      this.#onCut.add(onCut);
      call.then(
        (value) => {
          this.#onCut.delete(onCut);
          if (settled) void Promise.resolve(value).then(late).catch(() => {});
          else resolve(value);
        },
        (error: unknown) => {
          this.#onCut.delete(onCut);
          if (!settled) reject(error);
        },
      );
    });
  }
}

/** Builds the router and starts its checks (the first one runs before it resolves). */
export async function createReadRouter(options: ReadRouterOptions): Promise<ReadRouter> {
  const { primary, maxLagMs, checkIntervalMs, readYourWritesWaitMs, logger } = options;
  const timeoutMs = options.timeoutMs ?? DEFAULT_REPLICA_TIMEOUT_MS;
  if (primary.dialect !== 'postgres' || primary.createDriver === undefined || primary.target.dialect !== 'postgres') {
    throw new Error('read standbys need a Postgres primary');
  }
  const listeners: ((target: 'standby' | 'primary', reason: RouteReason) => void)[] = [];
  const route = (target: 'standby' | 'primary', reason: RouteReason) => {
    for (const listener of listeners) listener(target, reason);
  };
  let closed = false;
  /** Takes a standby that did not answer out of rotation, cutting every call waiting on it. */
  const cut = (standby: Standby, error: unknown, what: string) => {
    const was = standby.answering;
    standby.cut(messageOf(error));
    if (was && !closed) logger.warn({ standby: standby.name, err: error }, `read standby ${what}; out of rotation, its reads go to the primary`);
  };
  const onFailover = (standby: Standby, error: unknown) => {
    route('primary', 'failover');
    // A statement a standby cannot run (a write), a replay conflict or a busy pool says nothing about its health.
    if (error === CUT || !standbyUnavailable(error)) return;
    cut(standby, error, 'failed a statement or did not answer it in time');
  };
  const standbys = options.standbys.map((target) => {
    const open = openDatabase(target, { ...options.poolOptions, connectionTimeoutMs: timeoutMs, queryTimeoutMs: timeoutMs });
    const checks = new pg.Pool({ connectionString: target.connectionString, max: 2, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs, statement_timeout: timeoutMs });
    checks.on('error', () => {});
    return new Standby(target.display, open, checks, maxLagMs, primary, options.log, onFailover);
  });
  // The primary's WAL position, over a connection of its own: never queued behind requests for the request pool.
  const primaryCheck = new pg.Pool({ connectionString: (options.primaryCheck ?? primary.target).connectionString, max: 1, connectionTimeoutMillis: timeoutMs, query_timeout: timeoutMs });
  primaryCheck.on('error', () => {});

  // Primary positions sampled over the last maxLagMs and a little more: enough to date any lag up to the threshold.
  const samples: Sample[] = [];
  const lagOf = (replay: bigint, now: number): number => {
    const newest = samples.at(-1);
    if (newest === undefined || replay >= newest.lsn) return 0;
    const firstAhead = samples.find((sample) => sample.lsn > replay)!;
    return now - firstAhead.at;
  };
  /** Samples the primary's WAL position; null when it was read, else why not. */
  let primaryFailure: string | null = null;
  const samplePrimary = async (): Promise<string | null> => {
    const now = Date.now();
    try {
      const { rows } = await primaryCheck.query<{ lsn: string }>('select pg_current_wal_lsn()::text as lsn');
      samples.push({ at: now, lsn: parseLsn(rows[0]!.lsn)! });
      const keepFrom = now - maxLagMs - 2 * checkIntervalMs;
      while (samples.length > 1 && samples[1]!.at < keepFrom) samples.shift();
      if (primaryFailure !== null && !closed) logger.info('read standbys: the primary’s WAL position is read again');
      primaryFailure = null;
    } catch (error) {
      if (primaryFailure === null && !closed) {
        logger.warn({ err: error }, 'read standbys: the primary’s WAL position could not be read; lag unknown, reads without a token go to the primary');
      }
      primaryFailure = messageOf(error);
    }
    return primaryFailure;
  };

  /** The standby's replay position, over its check connections; a failure (its deadline included) cuts it. */
  const replayPosition = async (standby: Standby): Promise<bigint | null> => {
    standby.refreshing ??= (async () => {
      try {
        const { rows } = await standby.checks.query<{ recovery: boolean; replay: string | null }>(
          'select pg_is_in_recovery() as recovery, pg_last_wal_replay_lsn()::text as replay',
        );
        const row = rows[0]!;
        if (!row.recovery) throw new Error('not a standby (not in recovery): promoted, or the primary itself');
        standby.replayLsn = row.replay === null ? null : parseLsn(row.replay);
        return standby.replayLsn;
      } catch (error) {
        cut(standby, error, 'did not answer its replay-position check');
        throw error;
      } finally {
        standby.refreshing = null;
      }
    })();
    return standby.refreshing;
  };

  const check = async () => {
    const sampled = samplePrimary();
    await Promise.all(
      standbys.map(async (standby) => {
        const was = standby.inRotation;
        try {
          const [replay, failure] = await Promise.all([replayPosition(standby), sampled]);
          if (closed) return;
          standby.answering = true;
          if (failure !== null) {
            standby.lagMs = null;
            standby.lastError = `lag unknown: the primary’s WAL position could not be read (${failure})`;
          } else {
            standby.lagMs = replay === null ? null : lagOf(replay, Date.now());
            standby.lastError = standby.inRotation ? null : standby.lagMs === null ? 'no WAL replayed yet' : `replay lag ${standby.lagMs} ms over ${maxLagMs} ms`;
          }
        } catch {
          // Cut by replayPosition, with the reason.
        }
        if (was !== standby.inRotation && !closed) {
          if (standby.inRotation) logger.info({ standby: standby.name, lagMs: standby.lagMs }, 'read standby in rotation');
          // (One that stopped answering was logged when it was cut.)
          else if (standby.answering) logger.warn({ standby: standby.name, reason: standby.lastError }, 'read standby out of rotation; its reads go to the primary');
        }
      }),
    );
  };

  let next = 0;
  const pick = (candidates: Standby[]): Standby => candidates[next++ % candidates.length]!;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  /** Resolves when `promise` settles or after `ms`, whichever comes first. */
  const atMost = (promise: Promise<unknown>, ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      void promise.finally(() => {
        clearTimeout(timer);
        resolve();
      });
    });

  await check();
  let checking = false;
  const timer = setInterval(() => {
    if (checking) return;
    checking = true;
    void check().finally(() => {
      checking = false;
    });
  }, checkIntervalMs);
  timer.unref();

  return {
    async readerFor(readAfter) {
      if (readAfter === null) {
        const inRotation = standbys.filter((standby) => standby.inRotation);
        if (inRotation.length === 0) {
          route('primary', 'no_standby_in_rotation');
          return primary.db;
        }
        route('standby', 'standby');
        return pick(inRotation).db;
      }
      const deadline = Date.now() + readYourWritesWaitMs;
      const replayedPast = (standby: Standby) => standby.replayLsn !== null && standby.replayLsn >= readAfter;
      for (;;) {
        const candidates = standbys.filter((standby) => standby.servesTokenReads);
        if (candidates.length === 0) {
          route('primary', 'no_standby_in_rotation');
          return primary.db;
        }
        const replayed = candidates.filter(replayedPast);
        if (replayed.length > 0) {
          route('standby', 'token_replayed');
          return pick(replayed).db;
        }
        const left = deadline - Date.now();
        if (left <= 0) break;
        // A standby slow to answer keeps no read past its wait (and is cut at its own deadline).
        await atMost(Promise.all(candidates.map((standby) => replayPosition(standby).catch(() => null))), left);
        if (candidates.some((standby) => standby.servesTokenReads && replayedPast(standby))) continue;
        await sleep(Math.min(10, Math.max(0, deadline - Date.now())));
      }
      route('primary', 'token_wait_timeout');
      return primary.db;
    },
    async currentToken() {
      const { rows } = await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(primary.db);
      return rows[0]!.lsn;
    },
    standbys: () => standbys.map(({ name, inRotation, answering, lagMs, lastError }) => ({ name, inRotation, answering, lagMs, lastError })),
    onRoute: (listener) => void listeners.push(listener),
    check,
    async close() {
      if (closed) return;
      closed = true;
      clearInterval(timer);
      for (const standby of standbys) standby.cut('the read router was closed');
      // Cut above, the connections in use end as their statements fail over; an attempt still
      // connecting to a standby that does not answer ends at its deadline. Neither is waited for.
      for (const standby of standbys) {
        void standby.db.destroy().catch(() => {});
        void standby.checks.end().catch(() => {});
      }
      await primaryCheck.end().catch(() => {});
    },
  };
}

/**
 * A standby's driver: connections come from the standby while it is in
 * rotation, else from the primary; a statement the standby fails for a
 * reason of its own runs again on the primary; transactions run on the
 * primary. Destroying it ends the standby's pool only.
 */
class FailoverDriver implements Driver {
  constructor(
    private readonly standby: Standby,
    readonly standbyDriver: Driver,
    readonly primaryDriver: Driver,
    readonly onFailover: (standby: Standby, error: unknown) => void,
  ) {}

  async init(): Promise<void> {
    await this.standbyDriver.init();
    await this.primaryDriver.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    // Answering, not in rotation: a handle given out for a token the standby replayed reads it while its lag is unknown.
    if (this.standby.answering) {
      try {
        // A wait for a connection ends when the standby is cut (another call past its deadline): not a deadline of its own.
        const connection = await this.standby.whileAnswering(this.standbyDriver.acquireConnection(), (late) => this.standbyDriver.releaseConnection(late));
        if (connection !== CUT) return new FailoverConnection(this, this.standby, connection, 'standby');
        this.onFailover(this.standby, CUT);
      } catch (error) {
        if (!failsOver(error)) throw error;
        this.onFailover(this.standby, error);
      }
    }
    return new FailoverConnection(this, this.standby, await this.primaryDriver.acquireConnection(), 'primary');
  }

  async beginTransaction(connection: DatabaseConnection, settings: TransactionSettings): Promise<void> {
    const own = connection as FailoverConnection;
    await own.moveToPrimary();
    await this.primaryDriver.beginTransaction(own.inner, settings);
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await this.primaryDriver.commitTransaction((connection as FailoverConnection).inner);
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await this.primaryDriver.rollbackTransaction((connection as FailoverConnection).inner);
  }

  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    const own = connection as FailoverConnection;
    if (own.on === 'none') return;
    await (own.on === 'standby' ? this.standbyDriver : this.primaryDriver).releaseConnection(own.inner);
  }

  async destroy(): Promise<void> {
    await this.standbyDriver.destroy();
  }
}

class FailoverConnection implements DatabaseConnection {
  constructor(
    private readonly driver: FailoverDriver,
    private readonly standby: Standby,
    public inner: DatabaseConnection,
    /** `none` between giving the standby's connection back and getting the primary's. */
    public on: 'standby' | 'primary' | 'none',
  ) {}

  async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
    if (this.on === 'primary') return this.inner.executeQuery<R>(query);
    try {
      return await this.inner.executeQuery<R>(query);
    } catch (error) {
      if (!failsOver(error)) throw error;
      this.driver.onFailover(this.standby, error);
      await this.moveToPrimary();
      return this.inner.executeQuery<R>(query);
    }
  }

  streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
    return this.inner.streamQuery<R>(query, chunkSize);
  }

  /** Gives the standby connection back (first: it may be all the standby's pool is waiting for) and continues on one of the primary's. */
  async moveToPrimary(): Promise<void> {
    if (this.on === 'primary') return;
    const standbyConnection = this.inner;
    this.on = 'none';
    await this.driver.standbyDriver.releaseConnection(standbyConnection).catch(() => {});
    this.inner = await this.driver.primaryDriver.acquireConnection();
    this.on = 'primary';
  }
}
