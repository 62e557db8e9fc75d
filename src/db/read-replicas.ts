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
 * - **Failover per statement**: a standby's handle runs each statement on the
 *   standby and, when the standby is unreachable, dies mid-statement, cancels
 *   it for a recovery conflict or refuses it as read-only, runs it again on the
 *   primary (statements outside a transaction are reads, safe to repeat); the
 *   standby leaves rotation until a check finds it well. A transaction on
 *   such a handle runs on the primary. A read never fails for a standby.
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
import { classifyDatabaseError } from './errors.js';
import type { Database } from './tables.js';

/** Options of {@link createReadRouter}. */
export interface ReadRouterOptions {
  /** The primary: writes, fenced reads, and every read no standby may serve. */
  primary: OpenDatabase;
  /** The standbys (`READ_DATABASE_URLS`), Postgres URLs. */
  standbys: readonly PostgresTarget[];
  /** A standby further behind than this leaves rotation. */
  maxLagMs: number;
  /** How often positions are sampled and standbys checked. */
  checkIntervalMs: number;
  /** How long a read with a token waits for a standby to replay past it before reading the primary. */
  readYourWritesWaitMs: number;
  /** Pool options of the standbys' request pools (statement timeout, size, pool mode, error hook). */
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
  inRotation: boolean;
  /** Replay lag in ms at the last check; null before the first answer or while unreachable. */
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
  /** Stops the checks and closes the standbys' pools (not the primary's). */
  close(): Promise<void>;
}

/** A WAL position (`X/Y`, two hex numbers) as a number, or null when `text` is not one. */
export function parseLsn(text: string): bigint | null {
  const match = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text.trim());
  if (match === null) return null;
  return (BigInt(`0x${match[1]}`) << 32n) + BigInt(`0x${match[2]}`);
}

/** Whether the standby itself is the trouble: it went away, or no connection to it could be had in time. */
function standbyUnavailable(error: unknown): boolean {
  return classifyDatabaseError(error)?.code === 'DATABASE_UNAVAILABLE' || /timeout exceeded when trying to connect/i.test(String((error as Error | null)?.message));
}

/** Errors after which a standby's statement runs again on the primary. */
function failsOver(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  // read_only_sql_transaction (a write sent to a standby); a query canceled by a recovery conflict (40001).
  return standbyUnavailable(error) || code === '25006' || code === '40001';
}

interface Sample {
  at: number;
  lsn: bigint;
}

