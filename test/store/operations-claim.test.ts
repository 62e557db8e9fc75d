import { describe, expect, it } from 'vitest';
import { IdempotencyConflictError, InvalidInputError } from '../../src/store/errors.js';
import {
  acquireOperationLease,
  claimOperation,
  markOperationSent,
  recordOperationOutcome,
  releaseOperationLease,
  type ClaimOperationInput,
} from '../../src/store/operations/index.js';
import { takeOverLease } from '../../src/store/operations/takeover.js';
import { describeEachDialect } from '../helpers/databases.js';
import {
  claimFresh,
  claimInput,
  commitDirectly,
  keyOf,
  LEASE_MS,
  setColumns,
  withHookAfterSelects,
  withStatementHook,
  PAST_SEND_WINDOW_MS,
} from '../helpers/operation-claim-fixtures.js';
import { CALLER, getOperationRow, OWNER } from '../helpers/row-fixtures.js';

describeEachDialect('operations: claim', (suite) => {
  describe('a new key', () => {
    it('inserts an attempted operation with a lease: CLAIMED', async () => {
      const now = suite.clock.now();
      const result = await claimOperation(suite.store, claimInput({ sourceID: 'source-9' }));

      expect(result.outcome).toBe('CLAIMED');
      expect(result.replay).toBeUndefined();
      expect(result.lease).toEqual({ token: expect.any(String), expiresAt: now + LEASE_MS, version: 0 });
      expect(result.operation).toEqual({
        callerDID: CALLER,
        operationID: 'op-1',
        nodeKey: expect.any(String),
        ownerDID: OWNER,
        connectorName: 'google',
        model: 'contact',
        op: 'create',
        accountKey: 'account-1',
        target: 'contacts',
        sourceID: 'source-9',
        deterministicEventID: 'event-1',
        payloadHash: 'hash-1',
        reissueIntent: 'none',
        providerEtag: null,
        documentID: null,
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
        leaseExpiresAt: now + LEASE_MS,
        createdAt: now,
        updatedAt: now,
      });
      const row = await getOperationRow(suite.store, keyOf(claimInput()));
      expect(row?.lease_token).toBe(result.lease?.token);
      expect(row?.node_key).toBe(result.operation.nodeKey);
      // Node key, incarnation and token are three independent random ids.
      expect(new Set([row?.node_key, row?.incarnation, row?.lease_token]).size).toBe(3);
    });

    it('never exposes the lease token or send marker on the operation', async () => {
      const { operation, lease, fence } = await claimFresh(suite.store);
      await markOperationSent(suite.store, { ...fence, sendMarker: 'run-secret-marker' });
      expect(Object.keys(operation)).not.toContain('leaseToken');
      expect(Object.keys(operation)).not.toContain('sendMarker');
      const again = await claimOperation(suite.store, claimInput());
      const text = JSON.stringify(again);
      expect(text).not.toContain(lease.token);
      expect(text).not.toContain('run-secret-marker');
      expect(again.operation.sendMarkerSet).toBe(true);
    });

    it('gives each new operation its own node key', async () => {
      const a = await claimFresh(suite.store, { operationID: 'a' });
      const b = await claimFresh(suite.store, { operationID: 'b' });
      const c = await claimFresh(suite.store, { callerDID: 'did:key:z6MkOther', operationID: 'a' });
      expect(new Set([a.operation.nodeKey, b.operation.nodeKey, c.operation.nodeKey]).size).toBe(3);
    });

    it('a row deleted between the conflicting insert and its read (retention) is claimed anew', async () => {
      await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS);
      const first = await getOperationRow(suite.store, keyOf(claimInput()));
      const racing = withStatementHook(suite.store, { kind: 'SelectQueryNode', when: 'before' }, async (n) => {
        if (n === 1) await suite.store.db.deleteFrom('kubun_connector_operation').execute();
      });
      const result = await claimOperation(racing, claimInput());
      expect(result.outcome).toBe('CLAIMED');
      expect(result.operation.nodeKey).not.toBe(first?.node_key);
      expect(await getOperationRow(suite.store, keyOf(claimInput()))).toMatchObject({ lease_token: result.lease?.token, version: 0 });
    });

    it('loses an insert race to a concurrent claim and reports IN_FLIGHT', async () => {
      let competitor: Awaited<ReturnType<typeof claimOperation>> | undefined;
      // The competitor's row lands just before this claim's INSERT, which then conflicts: the row is read and judged.
      const racing = withStatementHook(suite.store, { kind: 'InsertQueryNode', when: 'before' }, async (n) => {
        if (n === 1) competitor = await claimOperation(suite.store, claimInput());
      });
      const result = await claimOperation(racing, claimInput());
      expect(competitor?.outcome).toBe('CLAIMED');
      expect(result.outcome).toBe('IN_FLIGHT');
      expect(result.lease).toBeUndefined();
      expect(result.operation.nodeKey).toBe(competitor?.operation.nodeKey);
    });
  });

  describe('an existing key', () => {
    it('with a live lease held: IN_FLIGHT, no lease, row untouched', async () => {
      await claimFresh(suite.store);
      const before = await getOperationRow(suite.store, keyOf(claimInput()));
      suite.clock.advance(LEASE_MS - 1);
      const result = await claimOperation(suite.store, claimInput());
      expect(result.outcome).toBe('IN_FLIGHT');
      expect(result.lease).toBeUndefined();
      expect(await getOperationRow(suite.store, keyOf(claimInput()))).toEqual(before);
    });

    const differing: [keyof ClaimOperationInput, string][] = [
      ['ownerDID', 'did:key:z6MkSomeoneElse'],
      ['connectorName', 'github'],
      ['model', 'event'],
      ['op', 'update'],
      ['target', 'calendar'],
      ['payloadHash', 'hash-2'],
      // Recorded too (issue 37): a replay naming another value would be answered with the first claim's.
      ['accountKey', 'account-2'],
      ['deterministicEventID', 'event-2'],
      ['reissueIntent', 'reissue'],
      ['sourceID', 's-2'],
    ];
    for (const [field, value] of differing) {
      it(`with a different ${field}: IdempotencyConflictError naming it, row untouched`, async () => {
        await claimFresh(suite.store);
        suite.clock.advance(LEASE_MS * 2); // even an expired lease is not taken over
        const before = await getOperationRow(suite.store, keyOf(claimInput()));
        const error = await claimOperation(suite.store, claimInput({ [field]: value })).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(IdempotencyConflictError);
        expect(error).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', field });
        expect(await getOperationRow(suite.store, keyOf(claimInput()))).toEqual(before);
      });
    }

    it('names every differing field, in the order of the write’s identity', async () => {
      await claimFresh(suite.store);
      await expect(claimOperation(suite.store, claimInput({ payloadHash: 'hash-2', ownerDID: 'did:key:z6MkSomeoneElse', op: 'update' }))).rejects.toMatchObject({
        field: 'ownerDID',
        fields: ['ownerDID', 'op', 'payloadHash'],
      });
    });

    it('a claim naming its document stores it; the key again for another document is a conflict, without one (or the same) it is not', async () => {
      const { operation } = await claimFresh(suite.store, { op: 'update', documentID: 'doc-7' });
      expect(operation.documentID).toBe('doc-7');
      await expect(claimOperation(suite.store, claimInput({ op: 'update', documentID: 'doc-8' }))).rejects.toMatchObject({ fields: ['documentID'] });
      expect((await claimOperation(suite.store, claimInput({ op: 'update', documentID: 'doc-7' }))).outcome).toBe('IN_FLIGHT');
      expect((await claimOperation(suite.store, claimInput({ op: 'update' }))).outcome).toBe('IN_FLIGHT');
      await expect(claimOperation(suite.store, claimInput({ operationID: 'op-2', documentID: '' }))).rejects.toMatchObject({ field: 'documentID' });
    });

    it('conflicts before replaying: a committed key with another payload is refused', async () => {
      await claimFresh(suite.store);
      await commitDirectly(suite.store, keyOf(claimInput()), 'doc-1', { id: 'p-1' });
      await expect(claimOperation(suite.store, claimInput({ payloadHash: 'other' }))).rejects.toBeInstanceOf(IdempotencyConflictError);
    });

    it('a replay that differs in the account, source id, event id or reissue intent is a conflict naming each, even on a lapsed lease or a committed key (issue 37)', async () => {
      await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS);
      const changed = claimInput({ accountKey: 'account-2', sourceID: 's-2', deterministicEventID: 'event-2', reissueIntent: 'reissue' });
      await expect(claimOperation(suite.store, changed)).rejects.toMatchObject({ fields: ['accountKey', 'deterministicEventID', 'reissueIntent', 'sourceID'] });
      // A source id omitted and one given as null are the same.
      expect((await claimOperation(suite.store, claimInput({ sourceID: null }))).outcome).toBe('CLAIMED');
      await commitDirectly(suite.store, keyOf(claimInput()), 'doc-1', { id: 'p-1' });
      await expect(claimOperation(suite.store, claimInput({ accountKey: 'account-2' }))).rejects.toMatchObject({ fields: ['accountKey'] });
      expect((await claimOperation(suite.store, claimInput())).outcome).toBe('REPLAYED');
    });

    it('committed: REPLAYED with the recorded result, no lease, row untouched', async () => {
      await claimFresh(suite.store);
      await commitDirectly(suite.store, keyOf(claimInput()), 'doc-7', { id: 'provider-7', tags: ['a'] });
      const before = await getOperationRow(suite.store, keyOf(claimInput()));
      const result = await claimOperation(suite.store, claimInput());
      expect(result.outcome).toBe('REPLAYED');
      expect(result.lease).toBeUndefined();
      expect(result.replay).toEqual({ documentID: 'doc-7', resultEntity: { id: 'provider-7', tags: ['a'] } });
      expect(result.operation.state).toBe('committed');
      expect(await getOperationRow(suite.store, keyOf(claimInput()))).toEqual(before);
    });

    it('dead: DEAD, no lease, whether or not a lease is live', async () => {
      const { fence } = await claimFresh(suite.store);
      await recordOperationOutcome(suite.store, { ...fence, kind: 'fatal', lastHTTPStatus: 400 });
      const live = await claimOperation(suite.store, claimInput());
      expect(live.outcome).toBe('DEAD');
      expect(live.lease).toBeUndefined();
      suite.clock.advance(LEASE_MS * 2);
      const before = await getOperationRow(suite.store, keyOf(claimInput()));
      const expired = await claimOperation(suite.store, claimInput());
      expect(expired.outcome).toBe('DEAD');
      expect(expired.operation).toMatchObject({ state: 'dead', lastKind: 'fatal', lastHTTPStatus: 400 });
      expect(await getOperationRow(suite.store, keyOf(claimInput()))).toEqual(before);
    });
  });

  describe('takeover', () => {
    it('of an expired lease without a send marker: CLAIMED, new token, version + 1, still attempted', async () => {
      const first = await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS); // lease_expires_at == now: already expired
      const now = suite.clock.now();
      const result = await claimOperation(suite.store, claimInput());
      expect(result.outcome).toBe('CLAIMED');
      expect(result.lease).toEqual({ token: expect.any(String), expiresAt: now + LEASE_MS, version: 1 });
      expect(result.lease?.token).not.toBe(first.lease.token);
      expect(result.operation).toMatchObject({ state: 'attempted', version: 1, nodeKey: first.operation.nodeKey, updatedAt: now });
      expect((await getOperationRow(suite.store, keyOf(claimInput())))?.lease_token).toBe(result.lease?.token);
    });

    it('of an expired lease with a send marker: the operation becomes reconcile_only', async () => {
      const { fence } = await claimFresh(suite.store);
      await markOperationSent(suite.store, { ...fence, sendMarker: 'run-1' });
      // The lease lapsed but the send window has not closed: the provider may still be applying it (issue 37).
      suite.clock.advance(LEASE_MS + 1);
      expect((await claimOperation(suite.store, claimInput())).outcome).toBe('IN_FLIGHT');
      suite.clock.advance(PAST_SEND_WINDOW_MS - LEASE_MS - 2);
      expect((await claimOperation(suite.store, claimInput())).outcome).toBe('IN_FLIGHT');
      suite.clock.advance(1);
      const result = await claimOperation(suite.store, claimInput());
      expect(result.outcome).toBe('CLAIMED');
      expect(result.operation).toMatchObject({ state: 'reconcile_only', version: 1, sendMarkerSet: true });
    });

    it('of a released lease: CLAIMED at once', async () => {
      const { fence } = await claimFresh(suite.store);
      await releaseOperationLease(suite.store, fence);
      const result = await claimOperation(suite.store, claimInput());
      expect(result.outcome).toBe('CLAIMED');
      expect(result.operation.version).toBe(1);
    });

    it('keeps a reconcile_only operation reconcile_only', async () => {
      const { fence } = await claimFresh(suite.store);
      await markOperationSent(suite.store, { ...fence, sendMarker: 'run-1' });
      await recordOperationOutcome(suite.store, { ...fence, kind: 'unknown' });
      suite.clock.advance(PAST_SEND_WINDOW_MS);
      const result = await claimOperation(suite.store, claimInput());
      expect(result.operation).toMatchObject({ state: 'reconcile_only', version: 1 });
    });

    it('lost to a concurrent takeover: IN_FLIGHT (reload and re-evaluate), not an error', async () => {
      await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS);
      let competitor: Awaited<ReturnType<typeof acquireOperationLease>> | undefined;
      const racing = withHookAfterSelects(suite.store, async (n) => {
        if (n === 1) competitor = await acquireOperationLease(suite.store, { key: keyOf(claimInput()), leaseMs: LEASE_MS });
      });
      const result = await claimOperation(racing, claimInput());
      expect(competitor?.acquired).toBe(true);
      expect(result.outcome).toBe('IN_FLIGHT');
      expect(result.operation.version).toBe(1);
      expect(result.lease).toBeUndefined();
    });

    it('CAS: a takeover based on a stale read changes nothing', async () => {
      await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS);
      const stale = await getOperationRow(suite.store, keyOf(claimInput()));
      await acquireOperationLease(suite.store, { key: keyOf(claimInput()), leaseMs: LEASE_MS });
      const before = await getOperationRow(suite.store, keyOf(claimInput()));
      expect(await takeOverLease(suite.store, stale!, LEASE_MS, suite.clock.now())).toBeUndefined();
      expect(await getOperationRow(suite.store, keyOf(claimInput()))).toEqual(before);
    });

    it('does not steal a lease its holder renewed after the read (renewal keeps the version)', async () => {
      await claimFresh(suite.store);
      suite.clock.advance(LEASE_MS);
      const stale = await getOperationRow(suite.store, keyOf(claimInput()));
      await setColumns(suite.store, keyOf(claimInput()), { lease_expires_at: suite.clock.now() + 5_000 });
      expect(await takeOverLease(suite.store, stale!, LEASE_MS, suite.clock.now())).toBeUndefined();
    });

    it('decides reconcile_only from the row at write time (a mark-sent after the read counts)', async () => {
      const { fence } = await claimFresh(suite.store);
      const readBeforeMark = await getOperationRow(suite.store, keyOf(claimInput()));
      await markOperationSent(suite.store, { ...fence, sendMarker: 'run-1' });
      suite.clock.advance(PAST_SEND_WINDOW_MS);
      const taken = await takeOverLease(suite.store, readBeforeMark!, LEASE_MS, suite.clock.now());
      expect(taken?.row.state).toBe('reconcile_only');
    });
  });

  describe('input', () => {
    it('refuses a non-positive lease, an unknown op and empty keys', async () => {
      await expect(claimOperation(suite.store, claimInput({ leaseMs: 0 }))).rejects.toBeInstanceOf(InvalidInputError);
      await expect(claimOperation(suite.store, claimInput({ leaseMs: 1.5 }))).rejects.toBeInstanceOf(InvalidInputError);
      await expect(claimOperation(suite.store, claimInput({ op: 'delete' as never }))).rejects.toMatchObject({ field: 'op' });
      await expect(claimOperation(suite.store, claimInput({ operationID: '' }))).rejects.toMatchObject({ field: 'operationID' });
      expect(await getOperationRow(suite.store, keyOf(claimInput()))).toBeUndefined();
    });
  });
});
