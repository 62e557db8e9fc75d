import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createStoreContext, type StoreContext } from '../../src/store/context.js';
import { StaleLeaseError } from '../../src/store/errors.js';
import { acquireOperationLease, claimOperation, getOperationByKey, markOperationSent, SEND_WINDOW_MARGIN_MS, startOperationAttempt } from '../../src/store/operations/index.js';
import { describeEachDialect, TEST_POOL_SIZE } from '../helpers/databases.js';
import { claimFresh, claimInput, keyOf, LEASE_MS } from '../helpers/operation-claim-fixtures.js';
import { getOperationRow } from '../helpers/row-fixtures.js';

const KEY = keyOf(claimInput());

describeEachDialect('operations: concurrency', (suite) => {
  /**
   * Runs `race` with stores over two independent pools (TEST_POOL_SIZE connections
   * each) sharing the suite clock, every connection already open (otherwise
   * connecting staggers the racers so much that they rarely overlap). The
   * second pool is closed afterwards: the server allows ~100 connections.
   */
  async function withPools<T>(race: (pools: StoreContext[]) => Promise<T>): Promise<T> {
    const again = suite.database.connectAgain();
    try {
      const pools = [suite.store, createStoreContext(again.db, 'postgres', { now: suite.clock.now })];
      await Promise.all(pools.flatMap((store) => Array.from({ length: TEST_POOL_SIZE }, () => sql`select pg_sleep(0.02)`.execute(store.db))));
      return await race(pools);
    } finally {
      await again.close();
    }
  }

  describe.runIf(suite.dialect === 'postgres')('on real parallel connections', () => {
    it('two concurrent claims of a new key: exactly one CLAIMED', async () => {
      const results = await withPools(([a, b]) => Promise.all([claimOperation(a!, claimInput()), claimOperation(b!, claimInput())]));
      expect(results.map((r) => r.outcome).sort()).toEqual(['CLAIMED', 'IN_FLIGHT']);
      const winner = results.find((r) => r.outcome === 'CLAIMED')!;
      expect((await getOperationRow(suite.store, KEY))?.lease_token).toBe(winner.lease?.token);
      expect(results[0]!.operation.nodeKey).toBe(results[1]!.operation.nodeKey);
    });

    it('20 concurrent claims of a new key: one CLAIMED, 19 IN_FLIGHT, one row', async () => {
      const results = await withPools((pools) => Promise.all(Array.from({ length: 20 }, (_, i) => claimOperation(pools[i % 2]!, claimInput()))));
      expect(results.filter((r) => r.outcome === 'CLAIMED')).toHaveLength(1);
      expect(results.filter((r) => r.outcome === 'IN_FLIGHT')).toHaveLength(19);
      expect(results.filter((r) => r.lease !== undefined)).toHaveLength(1);
      const rows = await suite.store.db.selectFrom('kubun_connector_operation').select('node_key').execute();
      expect(rows).toHaveLength(1);
      expect(new Set(results.map((r) => r.operation.nodeKey))).toEqual(new Set([rows[0]!.node_key]));
    });

    it('20 concurrent takeovers of an expired lease by claim: exactly one gets the lease', async () => {
      await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS);
      const results = await withPools((pools) => Promise.all(Array.from({ length: 20 }, (_, i) => claimOperation(pools[i % 2]!, claimInput()))));
      const winners = results.filter((r) => r.outcome === 'CLAIMED');
      expect(winners).toHaveLength(1);
      expect(results.filter((r) => r.outcome === 'IN_FLIGHT')).toHaveLength(19);
      expect(winners[0]!.lease?.version).toBe(1);
      const row = await getOperationRow(suite.store, KEY);
      expect(row).toMatchObject({ version: 1, lease_token: winners[0]!.lease?.token });
    });

    it('20 concurrent acquires of an expired lease: exactly one acquired', async () => {
      await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS);
      const results = await withPools((pools) =>
        Promise.all(Array.from({ length: 20 }, (_, i) => acquireOperationLease(pools[i % 2]!, { key: KEY, leaseMs: LEASE_MS }))),
      );
      expect(results.filter((r) => r.acquired)).toHaveLength(1);
      expect((await getOperationByKey(suite.store, KEY))?.version).toBe(1);
    });

    it('20 concurrent attempt starts by one holder: all count, each its own history row', async () => {
      const { fence } = await claimFresh(suite.store);
      // Each history position is read after the row lock, so no two racers take the same one.
      await withPools((pools) => Promise.all(Array.from({ length: 20 }, (_, i) => startOperationAttempt(pools[i % 2]!, fence))));
      expect((await getOperationRow(suite.store, KEY))?.attempts).toBe(20);
      const history = await suite.store.db.selectFrom('kubun_connector_operation_history').select(['seq', 'attempt']).orderBy('seq').execute();
      expect(history.map((row) => Number(row.seq))).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      expect(new Set(history.map((row) => Number(row.attempt))).size).toBe(20);
      // Then one mark-sent stamps the newest attempt only.
      await markOperationSent(suite.store, { ...fence, sendMarker: 'marker-1' });
      const stamped = await suite.store.db.selectFrom('kubun_connector_operation_history').select('seq').where('sent_at', 'is not', null).execute();
      expect(stamped.map((row) => Number(row.seq))).toEqual([20]);
    });

    it('mark-sent racing a takeover: reconcile_only exactly when a mark landed before it', async () => {
      for (let round = 0; round < 5; round++) {
        await suite.database.truncate();
        suite.clock.set(Date.UTC(2026, 0, 1));
        const { fence } = await claimFresh(suite.store);
        // The holder's clock says its lease is still live; the claimer's says it expired, and so did
        // the send window of a mark made now (1 ms, plus the margin): the race is the takeover's alone.
        const expiry = suite.clock.now() + LEASE_MS;
        const holder: StoreContext = { ...suite.store, now: () => expiry - 1 };
        const claimer: StoreContext = { ...suite.store, now: () => expiry + SEND_WINDOW_MARGIN_MS };
        const marks = Array.from({ length: 10 }, () =>
          // One run's marker, resent: the first mark writes, the others answer it (a second marker would be a conflict).
          markOperationSent(holder, { ...fence, sendMarker: 'run-1', sendTimeoutMs: 1 }).then(
            () => 'marked' as const,
            (error: unknown) => {
              if (error instanceof StaleLeaseError) return 'stale' as const;
              throw error;
            },
          ),
        );
        const [claim, ...outcomes] = await Promise.all([claimOperation(claimer, claimInput()), ...marks]);
        expect(claim.outcome).toBe('CLAIMED');
        const anyMarked = outcomes.includes('marked');
        expect(claim.operation.state).toBe(anyMarked ? 'reconcile_only' : 'attempted');
        const row = await getOperationRow(suite.store, KEY);
        expect(row?.send_marker !== null).toBe(anyMarked);
      }
    });
  });

  it('runs its concurrency checks on Postgres only (SQLite has one serialized connection)', () => {
    expect(['sqlite', 'postgres']).toContain(suite.dialect);
  });
});
