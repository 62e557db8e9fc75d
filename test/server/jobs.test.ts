import { expect, it } from 'vitest';
import { DEFAULT_DEAD_RETENTION_MS, DEFAULT_IDEMPOTENCY_WINDOW_MS } from '../../src/store/retention/index.js';
import { backlogSamplerJob, backlogSamplerTickMs, runJobsOnce, serverJobs, startBackgroundJobs, type BackgroundJob } from '../../src/server/jobs.js';
import type { ChangeEvent } from '../../resolvers/context.js';
import { describeEachDialect } from '../helpers/databases.js';
import { countRows, insertCandidateRow, insertOperationRow, insertPendingAuthRow, insertReceiptRow } from '../helpers/row-fixtures.js';
import { captureLogs } from './log-capture.js';

const HOUR = 60 * 60 * 1000;
/** A publish that keeps what it was given (the server passes its change feed's). */
function recordPublished(): { publish: (events: readonly ChangeEvent[]) => Promise<void>; published: ChangeEvent[] } {
  const published: ChangeEvent[] = [];
  return { publish: async (events) => void published.push(...events), published };
}
const ignore = async () => {};
const jobConfig = { retentionIntervalMs: 60_000, idempotencyWindowMs: DEFAULT_IDEMPOTENCY_WINDOW_MS, deadRetentionMs: DEFAULT_DEAD_RETENTION_MS };

