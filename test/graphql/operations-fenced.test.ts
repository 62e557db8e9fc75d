/**
 * The lease and attempt mutations through yoga.fetch (SPEC §3.3 leases,
 * attempts, reconcile; §5 visibility): each succeeds for the holder, and is
 * refused with a stale fence, after a takeover, in the wrong state, and for a
 * viewer who cannot see the operation (exactly like an unknown id).
 */
import { describe, expect, it } from 'vitest';
import { describeGraphQL, type GraphQLSuite } from '../helpers/graphql.js';
import {
  claim,
  claimed,
  FINALIZE,
  mutate,
  mutateOK,
  readOperation,
  type GqlOperation,
  type OperationMutation,
} from '../helpers/operation-graphql.js';
import { iso, unknownNodeID } from '../helpers/graphql-seed.js';
import { LEASE_MS, PAST_SEND_WINDOW_MS } from '../helpers/operation-claim-fixtures.js';
import { getOperationRow } from '../helpers/row-fixtures.js';

/** The store's default retry policy (backoff.ts). */
const BASE_DELAY_MS = 1_000;
const DEFERRAL_MS = 900_000;
const MAX_ATTEMPTS = 8;

type Fence = { id: string; version: number; leaseToken: string };

/** The extra input each fenced mutation needs beyond the fence, in a state that accepts it. */
const EXTRA: Record<Exclude<OperationMutation, 'acquireOperationLease'>, Record<string, unknown>> = {
  renewOperationLease: { leaseMs: LEASE_MS },
  releaseOperationLease: {},
  startOperationAttempt: {},
  markOperationSent: { sendMarker: 'run-x' },
  recordOperationAttempt: { kind: 'RETRYABLE' },
  recordReconcileResult: { landed: false },
};
const FENCED = Object.keys(EXTRA) as (keyof typeof EXTRA)[];

