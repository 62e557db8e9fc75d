/**
 * leaseDueOperations (issue 40 item 3): up to `limit` due operations leased
 * at once, oldest first, each as an acquire would (version + 1, a new token,
 * a marked send → reconcile_only); on Postgres one statement with
 * `FOR UPDATE SKIP LOCKED`, so concurrent workers lease disjoint batches.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createStoreContext, type StoreContext } from '../../src/store/context.js';
import { InvalidInputError, StaleLeaseError } from '../../src/store/errors.js';
import { finalizeOperationAndArmWatch } from '../../src/store/finalize/index.js';
import {
  enqueueOperation,
  getOperationByKey,
  leaseDueOperations,
  listDueOperations,
  markOperationSent,
  MAX_LEASE_DUE_BATCH,
  recordOperationOutcome,
  releaseOperationLease,
  startOperationAttempt,
  type EnqueueOperationInput,
  type LeasedOperation,
} from '../../src/store/operations/index.js';
import { describeEachDialect, TEST_POOL_SIZE } from '../helpers/databases.js';
import { withStatementCounter } from '../helpers/statement-counter.js';
import { claimFresh, claimInput, keyOf, LEASE_MS, PAST_SEND_WINDOW_MS, setColumns } from '../helpers/operation-claim-fixtures.js';
import { CALLER, CONNECTOR, getOperationRow, OTHER_OWNER, OWNER, watchIdentity } from '../helpers/row-fixtures.js';

function enqueueInput(overrides: Partial<EnqueueOperationInput> = {}): EnqueueOperationInput {
  const { leaseMs: _lease, ...write } = claimInput();
  return { ...write, ...overrides };
}

/** Enqueues `count` operations `op-0`, `op-1`, … due 1 ms apart (op-0 oldest). */
async function enqueueMany(store: StoreContext, count: number, overrides: Partial<EnqueueOperationInput> = {}): Promise<void> {
  const base = store.now();
  for (let i = 0; i < count; i++) {
    const input = enqueueInput({ operationID: `op-${i}`, ...overrides });
    await enqueueOperation(store, input);
    await setColumns(store, keyOf(input), { next_attempt_at: base - count + i });
  }
}

const ids = (leased: LeasedOperation[]) => leased.map((item) => item.operation.operationID);