/** Waits until `done()` holds, polling; fails after `ms`. */
async function waitFor(done: () => boolean, ms = 5_000): Promise<void> {
  const until = Date.now() + ms;
  while (!done()) {
    if (Date.now() > until) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describeEachDialect('background jobs', (suite) => {
  it('the backlog sampler takes one sample per slot (logged at info), ticking five times a slot', async () => {
    const { store, clock } = suite;
    await insertOperationRow(store, { state: 'attempted', next_attempt_at: clock.now() - 1, lease_token: null, lease_expires_at: null });
    const logs = captureLogs();
    const { publish, published } = recordPublished();
    const job = backlogSamplerJob(300_000, publish);
    expect((await runJobsOnce(store, logs.logger, [job]))[0]).toMatchObject({ name: 'backlog-sample', ok: true, summary: { sampled: 1, due: 1, capped: false } });
    // A sample taken is told to services (the backlog is store-wide); a slot found taken publishes nothing.
    expect(published).toEqual([{ kind: 'store', nodeKey: 'BACKLOG/BACKLOG_SAMPLED/@services' }]);
    expect((await runJobsOnce(store, logs.logger, [job]))[0]).toMatchObject({ ok: true, summary: { sampled: 0 } });
    expect(published).toHaveLength(1);
    clock.advance(300_000);
    expect((await runJobsOnce(store, logs.logger, [job]))[0]).toMatchObject({ ok: true, summary: { sampled: 1 } });
    expect(await countRows(store, 'kubun_connector_backlog_sample')).toBe(2);
    expect(logs.entries().filter((e) => e.msg === 'background job done').map((e) => [e.job, e.level])).toEqual([
      ['backlog-sample', 30],
      ['backlog-sample', 20],
      ['backlog-sample', 30],
    ]);
    expect([backlogSamplerTickMs(300_000), backlogSamplerTickMs(2_000), backlogSamplerTickMs(0)]).toEqual([60_000, 1_000, 0]);
  });

  it('a tick deletes expired authorizations and finished operations past the window, and keeps live ones', async () => {
    const { store, clock } = suite;
    const now = clock.now();
    const cutoff = now - DEFAULT_IDEMPOTENCY_WINDOW_MS;
    const oldCommitted = await insertOperationRow(store, { state: 'committed', updated_at: cutoff - 1 });
    const oldDead = await insertOperationRow(store, { state: 'dead', updated_at: now - DEFAULT_DEAD_RETENTION_MS - HOUR });
    const recentCommitted = await insertOperationRow(store, { state: 'committed', updated_at: now - HOUR });
    const oldLive = await insertOperationRow(store, { state: 'attempted', updated_at: cutoff - HOUR });
    const oldReconcile = await insertOperationRow(store, { state: 'reconcile_only', updated_at: cutoff - HOUR });
    await insertPendingAuthRow(store, { state: 'expired', expires_at: now - 1 });
    await insertPendingAuthRow(store, { state: 'expires-now', expires_at: now });
    await insertPendingAuthRow(store, { state: 'fresh', expires_at: now + HOUR });
    const receipt = await insertReceiptRow(store, { committed_at: now });
    await insertCandidateRow(store, { document_id: 'settled', provenance: receipt.provenance, state: 'applied' });
    await insertCandidateRow(store, { document_id: 'pending', provenance: receipt.provenance, state: 'pending' });

    const logs = captureLogs();
    const { publish, published } = recordPublished();
    const results = await runJobsOnce(store, logs.logger, serverJobs(jobConfig, publish));

    expect(results.map((r) => [r.name, r.ok])).toEqual([
      ['pending-auth-expiry', true],
      ['retention', true],
    ]);
    expect(results[0]).toMatchObject({ summary: { deleted: 1 } });
    expect(results[1]).toMatchObject({ summary: { operations: 2, pendingAuthorizations: 0, sweepCandidates: 1, complete: true } });

    const operations = await store.db.selectFrom('kubun_connector_operation').select('operation_id').execute();
    expect(operations.map((r) => r.operation_id).sort()).toEqual(
      [recentCommitted.operation_id, oldLive.operation_id, oldReconcile.operation_id].sort(),
    );
    expect(operations.map((r) => r.operation_id)).not.toContain(oldCommitted.operation_id);
    expect(operations.map((r) => r.operation_id)).not.toContain(oldDead.operation_id);
    const states = await store.db.selectFrom('kubun_connector_pending_auth').select('state').orderBy('state').execute();
    expect(states.map((r) => r.state)).toEqual(['expires-now', 'fresh']);
    expect(await countRows(store, 'kubun_connector_sweep_candidate')).toBe(1);
    // One event per subject and DID whose rows went, not one per row; the summary logs counts only.
    const dids = new Set([oldCommitted.caller_did, oldCommitted.owner_did, oldDead.caller_did, oldDead.owner_did]);
    expect(published).toEqual([
      ...[...dids].map((did) => ({ kind: 'store', nodeKey: `OPERATIONS/RETENTION/${did}` })),
      { kind: 'store', nodeKey: `SWEEP_RECEIPTS/RETENTION/${receipt.owner_did}` },
    ]);
    expect(results[1]).not.toHaveProperty('summary.touched');

    const done = logs.entries().filter((e) => e.msg === 'background job done');
    expect(done.map((e) => e.job)).toEqual(['pending-auth-expiry', 'retention']);
    expect(done[1]).toMatchObject({ level: 30, operations: 2 });
  });

  it('honours the configured idempotency window', async () => {
    const { store, clock } = suite;
    await insertOperationRow(store, { state: 'committed', updated_at: clock.now() - 2 * HOUR });
    await insertOperationRow(store, { state: 'committed', updated_at: clock.now() - HOUR / 2 });
    const [, retention] = await runJobsOnce(store, captureLogs().logger, serverJobs({ ...jobConfig, idempotencyWindowMs: HOUR }, ignore));
    expect(retention).toMatchObject({ ok: true, summary: { operations: 1 } });
    expect(await countRows(store, 'kubun_connector_operation')).toBe(1);
  });

  it('a failing job is logged, not thrown; the other jobs and the next tick still run', async () => {
    const { store, clock } = suite;
    let failures = 0;
    const failing: BackgroundJob = {
      name: 'always-fails',
      run: async () => {
        failures += 1;
        throw new Error(`boom ${failures}`);
      },
    };
    const logs = captureLogs();
    const jobs = startBackgroundJobs({ store, logger: logs.logger, intervalMs: 10, jobs: [failing, ...serverJobs(jobConfig, ignore)] });
    try {
      // The first tick fails, then the expiry sweep deletes what exists; a row
      // added after it is deleted by a later tick, so the schedule survived.
      await waitFor(() => failures >= 1);
      await insertPendingAuthRow(store, { expires_at: clock.now() - 1 });
      await waitFor(() => failures >= 3);
      // A retention run that began before the insert may not see the row; a later one deletes it.
      const inserted = logs.entries().filter((e) => e.msg === 'background job done' && e.job === 'retention').length;
      await waitFor(() => logs.entries().filter((e) => e.msg === 'background job done' && e.job === 'retention').length >= inserted + 2);
    } finally {
      await jobs.stop();
    }
    expect(await countRows(store, 'kubun_connector_pending_auth')).toBe(0);
    const failed = logs.entries().filter((e) => e.msg === 'background job failed');
    expect(failed.length).toBeGreaterThanOrEqual(3);
    expect(failed[0]).toMatchObject({ level: 50, job: 'always-fails', err: { message: 'boom 1' } });
  });

  it('never overlaps runs, and stop waits for the run in progress, then nothing more runs', async () => {
    const { store } = suite;
    let active = 0;
    let maxActive = 0;
    let runs = 0;
    let release: (() => void) | undefined;
    const slow: BackgroundJob = {
      name: 'slow',
      run: async () => {
        active += 1;
        maxActive = Math.max(maxActive, active);
        runs += 1;
        await new Promise<void>((resolve) => {
          release = resolve;
        });
        active -= 1;
        return {};
      },
    };
    const jobs = startBackgroundJobs({ store, logger: captureLogs().logger, intervalMs: 1, jobs: [slow] });
    await waitFor(() => release !== undefined);
    // Far longer than the interval: a second run would have started by now if runs could overlap.
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(runs).toBe(1);
    let stopped = false;
    const stopping = jobs.stop().then(() => {
      stopped = true;
    });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(stopped).toBe(false);
    release!();
    await stopping;
    expect(jobs.active).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(runs).toBe(1);
    expect(maxActive).toBe(1);
  });

  it('an interval of 0 schedules nothing', async () => {
    let runs = 0;
    const jobs = startBackgroundJobs({
      store: suite.store,
      logger: captureLogs().logger,
      intervalMs: 0,
      jobs: [{ name: 'counter', run: async () => ({ runs: ++runs }) }],
    });
    expect(jobs.active).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(runs).toBe(0);
    await jobs.stop();
  });
});
