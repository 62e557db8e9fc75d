/**
 * The `/metrics` gauges' one statement: operations by state from the
 * counters, the due backlog and its oldest entry, expired leases, stuck
 * operations, watches and sync states by status; bounded by the count cap.
 */
import { CompiledQuery } from 'kysely';
import { expect, it } from 'vitest';
import { COUNT_CAP } from '../../src/store/count.js';
import { readStoreGauges } from '../../src/store/gauges.js';
import { recordOperationOutcome, startOperationAttempt } from '../../src/store/operations/index.js';
import { setSyncState } from '../../src/store/sync-state/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { claimFresh } from '../helpers/operation-claim-fixtures.js';
import { recordingStatements } from '../helpers/query-plans.js';
import { insertOperationRow, insertWatchRow } from '../helpers/row-fixtures.js';

describeEachDialect('store gauges', (suite) => {
  it('an empty store reads all zeros and no oldest due operation', async () => {
    expect(await readStoreGauges(suite.store)).toEqual({
      operationsByState: { attempted: 0, reconcile_only: 0, committed: 0, dead: 0 },
      dueBacklog: { count: 0, capped: false },
      oldestDueAt: null,
      expiredLeases: { count: 0, capped: false },
      stuck: { count: 0, capped: false },
      watchesByStatus: { pending_verification: { count: 0, capped: false }, verified: { count: 0, capped: false }, failed: { count: 0, capped: false } },
      syncStatesByStatus: {},
      syncStatesCapped: false,
    });
  });

  it('counts states, the due backlog, expired leases and stuck work as the lists define them', async () => {
    const t0 = suite.clock.now();
    // Leased now: not due. Then its lease lapses: due, an expired lease.
    const leased = await claimFresh(suite.store, { operationID: 'leased' });
    // Retryable outcome: due again at its backoff, lease released.
    const retried = await claimFresh(suite.store, { operationID: 'retried' });
    await startOperationAttempt(suite.store, retried.fence);
    await recordOperationOutcome(suite.store, { ...retried.fence, kind: 'retryable' });
    // Deferred offline: never due until resumed.
    const deferred = await claimFresh(suite.store, { operationID: 'deferred' });
    await startOperationAttempt(suite.store, deferred.fence);
    await recordOperationOutcome(suite.store, { ...deferred.fence, kind: 'offline' });
    await insertOperationRow(suite.store, { state: 'committed', lease_token: null, lease_expires_at: null, document_id: 'doc-1' });
    await insertOperationRow(suite.store, { state: 'dead', lease_token: null, lease_expires_at: null });

    let gauges = await readStoreGauges(suite.store);
    expect(gauges.operationsByState).toEqual({ attempted: 3, reconcile_only: 0, committed: 1, dead: 1 });
    expect(gauges.expiredLeases).toEqual({ count: 0, capped: false });
    expect(gauges.stuck.count).toBe(0);

    suite.clock.advance(60 * 60 * 1000);
    gauges = await readStoreGauges(suite.store);
    // Due: the lapsed lease and the retried one (the deferred one waits for its resume).
    expect(gauges.dueBacklog).toEqual({ count: 2, capped: false });
    // An outcome leaves the holder's lease to lapse on its own: all three live ones hold an expired lease.
    expect(gauges.expiredLeases).toEqual({ count: 3, capped: false });
    // A lapsed lease on live work is stuck, deferred or not (the `stuck` filter's definition).
    expect(gauges.stuck).toEqual({ count: 3, capped: false });
    // The oldest due one became due when the retried one's backoff ran out, or at the leased one's claim.
    expect(gauges.oldestDueAt).not.toBeNull();
    expect(gauges.oldestDueAt!).toBeGreaterThanOrEqual(t0);
    expect(gauges.oldestDueAt!).toBeLessThan(suite.clock.now());
    void leased;
  });

  it('counts watches by status and sync states by their free-text status', async () => {
    await insertWatchRow(suite.store, { document_id: 'doc-1', source_id: 's1', verification_status: 'verified' });
    await insertWatchRow(suite.store, { document_id: 'doc-2', source_id: 's2', verification_status: 'verified' });
    await insertWatchRow(suite.store, { document_id: 'doc-3', source_id: 's3', verification_status: 'failed' });
    await setSyncState(suite.store, 'google', 'did:key:zA', { status: 'idle', checkpoint: null, lastSyncedAt: 'x', entityCount: 0 } as any);
    await setSyncState(suite.store, 'github', 'did:key:zA', { status: 'idle', checkpoint: null, lastSyncedAt: 'x', entityCount: 0 } as any);
    await setSyncState(suite.store, 'google', 'did:key:zB', { status: 'error', checkpoint: null, lastSyncedAt: 'x', entityCount: 0 } as any);
    const gauges = await readStoreGauges(suite.store);
    expect(gauges.watchesByStatus).toEqual({ pending_verification: { count: 0, capped: false }, verified: { count: 2, capped: false }, failed: { count: 1, capped: false } });
    expect(gauges.syncStatesByStatus).toEqual({ idle: 2, error: 1 });
    expect(gauges.syncStatesCapped).toBe(false);
  });

  /** COUNT_CAP + 5 live operations, unleased, due since `dueAt`. */
  async function backlogPastTheCap(dueAt: number): Promise<void> {
    const now = suite.clock.now();
    const values = Array.from({ length: COUNT_CAP + 5 }, (_, i) => `('did:key:zCap', 'cap-${i}', 'nk-cap-${i}', 'did:key:zCap', 'google', 'm', 'create', 'a', 't', 'e-${i}', 'h-${i}', 'none', 'attempted', 1, 1, ${dueAt}, ${now}, ${now})`);
    for (let i = 0; i < values.length; i += 1000) {
      await suite.store.db.executeQuery(
        CompiledQuery.raw(
          `insert into kubun_connector_operation (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id, payload_hash, reissue_intent, state, attempts, version, next_attempt_at, created_at, updated_at) values ${values.slice(i, i + 1000).join(',')}`,
        ),
      );
    }
    await suite.store.db.executeQuery(CompiledQuery.raw(suite.dialect === 'postgres' ? 'analyze kubun_connector_operation' : 'analyze'));
  }

  /** Postgres: what the statement reads of the operation table, explained and run: its rows (heap and index-only scans) and its bitmap scans' index entries. */
  async function operationsRead(statement: CompiledQuery): Promise<{ rows: number; bitmapEntries: number }> {
    const { rows } = await suite.store.db.executeQuery<{ 'QUERY PLAN': unknown }>(CompiledQuery.raw(`explain (analyze, format json) ${statement.sql}`, [...statement.parameters]));
    const read = { rows: 0, bitmapEntries: 0 };
    const walk = (node: Record<string, unknown>) => {
      const times = Number(node['Actual Rows']) * Number(node['Actual Loops']);
      if (node['Relation Name'] === 'kubun_connector_operation') read.rows += times;
      if (node['Node Type'] === 'Bitmap Index Scan' && /connector_operation/.test(String(node['Index Name']))) read.bitmapEntries += times;
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk((rows[0]!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
    return read;
  }

  it('stops counting at the cap and says so', async () => {
    const now = suite.clock.now();
    await backlogPastTheCap(now - 1);
    const recorded = recordingStatements(suite.store);
    const gauges = await readStoreGauges(recorded.store);
    expect(gauges.operationsByState.attempted).toBe(COUNT_CAP + 5);
    expect(gauges.dueBacklog).toEqual({ count: COUNT_CAP, capped: true });
    expect(gauges.oldestDueAt).toBe(now - 1);
    if (suite.dialect !== 'postgres') return;
    // The operations read: the capped count's (the cap + 1) and the oldest due one, the head of
    // each live state's range of the due index (+ 1 per state), never the whole backlog.
    const read = await operationsRead(recorded.statements.at(-1)!);
    expect(read.rows).toBeGreaterThan(COUNT_CAP);
    expect(read.rows).toBeLessThanOrEqual(COUNT_CAP + 1 + 2);
  });

  it('a stuck backlog past the cap: due and stuck each stop at the cap, reading no more of the backlog than that', async () => {
    const now = suite.clock.now();
    // Due for an hour, no lease: stuck (past the 15 min threshold) as well as due.
    await backlogPastTheCap(now - 60 * 60 * 1000);
    const recorded = recordingStatements(suite.store);
    const gauges = await readStoreGauges(recorded.store);
    expect(gauges.dueBacklog).toEqual({ count: COUNT_CAP, capped: true });
    expect(gauges.stuck).toEqual({ count: COUNT_CAP, capped: true });
    expect(gauges.expiredLeases).toEqual({ count: 0, capped: false });
    if (suite.dialect !== 'postgres') return;
    // Due's and stuck's cap + 1 each, the oldest due's heads: rows and index entries, never the backlog twice over.
    const read = await operationsRead(recorded.statements.at(-1)!);
    expect(read.rows + read.bitmapEntries, JSON.stringify(read)).toBeLessThanOrEqual(2 * (COUNT_CAP + 1) + 2 + 2);
  });
});
