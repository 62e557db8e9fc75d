/**
 * Operator actions (issue 11 item 3): retry / cancel / requeue, each a CAS on
 * the version that fences out the lease holder and is recorded in the
 * history with who did it; on Postgres, concurrent actions on one operation
 * have exactly one winner.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createStoreContext } from '../../src/store/context.js';
import { InvalidInputError, InvalidStateError, NotFoundError, StaleLeaseError, StaleVersionError } from '../../src/store/errors.js';
import {
  applyOperationAction,
  applyOperationActionToMany,
  getAttemptHistories,
  getOperationByKey,
  markOperationSent,
  recordOperationOutcome,
  startOperationAttempt,
} from '../../src/store/operations/index.js';
import { describeEachDialect, TEST_POOL_SIZE } from '../helpers/databases.js';
import { claimFresh, claimInput, keyOf } from '../helpers/operation-claim-fixtures.js';
import { CALLER, getOperationRow, insertOperationRow } from '../helpers/row-fixtures.js';

const KEY = keyOf(claimInput());
const OPERATOR = 'did:key:zOperator';

describeEachDialect('operations: operator actions', (suite) => {
  async function deadOperation(sent: boolean) {
    const claimed = await claimFresh(suite.store);
    await startOperationAttempt(suite.store, claimed.fence);
    if (sent) await markOperationSent(suite.store, { ...claimed.fence, sendMarker: 'm-1' });
    await recordOperationOutcome(suite.store, { ...claimed.fence, kind: 'fatal', lastHTTPStatus: 400, message: 'bad request' });
    const op = (await getOperationByKey(suite.store, KEY))!;
    expect(op.state).toBe('dead');
    return op;
  }

  it('retry: dead → attempted with a new budget, due now, history kept and the action recorded', async () => {
    const dead = await deadOperation(false);
    suite.clock.advance(5_000);
    const retried = await applyOperationAction(suite.store, { key: KEY, version: dead.version, action: 'retry', actorDID: OPERATOR });
    expect(retried).toMatchObject({ state: 'attempted', attempts: 0, nextAttemptAt: suite.clock.current, deferReason: null, lastKind: null, lastError: null, version: dead.version + 1, leaseExpiresAt: null });
    const [history] = await getAttemptHistories(suite.store, [{ key: KEY, first: 10 }]);
    expect(history!.attempts.map((a) => [a.kind, a.actorDID, a.outcome])).toEqual([
      ['retry', OPERATOR, null],
      ['attempt', null, 'fatal'],
    ]);
  });

  it('retry of an operation whose request may have been sent goes to reconcile_only, never a blind resend', async () => {
    const dead = await deadOperation(true);
    const retried = await applyOperationAction(suite.store, { key: KEY, version: dead.version, action: 'retry', actorDID: OPERATOR });
    expect(retried.state).toBe('reconcile_only');
    expect(retried.sendMarkerSet).toBe(true);
  });

  it('cancel fences the holder out: every later write of its lease is stale and changes nothing', async () => {
    const { fence } = await claimFresh(suite.store);
    await startOperationAttempt(suite.store, fence);
    const cancelled = await applyOperationAction(suite.store, { key: KEY, version: fence.version, action: 'cancel', actorDID: OPERATOR, reason: 'customer asked' });
    expect(cancelled).toMatchObject({ state: 'dead', lastError: 'cancelled: customer asked', leaseExpiresAt: null, nextAttemptAt: null });
    await expect(markOperationSent(suite.store, { ...fence, sendMarker: 'late' })).rejects.toBeInstanceOf(StaleLeaseError);
    await expect(recordOperationOutcome(suite.store, { ...fence, kind: 'retryable' })).rejects.toBeInstanceOf(StaleLeaseError);
    const after = (await getOperationByKey(suite.store, KEY))!;
    expect(after).toMatchObject({ state: 'dead', sendMarkerSet: false, version: cancelled.version });
    const [history] = await getAttemptHistories(suite.store, [{ key: KEY, first: 10 }]);
    expect(history!.attempts.map((a) => [a.kind, a.message, a.endedAt !== null])).toEqual([
      ['cancel', 'customer asked', true],
      ['attempt', null, true], // the fenced-out holder's open attempt is closed by the cancel
    ]);
  });

  it('requeue: due now, deferral cleared, lease cleared', async () => {
    const { fence } = await claimFresh(suite.store);
    await startOperationAttempt(suite.store, fence);
    await recordOperationOutcome(suite.store, { ...fence, kind: 'offline' });
    suite.clock.advance(1_000);
    const requeued = await applyOperationAction(suite.store, { key: KEY, version: fence.version, action: 'requeue', actorDID: OPERATOR });
    expect(requeued).toMatchObject({ state: 'attempted', deferReason: null, nextAttemptAt: suite.clock.current, leaseExpiresAt: null, version: fence.version + 1 });
  });

  it('refuses a stale version, a wrong state, an unknown operation and a cancel without a reason, writing nothing', async () => {
    const { fence } = await claimFresh(suite.store);
    await expect(applyOperationAction(suite.store, { key: KEY, version: fence.version + 1, action: 'requeue', actorDID: OPERATOR })).rejects.toBeInstanceOf(StaleVersionError);
    await expect(applyOperationAction(suite.store, { key: KEY, version: fence.version, action: 'retry', actorDID: OPERATOR })).rejects.toBeInstanceOf(InvalidStateError);
    await expect(applyOperationAction(suite.store, { key: { ...KEY, operationID: 'nope' }, version: 0, action: 'cancel', actorDID: OPERATOR, reason: 'x' })).rejects.toBeInstanceOf(NotFoundError);
    await expect(applyOperationAction(suite.store, { key: KEY, version: fence.version, action: 'cancel', actorDID: OPERATOR })).rejects.toBeInstanceOf(InvalidInputError);
    const op = (await getOperationByKey(suite.store, KEY))!;
    expect(op).toMatchObject({ state: 'attempted', version: fence.version });
    const [history] = await getAttemptHistories(suite.store, [{ key: KEY, first: 10 }]);
    expect(history!.attempts).toEqual([]);
  });

  describe('bulk', () => {
    async function deadMany(n: number, owner = claimInput().ownerDID) {
      for (let i = 0; i < n; i++) {
        const { fence } = await claimFresh(suite.store, { operationID: `bulk-${owner}-${i}`, ownerDID: owner, callerDID: owner });
        await startOperationAttempt(suite.store, fence);
        await recordOperationOutcome(suite.store, { ...fence, kind: 'fatal' });
        suite.clock.advance(1);
      }
    }

    it('applies to every match up to the cap, newest first, and says when more remain', async () => {
      await deadMany(5);
      const first = await applyOperationActionToMany(suite.store, { filter: { states: ['dead'] }, ownerDID: null, action: 'retry', actorDID: OPERATOR, cap: 2 });
      expect(first.operations.map((op) => op.operationID)).toEqual([`bulk-${claimInput().ownerDID}-4`, `bulk-${claimInput().ownerDID}-3`]);
      expect(first.more).toBe(true);
      expect(first.operations.every((op) => op.state === 'attempted' && op.attempts === 0)).toBe(true);
      expect((await applyOperationActionToMany(suite.store, { filter: { states: ['dead'] }, ownerDID: null, action: 'retry', actorDID: OPERATOR, cap: 2 })).more).toBe(true);
      const last = await applyOperationActionToMany(suite.store, { filter: { lastKinds: ['fatal'] }, ownerDID: null, action: 'retry', actorDID: OPERATOR, cap: 1000 });
      expect(last).toMatchObject({ more: false });
      expect(last.operations).toHaveLength(1);
      const histories = await getAttemptHistories(suite.store, first.operations.map((op) => ({ key: { callerDID: op.callerDID, operationID: op.operationID }, first: 5 })));
      for (const h of histories) expect(h.attempts[0]).toMatchObject({ kind: 'retry', actorDID: OPERATOR });
    });

    it('a user’s bulk action touches only their own operations', async () => {
      await deadMany(2, 'did:key:zMine');
      await deadMany(2, 'did:key:zTheirs');
      const mine = await applyOperationActionToMany(suite.store, { filter: { states: ['dead'] }, ownerDID: 'did:key:zMine', action: 'retry', actorDID: 'did:key:zMine', cap: 100 });
      expect(mine.operations.map((op) => op.ownerDID)).toEqual(['did:key:zMine', 'did:key:zMine']);
      const theirs = await getOperationByKey(suite.store, { callerDID: 'did:key:zTheirs', operationID: 'bulk-did:key:zTheirs-0' });
      expect(theirs?.state).toBe('dead');
    });

    it('refuses an empty filter and a cap out of range, changing nothing', async () => {
      await deadMany(1);
      await expect(applyOperationActionToMany(suite.store, { filter: {}, ownerDID: null, action: 'retry', actorDID: OPERATOR, cap: 10 })).rejects.toThrow(/at least one condition/);
      await expect(applyOperationActionToMany(suite.store, { filter: { states: undefined }, ownerDID: null, action: 'retry', actorDID: OPERATOR, cap: 10 })).rejects.toBeInstanceOf(InvalidInputError);
      await expect(applyOperationActionToMany(suite.store, { filter: { states: ['dead'] }, ownerDID: null, action: 'retry', actorDID: OPERATOR, cap: 1001 })).rejects.toBeInstanceOf(InvalidInputError);
      await expect(applyOperationActionToMany(suite.store, { filter: { states: ['dead'] }, ownerDID: null, action: 'retry', actorDID: OPERATOR, cap: 0 })).rejects.toBeInstanceOf(InvalidInputError);
      const [op] = (await applyOperationActionToMany(suite.store, { filter: { states: ['attempted'] }, ownerDID: null, action: 'requeue', actorDID: OPERATOR, cap: 10 })).operations;
      expect(op).toBeUndefined();
    });

    it('requeue takes only rows not already due, so the same filter again moves on to the rest', async () => {
      const now = suite.store.now();
      const row = (operationID: string, overrides: Parameters<typeof insertOperationRow>[1]) => insertOperationRow(suite.store, { operation_id: operationID, ...overrides });
      // Already due, nobody holding it: requeue has nothing to do.
      await row('due-free', { next_attempt_at: now - 1, lease_token: null, lease_expires_at: null });
      await row('due-lapsed', { next_attempt_at: now - 1, lease_expires_at: now - 1 });
      // Each of these is something requeue changes: not yet due, never scheduled, deferred, or held by a live lease.
      await row('later', { next_attempt_at: now + 60_000, lease_token: null, lease_expires_at: null });
      await row('unscheduled', { next_attempt_at: null, lease_token: null, lease_expires_at: null });
      await row('deferred', { next_attempt_at: now - 1, defer_reason: 'offline', lease_token: null, lease_expires_at: null });
      await row('held', { next_attempt_at: now - 1, lease_expires_at: now + 30_000 });
      const requeue = () => applyOperationActionToMany(suite.store, { filter: { states: ['attempted'] }, ownerDID: null, action: 'requeue', actorDID: OPERATOR, cap: 3 });
      const first = await requeue();
      const second = await requeue();
      expect(first).toMatchObject({ more: true });
      expect(second).toMatchObject({ more: false });
      const requeued = [...first.operations, ...second.operations].map((op) => op.operationID).sort();
      expect(requeued).toEqual(['deferred', 'held', 'later', 'unscheduled']);
      expect((await requeue()).operations).toEqual([]);
      for (const key of ['due-free', 'due-lapsed']) expect((await getOperationRow(suite.store, { callerDID: CALLER, operationID: key }))?.version).toBe(1);
    });

    it('never leaves half a batch applied: a failure while recording rolls every change back', async () => {
      await deadMany(3);
      // A fault in the database for the history of one operation of the batch.
      const victim = `bulk-${claimInput().ownerDID}-1`;
      if (suite.dialect === 'postgres') {
        await sql.raw(`create function fail_history() returns trigger language plpgsql as $$ begin if new.operation_id = '${victim}' then raise exception 'injected fault'; end if; return new; end $$`).execute(suite.store.db);
        await sql.raw('create trigger fail_history before insert on kubun_connector_operation_history for each row execute function fail_history()').execute(suite.store.db);
      } else {
        await sql.raw(`create trigger fail_history before insert on kubun_connector_operation_history when new.operation_id = '${victim}' begin select raise(abort, 'injected fault'); end`).execute(suite.store.db);
      }
      try {
        await expect(applyOperationActionToMany(suite.store, { filter: { states: ['dead'] }, ownerDID: null, action: 'retry', actorDID: OPERATOR, cap: 10 })).rejects.toThrow(/injected fault/);
        const states = await suite.store.db.selectFrom('kubun_connector_operation').select(['state', 'version']).execute();
        expect(states.every((row) => row.state === 'dead')).toBe(true);
        expect(await suite.store.db.selectFrom('kubun_connector_operation_history').select('kind').where('kind', '!=', 'attempt').execute()).toEqual([]);
      } finally {
        await sql.raw(`drop trigger if exists fail_history${suite.dialect === 'postgres' ? ' on kubun_connector_operation_history' : ''}`).execute(suite.store.db);
        if (suite.dialect === 'postgres') await sql.raw('drop function if exists fail_history()').execute(suite.store.db);
      }
    });
  });

  describe.runIf(suite.dialect === 'postgres')('on real parallel connections', () => {
    it('20 concurrent retries and cancels of one operation: exactly one wins, the rest are stale', async () => {
      const dead = await deadOperation(false);
      const again = suite.database.connectAgain();
      try {
        const pools = [suite.store, createStoreContext(again.db, 'postgres', { now: suite.clock.now })];
        await Promise.all(pools.flatMap((store) => Array.from({ length: TEST_POOL_SIZE }, () => sql`select pg_sleep(0.02)`.execute(store.db))));
        const results = await Promise.allSettled(
          Array.from({ length: 20 }, (_, i) =>
            applyOperationAction(pools[i % 2]!, { key: KEY, version: dead.version, action: i % 2 === 0 ? 'retry' : 'requeue', actorDID: `${OPERATOR}${i}` }),
          ),
        );
        const won = results.filter((r) => r.status === 'fulfilled');
        expect(won).toHaveLength(1);
        for (const r of results) if (r.status === 'rejected') expect([StaleVersionError, InvalidStateError].some((E) => r.reason instanceof E)).toBe(true);
        const [history] = await getAttemptHistories(suite.store, [{ key: KEY, first: 50 }]);
        expect(history!.attempts.filter((a) => a.kind !== 'attempt')).toHaveLength(1);
        expect((await getOperationByKey(suite.store, KEY))!.version).toBe(dead.version + 1);
      } finally {
        await again.close();
      }
    });

    it('20 concurrent cancels and requeues of one live operation, with its holder writing: exactly one action wins', async () => {
      const { fence } = await claimFresh(suite.store);
      await startOperationAttempt(suite.store, fence);
      const again = suite.database.connectAgain();
      try {
        const pools = [suite.store, createStoreContext(again.db, 'postgres', { now: suite.clock.now })];
        await Promise.all(pools.flatMap((store) => Array.from({ length: TEST_POOL_SIZE }, () => sql`select pg_sleep(0.02)`.execute(store.db))));
        const actions = Array.from({ length: 20 }, (_, i) =>
          applyOperationAction(pools[i % 2]!, { key: KEY, version: fence.version, action: i % 2 === 0 ? 'cancel' : 'requeue', actorDID: `${OPERATOR}${i}`, reason: 'race' }),
        );
        const holder = markOperationSent(pools[1]!, { ...fence, sendMarker: 'racing' }).then(
          () => 'sent',
          (error: unknown) => (error instanceof StaleLeaseError ? 'fenced out' : Promise.reject(error)),
        );
        const results = await Promise.allSettled(actions);
        expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
        for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(StaleVersionError);
        expect(['sent', 'fenced out']).toContain(await holder);
        const op = (await getOperationByKey(suite.store, KEY))!;
        expect(op.version).toBe(fence.version + 1);
        expect(op.leaseExpiresAt).toBeNull();
        // Whatever the holder managed before the action, nothing of its lease works after it.
        await expect(recordOperationOutcome(suite.store, { ...fence, kind: 'retryable' })).rejects.toBeInstanceOf(StaleLeaseError);
      } finally {
        await again.close();
      }
    });
  });
});