class Standby {
  inRotation = false;
  lagMs: number | null = null;
  replayLsn: bigint | null = null;
  lastError: string | null = null;
  /** An in-flight replay-position read shared by concurrent waiters. */
  refreshing: Promise<bigint | null> | null = null;
  readonly db: Kysely<Database>;
  constructor(
    readonly name: string,
    readonly open: OpenDatabase,
    /** One connection of its own for checks, with short timeouts, so a hung standby cannot hold requests' connections. */
    readonly checks: pg.Pool,
    primary: OpenDatabase,
    log: LogConfig | undefined,
    onFailover: (standby: Standby, error: unknown) => void,
  ) {
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
}

/** Builds the router and starts its checks (the first one runs before it resolves). */
export async function createReadRouter(options: ReadRouterOptions): Promise<ReadRouter> {
  const { primary, maxLagMs, checkIntervalMs, readYourWritesWaitMs, logger } = options;
  if (primary.dialect !== 'postgres' || primary.createDriver === undefined) throw new Error('read standbys need a Postgres primary');
  const listeners: ((target: 'standby' | 'primary', reason: RouteReason) => void)[] = [];
  const route = (target: 'standby' | 'primary', reason: RouteReason) => {
    for (const listener of listeners) listener(target, reason);
  };
  const onFailover = (standby: Standby, error: unknown) => {
    route('primary', 'failover');
    // A statement a standby cannot run (a write) or a replay conflict says nothing about its health.
    if (!standbyUnavailable(error)) return;
    if (standby.inRotation) logger.warn({ standby: standby.name, err: error }, 'read standby failed a statement; out of rotation, statement run on the primary');
    standby.inRotation = false;
    standby.lastError = error instanceof Error ? error.message : String(error);
  };
  const checkTimeoutMs = Math.max(200, Math.min(checkIntervalMs, 2_000));
  const standbys = options.standbys.map((target) => {
    const open = openDatabase(target, options.poolOptions);
    const checks = new pg.Pool({ connectionString: target.connectionString, max: 2, connectionTimeoutMillis: checkTimeoutMs, statement_timeout: checkTimeoutMs });
    checks.on('error', () => {});
    return new Standby(target.display, open, checks, primary, options.log, onFailover);
  });

  // Primary positions sampled over the last maxLagMs and a little more: enough to date any lag up to the threshold.
  const samples: Sample[] = [];
  const lagOf = (replay: bigint, now: number): number => {
    const newest = samples.at(-1);
    if (newest === undefined || replay >= newest.lsn) return 0;
    const firstAhead = samples.find((sample) => sample.lsn > replay)!;
    return now - firstAhead.at;
  };

  const replayPosition = async (standby: Standby): Promise<bigint | null> => {
    standby.refreshing ??= (async () => {
      try {
        const { rows } = await standby.checks.query<{ recovery: boolean; replay: string | null }>(
          'select pg_is_in_recovery() as recovery, pg_last_wal_replay_lsn()::text as replay',
        );
        const row = rows[0]!;
        if (!row.recovery) throw new Error('not a standby (not in recovery): promoted, or the primary itself');
        standby.replayLsn = row.replay === null ? null : parseLsn(row.replay);
        standby.lastError = null;
        return standby.replayLsn;
      } finally {
        standby.refreshing = null;
      }
    })();
    return standby.refreshing;
  };

  const check = async () => {
    const now = Date.now();
    try {
      const { rows } = await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(primary.db);
      samples.push({ at: now, lsn: parseLsn(rows[0]!.lsn)! });
      const keepFrom = now - maxLagMs - 2 * checkIntervalMs;
      while (samples.length > 1 && samples[1]!.at < keepFrom) samples.shift();
    } catch (error) {
      logger.warn({ err: error }, 'read standbys: the primary’s WAL position could not be read; rotation unchanged');
      return;
    }
    await Promise.all(
      standbys.map(async (standby) => {
        const was = standby.inRotation;
        try {
          const replay = await replayPosition(standby);
          standby.lagMs = replay === null ? null : lagOf(replay, Date.now());
          standby.inRotation = standby.lagMs !== null && standby.lagMs <= maxLagMs;
          if (!standby.inRotation) standby.lastError = standby.lagMs === null ? 'no WAL replayed yet' : `replay lag ${standby.lagMs} ms over ${maxLagMs} ms`;
        } catch (error) {
          standby.inRotation = false;
          standby.lagMs = null;
          standby.lastError = error instanceof Error ? error.message : String(error);
        }
        if (was !== standby.inRotation) {
          if (standby.inRotation) logger.info({ standby: standby.name, lagMs: standby.lagMs }, 'read standby in rotation');
          else logger.warn({ standby: standby.name, reason: standby.lastError }, 'read standby out of rotation; its reads go to the primary');
        }
      }),
    );
  };

  let next = 0;
  const pick = (candidates: Standby[]): Standby => candidates[next++ % candidates.length]!;
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

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
      const inRotation = standbys.filter((standby) => standby.inRotation);
      if (inRotation.length === 0) {
        route('primary', 'no_standby_in_rotation');
        return primary.db;
      }
      if (readAfter === null) {
        route('standby', 'standby');
        return pick(inRotation).db;
      }
      const deadline = Date.now() + readYourWritesWaitMs;
      for (;;) {
        const replayed = inRotation.filter((standby) => standby.replayLsn !== null && standby.replayLsn >= readAfter);
        if (replayed.length > 0) {
          route('standby', 'token_replayed');
          return pick(replayed).db;
        }
        if (Date.now() >= deadline) break;
        await Promise.all(inRotation.map((standby) => replayPosition(standby).catch(() => null)));
        if (inRotation.some((standby) => standby.replayLsn !== null && standby.replayLsn >= readAfter)) continue;
        await sleep(Math.min(10, Math.max(0, deadline - Date.now())));
      }
      route('primary', 'token_wait_timeout');
      return primary.db;
    },
    async currentToken() {
      const { rows } = await sql<{ lsn: string }>`select pg_current_wal_lsn()::text as lsn`.execute(primary.db);
      return rows[0]!.lsn;
    },
    standbys: () => standbys.map(({ name, inRotation, lagMs, lastError }) => ({ name, inRotation, lagMs, lastError })),
    onRoute: (listener) => void listeners.push(listener),
    check,
    async close() {
      clearInterval(timer);
      await Promise.all(standbys.map(async (standby) => Promise.all([standby.db.destroy(), standby.checks.end()])));
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
    if (this.standby.inRotation) {
      try {
        return new FailoverConnection(this, this.standby, await this.standbyDriver.acquireConnection(), 'standby');
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
    public on: 'standby' | 'primary',
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

  /** Gives the standby connection back and continues on one of the primary's. */
  async moveToPrimary(): Promise<void> {
    if (this.on === 'primary') return;
    const standbyConnection = this.inner;
    this.inner = await this.driver.primaryDriver.acquireConnection();
    this.on = 'primary';
    await this.driver.standbyDriver.releaseConnection(standbyConnection).catch(() => {});
  }
}
