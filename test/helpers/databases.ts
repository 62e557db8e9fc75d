/**
 * One database per suite and per dialect: an in-memory SQLite database, or a
 * fresh Postgres database created on the test server and dropped afterwards.
 * `describeEachDialect` runs a suite once per dialect named in TEST_DIALECTS
 * (default both), as `${dialect}: ${name}`.
 */
import type { LogConfig } from 'kysely';
import { afterAll, beforeAll, beforeEach, describe, inject } from 'vitest';
import { openDatabase, type DialectName, type OpenDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import type { Database } from '../../src/db/tables.js';
import { createStoreContext, type StoreContext } from '../../src/store/context.js';
import { createScratchPostgresDatabase } from './postgres.js';

/** Dialects this run covers, from TEST_DIALECTS (default `sqlite,postgres`). */
export function testDialects(): DialectName[] {
  const names = (process.env.TEST_DIALECTS ?? 'sqlite,postgres').split(',').map((s) => s.trim());
  return (['sqlite', 'postgres'] as const).filter((d) => names.includes(d));
}

/** Whether `dialect` can run here: Postgres only when the global setup reached the server. */
export function dialectAvailable(dialect: DialectName): boolean {
  return dialect !== 'postgres' || inject('postgresAvailable');
}

/**
 * Connections per Postgres pool in tests. Two test files run at once and a
 * file may open two pools: 4 × 20 stays under the server's 100 connections.
 */
export const TEST_POOL_SIZE = 20;

/** A clock tests move by hand. Starts at a fixed instant. */
export class TestClock {
  constructor(public current = Date.UTC(2026, 0, 1)) {}
  readonly now = (): number => this.current;
  advance(ms: number): number {
    this.current += ms;
    return this.current;
  }
  set(ms: number): void {
    this.current = ms;
  }
}

/** A database made for one suite. */
export interface TestDatabase {
  dialect: DialectName;
  /** The suite's connection (a pool of {@link TEST_POOL_SIZE} on Postgres). */
  open: OpenDatabase;
  /** Opens another, independent connection (pool) to the same database; close it yourself. SQLite: not possible in memory. */
  connectAgain(options?: { log?: LogConfig; statementTimeoutMs?: number }): OpenDatabase;
  /** Deletes every row of every table. */
  truncate(): Promise<void>;
  destroy(): Promise<void>;
}

const TABLES: (keyof Database)[] = [
  'kubun_connector_sync_state',
  'kubun_connector_pending_auth',
  'kubun_connector_operation',
  'kubun_connector_operation_count',
  'kubun_connector_operation_total',
  'kubun_connector_operation_history',
  'kubun_connector_operation_activity',
  'kubun_connector_operation_activity_total',
  'kubun_connector_backlog_sample',
  'kubun_connector_projection_watch',
  'kubun_connector_observation_records',
  'kubun_connector_observation_repair',
  'kubun_connector_entity_trim',
  'kubun_connector_sweep_receipt',
  'kubun_connector_sweep_candidate',
  'kubun_connector_sweep_checkpoint',
];

/** Creates an empty database for `dialect`; `migrate: false` leaves it without tables. */
export async function createTestDatabase(dialect: DialectName, options: { migrate?: boolean; log?: LogConfig } = {}): Promise<TestDatabase> {
  if (dialect === 'sqlite') {
    const open = openDatabase({ dialect: 'sqlite', path: ':memory:', display: 'sqlite::memory:' }, { log: options.log });
    if (options.migrate !== false) await migrateToLatest(open.db, 'sqlite');
    return {
      dialect,
      open,
      connectAgain: () => {
        throw new Error('an in-memory SQLite database has exactly one connection');
      },
      truncate: () => truncateAll(open),
      destroy: () => open.close(),
    };
  }
  const scratch = await createScratchPostgresDatabase('cs_test');
  const url = scratch.url;
  const target = { dialect: 'postgres' as const, connectionString: url, display: url };
  const open = openDatabase(target, { poolMax: TEST_POOL_SIZE, log: options.log });
  if (options.migrate !== false) await migrateToLatest(open.db, 'postgres');
  const extra: OpenDatabase[] = [];
  return {
    dialect,
    open,
    connectAgain: (again = {}) => {
      const another = openDatabase(target, { poolMax: TEST_POOL_SIZE, log: again.log, statementTimeoutMs: again.statementTimeoutMs });
      extra.push(another);
      return another;
    },
    truncate: () => truncateAll(open),
    destroy: async () => {
      await Promise.allSettled(extra.map((e) => e.close()));
      await open.close();
      await scratch.drop();
    },
  };
}

// DELETE, not TRUNCATE: on these small tables TRUNCATE costs ~50 ms per call
// on Postgres against ~2 ms for ten DELETEs, and it runs before every test.
async function truncateAll(open: OpenDatabase): Promise<void> {
  for (const table of TABLES) await open.db.deleteFrom(table).execute();
}

/** What a suite made by {@link describeEachDialect} gets. */
export interface DialectSuite {
  dialect: DialectName;
  clock: TestClock;
  /** The suite's database (valid inside tests and hooks). */
  readonly database: TestDatabase;
  /** A store context over the suite's database, with the test clock and random ids. */
  readonly store: StoreContext;
}

/**
 * Declares `name` once per dialect. Each copy gets its own migrated database
 * (created before the suite, dropped after), emptied before every test, and a
 * {@link TestClock} reset to its start instant before every test.
 * The Postgres copy is skipped when the global setup found no server.
 */
export function describeEachDialect(name: string, body: (suite: DialectSuite) => void): void {
  for (const dialect of testDialects()) {
    describe.skipIf(!dialectAvailable(dialect))(`${dialect}: ${name}`, () => {
      const clock = new TestClock();
      let database: TestDatabase | undefined;
      let store: StoreContext | undefined;
      const suite: DialectSuite = {
        dialect,
        clock,
        get database() {
          if (database === undefined) throw new Error('database is only available inside tests and hooks');
          return database;
        },
        get store() {
          if (store === undefined) throw new Error('store is only available inside tests and hooks');
          return store;
        },
      };
      beforeAll(async () => {
        database = await createTestDatabase(dialect);
        store = createStoreContext(database.open.db, dialect, { now: clock.now });
      });
      afterAll(async () => {
        await database?.destroy();
      });
      beforeEach(async () => {
        clock.set(Date.UTC(2026, 0, 1));
        await database?.truncate();
      });
      body(suite);
    });
  }
}