describeEachDialect('operations: leaseDueOperations', (suite) => {
  const lease = (overrides: Partial<Parameters<typeof leaseDueOperations>[1]> = {}, store = suite.store) =>
    leaseDueOperations(store, { connectorName: CONNECTOR, limit: 10, leaseMs: LEASE_MS, ...overrides });

  it('leases due operations oldest first, up to the limit, each with its own new lease', async () => {
    await enqueueMany(suite.store, 5);
    const now = suite.clock.now();
    const leased = await lease({ limit: 3 });
    expect(ids(leased)).toEqual(['op-0', 'op-1', 'op-2']);
    for (const { operation, lease: held } of leased) {
      expect(held).toEqual({ token: expect.any(String), version: 1, expiresAt: now + LEASE_MS });
      expect(operation).toMatchObject({ version: 1, leaseExpiresAt: now + LEASE_MS, state: 'attempted' });
      const row = await getOperationRow(suite.store, { callerDID: CALLER, operationID: operation.operationID });
      expect(row).toMatchObject({ lease_token: held.token, version: 1 });
    }
    expect(new Set(leased.map((item) => item.lease.token)).size).toBe(3);
    // What is left is what the due list still shows, and the next call leases it.
    expect((await listDueOperations(suite.store, { limit: 10 })).map((op) => op.operationID)).toEqual(['op-3', 'op-4']);
    expect(ids(await lease())).toEqual(['op-3', 'op-4']);
    expect(await lease()).toEqual([]);
  });

  it('leaves out live leases, open send windows, deferred, future, terminal and other connectors’ operations', async () => {
    await claimFresh(suite.store, { operationID: 'held' });
    const { fence } = await claimFresh(suite.store, { operationID: 'marked' });
    await startOperationAttempt(suite.store, fence);
    await markOperationSent(suite.store, { ...fence, sendMarker: 'run-1' });
    await releaseOperationLease(suite.store, fence);
    await enqueueOperation(suite.store, enqueueInput({ operationID: 'later', notBefore: suite.clock.now() + 60_000 }));
    await enqueueOperation(suite.store, enqueueInput({ operationID: 'deferred' }));
    await setColumns(suite.store, { callerDID: CALLER, operationID: 'deferred' }, { defer_reason: 'offline' });
    await enqueueOperation(suite.store, enqueueInput({ operationID: 'dead' }));
    await setColumns(suite.store, { callerDID: CALLER, operationID: 'dead' }, { state: 'dead' });
    await enqueueOperation(suite.store, enqueueInput({ operationID: 'elsewhere', connectorName: 'github' }));
    await enqueueOperation(suite.store, enqueueInput({ operationID: 'free' }));
    expect(ids(await lease())).toEqual(['free']);
    expect(ids(await lease({ connectorName: 'github' }))).toEqual(['elsewhere']);
  });

  it('takes lapsed leases over: version + 1, and a marked send comes back reconcile_only once its window closed', async () => {
    const plain = await claimFresh(suite.store, { operationID: 'lapsed' });
    const sent = await claimFresh(suite.store, { operationID: 'sent' });
    await startOperationAttempt(suite.store, sent.fence);
    await markOperationSent(suite.store, { ...sent.fence, sendMarker: 'run-1' });
    suite.clock.advance(LEASE_MS);
    // The lapsed plain lease is free; the marked send's window is still open.
    expect(ids(await lease({ leaseMs: 10 * PAST_SEND_WINDOW_MS }))).toEqual(['lapsed']);
    suite.clock.advance(PAST_SEND_WINDOW_MS);
    const [taken] = await lease();
    expect(taken).toMatchObject({ operation: { operationID: 'sent', state: 'reconcile_only', version: 1 }, lease: { version: 1 } });
    expect(taken!.lease.token).not.toBe(sent.lease.token);
    // The old holders are fenced out.
    await expect(startOperationAttempt(suite.store, plain.fence)).rejects.toBeInstanceOf(StaleLeaseError);
    await expect(recordOperationOutcome(suite.store, { ...sent.fence, kind: 'unknown' })).rejects.toBeInstanceOf(StaleLeaseError);
  });

  it('scopes to an owner, and to what a viewer is caller or owner of', async () => {
    await enqueueOperation(suite.store, enqueueInput({ operationID: 'mine' }));
    await enqueueOperation(suite.store, enqueueInput({ operationID: 'theirs', callerDID: 'did:key:z6MkSomeoneElse', ownerDID: OTHER_OWNER }));
    expect(ids(await lease({ visibleTo: 'did:key:z6MkNobody' }))).toEqual([]);
    expect(ids(await lease({ ownerDID: OTHER_OWNER }))).toEqual(['theirs']);
    expect(ids(await lease({ visibleTo: OWNER }))).toEqual(['mine']);
  });

  it('hands out fences that start, mark, record and finalize', async () => {
    await enqueueMany(suite.store, 2);
    const [first, second] = await lease();
    const fenceOf = (item: LeasedOperation) => ({ key: { callerDID: CALLER, operationID: item.operation.operationID }, version: item.lease.version, leaseToken: item.lease.token });
    await startOperationAttempt(suite.store, fenceOf(first!));
    await markOperationSent(suite.store, { ...fenceOf(first!), sendMarker: 'run-1' });
    const result = await finalizeOperationAndArmWatch(suite.store, {
      ...fenceOf(first!),
      documentID: 'doc-1',
      resultEntity: null,
      currentWinnerDigest: 'digest-1',
      watchIdentity: watchIdentity(),
    });
    expect(result.finalized).toBe(true);
    await startOperationAttempt(suite.store, fenceOf(second!));
    const recorded = await recordOperationOutcome(suite.store, { ...fenceOf(second!), kind: 'retryable', lastHTTPStatus: 503 });
    expect(recorded.state).toBe('attempted');
    expect((await getOperationByKey(suite.store, { callerDID: CALLER, operationID: 'op-0' }))?.state).toBe('committed');
  });

  it('refuses a limit outside 1..100, a bad lease length and an empty connector', async () => {
    for (const limit of [0, MAX_LEASE_DUE_BATCH + 1, 1.5]) await expect(lease({ limit })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(lease({ leaseMs: 0 })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(lease({ connectorName: '' })).rejects.toBeInstanceOf(InvalidInputError);
    expect(await lease({ limit: MAX_LEASE_DUE_BATCH })).toEqual([]);
  });

  describe.runIf(suite.dialect === 'postgres')('on real parallel connections', () => {
    it('concurrent callers never lease the same operation, and together lease every due one', async () => {
      await enqueueMany(suite.store, 60);
      const again = suite.database.connectAgain();
      try {
        const other = createStoreContext(again.db, 'postgres', { now: suite.clock.now });
        const stores = [suite.store, other];
        await Promise.all(stores.flatMap((store) => Array.from({ length: TEST_POOL_SIZE }, () => sql`select pg_sleep(0.02)`.execute(store.db))));
        const batches = await Promise.all(Array.from({ length: 8 }, (_, i) => lease({ limit: 10 }, stores[i % 2])));
        const leased = batches.flatMap(ids);
        expect(new Set(leased).size).toBe(leased.length);
        expect(leased.length).toBe(60);
        // Each row's token is the one its batch returned.
        for (const item of batches.flat()) {
          expect((await getOperationRow(suite.store, { callerDID: CALLER, operationID: item.operation.operationID }))?.lease_token).toBe(item.lease.token);
        }
      } finally {
        await again.close();
      }
    });

    it('is one statement', async () => {
      await enqueueMany(suite.store, 3);
      const counting = withStatementCounter(suite.store);
      expect(await lease({}, counting.store)).toHaveLength(3);
      expect(counting.statements).toEqual(['UpdateQueryNode']);
    });
  });
});
