/**
 * Enqueue (issue 39): a write-back intent recorded by its idempotency key
 * with no lease, due now or at `notBefore`; the claim's conflict rules; a
 * replay answered field for field as the first time; batches of at most
 * MAX_ENQUEUE_BATCH in one transaction, on both dialects.
 */
import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { createStoreContext, type StoreContext } from '../../src/store/context.js';
import { IdempotencyConflictError, InvalidInputError } from '../../src/store/errors.js';
import {
  acquireOperationLease,
  CLAIM_ANSWER,
  claimOperation,
  runKeyedRequest,
  enqueueOperation,
  enqueueOperations,
  listDueOperations,
  MAX_ENQUEUE_BATCH,
  startOperationAttempt,
  type EnqueueOperationInput,
} from '../../src/store/operations/index.js';
import { DEFAULT_IDEMPOTENCY_WINDOW_MS, runRetention } from '../../src/store/retention/index.js';
import { describeEachDialect, TEST_POOL_SIZE } from '../helpers/databases.js';
import { claimFresh, claimInput, keyOf, LEASE_MS } from '../helpers/operation-claim-fixtures.js';
import { CALLER, CONNECTOR, getOperationRow, OWNER } from '../helpers/row-fixtures.js';

/** An enqueue input with the claim fixture's write (no lease length). */
function enqueueInput(overrides: Partial<EnqueueOperationInput> = {}): EnqueueOperationInput {
  const { leaseMs: _lease, ...write } = claimInput();
  return { ...write, ...overrides };
}

const due = (store: StoreContext) => listDueOperations(store, { limit: 100 }).then((ops) => ops.map((op) => op.operationID));

