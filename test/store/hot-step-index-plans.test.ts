/**
 * The reads whose indexes migration 0017 moved off columns a live operation's
 * steps write (so that start and mark sent are HOT on Postgres) still read
 * an index, on both dialects: retention finds terminal operations by age on
 * idx_connector_operation_terminal_updated (state, terminal_updated_at), and
 * `minAttempts` of 2 and more finds retried work on
 * idx_connector_operation_retried_attempts, and a window of `updatedAfter` /
 * `updatedBefore` over finished states only reads the terminal index too.
 * 20 000 operations, most of them live on their first attempt, analyzed.
 */
import { CompiledQuery } from 'kysely';
import { expect, it } from 'vitest';
import { countOperations, listOperations } from '../../src/store/operations/index.js';
import { runRetention } from '../../src/store/retention/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { accessPaths, overSeries, recordingStatements } from '../helpers/query-plans.js';

const ROWS = 20_000;
const T0 = 1_700_000_000_000;

describeEachDialect('indexes kept off the steps’ columns', (suite) => {
  it('retention reads terminal operations by age, minAttempts retried ones, and an updated window over finished states, from an index', { timeout: 120_000 }, async () => {
    // Every 100th operation committed, every 400th dead (long ago); every 250th on its third attempt; the rest live on their first.
    const state = `case when i % 400 = 0 then 'dead' when i % 100 = 0 then 'committed' else 'attempted' end`;
    await suite.store.db.executeQuery(
      overSeries(
        suite.dialect,
        ROWS,
        `insert into kubun_connector_operation
          (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
           payload_hash, reissue_intent, state, attempts, version, next_attempt_at, created_at, updated_at)
          select 'did:key:z6MkCaller' || (i % 50), 'op-' || i, 'n' || i, 'did:key:z6MkCaller' || (i % 50), 'google', 'calendar.event', 'create', 'a', 't',
            'e-' || i, 'h', 'none', ${state}, case when i % 250 = 0 then 3 else 1 end, 0, ${T0} + i, ${T0} + i, ${T0} + i`,
      ),
    );
    await suite.store.db.executeQuery(CompiledQuery.raw('analyze'));
    const table = 'kubun_connector_operation';
    const noTableScan = (paths: string[], sql: string) => {
      expect(paths, sql).not.toHaveLength(0);
      for (const path of paths) expect(path, sql).not.toMatch(/Seq Scan|^SCAN/);
    };

    // minAttempts 3: the 80 operations on their third attempt, from the retried index; 1 is most rows, read in the listing's order.
    const { store, statements } = recordingStatements(suite.store);
    const page = await listOperations(store, { visibleTo: null, first: 25, filter: { minAttempts: 3 } });
    expect(page.operations).toHaveLength(25);
    expect(page.operations.every((o) => o.attempts === 3)).toBe(true);
    expect(await countOperations(store, { visibleTo: null, filter: { minAttempts: 3 } })).toMatchObject({ count: 80 });
    for (const statement of statements) {
      const paths = await accessPaths(suite.store, statement, table);
      noTableScan(paths, statement.sql);
      expect(paths.some((path) => path.includes('idx_connector_operation_retried_attempts')), `${paths.join('\n')}\n  for ${statement.sql}`).toBe(true);
    }
    expect((await listOperations(suite.store, { visibleTo: null, first: 25, filter: { minAttempts: 1 } })).operations).toHaveLength(25);

    // Finished operations updated in a window (a dashboard's "dead since yesterday"): the terminal index per state.
    // Dead at i = 400k, updated at T0 + i: from i = 10 000 on, 26 of them.
    const window = recordingStatements(suite.store);
    const dead = await listOperations(window.store, { visibleTo: null, first: 25, filter: { states: ['dead'], updatedAfter: T0 + 10_000 } });
    expect(dead.operations).toHaveLength(25);
    expect(dead.operations.every((o) => o.state === 'dead' && o.updatedAt >= T0 + 10_000)).toBe(true);
    expect(await countOperations(window.store, { visibleTo: null, filter: { states: ['dead'], updatedAfter: T0 + 10_000 } })).toMatchObject({ count: 26 });
    const finished = { states: ['committed', 'dead'] as const, updatedAfter: T0 + 5_000, updatedBefore: T0 + 6_000 };
    // i in [5 000, 6 000): ten multiples of 100, three of them of 400.
    expect(await countOperations(window.store, { visibleTo: null, filter: { ...finished, states: [...finished.states] } })).toMatchObject({ count: 10 });
    for (const statement of window.statements) {
      const paths = await accessPaths(suite.store, statement, table);
      noTableScan(paths, statement.sql);
      expect(paths.some((path) => path.includes('idx_connector_operation_terminal_updated')), `${paths.join('\n')}\n  for ${statement.sql}`).toBe(true);
    }
    // A live state in the list: the window is not the terminal index's (a live row's terminal_updated_at is null), and the answer is whole.
    // i in [19 990, 20 000]: eleven rows, 20 000 dead, the others attempted.
    const mixed = { states: ['attempted', 'dead'] as ('attempted' | 'dead')[], updatedAfter: T0 + 19_990 };
    expect(await countOperations(suite.store, { visibleTo: null, filter: mixed })).toMatchObject({ count: 11 });
    const mixedPage = await listOperations(suite.store, { visibleTo: null, first: 25, filter: mixed });
    expect(mixedPage.operations.map((o) => o.state).sort()).toEqual([...Array(10).fill('attempted'), 'dead']);

    // Retention: the terminal rows older than the window, per state, on the terminal index (then each by its key).
    const DAY = 24 * 60 * 60 * 1000;
    suite.clock.set(T0 + ROWS / 2 + DAY);
    const retention = recordingStatements(suite.store);
    const result = await runRetention(retention.store, { deadRetentionMs: DAY });
    // Below i = 10 000: 99 terminal operations (multiples of 100), 24 of them dead (multiples of 400).
    expect(result).toMatchObject({ operations: 99, deadOperations: 24 });
    const deletes = retention.statements.filter((s) => /delete from "kubun_connector_operation"/i.test(s.sql));
    expect(deletes.length).toBeGreaterThanOrEqual(2);
    for (const statement of deletes) {
      const paths = await accessPaths(suite.store, statement, table);
      noTableScan(paths, statement.sql);
      expect(paths.some((path) => path.includes('idx_connector_operation_terminal_updated')), `${paths.join('\n')}\n  for ${statement.sql}`).toBe(true);
    }
  });
});
