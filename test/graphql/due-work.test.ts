/** `dueOperations` and `dueWatches`: the workers' work lists (service principals only), both dialects. */
import { expect, it } from 'vitest';
import { releaseOperationLease } from '../../src/store/operations/index.js';
import { describeGraphQL } from '../helpers/graphql.js';
import { seedClaim, seedWatch } from '../helpers/graphql-seed.js';

const DUE = `query($first: Int) { dueOperations(first: $first) { id operationID } dueWatches(first: $first) { id documentID } }`;

describeGraphQL('graphql due work', (suite) => {
  it('lists due, unleased operations and due, unclaimed watches, oldest first, for a service', async () => {
    const held = await seedClaim(suite);
    const released = await seedClaim(suite);
    await releaseOperationLease(suite.store, { key: released.operation, version: released.lease.version, leaseToken: released.lease.token });
    suite.clock.advance(1_000);
    const expiredLater = await seedClaim(suite, { leaseMs: 1_000 });
    suite.clock.advance(1_000);
    const later = await seedWatch(suite, { documentID: 'doc-later', dueAt: suite.clock.now() - 10 });
    const earlier = await seedWatch(suite, { documentID: 'doc-earlier', dueAt: suite.clock.now() - 500 });
    await seedWatch(suite, { documentID: 'doc-future', dueAt: suite.clock.now() + 60_000 });

    const res = await suite.gql(DUE, {}, { as: 'worker' });
    expect(res.errors).toBeUndefined();
    expect(res.data.dueOperations.map((o: { id: string }) => o.id)).toEqual([released.id, expiredLater.id]);
    expect(res.data.dueOperations.map((o: { id: string }) => o.id)).not.toContain(held.id);
    expect(res.data.dueWatches.map((w: { id: string }) => w.id)).toEqual([earlier.id, later.id]);

    const one = await suite.gql(DUE, { first: 1 }, { as: 'worker' });
    expect(one.data.dueOperations).toHaveLength(1);
    expect(one.data.dueWatches).toHaveLength(1);
  });

  it('is for service principals only; others get FORBIDDEN or UNAUTHENTICATED and no data', async () => {
    await seedClaim(suite, { leaseMs: 1_000 });
    suite.clock.advance(2_000);
    const user = await suite.gql(DUE, {}, { as: 'alice' });
    expect(user.data).toBeNull();
    expect(user.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const anonymous = await suite.gql(DUE, {}, { as: 'anonymous' });
    expect(anonymous.data).toBeNull();
    expect(anonymous.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it('refuses a page size outside 1..100', async () => {
    for (const first of [0, 101]) {
      const res = await suite.gql(DUE, { first }, { as: 'worker' });
      expect(res.data).toBeNull();
      expect(res.errors?.[0]?.message).toMatch(/first/);
    }
  });
});