describeEachDialect('operations: enqueue', (suite) => {
  describe('a new key', () => {
    it('records an attempted operation with no lease, version 0, due now: created', async () => {
      const now = suite.clock.now();
      const result = await enqueueOperation(suite.store, enqueueInput({ sourceID: 'source-9', documentID: 'doc-9' }));
      expect(result.outcome).toBe('created');
      expect(result.operation).toEqual({
        callerDID: CALLER,
        operationID: 'op-1',
        nodeKey: expect.any(String),
        ownerDID: OWNER,
        connectorName: CONNECTOR,
        model: 'contact',
        op: 'create',
        accountKey: 'account-1',
        target: 'contacts',
        sourceID: 'source-9',
        deterministicEventID: 'event-1',
        payloadHash: 'hash-1',
        reissueIntent: 'none',
        providerEtag: null,
        documentID: 'doc-9',
        resultEntity: null,
        state: 'attempted',
        attempts: 0,
        nextAttemptAt: now,
        deferReason: null,
        sendMarkerSet: false,
        lastKind: null,
        lastHTTPStatus: null,
        lastError: null,
        version: 0,
        incarnation: expect.any(String),
        leaseExpiresAt: null,
        createdAt: now,
        updatedAt: now,
      });
      expect(await getOperationRow(suite.store, keyOf(enqueueInput()))).toMatchObject({ lease_token: null, lease_expires_at: null, version: 0 });
      expect(await due(suite.store)).toEqual(['op-1']);
    });

    it('notBefore in the future: not due until then; an instant already past is now', async () => {
      const now = suite.clock.now();
      const later = await enqueueOperation(suite.store, enqueueInput({ operationID: 'later', notBefore: now + 60_000 }));
      const past = await enqueueOperation(suite.store, enqueueInput({ operationID: 'past', notBefore: now - 60_000 }));
      expect(later.operation.nextAttemptAt).toBe(now + 60_000);
      expect(past.operation.nextAttemptAt).toBe(now);
      expect(await due(suite.store)).toEqual(['past']);
      suite.clock.advance(59_999);
      expect(await due(suite.store)).toEqual(['past']);
      suite.clock.advance(1);
      expect((await due(suite.store)).sort()).toEqual(['later', 'past']);
    });

    it('a worker takes it as it takes a released operation: acquire gives version 1 and a lease', async () => {
      const { operation } = await enqueueOperation(suite.store, enqueueInput());
      const acquired = await acquireOperationLease(suite.store, { key: keyOf(enqueueInput()), leaseMs: LEASE_MS });
      expect(acquired).toMatchObject({ acquired: true, operation: { nodeKey: operation.nodeKey, state: 'attempted', version: 1 }, lease: { version: 1 } });
      expect(await due(suite.store)).toEqual([]);
    });

    it('refuses input it cannot act on before writing anything', async () => {
      await expect(enqueueOperation(suite.store, enqueueInput({ payloadHash: '' }))).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'payloadHash' });
      await expect(enqueueOperation(suite.store, enqueueInput({ notBefore: 1.5 }))).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'notBefore' });
      await expect(enqueueOperation(suite.store, enqueueInput({ op: 'upsert' as never }))).rejects.toBeInstanceOf(InvalidInputError);
      expect(await suite.store.db.selectFrom('kubun_connector_operation').select('node_key').execute()).toEqual([]);
    });
  });

  describe('an existing key', () => {
    it('the same write again is replayed with the first answer, field for field, after a worker moved the operation on', async () => {
      const first = await enqueueOperation(suite.store, enqueueInput({ notBefore: suite.clock.now() + 1_000 }));
      suite.clock.advance(5_000);
      const acquired = await acquireOperationLease(suite.store, { key: keyOf(enqueueInput()), leaseMs: LEASE_MS });
      if (!acquired.acquired) throw new Error('not acquired');
      await startOperationAttempt(suite.store, { key: keyOf(enqueueInput()), version: acquired.lease.version, leaseToken: acquired.lease.token });
      const rowBefore = await getOperationRow(suite.store, keyOf(enqueueInput()));

      const again = await enqueueOperation(suite.store, enqueueInput({ notBefore: suite.clock.now() - 4_000 }));
      expect(again).toEqual({ outcome: 'replayed', operation: first.operation });
      // Nothing written: the operation is where the worker left it.
      expect(await getOperationRow(suite.store, keyOf(enqueueInput()))).toEqual(rowBefore);
      expect(rowBefore).toMatchObject({ attempts: 1, version: 1 });
    });

    it('omitted and null optional fields are the same write', async () => {
      const first = await enqueueOperation(suite.store, enqueueInput({ sourceID: null, documentID: null, notBefore: null, sendTimeoutMs: null }));
      const { sourceID: _s, ...withoutSource } = enqueueInput();
      expect(await enqueueOperation(suite.store, withoutSource)).toEqual({ outcome: 'replayed', operation: first.operation });
    });

    it('another write under the key is an IdempotencyConflictError naming each field; the row is untouched', async () => {
      await enqueueOperation(suite.store, enqueueInput({ notBefore: suite.clock.now() + 1_000 }));
      const before = await getOperationRow(suite.store, keyOf(enqueueInput()));
      const cases: [Partial<EnqueueOperationInput>, string[]][] = [
        [{ payloadHash: 'hash-2' }, ['payloadHash', 'notBefore']],
        [{ payloadHash: 'hash-2', notBefore: suite.clock.now() + 1_000 }, ['payloadHash']],
        [{ notBefore: suite.clock.now() + 2_000 }, ['notBefore']],
        [{ ownerDID: 'did:key:z6MkSomeoneElse', notBefore: suite.clock.now() + 1_000, documentID: 'doc-2' }, ['ownerDID', 'documentID']],
      ];
      for (const [overrides, fields] of cases) {
        const refused = await enqueueOperation(suite.store, enqueueInput(overrides)).catch((error: unknown) => error);
        expect(refused).toBeInstanceOf(IdempotencyConflictError);
        expect([...(refused as IdempotencyConflictError).fields].sort()).toEqual([...fields].sort());
      }
      expect(await getOperationRow(suite.store, keyOf(enqueueInput()))).toEqual(before);
    });

    it('a key first used by a claim: the same write is replayed as the operation is now; another is the claim’s conflict', async () => {
      const { operation } = await claimFresh(suite.store);
      const replay = await enqueueOperation(suite.store, enqueueInput({ notBefore: suite.clock.now() + 9_000 }));
      expect(replay).toMatchObject({ outcome: 'replayed', operation: { nodeKey: operation.nodeKey, leaseExpiresAt: operation.leaseExpiresAt } });
      await expect(enqueueOperation(suite.store, enqueueInput({ target: 'calendar' }))).rejects.toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', fields: ['target'] });
    });

    it('retention keeps the first answer while the operation lives: a resend a day later is still answered as the first time', async () => {
      const first = await enqueueOperation(suite.store, enqueueInput({ notBefore: suite.clock.now() + 1_000 }));
      // A claim's request key beside it, which retention does prune.
      const claimed = claimInput({ operationID: 'claimed' });
      await runKeyedRequest(suite.store, { key: keyOf(claimed), requestKey: 'rk-1', step: 'claimOperation', input: {} }, CLAIM_ANSWER, (tx) => claimOperation(tx, claimed));
      expect(await suite.store.db.selectFrom('kubun_connector_operation_request').select('request_key').execute()).toHaveLength(2);
      suite.clock.advance(DEFAULT_IDEMPOTENCY_WINDOW_MS + 1);
      await runRetention(suite.store);
      const requests = await suite.store.db.selectFrom('kubun_connector_operation_request').select(['operation_id', 'request_key']).execute();
      expect(requests).toEqual([{ operation_id: 'op-1', request_key: '' }]);
      expect(await enqueueOperation(suite.store, enqueueInput({ notBefore: first.operation.nextAttemptAt }))).toEqual({ outcome: 'replayed', operation: first.operation });
      await expect(enqueueOperation(suite.store, enqueueInput())).rejects.toMatchObject({ fields: ['notBefore'] });
    });

    it('a row removed since (retention, the document sweep) is enqueued anew', async () => {
      const first = await enqueueOperation(suite.store, enqueueInput());
      await suite.store.db.deleteFrom('kubun_connector_operation').execute();
      const again = await enqueueOperation(suite.store, enqueueInput());
      expect(again.outcome).toBe('created');
      expect(again.operation.nodeKey).not.toBe(first.operation.nodeKey);
    });
  });

  describe('batches', () => {
    it('answers each item in input order: created, replayed, conflict; the conflict leaves the others written', async () => {
      await enqueueOperation(suite.store, enqueueInput({ operationID: 'b' }));
      await enqueueOperation(suite.store, enqueueInput({ operationID: 'c' }));
      const results = await enqueueOperations(suite.store, [
        enqueueInput({ operationID: 'd' }),
        enqueueInput({ operationID: 'c', payloadHash: 'other' }),
        enqueueInput({ operationID: 'b' }),
        enqueueInput({ operationID: 'a', notBefore: suite.clock.now() + 1_000 }),
      ]);
      expect(results.map((r) => r.outcome)).toEqual(['created', 'conflict', 'replayed', 'created']);
      expect(results[1]).toMatchObject({ error: { code: 'IDEMPOTENCY_CONFLICT', fields: ['payloadHash'] } });
      expect((await due(suite.store)).sort()).toEqual(['b', 'c', 'd']);
      expect(await getOperationRow(suite.store, { callerDID: CALLER, operationID: 'c' })).toMatchObject({ payload_hash: 'hash-1' });
    });

    it(`refuses more than ${MAX_ENQUEUE_BATCH}, none, or a key named twice, writing nothing`, async () => {
      const many = Array.from({ length: MAX_ENQUEUE_BATCH + 1 }, (_, i) => enqueueInput({ operationID: `op-${i}` }));
      await expect(enqueueOperations(suite.store, many)).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'operations' });
      await expect(enqueueOperations(suite.store, [])).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'operations' });
      await expect(enqueueOperations(suite.store, [enqueueInput({ operationID: 'x' }), enqueueInput({ operationID: 'y' }), enqueueInput({ operationID: 'x' })])).rejects.toMatchObject({
        code: 'INVALID_INPUT',
        field: 'operations',
      });
      await expect(enqueueOperations(suite.store, [enqueueInput({ operationID: 'x' }), enqueueInput({ operationID: 'y', model: '' })])).rejects.toMatchObject({ field: 'model' });
      expect(await suite.store.db.selectFrom('kubun_connector_operation').select('node_key').execute()).toEqual([]);
      // The cap itself is accepted.
      expect(await enqueueOperations(suite.store, many.slice(0, MAX_ENQUEUE_BATCH))).toHaveLength(MAX_ENQUEUE_BATCH);
    });

    it('is all or nothing: a failure at the last item rolls every item back', async () => {
      // A fault in the database when the last item (in key order) records its answer.
      const victim = 'op-9';
      if (suite.dialect === 'postgres') {
        await sql.raw(`create function fail_request() returns trigger language plpgsql as $$ begin if new.operation_id = '${victim}' then raise exception 'injected fault'; end if; return new; end $$`).execute(suite.store.db);
        await sql.raw('create trigger fail_request before insert on kubun_connector_operation_request for each row execute function fail_request()').execute(suite.store.db);
      } else {
        await sql.raw(`create trigger fail_request before insert on kubun_connector_operation_request when new.operation_id = '${victim}' begin select raise(abort, 'injected fault'); end`).execute(suite.store.db);
      }
      try {
        const batch = Array.from({ length: 10 }, (_, i) => enqueueInput({ operationID: `op-${9 - i}` }));
        await expect(enqueueOperations(suite.store, batch)).rejects.toThrow(/injected fault/);
        expect(await suite.store.db.selectFrom('kubun_connector_operation').select('node_key').execute()).toEqual([]);
        expect(await suite.store.db.selectFrom('kubun_connector_operation_request').select('request_key').execute()).toEqual([]);
      } finally {
        await sql.raw(`drop trigger if exists fail_request${suite.dialect === 'postgres' ? ' on kubun_connector_operation_request' : ''}`).execute(suite.store.db);
        if (suite.dialect === 'postgres') await sql.raw('drop function if exists fail_request()').execute(suite.store.db);
      }
      // Without the fault, the same batch goes through.
      expect((await enqueueOperations(suite.store, [enqueueInput({ operationID: 'op-9' })]))[0]?.outcome).toBe('created');
    });
  });

  describe.runIf(suite.dialect === 'postgres')('on real parallel connections', () => {
    it('20 concurrent enqueues of one new key: one created, 19 replayed with its answer, one row', async () => {
      const again = suite.database.connectAgain();
      try {
        const pools = [suite.store, createStoreContext(again.db, 'postgres', { now: suite.clock.now })];
        await Promise.all(pools.flatMap((store) => Array.from({ length: TEST_POOL_SIZE }, () => sql`select pg_sleep(0.02)`.execute(store.db))));
        const results = await Promise.all(Array.from({ length: 20 }, (_, i) => enqueueOperation(pools[i % 2]!, enqueueInput())));
        const created = results.filter((r) => r.outcome === 'created');
        expect(created).toHaveLength(1);
        for (const result of results) expect(result.operation).toEqual(created[0]!.operation);
        expect(await suite.store.db.selectFrom('kubun_connector_operation').select('node_key').execute()).toHaveLength(1);
      } finally {
        await again.close();
      }
    });

    it('two concurrent batches sharing keys in opposite orders both finish (keys are written in one order)', async () => {
      const again = suite.database.connectAgain();
      try {
        const other = createStoreContext(again.db, 'postgres', { now: suite.clock.now });
        const keys = Array.from({ length: 30 }, (_, i) => `k-${String(i).padStart(2, '0')}`);
        const [a, b] = await Promise.all([
          enqueueOperations(suite.store, keys.map((operationID) => enqueueInput({ operationID }))),
          enqueueOperations(other, [...keys].reverse().map((operationID) => enqueueInput({ operationID }))),
        ]);
        expect([...a!, ...b!].filter((r) => r.outcome === 'created')).toHaveLength(30);
        expect([...a!, ...b!].filter((r) => r.outcome === 'replayed')).toHaveLength(30);
      } finally {
        await again.close();
      }
    });
  });
});
