/**
 * `leaseDueOperations` through yoga.fetch (issue 40 item 3): a connector's
 * due operations leased at once, oldest first, each with its lease (the
 * token only in this payload, as acquire's); a service leases anyone's, a
 * device only its own; the lease's fences work for the fenced steps; the
 * change is published; bad input is a typed error.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { markOperationSent, releaseOperationLease, startOperationAttempt } from '../../src/store/operations/index.js';
import { describeGraphQL, type Principal } from '../helpers/graphql.js';
import { seedClaim, type SeedClaimOptions, type SeededOperation } from '../helpers/graphql-seed.js';
import { finalize, mutateOK, OPERATION_FIELDS, readOperation } from '../helpers/operation-graphql.js';
import { subscribeSSE, type SSESubscription } from '../helpers/sse.js';

const LEASE_DUE = `mutation Lease($input: LeaseDueOperationsInput!) {
  leaseDueOperations(input: $input) {
    __typename
    ... on Error { code message }
    ... on InputValidationError { issues { path message } }
    ... on LeaseDueOperationsPayload { operations { lease { token version expiresAt } operation { ${OPERATION_FIELDS} } } }
  }
}`;

interface Leased {
  lease: { token: string; version: number; expiresAt: string };
  operation: { id: string; operationID: string; state: string; version: number; leaseExpiresAt: string | null };
}

describeGraphQL('graphql leaseDueOperations', (suite) => {
  const open: SSESubscription[] = [];
  afterEach(() => {
    for (const sub of open.splice(0)) sub.close();
  });

  /** A claimed operation whose lease is released: due now, and older than the next one seeded. */
  async function seedDue(options: SeedClaimOptions = {}): Promise<SeededOperation> {
    const seeded = await seedClaim(suite, options);
    await releaseOperationLease(suite.store, { key: seeded.operation, version: seeded.lease.version, leaseToken: seeded.lease.token });
    suite.clock.advance(1_000);
    return seeded;
  }

  async function leaseDue(input: Record<string, unknown>, as: Principal = 'worker') {
    const res = await suite.gql(LEASE_DUE, { input: { connectorName: 'google', limit: 10, leaseMs: 30_000, ...input } }, { as });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    return res.data.leaseDueOperations;
  }

  it('leases a service up to `limit` due operations, oldest first, each with its own lease', async () => {
    const seeded = [await seedDue(), await seedDue(), await seedDue()];
    await seedDue({ connectorName: 'github' });
    const now = suite.clock.now();
    const first = await leaseDue({ limit: 2 });
    expect(first.__typename).toBe('LeaseDueOperationsPayload');
    expect(first.operations.map((item: Leased) => item.operation.id)).toEqual([seeded[0]!.id, seeded[1]!.id]);
    for (const item of first.operations as Leased[]) {
      expect(item.lease).toEqual({ token: expect.any(String), version: 1, expiresAt: new Date(now + 30_000).toISOString() });
      expect(item.operation).toMatchObject({ state: 'ATTEMPTED', version: 1, leaseExpiresAt: new Date(now + 30_000).toISOString() });
    }
    const rest = await leaseDue({});
    expect(rest.operations.map((item: Leased) => item.operation.id)).toEqual([seeded[2]!.id]);
    expect(await leaseDue({})).toEqual({ __typename: 'LeaseDueOperationsPayload', operations: [] });
  });

  it('hands out fences the fenced steps accept, and a lapsed marked send comes back RECONCILE_ONLY', async () => {
    const plain = await seedDue();
    const sent = await seedClaim(suite, { leaseMs: 1_000 });
    const fence = { key: sent.operation, version: sent.lease.version, leaseToken: sent.lease.token };
    await startOperationAttempt(suite.store, fence);
    await markOperationSent(suite.store, { ...fence, sendMarker: 'run-1', sendTimeoutMs: 1_000 });
    suite.clock.advance(10_000);
    const { operations } = await leaseDue({});
    expect(operations.map((item: Leased) => [item.operation.id, item.operation.state])).toEqual([
      [plain.id, 'ATTEMPTED'],
      [sent.id, 'RECONCILE_ONLY'],
    ]);
    const [leasedPlain] = operations as Leased[];
    const held = { id: leasedPlain!.operation.id, version: leasedPlain!.lease.version, leaseToken: leasedPlain!.lease.token };
    await mutateOK(suite, 'startOperationAttempt', held, 'worker');
    await mutateOK(suite, 'markOperationSent', { ...held, sendMarker: 'run-2' }, 'worker');
    expect(await finalize(suite, held, {}, 'worker')).toMatchObject({ state: 'COMMITTED' });
    // The old holder of the marked send is fenced out.
    const stale = await suite.gql(`mutation($input: StartOperationAttemptInput!) { startOperationAttempt(input: $input) { __typename } }`, {
      input: { id: sent.id, version: sent.lease.version, leaseToken: sent.lease.token },
    }, { as: 'alice' });
    expect(stale.data.startOperationAttempt.__typename).toBe('StaleLeaseError');
  });

  it('leases a device only the operations it is the caller or owner of', async () => {
    const alices = await seedDue();
    const bobs = await seedDue({ callerDID: suite.keys.bob.did });
    const forAlice = await leaseDue({}, 'alice');
    expect(forAlice.operations.map((item: Leased) => item.operation.id)).toEqual([alices.id]);
    expect(await leaseDue({ ownerDID: suite.keys.bob.did }, 'alice')).toEqual({ __typename: 'LeaseDueOperationsPayload', operations: [] });
    expect((await leaseDue({}, 'bob')).operations.map((item: Leased) => item.operation.id)).toEqual([bobs.id]);
    const anonymous = await suite.gql(LEASE_DUE, { input: { connectorName: 'google', limit: 1, leaseMs: 30_000 } }, { as: 'anonymous' });
    expect(anonymous.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it('never lists the lease token anywhere else', async () => {
    const seeded = await seedDue();
    const { operations } = await leaseDue({});
    const token = (operations as Leased[])[0]!.lease.token;
    const read = await readOperation(suite, seeded.id, 'worker');
    expect(JSON.stringify(read)).not.toContain(token);
  });

  it('refuses a limit outside 1..100, a lease outside 1 s..1 h and an empty connector, as typed errors', async () => {
    await seedDue();
    for (const input of [{ limit: 0 }, { limit: 101 }, { leaseMs: 999 }, { leaseMs: 3_600_001 }, { connectorName: '' }]) {
      const result = await leaseDue(input);
      expect(result.__typename, JSON.stringify(input)).toBe('InputValidationError');
    }
    // Nothing was leased by the refusals.
    expect((await leaseDue({})).operations).toHaveLength(1);
  });

  it('publishes each leased operation to operationsChanged', async () => {
    const seeded = [await seedDue(), await seedDue()];
    const sub = await subscribeSSE(suite.app.yoga.fetch as never, 'http://localhost/graphql', `subscription { operationsChanged(filter: { connectorName: "google" }) { id leaseExpiresAt } }`, {}, {
      authorization: `Bearer ${await suite.token('worker')}`,
    });
    open.push(sub);
    await new Promise((r) => setTimeout(r, 20));
    await leaseDue({});
    await sub.waitFor(2, 1_000);
    expect(sub.events.map((e) => e.data.operationsChanged.id).sort()).toEqual(seeded.map((s) => s.id).sort());
    expect(sub.events.every((e) => e.data.operationsChanged.leaseExpiresAt !== null)).toBe(true);
  });

  describe.runIf(suite.dialect === 'postgres')('concurrent workers', () => {
    it('two workers leasing at once get disjoint operations and together all of them', async () => {
      for (let i = 0; i < 20; i++) await seedDue();
      const [a, b] = await Promise.all([leaseDue({ limit: 15 }), leaseDue({ limit: 15 })]);
      const ids = [...a.operations, ...b.operations].map((item: Leased) => item.operation.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect(ids).toHaveLength(20);
    });
  });
});
