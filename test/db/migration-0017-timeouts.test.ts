/**
 * Migration 0017 rewrites the operation table on Postgres (stored generated
 * columns, every index rebuilt), which on a large table takes far longer than
 * a request may: inside its transaction the connection's statement timeout
 * (DB_STATEMENT_TIMEOUT_MS) is lifted and bounds the wait for the table's
 * lock instead (`lock_timeout`). So a migration behind an open transaction
 * gives up after that timeout, writing nothing, and one over a table whose
 * rewrite outlasts the timeout completes.
 */
import { CompiledQuery, type Kysely } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, type OpenDatabase } from '../../src/db/connect.js';
import { createMigrator, unwrapMigrationResult } from '../../src/db/migrator.js';
import { testDialects } from '../helpers/databases.js';
import { createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';
import { overSeries } from '../helpers/query-plans.js';

const BEFORE = '0016-activity-committed-per-statement';
const LATEST = '0017-operation-hot-steps';
/** The server's statement timeout in this test: far shorter than the rewrite of ROWS operations, far longer than the migrator's bookkeeping. */
const STATEMENT_TIMEOUT_MS = 150;
const ROWS = 100_000;

const runs = testDialects().includes('postgres') && inject('postgresAvailable');

describe.skipIf(!runs)('postgres: migration 0017 under the statement timeout', () => {
  let scratch: ScratchPostgresDatabase;
  let seeding: OpenDatabase;
  let server: OpenDatabase;

  beforeAll(async () => {
    scratch = await createScratchPostgresDatabase('cs_mig_0017');
    seeding = openDatabase({ dialect: 'postgres', connectionString: scratch.url, display: 'seeding' }, { poolMax: 1, statementTimeoutMs: 120_000 });
    unwrapMigrationResult(await createMigrator(seeding.db, 'postgres').migrateTo(BEFORE));
    await seeding.db.executeQuery(
      overSeries(
        'postgres',
        ROWS,
        `insert into kubun_connector_operation
          (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
           payload_hash, reissue_intent, state, attempts, version, next_attempt_at, created_at, updated_at)
          select 'did:key:zCaller' || (i % 100), 'op-' || i, 'n' || i, 'did:key:zCaller' || (i % 100), 'google', 'calendar.event', 'create', 'a', 't',
            'e-' || i, 'h', 'none', case when i % 10 = 0 then 'committed' else 'attempted' end, 1 + i % 3, 0, i, i, i`,
      ),
    );
    // The server's own connections: the statement timeout a request has.
    server = openDatabase({ dialect: 'postgres', connectionString: scratch.url, display: 'server' }, { poolMax: 1, statementTimeoutMs: STATEMENT_TIMEOUT_MS });
  }, 120_000);

  afterAll(async () => {
    await server?.close();
    await seeding?.close();
    await scratch?.drop();
  });

  const applied = async (db: Kysely<any>) => (await createMigrator(db, 'postgres').getMigrations()).filter((m) => m.executedAt !== undefined).map((m) => m.name);

  it('the table rewrite outlasts the statement timeout as a request would see it, yet the migration completes', async () => {
    // A statement as long as the rewrite, on the same connection settings, is cut off: the timeout is real.
    await expect(server.db.executeQuery(CompiledQuery.raw('select pg_sleep(1)'))).rejects.toThrow(/statement timeout/);

    // Behind a reader's open transaction (its lock on the table), the migration waits at most the timeout and writes nothing.
    const reader = new pg.Client({ connectionString: scratch.url });
    await reader.connect();
    try {
      await reader.query('begin');
      await reader.query('select 1 from kubun_connector_operation limit 1');
      const startedAt = Date.now();
      const blocked = await createMigrator(server.db, 'postgres').migrateToLatest();
      const waitedMs = Date.now() - startedAt;
      expect(String(blocked.error)).toMatch(/lock timeout/);
      expect(waitedMs).toBeLessThan(10_000);
      expect(await applied(seeding.db)).not.toContain(LATEST);
      const columns = (await seeding.db.introspection.getTables()).find((t) => t.name === 'kubun_connector_operation')!.columns.map((c) => c.name);
      expect(columns).not.toContain('terminal_updated_at');
    } finally {
      await reader.query('rollback').catch(() => {});
      await reader.end();
    }

    // With the table free, the rewrite of every row (much longer than the timeout) completes.
    const startedAt = Date.now();
    unwrapMigrationResult(await createMigrator(server.db, 'postgres').migrateToLatest());
    const tookMs = Date.now() - startedAt;
    expect(await applied(seeding.db)).toContain(LATEST);
    const { rows } = await seeding.db.executeQuery<{ terminal: unknown; retried: unknown }>(
      CompiledQuery.raw('select count(terminal_updated_at) as terminal, count(retried_attempts) as retried from kubun_connector_operation'),
    );
    // Every tenth committed; attempts 1 + i % 3, so two rows in three past their first attempt.
    expect({ terminal: Number(rows[0]!.terminal), retried: Number(rows[0]!.retried) }).toEqual({ terminal: ROWS / 10, retried: ROWS - Math.floor(ROWS / 3) });
    // The proof that the timeout was lifted, not merely unreached: the migration took longer than it.
    expect(tookMs).toBeGreaterThan(STATEMENT_TIMEOUT_MS);
  });
});
