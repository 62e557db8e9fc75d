/**
 * Operation activity by hour and the due backlog over time (migration 0011,
 * issue 22 item 7): the triggers count every commit and every recorded
 * outcome by kind in the hour it happened, whichever code path wrote it;
 * deleting operations takes nothing off; a viewer sees the activity of their
 * own operations (caller or owner) once; the backlog is sampled once per
 * slot whoever samples and is shown only to readers of every operation;
 * retention prunes old hours; reads use the tables' indexes; on Postgres
 * concurrent commits are all counted and never deadlock.
 */
import { CompiledQuery } from 'kysely';
import { expect, it } from 'vitest';
import { ACTIVITY_RETENTION_MS, HOUR_MS, hourOf, importActivity, importBacklogSamples, readOperationActivity, sampleDueBacklog } from '../../src/store/activity/index.js';
import { finalizeOperationAndArmWatch } from '../../src/store/finalize/index.js';
import { recordOperationOutcome, startOperationAttempt, type OperationFence } from '../../src/store/operations/index.js';
import { runRetention } from '../../src/store/retention/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { claimFresh, setColumns } from '../helpers/operation-claim-fixtures.js';
import { accessPaths, overSeries, recordingStatements } from '../helpers/query-plans.js';
import { CALLER, countRows, OTHER_OWNER, OWNER, watchIdentity } from '../helpers/row-fixtures.js';

const ZERO = { committed: 0, retryable: 0, unknown: 0, fatal: 0, offline: 0, auth: 0 };

