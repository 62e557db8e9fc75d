/** `dueOperations` and `dueWatches`: the workers' work lists (service principals only), both dialects. */
import { describe, expect, it } from 'vitest';
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
    // It says what to do: which DID the caller signed as, and where a service's DID is listed.
    expect(user.errors?.[0]?.message).toMatch(/^Not authorized to use dueOperations: it is for service principals, and did:key:z\w+ is not one \(a service's DID is listed in the server's SERVICE_DIDS\)$/);
    const anonymous = await suite.gql(DUE, {}, { as: 'anonymous' });
    expect(anonymous.data).toBeUndefined();
    expect(anonymous.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  describe('dueOperations(connectorName)', () => {
    const DUE_FOR = `query($first: Int, $connectorName: String) { dueOperations(first: $first, connectorName: $connectorName) { id connectorName } }`;

    /** A claimed operation of `connectorName` whose lease is released: due now. */
    async function dueClaim(connectorName: string) {
      const seeded = await seedClaim(suite, { connectorName });
      await releaseOperationLease(suite.store, { key: seeded.operation, version: seeded.lease.version, leaseToken: seeded.lease.token });
      suite.clock.advance(1_000);
      return seeded;
    }

    it('lists only that connector’s due operations, oldest first; every connector’s when omitted', async () => {
      const a1 = await dueClaim('a');
      const b1 = await dueClaim('b');
      const a2 = await dueClaim('a');
      const b2 = await dueClaim('b');

      const onlyA = await suite.gql(DUE_FOR, { connectorName: 'a' }, { as: 'worker' });
      expect(onlyA.errors).toBeUndefined();
      expect(onlyA.data.dueOperations).toEqual([
        { id: a1.id, connectorName: 'a' },
        { id: a2.id, connectorName: 'a' },
      ]);
      const onlyB = await suite.gql(DUE_FOR, { connectorName: 'b', first: 1 }, { as: 'worker' });
      expect(onlyB.data.dueOperations).toEqual([{ id: b1.id, connectorName: 'b' }]);
      const all = await suite.gql(DUE_FOR, {}, { as: 'worker' });
      expect(all.data.dueOperations.map((o: { id: string }) => o.id)).toEqual([a1.id, b1.id, a2.id, b2.id]);
    });

    it('answers [] for a connector with no due work', async () => {
      await dueClaim('a');
      const res = await suite.gql(DUE_FOR, { connectorName: 'no-such-connector' }, { as: 'worker' });
      expect(res).toEqual({ data: { dueOperations: [] } });
    });

    it('refuses an empty connector name with the validation error other query arguments give, and no data', async () => {
      await dueClaim('a');
      const res = await suite.gql(DUE_FOR, { connectorName: '' }, { as: 'worker' });
      expect(res.data).toBeNull();
      // As every query argument: BAD_USER_INPUT with the rules' issues (query fields have no typed error results).
      expect(res.errors).toEqual([
        {
          message: 'Validation error: connectorName: must not be empty',
          path: ['dueOperations'],
          extensions: { code: 'BAD_USER_INPUT', issues: [{ path: ['connectorName'], message: 'must not be empty' }] },
        },
      ]);
    });
  });

  it('operationsByIDPrefix: a service finds every caller’s keys that start with the text, in key order; a user is refused; bad input is BAD_USER_INPUT', async () => {
    const PREFIX = `query($prefix: String!, $first: Int) { operationsByIDPrefix(prefix: $prefix, first: $first) { id operationID } }`;
    const keys = ['inv-2', 'inv-10', 'inv-1', 'invoice', 'other'];
    const seeded = new Map<string, string>();
    for (const operationID of keys) seeded.set(operationID, (await seedClaim(suite, { operationID })).id);
    const service = await suite.gql(PREFIX, { prefix: 'inv-' }, { as: 'worker' });
    expect(service.errors).toBeUndefined();
    expect(service.data.operationsByIDPrefix).toEqual(['inv-1', 'inv-10', 'inv-2'].map((operationID) => ({ id: seeded.get(operationID), operationID })));
    expect((await suite.gql(PREFIX, { prefix: 'inv', first: 2 }, { as: 'worker' })).data.operationsByIDPrefix).toHaveLength(2);
    const user = await suite.gql(PREFIX, { prefix: 'inv-' }, { as: 'alice' });
    expect(user.data).toBeNull();
    expect(user.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    for (const variables of [{ prefix: '' }, { prefix: 'x'.repeat(257) }, { prefix: 'inv', first: 0 }, { prefix: 'inv', first: 101 }]) {
      const bad = await suite.gql(PREFIX, variables, { as: 'worker' });
      expect(bad.errors?.[0]?.extensions?.code, JSON.stringify(variables)).toBe('BAD_USER_INPUT');
    }
  });

  it('refuses a page size outside 1..100', async () => {
    for (const first of [0, 101]) {
      const res = await suite.gql(DUE, { first }, { as: 'worker' });
      expect(res.data).toBeNull();
      expect(res.errors?.[0]?.message).toMatch(/first/);
    }
  });
});
