/**
 * `operationActivity` through yoga.fetch (issue 22 item 7): hourly buckets of
 * commits and recorded outcomes by kind, written by the mutations
 * themselves; each viewer sees only their own operations' activity, a
 * service everyone's with the due backlog samples; refusals are typed.
 */
import { expect, it } from 'vitest';
import { sampleDueBacklog } from '../../src/store/activity/index.js';
import { describeGraphQL, type Principal } from '../helpers/graphql.js';
import { claimed, finalize, mutateOK } from '../helpers/operation-graphql.js';

const ACTIVITY = `query A($window: ActivityWindow!, $connectorName: String) {
  operationActivity(window: $window, connectorName: $connectorName) {
    window from to bucketSeconds backlogIncluded
    buckets { start committed retryable unknown fatal offline auth dueBacklog dueBacklogCapped }
  }
}`;

type Bucket = { start: string; committed: number; retryable: number; unknown: number; fatal: number; offline: number; auth: number; dueBacklog: number | null; dueBacklogCapped: boolean };

describeGraphQL('graphql operations: activity by hour', (suite) => {
  async function activity(as: Principal, variables: Record<string, unknown> = { window: 'LAST_24_HOURS' }) {
    const res = await suite.gql(ACTIVITY, variables, { as });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    return res.data.operationActivity as { window: string; from: string; to: string; bucketSeconds: number; backlogIncluded: boolean; buckets: Bucket[] };
  }
  const totals = (buckets: Bucket[]) => {
    const sum = { committed: 0, retryable: 0, unknown: 0, fatal: 0, offline: 0, auth: 0 };
    for (const bucket of buckets) for (const key of Object.keys(sum) as (keyof typeof sum)[]) sum[key] += bucket[key];
    return sum;
  };

  it('counts what the mutations did, per viewer, and the backlog for services', async () => {
    const a = await claimed(suite, { operationID: 'a' });
    await mutateOK(suite, 'startOperationAttempt', a.fence);
    await mutateOK(suite, 'recordOperationAttempt', { ...a.fence, kind: 'RETRYABLE', message: '503 from provider' });
    await mutateOK(suite, 'startOperationAttempt', a.fence);
    await finalize(suite, a.fence);
    const b = await claimed(suite, { operationID: 'b', connectorName: 'github' }, 'bob');
    await mutateOK(suite, 'startOperationAttempt', b.fence, 'bob');
    await mutateOK(suite, 'recordOperationAttempt', { ...b.fence, kind: 'OFFLINE' }, 'bob');
    await sampleDueBacklog(suite.store, 60_000);

    const alice = await activity('alice');
    expect(alice).toMatchObject({ window: 'LAST_24_HOURS', bucketSeconds: 3600, backlogIncluded: false });
    expect(alice.buckets).toHaveLength(24);
    expect(Date.parse(alice.to) - Date.parse(alice.from)).toBe(24 * 3_600_000);
    expect(Date.parse(alice.buckets.at(-1)!.start)).toBe(Math.floor(suite.clock.current / 3_600_000) * 3_600_000);
    expect(totals(alice.buckets)).toEqual({ committed: 1, retryable: 1, unknown: 0, fatal: 0, offline: 0, auth: 0 });
    expect(alice.buckets.every((bucket) => bucket.dueBacklog === null)).toBe(true);

    expect(totals((await activity('bob')).buckets)).toEqual({ committed: 0, retryable: 0, unknown: 0, fatal: 0, offline: 1, auth: 0 });
    expect(totals((await activity('mallory')).buckets)).toEqual({ committed: 0, retryable: 0, unknown: 0, fatal: 0, offline: 0, auth: 0 });

    const worker = await activity('worker', { window: 'LAST_7_DAYS' });
    expect(worker.buckets).toHaveLength(168);
    expect(worker.backlogIncluded).toBe(true);
    expect(totals(worker.buckets)).toEqual({ committed: 1, retryable: 1, unknown: 0, fatal: 0, offline: 1, auth: 0 });
    // b is deferred and a committed: nothing was due when the sample was taken.
    expect(worker.buckets.at(-1)).toMatchObject({ dueBacklog: 0, dueBacklogCapped: false });

    const github = await activity('worker', { window: 'LAST_24_HOURS', connectorName: 'github' });
    expect(github.backlogIncluded).toBe(false);
    expect(totals(github.buckets)).toEqual({ committed: 0, retryable: 0, unknown: 0, fatal: 0, offline: 1, auth: 0 });
  });

  it('refuses anonymous readers, unknown windows and an empty connector name, each with a code', async () => {
    const anonymous = await suite.gql(ACTIVITY, { window: 'LAST_24_HOURS' }, { as: 'anonymous' });
    expect(anonymous.data?.operationActivity ?? null).toBeNull();
    expect(anonymous.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    const window = await suite.gql(ACTIVITY, { window: 'LAST_YEAR' });
    // A bad variable is refused before anything runs, with a code.
    expect(window.data?.operationActivity ?? null).toBeNull();
    expect(window.errors?.[0]?.message).toMatch(/LAST_YEAR/);
    expect(window.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    const name = await suite.gql(ACTIVITY, { window: 'LAST_24_HOURS', connectorName: '  ' });
    // As every query argument: BAD_USER_INPUT with the rules' issues, no data.
    expect(name.data).toBeNull();
    expect(name.errors).toEqual([
      {
        message: 'Validation error: connectorName: must not be empty',
        path: ['operationActivity'],
        extensions: { code: 'BAD_USER_INPUT', issues: [{ path: ['connectorName'], message: 'must not be empty' }] },
      },
    ]);
  });

  it('defaults to the last 24 hours', async () => {
    const res = await suite.gql('{ operationActivity { window buckets { start } } }', {}, { as: 'worker' });
    expect(res.errors).toBeUndefined();
    expect(res.data.operationActivity.window).toBe('LAST_24_HOURS');
    expect(res.data.operationActivity.buckets).toHaveLength(24);
  });
});