describeEachDialect('operations: activity by hour', (suite) => {
  const finalize = (fence: OperationFence, documentID: string) =>
    finalizeOperationAndArmWatch(suite.store, {
      key: fence.key,
      version: fence.version,
      leaseToken: fence.leaseToken,
      documentID,
      resultEntity: null,
      currentWinnerDigest: null,
      watchIdentity: watchIdentity({ sourceID: documentID }),
    });
  const outcome = async (fence: OperationFence, kind: 'retryable' | 'unknown' | 'fatal' | 'offline' | 'auth') => {
    await startOperationAttempt(suite.store, fence);
    await recordOperationOutcome(suite.store, { ...fence, kind, lastHTTPStatus: null, message: `${kind} outcome` });
  };
  /** Non-zero buckets as [hours before the current one, counts]. */
  const nonZero = (activity: Awaited<ReturnType<typeof readOperationActivity>>) =>
    activity.buckets
      .filter((bucket) => Object.values(bucket.counts).some((n) => n > 0))
      .map((bucket) => [(activity.to - HOUR_MS - bucket.start) / HOUR_MS, bucket.counts]);

  it('counts commits and outcomes by kind in the hour they happened, for a service and for each viewer once', async () => {
    // The test clock starts on the hour; move into the middle of it.
    suite.clock.advance(20 * 60_000);
    const a = await claimFresh(suite.store, { operationID: 'a' });
    const b = await claimFresh(suite.store, { operationID: 'b', connectorName: 'github' });
    const c = await claimFresh(suite.store, { operationID: 'c', callerDID: OTHER_OWNER, ownerDID: OTHER_OWNER });
    await outcome(a.fence, 'retryable');
    await outcome(b.fence, 'offline');
    await outcome(c.fence, 'fatal');
    suite.clock.advance(HOUR_MS);
    const d = await claimFresh(suite.store, { operationID: 'd' });
    await outcome(d.fence, 'unknown');
    const e = await claimFresh(suite.store, { operationID: 'e', ownerDID: OTHER_OWNER });
    expect((await finalize(e.fence, 'doc-e')).finalized).toBe(true);
    const f = await claimFresh(suite.store, { operationID: 'f', connectorName: 'github' });
    await outcome(f.fence, 'auth');
    // Claims alone, attempts still open and renewals are not activity.
    await claimFresh(suite.store, { operationID: 'g' });
    await startOperationAttempt(suite.store, (await claimFresh(suite.store, { operationID: 'h' })).fence);

    const everyone = await readOperationActivity(suite.store, { visibleTo: null, hours: 24 });
    expect(everyone.buckets).toHaveLength(24);
    expect(everyone.to - everyone.from).toBe(24 * HOUR_MS);
    expect(everyone.buckets.at(-1)!.start).toBe(hourOf(suite.clock.current));
    expect(nonZero(everyone)).toEqual([
      [1, { ...ZERO, retryable: 1, offline: 1, fatal: 1 }],
      [0, { ...ZERO, unknown: 1, committed: 1, auth: 1 }],
    ]);
    expect(everyone.backlogIncluded).toBe(true);

    const github = await readOperationActivity(suite.store, { visibleTo: null, hours: 24, connectorName: 'github' });
    expect(nonZero(github)).toEqual([
      [1, { ...ZERO, offline: 1 }],
      [0, { ...ZERO, auth: 1 }],
    ]);
    expect(github.backlogIncluded).toBe(false);

    // OWNER owns a, b, d, f; CALLER called a, b, d, e, f; OTHER_OWNER called c and owns c, e (c once although both).
    expect(nonZero(await readOperationActivity(suite.store, { visibleTo: OWNER, hours: 24 }))).toEqual([
      [1, { ...ZERO, retryable: 1, offline: 1 }],
      [0, { ...ZERO, unknown: 1, auth: 1 }],
    ]);
    expect(nonZero(await readOperationActivity(suite.store, { visibleTo: CALLER, hours: 24 }))).toEqual([
      [1, { ...ZERO, retryable: 1, offline: 1 }],
      [0, { ...ZERO, unknown: 1, committed: 1, auth: 1 }],
    ]);
    const other = await readOperationActivity(suite.store, { visibleTo: OTHER_OWNER, hours: 24 });
    expect(nonZero(other)).toEqual([
      [1, { ...ZERO, fatal: 1 }],
      [0, { ...ZERO, committed: 1 }],
    ]);
    expect(other.backlogIncluded).toBe(false);
    expect(nonZero(await readOperationActivity(suite.store, { visibleTo: 'did:key:zNobody', hours: 24 }))).toEqual([]);

    // What happened stays counted when the operations go (retention, past the idempotency window).
    await setColumns(suite.store, { callerDID: CALLER, operationID: 'e' }, { updated_at: 0 });
    expect((await runRetention(suite.store, { idempotencyWindowMs: 60_000 })).operations).toBe(1);
    expect(nonZero(await readOperationActivity(suite.store, { visibleTo: null, hours: 24 }))).toEqual(nonZero(everyone));
  });

  it('a window is the current hour and the hours before it: 24 h and 7 d, and nothing older', async () => {
    const a = await claimFresh(suite.store, { operationID: 'a' });
    await outcome(a.fence, 'retryable');
    suite.clock.advance(30 * HOUR_MS);
    const day = await readOperationActivity(suite.store, { visibleTo: null, hours: 24 });
    expect(nonZero(day)).toEqual([]);
    const week = await readOperationActivity(suite.store, { visibleTo: null, hours: 168 });
    expect(week.buckets).toHaveLength(168);
    expect(nonZero(week)).toEqual([[30, { ...ZERO, retryable: 1 }]]);
    expect(nonZero(await readOperationActivity(suite.store, { visibleTo: OWNER, hours: 168 }))).toEqual([[30, { ...ZERO, retryable: 1 }]]);
  });

  it('refuses a window of no hours or more than seven days, and an empty connector name', async () => {
    await expect(readOperationActivity(suite.store, { visibleTo: null, hours: 0 })).rejects.toThrow(/hours/);
    await expect(readOperationActivity(suite.store, { visibleTo: null, hours: 169 })).rejects.toThrow(/hours/);
    await expect(readOperationActivity(suite.store, { visibleTo: null, hours: 1.5 })).rejects.toThrow(/hours/);
    await expect(readOperationActivity(suite.store, { visibleTo: null, hours: 24, connectorName: '' })).rejects.toThrow(/connectorName/);
  });

  it('samples the due backlog once per slot, whoever asks, and shows each hour’s largest sample', async () => {
    suite.clock.advance(60_000);
    for (const id of ['a', 'b', 'c']) await claimFresh(suite.store, { operationID: id, leaseMs: 1_000 });
    // Leased: nothing is due until the leases lapse.
    expect(await sampleDueBacklog(suite.store, 300_000)).toMatchObject({ sampled: true, due: 0, capped: false });
    expect(await sampleDueBacklog(suite.store, 300_000)).toMatchObject({ sampled: false });
    suite.clock.advance(300_000);
    expect(await sampleDueBacklog(suite.store, 300_000)).toMatchObject({ sampled: true, due: 3, capped: false });
    suite.clock.advance(300_000);
    await setColumns(suite.store, { callerDID: CALLER, operationID: 'a' }, { defer_reason: 'offline' });
    expect(await sampleDueBacklog(suite.store, 300_000)).toMatchObject({ sampled: true, due: 2 });
    expect(await countRows(suite.store, 'kubun_connector_backlog_sample')).toBe(3);

    suite.clock.advance(HOUR_MS);
    expect(await sampleDueBacklog(suite.store, 300_000)).toMatchObject({ sampled: true, due: 2 });
    const activity = await readOperationActivity(suite.store, { visibleTo: null, hours: 24 });
    const sampled = activity.buckets.filter((bucket) => bucket.dueBacklog !== null).map((bucket) => [bucket.start, bucket.dueBacklog, bucket.dueBacklogCapped]);
    expect(sampled).toEqual([
      [hourOf(suite.clock.current) - HOUR_MS, 3, false],
      [hourOf(suite.clock.current), 2, false],
    ]);
    // Samples count the whole store: not for a viewer, nor under a connector filter.
    const mine = await readOperationActivity(suite.store, { visibleTo: OWNER, hours: 24 });
    expect(mine.buckets.every((bucket) => bucket.dueBacklog === null)).toBe(true);
    const github = await readOperationActivity(suite.store, { visibleTo: null, hours: 24, connectorName: 'google' });
    expect(github.buckets.every((bucket) => bucket.dueBacklog === null)).toBe(true);
    await expect(sampleDueBacklog(suite.store, 0)).rejects.toThrow(/intervalMs/);
  });

  it('retention prunes activity and samples older than eight days and keeps the rest', async () => {
    const a = await claimFresh(suite.store, { operationID: 'a' });
    await outcome(a.fence, 'retryable');
    await sampleDueBacklog(suite.store, 300_000);
    suite.clock.advance(ACTIVITY_RETENTION_MS - HOUR_MS);
    const b = await claimFresh(suite.store, { operationID: 'b' });
    await outcome(b.fence, 'fatal');
    await sampleDueBacklog(suite.store, 300_000);
    const kept = await runRetention(suite.store, { batchSize: 1 });
    expect(kept.activityRows).toBe(0);
    suite.clock.advance(2 * HOUR_MS);
    const pruned = await runRetention(suite.store, { batchSize: 1 });
    // a's hour: one viewer row and one total row; its sample.
    expect(pruned.activityRows).toBe(3);
    expect(await countRows(suite.store, 'kubun_connector_operation_activity')).toBe(1);
    expect(await countRows(suite.store, 'kubun_connector_operation_activity_total')).toBe(1);
    expect(await countRows(suite.store, 'kubun_connector_backlog_sample')).toBe(1);
    await expect(runRetention(suite.store, { activityRetentionMs: -1 })).rejects.toThrow(/activityRetentionMs/);
  });

  it('reads only the window’s hours through indexes, for a service and for a viewer', { timeout: 120_000 }, async () => {
    const hour = hourOf(suite.clock.current);
    // 200 viewers × 2 000 hours of activity before the window, one row per viewer in it.
    const rows = 40_000;
    await suite.store.db.executeQuery(
      overSeries(
        suite.dialect,
        rows,
        `insert into kubun_connector_operation_activity (caller_did, hour, owner_did, connector_name, outcome, shard, n)
          select 'did:key:zCaller' || (i % 200), ${hour} - (i / 200) * ${HOUR_MS}, 'did:key:zOwner' || ((i + 1) % 200), 'google', 'committed', 0, 1`,
      ),
    );
    await suite.store.db.executeQuery(
      overSeries(
        suite.dialect,
        rows,
        `insert into kubun_connector_operation_activity_total (hour, connector_name, outcome, shard, n)
          select ${hour} - cast(${HOUR_MS} as bigint) * (i / 8), 'c' || (i % 8), 'committed', 0, 1`,
      ),
    );
    await suite.store.db.executeQuery(CompiledQuery.raw('analyze'));
    const expectIndexed = async (visibleTo: string | null, table: string, indexes: string[]) => {
      const { store, statements } = recordingStatements(suite.store);
      const activity = await readOperationActivity(store, { visibleTo, hours: 24 });
      expect(activity.buckets.reduce((sum, bucket) => sum + bucket.counts.committed, 0)).toBeGreaterThan(0);
      const paths = await accessPaths(suite.store, statements[0]!, table);
      expect(paths, statements[0]!.sql).not.toHaveLength(0);
      for (const path of paths) expect(indexes.some((index) => path.includes(index)), `${path}\n  for ${statements[0]!.sql}`).toBe(true);
    };
    await expectIndexed(null, 'kubun_connector_operation_activity_total', ['kubun_connector_operation_activity_total_pkey', 'sqlite_autoindex_kubun_connector_operation_activity_total_1']);
    await expectIndexed('did:key:zCaller7', 'kubun_connector_operation_activity', [
      'kubun_connector_operation_activity_pkey',
      'sqlite_autoindex_kubun_connector_operation_activity_1',
      'idx_connector_operation_activity_owner',
    ]);
  });

  it.runIf(suite.dialect === 'postgres')('concurrent commits and outcomes are all counted, without deadlocks', { timeout: 60_000 }, async () => {
    const claims = await Promise.all(Array.from({ length: 40 }, (_, i) => claimFresh(suite.store, { operationID: `op-${i}`, ownerDID: i % 2 === 0 ? OWNER : OTHER_OWNER })));
    await Promise.all(
      claims.map(async ({ fence }, i) => {
        if (i % 4 === 0) await outcome(fence, 'retryable');
        else expect((await finalize(fence, `doc-${i}`)).finalized).toBe(true);
      }),
    );
    const activity = await readOperationActivity(suite.store, { visibleTo: null, hours: 1 });
    expect(activity.buckets[0]!.counts).toEqual({ ...ZERO, committed: 30, retryable: 10 });
    const owner = await readOperationActivity(suite.store, { visibleTo: OWNER, hours: 1 });
    expect(owner.buckets[0]!.counts).toEqual({ ...ZERO, committed: 10, retryable: 10 });
  });
});