describeGraphQL('graphql operations: fenced writes', (suite) => {
  const key = (operationID = 'op-1', who: 'alice' | 'worker' = 'alice') => ({ callerDID: suite.keys[who].did, operationID });

  /** A claimed operation moved to reconcile_only by its holder (start, mark sent, unknown outcome). */
  async function reconcileOnly(s: GraphQLSuite, overrides: Record<string, unknown> = {}) {
    const op = await claimed(s, overrides);
    await mutateOK(s, 'startOperationAttempt', op.fence);
    await mutateOK(s, 'markOperationSent', { ...op.fence, sendMarker: 'run-1' });
    const { operation } = await mutateOK(s, 'recordOperationAttempt', { ...op.fence, kind: 'UNKNOWN' });
    expect(operation.state).toBe('RECONCILE_ONLY');
    return op;
  }

  describe('acquireOperationLease', () => {
    it('takes a released lease: version + 1, a new token, the old one fenced out', async () => {
      const first = await claimed(suite);
      await mutateOK(suite, 'releaseOperationLease', first.fence);
      suite.clock.advance(5_000);
      const now = suite.clock.now();
      const { operation, lease } = await mutateOK(suite, 'acquireOperationLease', { id: first.operation.id, leaseMs: 60_000 });
      expect(lease).toMatchObject({ version: 1, expiresAt: iso(now + 60_000) });
      expect(lease?.token).not.toBe(first.lease.token);
      expect(operation).toMatchObject({ version: 1, state: 'ATTEMPTED', leaseExpiresAt: iso(now + 60_000) });
      expect(await mutate(suite, 'startOperationAttempt', first.fence)).toMatchObject({ __typename: 'StaleLeaseError' });
      await mutateOK(suite, 'startOperationAttempt', { id: first.operation.id, version: 1, leaseToken: lease!.token });
    });

    it('takes an expired lease; a send marker makes the operation RECONCILE_ONLY', async () => {
      const first = await claimed(suite);
      await mutateOK(suite, 'startOperationAttempt', first.fence);
      await mutateOK(suite, 'markOperationSent', { ...first.fence, sendMarker: 'run-1' });
      suite.clock.advance(PAST_SEND_WINDOW_MS);
      const { operation, lease } = await mutateOK(suite, 'acquireOperationLease', { id: first.operation.id, leaseMs: LEASE_MS });
      expect(lease?.version).toBe(1);
      expect(operation).toMatchObject({ version: 1, state: 'RECONCILE_ONLY', sendMarkerSet: true });
    });

    it('is refused with InvalidStateError while a lease is live (even the caller’s own), changing nothing', async () => {
      const first = await claimed(suite);
      const before = await getOperationRow(suite.store, key());
      const result = await mutate(suite, 'acquireOperationLease', { id: first.operation.id, leaseMs: LEASE_MS });
      expect(result).toMatchObject({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });
      expect(await getOperationRow(suite.store, key())).toEqual(before);
    });

    it('is refused with InvalidStateError on a finished operation', async () => {
      const first = await claimed(suite);
      await mutateOK(suite, 'recordOperationAttempt', { ...first.fence, kind: 'FATAL' });
      await mutateOK(suite, 'releaseOperationLease', first.fence);
      const result = await mutate(suite, 'acquireOperationLease', { id: first.operation.id, leaseMs: LEASE_MS });
      expect(result).toMatchObject({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });
      expect((await readOperation(suite, first.operation.id))?.version).toBe(0);
    });

    it('lets the owner of a service-claimed operation acquire it, and no stranger', async () => {
      const first = await claimed(suite, { ownerDID: suite.keys.alice.did }, 'worker');
      await mutateOK(suite, 'releaseOperationLease', first.fence, 'worker');
      const stranger = await mutate(suite, 'acquireOperationLease', { id: first.operation.id, leaseMs: LEASE_MS }, 'bob');
      expect(stranger).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
      const { lease } = await mutateOK(suite, 'acquireOperationLease', { id: first.operation.id, leaseMs: LEASE_MS }, 'alice');
      expect(lease?.version).toBe(1);
    });

    it('refuses leaseMs out of range with InputValidationError', async () => {
      const first = await claimed(suite);
      await mutateOK(suite, 'releaseOperationLease', first.fence);
      for (const leaseMs of [0, 999, 3_600_001]) {
        const result = await mutate(suite, 'acquireOperationLease', { id: first.operation.id, leaseMs });
        expect(result).toMatchObject({ __typename: 'InputValidationError', issues: [{ path: ['input', 'leaseMs'] }] });
      }
      expect((await readOperation(suite, first.operation.id))?.leaseExpiresAt).toBeNull();
    });
  });

  describe('renewOperationLease', () => {
    it('extends the holder’s lease from now, keeping version and token', async () => {
      const first = await claimed(suite);
      suite.clock.advance(20_000);
      const now = suite.clock.now();
      const { operation, lease } = await mutateOK(suite, 'renewOperationLease', { ...first.fence, leaseMs: 120_000 });
      expect(lease).toEqual({ token: first.lease.token, version: 0, expiresAt: iso(now + 120_000) });
      expect(operation).toMatchObject({ version: 0, leaseExpiresAt: iso(now + 120_000), updatedAt: iso(now) });
    });

    it('cannot revive an expired lease (acquire a new one instead)', async () => {
      const first = await claimed(suite);
      suite.clock.advance(LEASE_MS);
      const before = await getOperationRow(suite.store, key());
      expect(await mutate(suite, 'renewOperationLease', { ...first.fence, leaseMs: LEASE_MS })).toMatchObject({ __typename: 'StaleLeaseError' });
      expect(await getOperationRow(suite.store, key())).toEqual(before);
    });

    it('ends with finalize: the lease is gone, renew and release are stale', async () => {
      const first = await claimed(suite);
      const res = await suite.gql(FINALIZE, { input: { ...first.fence, documentID: 'doc-1', sourceID: 'src-1' } });
      expect(res.data.finalizeOperation).toMatchObject({ finalized: true, operation: { state: 'COMMITTED', leaseExpiresAt: null, version: 0 } });
      expect(await mutate(suite, 'renewOperationLease', { ...first.fence, leaseMs: LEASE_MS })).toMatchObject({ __typename: 'StaleLeaseError' });
      expect(await mutate(suite, 'releaseOperationLease', first.fence)).toMatchObject({ __typename: 'StaleLeaseError' });
    });

    it('refuses leaseMs out of range with InputValidationError', async () => {
      const first = await claimed(suite);
      const result = await mutate(suite, 'renewOperationLease', { ...first.fence, leaseMs: 3_600_001 });
      expect(result).toMatchObject({ __typename: 'InputValidationError', issues: [{ path: ['input', 'leaseMs'] }] });
      expect((await readOperation(suite, first.operation.id))?.leaseExpiresAt).toBe(first.operation.leaseExpiresAt);
    });
  });

  describe('releaseOperationLease', () => {
    it('clears the lease, keeps the version, and leaves the token useless', async () => {
      const first = await claimed(suite);
      const { operation, lease } = await mutateOK(suite, 'releaseOperationLease', first.fence);
      expect(lease).toBeNull();
      expect(operation).toMatchObject({ version: 0, leaseExpiresAt: null, state: 'ATTEMPTED' });
      expect(await mutate(suite, 'startOperationAttempt', first.fence)).toMatchObject({ __typename: 'StaleLeaseError' });
      expect(await mutate(suite, 'releaseOperationLease', first.fence)).toMatchObject({ __typename: 'StaleLeaseError' });
    });

    it('works on an expired lease nobody took over yet', async () => {
      const first = await claimed(suite);
      suite.clock.advance(LEASE_MS * 2);
      const { operation } = await mutateOK(suite, 'releaseOperationLease', first.fence);
      expect(operation.leaseExpiresAt).toBeNull();
    });
  });

  describe('startOperationAttempt and markOperationSent', () => {
    it('start: attempts + 1, send marker and last outcome cleared; mark sent sets the marker', async () => {
      const first = await claimed(suite);
      const started = await mutateOK(suite, 'startOperationAttempt', first.fence);
      expect(started.operation).toMatchObject({ attempts: 1, sendMarkerSet: false, lastKind: null, version: 0 });
      const sent = await mutateOK(suite, 'markOperationSent', { ...first.fence, sendMarker: 'run-1' });
      expect(sent.operation).toMatchObject({ attempts: 1, sendMarkerSet: true, version: 0 });
      await mutateOK(suite, 'recordOperationAttempt', { ...first.fence, kind: 'RETRYABLE', lastHTTPStatus: 503 });
      const again = await mutateOK(suite, 'startOperationAttempt', first.fence);
      expect(again.operation).toMatchObject({ attempts: 2, sendMarkerSet: false, lastKind: null, lastHTTPStatus: null });
    });

    it('both need a live lease', async () => {
      const first = await claimed(suite);
      suite.clock.advance(LEASE_MS);
      const before = await getOperationRow(suite.store, key());
      expect(await mutate(suite, 'startOperationAttempt', first.fence)).toMatchObject({ __typename: 'StaleLeaseError' });
      expect(await mutate(suite, 'markOperationSent', { ...first.fence, sendMarker: 'run-1' })).toMatchObject({ __typename: 'StaleLeaseError' });
      expect(await getOperationRow(suite.store, key())).toEqual(before);
    });

    it('are refused with InvalidStateError on a reconcile-only operation', async () => {
      const op = await reconcileOnly(suite);
      const before = await getOperationRow(suite.store, key());
      expect(await mutate(suite, 'startOperationAttempt', op.fence)).toMatchObject({ __typename: 'InvalidStateError' });
      expect(await mutate(suite, 'markOperationSent', { ...op.fence, sendMarker: 'run-2' })).toMatchObject({ __typename: 'InvalidStateError' });
      expect(await getOperationRow(suite.store, key())).toEqual(before);
    });

    it('refuses an empty send marker with InputValidationError', async () => {
      const first = await claimed(suite);
      const result = await mutate(suite, 'markOperationSent', { ...first.fence, sendMarker: '' });
      expect(result).toMatchObject({ __typename: 'InputValidationError', issues: [{ path: ['input', 'sendMarker'] }] });
      expect((await readOperation(suite, first.operation.id))?.sendMarkerSet).toBe(false);
    });
  });

  describe('recordOperationAttempt', () => {
    async function started(overrides: Record<string, unknown> = {}) {
      const op = await claimed(suite, overrides);
      await mutateOK(suite, 'startOperationAttempt', op.fence);
      return op;
    }

    it('RETRYABLE: backs off with jitter and records status and etag', async () => {
      const op = await started();
      const now = suite.clock.now();
      const { operation } = await mutateOK(suite, 'recordOperationAttempt', {
        ...op.fence,
        kind: 'RETRYABLE',
        lastHTTPStatus: 503,
        providerEtag: 'etag-1',
      });
      expect(operation).toMatchObject({ state: 'ATTEMPTED', attempts: 1, lastKind: 'RETRYABLE', lastHTTPStatus: 503, providerEtag: 'etag-1', deferReason: null, version: 0 });
      const due = Date.parse(operation.nextAttemptAt!);
      // First backoff: half of the base delay fixed, the other half random.
      expect(due).toBeGreaterThanOrEqual(now + BASE_DELAY_MS / 2);
      expect(due).toBeLessThan(now + BASE_DELAY_MS);
    });

    it('RETRYABLE honours a longer retryAfterMs', async () => {
      const op = await started();
      const now = suite.clock.now();
      const { operation } = await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind: 'RETRYABLE', lastHTTPStatus: 429, retryAfterMs: 120_000 });
      expect(operation.nextAttemptAt).toBe(iso(now + 120_000));
    });

    it('RETRYABLE on the last allowed attempt makes the operation DEAD', async () => {
      const op = await claimed(suite);
      let operation: GqlOperation | undefined;
      for (let attempt = 1; attempt <= MAX_ATTEMPTS; attempt++) {
        await mutateOK(suite, 'startOperationAttempt', op.fence);
        ({ operation } = await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind: 'RETRYABLE' }));
        expect(operation.attempts).toBe(attempt);
        expect(operation.state).toBe(attempt < MAX_ATTEMPTS ? 'ATTEMPTED' : 'DEAD');
      }
      expect(operation?.nextAttemptAt).toBeNull();
    });

    it('UNKNOWN makes the operation RECONCILE_ONLY, due after a backoff', async () => {
      const op = await started();
      await mutateOK(suite, 'markOperationSent', { ...op.fence, sendMarker: 'run-1' });
      const now = suite.clock.now();
      const { operation } = await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind: 'UNKNOWN' });
      expect(operation).toMatchObject({ state: 'RECONCILE_ONLY', lastKind: 'UNKNOWN', sendMarkerSet: true, attempts: 1 });
      expect(Date.parse(operation.nextAttemptAt!)).toBeGreaterThan(now);
    });

    it('FATAL makes the operation DEAD', async () => {
      const op = await started();
      const { operation } = await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind: 'FATAL', lastHTTPStatus: 400 });
      expect(operation).toMatchObject({ state: 'DEAD', lastKind: 'FATAL', lastHTTPStatus: 400, nextAttemptAt: null });
    });

    for (const kind of ['OFFLINE', 'AUTH'] as const) {
      it(`${kind} defers without spending the attempt`, async () => {
        const op = await started({ operationID: `op-${kind}` });
        const now = suite.clock.now();
        const { operation } = await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind });
        expect(operation).toMatchObject({ state: 'ATTEMPTED', attempts: 0, deferReason: kind, lastKind: kind, nextAttemptAt: iso(now + DEFERRAL_MS) });
        // Deferred again and again: still no attempt spent.
        for (let i = 0; i < 3; i++) {
          await mutateOK(suite, 'startOperationAttempt', op.fence);
          const again = await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind });
          expect(again.operation.attempts).toBe(0);
        }
        await mutateOK(suite, 'startOperationAttempt', op.fence);
        const retry = await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind: 'RETRYABLE' });
        expect(retry.operation).toMatchObject({ attempts: 1, deferReason: null });
      });
    }

    it('is accepted after the lease expired, until someone takes it over', async () => {
      const op = await started();
      suite.clock.advance(LEASE_MS + 1);
      await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind: 'RETRYABLE' });
      await claim(suite); // takeover
      const before = await getOperationRow(suite.store, key());
      expect(await mutate(suite, 'recordOperationAttempt', { ...op.fence, kind: 'FATAL' })).toMatchObject({ __typename: 'StaleLeaseError' });
      expect(await getOperationRow(suite.store, key())).toEqual(before);
    });

    it('refuses bad numbers with InputValidationError', async () => {
      const op = await started();
      const cases: [Record<string, unknown>, string][] = [
        [{ lastHTTPStatus: 99 }, 'lastHTTPStatus'],
        [{ lastHTTPStatus: 600 }, 'lastHTTPStatus'],
        [{ retryAfterMs: -1 }, 'retryAfterMs'],
        [{ providerEtag: '' }, 'providerEtag'],
      ];
      for (const [change, field] of cases) {
        const result = await mutate(suite, 'recordOperationAttempt', { ...op.fence, kind: 'FATAL', ...change });
        expect(result).toMatchObject({ __typename: 'InputValidationError', issues: [{ path: ['input', field] }] });
      }
      expect((await readOperation(suite, op.operation.id))?.state).toBe('ATTEMPTED');
    });

    it('is refused with InvalidStateError on a finished operation', async () => {
      const op = await started();
      await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind: 'FATAL' });
      expect(await mutate(suite, 'recordOperationAttempt', { ...op.fence, kind: 'RETRYABLE' })).toMatchObject({ __typename: 'InvalidStateError' });
    });
  });

  describe('recordReconcileResult', () => {
    it('landed: back to ATTEMPTED with the marker kept, then finalize commits it', async () => {
      const op = await reconcileOnly(suite);
      suite.clock.advance(1_000);
      const now = suite.clock.now();
      const { operation } = await mutateOK(suite, 'recordReconcileResult', { ...op.fence, landed: true, providerEtag: 'etag-found' });
      expect(operation).toMatchObject({ state: 'ATTEMPTED', sendMarkerSet: true, nextAttemptAt: iso(now), providerEtag: 'etag-found', version: 0, attempts: 1 });
      const res = await suite.gql(FINALIZE, { input: { ...op.fence, documentID: 'doc-1', sourceID: 'src-1' } });
      expect(res.data.finalizeOperation).toMatchObject({ finalized: true, operation: { state: 'COMMITTED', documentID: 'doc-1' } });
    });

    it('not landed: back to ATTEMPTED, marker cleared, due now, may be sent again', async () => {
      const op = await reconcileOnly(suite);
      suite.clock.advance(1_000);
      const now = suite.clock.now();
      const { operation } = await mutateOK(suite, 'recordReconcileResult', { ...op.fence, landed: false });
      expect(operation).toMatchObject({ state: 'ATTEMPTED', sendMarkerSet: false, nextAttemptAt: iso(now), attempts: 1 });
      const again = await mutateOK(suite, 'startOperationAttempt', op.fence);
      expect(again.operation.attempts).toBe(2);
    });

    it('works for the holder who took over a sent operation', async () => {
      const first = await claimed(suite);
      await mutateOK(suite, 'startOperationAttempt', first.fence);
      await mutateOK(suite, 'markOperationSent', { ...first.fence, sendMarker: 'run-1' });
      suite.clock.advance(PAST_SEND_WINDOW_MS);
      const taken = await claim(suite);
      expect(taken.operation.state).toBe('RECONCILE_ONLY');
      const fence = { id: first.operation.id, version: taken.lease.version, leaseToken: taken.lease.token };
      expect(await mutate(suite, 'recordReconcileResult', { ...first.fence, landed: true })).toMatchObject({ __typename: 'StaleLeaseError' });
      expect((await mutateOK(suite, 'recordReconcileResult', { ...fence, landed: true })).operation.state).toBe('ATTEMPTED');
    });

    it('is refused with InvalidStateError on an attempted operation', async () => {
      const op = await claimed(suite);
      const before = await getOperationRow(suite.store, key());
      expect(await mutate(suite, 'recordReconcileResult', { ...op.fence, landed: false })).toMatchObject({ __typename: 'InvalidStateError' });
      expect(await getOperationRow(suite.store, key())).toEqual(before);
    });
  });

  describe('fencing', () => {
    /** A holder fence, with the operation in a state that accepts `name` (reconcile needs reconcile_only). */
    async function holderFor(name: keyof typeof EXTRA): Promise<{ fence: Fence; operationID: string }> {
      const operationID = `op-${name}`;
      const op = name === 'recordReconcileResult' ? await reconcileOnly(suite, { operationID }) : await claimed(suite, { operationID });
      return { fence: op.fence, operationID };
    }

    for (const name of FENCED) {
      it(`${name}: a wrong token or a wrong version is a StaleLeaseError and changes nothing`, async () => {
        const { fence, operationID } = await holderFor(name);
        const before = await getOperationRow(suite.store, key(operationID));
        const shown = await readOperation(suite, fence.id);
        for (const bad of [{ leaseToken: `${fence.leaseToken}x` }, { version: fence.version + 1 }, { leaseToken: 'not-a-token', version: 7 }]) {
          const result = await mutate(suite, name, { ...fence, ...EXTRA[name], ...bad });
          expect(result).toMatchObject({ __typename: 'StaleLeaseError', code: 'STALE_LEASE' });
        }
        expect(await getOperationRow(suite.store, key(operationID))).toEqual(before);
        expect(await readOperation(suite, fence.id)).toEqual(shown);
        // The right fence still works.
        await mutateOK(suite, name, { ...fence, ...EXTRA[name] });
      });

      it(`${name}: after a takeover the old holder can write nothing`, async () => {
        const { fence, operationID } = await holderFor(name);
        suite.clock.advance(PAST_SEND_WINDOW_MS);
        const taken = await claim(suite, { operationID });
        expect(taken).toMatchObject({ outcome: 'CLAIMED', lease: { version: fence.version + 1 } });
        const before = await getOperationRow(suite.store, key(operationID));
        const shown = await readOperation(suite, fence.id);
        expect(await mutate(suite, name, { ...fence, ...EXTRA[name] })).toMatchObject({ __typename: 'StaleLeaseError', code: 'STALE_LEASE' });
        expect(await getOperationRow(suite.store, key(operationID))).toEqual(before);
        expect(await readOperation(suite, fence.id)).toEqual(shown);
      });

      it(`${name}: a viewer who cannot see the operation gets NotFoundError, exactly as for an unknown id`, async () => {
        const { fence, operationID } = await holderFor(name);
        const before = await getOperationRow(suite.store, key(operationID));
        const input = { ...fence, ...EXTRA[name] };
        const unknown = await mutate(suite, name, { ...input, id: unknownNodeID('ConnectorOperation') }, 'alice');
        expect(unknown).toEqual({ __typename: 'NotFoundError', code: 'NOT_FOUND', message: 'operation not found' });
        // Even with the holder's real token, a stranger learns nothing and changes nothing.
        for (const who of ['bob', 'mallory'] as const) expect(await mutate(suite, name, input, who)).toEqual(unknown);
        expect(await getOperationRow(suite.store, key(operationID))).toEqual(before);
      });
    }

    it('finalize by the old holder after a takeover writes nothing', async () => {
      const first = await claimed(suite);
      suite.clock.advance(LEASE_MS);
      await claim(suite);
      const before = await getOperationRow(suite.store, key());
      const res = await suite.gql(FINALIZE, { input: { ...first.fence, documentID: 'doc-1', sourceID: 'src-1' } });
      expect(res.data.finalizeOperation).toMatchObject({ finalized: false, operation: { state: 'ATTEMPTED', documentID: null }, watch: null });
      expect(await getOperationRow(suite.store, key())).toEqual(before);
    });

    it('a malformed or foreign-type id is refused without touching anything', async () => {
      const first = await claimed(suite);
      const before = await getOperationRow(suite.store, key());
      for (const id of ['not-an-id', '', Buffer.from(`SyncState:${'A'.repeat(22)}`).toString('base64url')]) {
        const res = await suite.gql(
          `mutation($input: StartOperationAttemptInput!) { startOperationAttempt(input: $input) { __typename ... on Error { code } } }`,
          { input: { ...first.fence, id } },
        );
        // Decoding the id is input coercion: a clear top-level error (or a typed one), never a write.
        const text = JSON.stringify(res);
        if (res.errors !== undefined) expect(res.errors[0]?.message, text).toMatch(/not of type: ConnectorOperation/);
        else expect(['NotFoundError', 'InputValidationError'], text).toContain(res.data.startOperationAttempt.__typename);
      }
      expect(await getOperationRow(suite.store, key())).toEqual(before);
    });

    it('every fenced mutation keeps anonymous callers out', async () => {
      const first = await claimed(suite);
      const res = await suite.gql(
        `mutation($input: StartOperationAttemptInput!) { startOperationAttempt(input: $input) { __typename } }`,
        { input: first.fence },
        { as: 'anonymous' },
      );
      expect(res.data).toBeUndefined();
      expect(res.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
      expect((await readOperation(suite, first.operation.id))?.attempts).toBe(0);
    });
  });
});