describeEachDialect('operations: activity imports', (suite) => {
  it('adds each entry once, to the viewer rows and the totals; a second import adds nothing', async () => {
    const now = suite.clock.current;
    const entries = [
      { at: now - 30 * HOUR_MS, callerDID: CALLER, ownerDID: OWNER, connectorName: 'google', outcome: 'committed' as const, count: 7 },
      { at: now - 30 * HOUR_MS + 60_000, callerDID: OTHER_OWNER, ownerDID: OTHER_OWNER, connectorName: 'google', outcome: 'committed' as const, count: 3 },
      { at: now - 2 * HOUR_MS, callerDID: CALLER, ownerDID: OWNER, connectorName: 'github', outcome: 'retryable' as const, count: 2 },
    ];
    expect(await importActivity(suite.store, entries)).toBe(3);
    expect(await importActivity(suite.store, entries)).toBe(0);
    const week = await readOperationActivity(suite.store, { visibleTo: null, hours: 168 });
    const byAgo = (activity: typeof week) =>
      activity.buckets.filter((b) => Object.values(b.counts).some((n) => n > 0)).map((b) => [(activity.to - HOUR_MS - b.start) / HOUR_MS, b.counts.committed, b.counts.retryable]);
    expect(byAgo(week)).toEqual([
      [30, 10, 0],
      [2, 0, 2],
    ]);
    expect(byAgo(await readOperationActivity(suite.store, { visibleTo: OWNER, hours: 168 }))).toEqual([
      [30, 7, 0],
      [2, 0, 2],
    ]);
    // Real activity in an imported hour adds to it.
    const a = await claimFresh(suite.store, { operationID: 'a', connectorName: 'github' });
    suite.clock.advance(-2 * HOUR_MS);
    await startOperationAttempt(suite.store, a.fence);
    await recordOperationOutcome(suite.store, { ...a.fence, kind: 'retryable', lastHTTPStatus: null });
    suite.clock.advance(2 * HOUR_MS);
    expect(byAgo(await readOperationActivity(suite.store, { visibleTo: null, hours: 168 }))).toEqual([
      [30, 10, 0],
      [2, 0, 3],
    ]);

    const samples = [{ sampledAt: now - 5 * HOUR_MS, due: 12 }, { sampledAt: now - 4 * HOUR_MS, due: 40, capped: true }];
    expect(await importBacklogSamples(suite.store, samples)).toBe(2);
    expect(await importBacklogSamples(suite.store, samples)).toBe(0);
    const backlog = (await readOperationActivity(suite.store, { visibleTo: null, hours: 24 })).buckets.filter((b) => b.dueBacklog !== null);
    expect(backlog.map((b) => [b.dueBacklog, b.dueBacklogCapped])).toEqual([
      [12, false],
      [40, true],
    ]);

    await expect(importActivity(suite.store, [{ ...entries[0]!, outcome: 'exploded' as never }])).rejects.toThrow(/outcome/);
    await expect(importActivity(suite.store, [{ ...entries[0]!, count: 0 }])).rejects.toThrow(/count/);
    await expect(importBacklogSamples(suite.store, [{ sampledAt: now, due: -1 }])).rejects.toThrow(/due/);
  });
});
