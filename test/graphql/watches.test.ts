/**
 * finalizeOperation, requestRepull, claimWatchAttempt, recordVerification and
 * the `watches` connection, through yoga.fetch on both dialects.
 */
import { describe, expect, it } from 'vitest';
import { getOperationByKey } from '../../src/store/operations/index.js';
import { getWatchByDocument, getWatchByNodeKey } from '../../src/store/projection-watches/index.js';
import { describeGraphQL, type GraphQLResponse, type GraphQLSuite, type Principal } from '../helpers/graphql.js';
import {
  CLAIM_WATCH_ATTEMPT,
  FINALIZE,
  RECORD_VERIFICATION,
  REQUEST_REPULL,
  WATCH_NODE,
  WATCHES,
} from '../helpers/graphql-documents.js';
import { iso, nodeID, seedClaim, seedFinalized, seedWatch, unknownNodeID, type SeededOperation } from '../helpers/graphql-seed.js';
import { allWatchRows } from '../helpers/row-fixtures.js';

describeGraphQL('graphql watches', (suite) => {
  const finalize = (seeded: SeededOperation, overrides: Record<string, unknown> = {}, as: Principal = 'alice') =>
    suite.gql(
      FINALIZE,
      {
        input: {
          id: seeded.id,
          version: seeded.lease.version,
          leaseToken: seeded.lease.token,
          documentID: 'doc-1',
          sourceID: 'provider-doc-1',
          resultEntity: { title: 'Lunch' },
          currentWinnerDigest: 'digest-1',
          ...overrides,
        },
      },
      { as },
    );

  describe('finalizeOperation', () => {
    it('commits the operation and arms the watch of its owner, connector, model and account with the given source id', async () => {
      // The worker (a service) is the caller; alice owns the data. The watch
      // must carry the operation's identity, not the viewer's.
      const seeded = await seedClaim(suite, {
        callerDID: suite.keys.worker.did,
        ownerDID: suite.keys.alice.did,
        connectorName: 'github',
        model: 'issue',
        accountKey: 'acct-7',
      });
      const res = await finalize(seeded, {}, 'worker');
      expect(res.errors).toBeUndefined();
      const payload = res.data.finalizeOperation;
      expect(payload).toMatchObject({
        __typename: 'FinalizeOperationPayload',
        finalized: true,
        operation: { id: seeded.id, state: 'COMMITTED', documentID: 'doc-1', resultEntity: { title: 'Lunch' }, version: seeded.lease.version, leaseExpiresAt: null },
        watch: {
          ownerDID: suite.keys.alice.did,
          connectorName: 'github',
          model: 'issue',
          accountKey: 'acct-7',
          sourceID: 'provider-doc-1',
          documentID: 'doc-1',
          observedWinnerDigest: 'digest-1',
          verifiedStateDigest: null,
          verificationStatus: 'PENDING_VERIFICATION',
          verificationAttempts: 0,
          repairGeneration: 0,
          version: 0,
          nextAttemptAt: iso(suite.clock.now()),
          claimedUntil: null,
          deferReason: null,
        },
      });
      const stored = await getWatchByDocument(suite.store, 'doc-1');
      expect(stored).not.toBeNull();
      expect(payload.watch.id).toBe(nodeID('ProjectionWatch', stored!.nodeKey));
      // The owner sees the armed watch as a node; so does the caller's operation.
      const node = await suite.gql(WATCH_NODE, { id: payload.watch.id }, { as: 'alice' });
      expect(node.data.node).toEqual({ __typename: 'ProjectionWatch', ...payload.watch });
    });

    it('a retried identical finalize answers finalized: true, replayed: true with the recorded watch, and writes nothing', async () => {
      const seeded = await seedClaim(suite);
      const first = await finalize(seeded);
      expect(first.data.finalizeOperation).toMatchObject({ finalized: true });
      const before = await allWatchRows(suite.store);
      suite.clock.advance(5_000);
      const retry = await finalize(seeded);
      expect(retry.data.finalizeOperation).toMatchObject({
        finalized: true,
        watch: { id: first.data.finalizeOperation.watch.id, repairGeneration: 0, version: 0 },
        operation: { id: seeded.id, state: 'COMMITTED', documentID: 'doc-1' },
      });
      expect(await allWatchRows(suite.store)).toEqual(before);
    });

    it('a second finalize with the same lease and other values is an IdempotencyConflictError naming each, and changes nothing', async () => {
      const seeded = await seedClaim(suite);
      const first = await finalize(seeded);
      expect(first.data.finalizeOperation.finalized).toBe(true);
      const before = await allWatchRows(suite.store);
      const opBefore = await getOperationByKey(suite.store, seeded.operation);

      suite.clock.advance(5_000);
      const second = await finalize(seeded, { documentID: 'doc-2', sourceID: 'other', resultEntity: { title: 'changed' }, currentWinnerDigest: 'digest-2' });
      expect(second.errors).toBeUndefined();
      expect(second.data.finalizeOperation).toEqual({
        __typename: 'IdempotencyConflictError',
        code: 'IDEMPOTENCY_CONFLICT',
        message: 'idempotency key already used with a different documentID, resultEntity, sourceID, currentWinnerDigest',
        fields: ['documentID', 'resultEntity', 'sourceID', 'currentWinnerDigest'],
      });
      // One value alone is named alone; the same values again are a replay.
      const onlyResult = await finalize(seeded, { resultEntity: { title: 'Lunch', extra: true } });
      expect(onlyResult.data.finalizeOperation).toMatchObject({ __typename: 'IdempotencyConflictError', fields: ['resultEntity'] });
      const onlySource = await finalize(seeded, { sourceID: 'another-source' });
      expect(onlySource.data.finalizeOperation).toMatchObject({ __typename: 'IdempotencyConflictError', fields: ['sourceID'] });
      const replay = await finalize(seeded);
      expect(replay.data.finalizeOperation).toMatchObject({ __typename: 'FinalizeOperationPayload', finalized: true, operation: { documentID: 'doc-1' } });
      expect(await allWatchRows(suite.store)).toEqual(before);
      expect(await getOperationByKey(suite.store, seeded.operation)).toEqual(opBefore);
    });

    it.each([
      ['version', (s: SeededOperation) => ({ version: s.lease.version + 1 })],
      ['lease token', () => ({ leaseToken: 'not-the-token' })],
    ])('returns finalized: false and arms no watch with a stale %s', async (_name, stale) => {
      const seeded = await seedClaim(suite);
      const res = await finalize(seeded, stale(seeded));
      expect(res.errors).toBeUndefined();
      expect(res.data.finalizeOperation).toMatchObject({ finalized: false, watch: null, operation: { id: seeded.id, state: 'ATTEMPTED', documentID: null } });
      expect(await allWatchRows(suite.store)).toEqual([]);
      expect(await getOperationByKey(suite.store, seeded.operation)).toEqual(seeded.operation);
    });

    it('never echoes the lease token in a refusal', async () => {
      const seeded = await seedClaim(suite);
      const res = await finalize(seeded, { version: 99 });
      expect(JSON.stringify(res)).not.toContain(seeded.lease.token);
    });

    it('replaces the watch of a document watched under another identity', async () => {
      const old = await seedWatch(suite, { documentID: 'doc-1', sourceID: 'old-source', accountKey: 'account-old' });
      const seeded = await seedClaim(suite);
      const res = await finalize(seeded, { sourceID: 'new-source' });
      expect(res.data.finalizeOperation.finalized).toBe(true);
      const armed = res.data.finalizeOperation.watch;
      expect(armed).toMatchObject({ sourceID: 'new-source', accountKey: 'account-1', documentID: 'doc-1', repairGeneration: 0, version: 0 });
      expect(armed.id).not.toBe(old.id);

      expect(await getWatchByNodeKey(suite.store, old.watch.nodeKey)).toBeNull();
      const gone = await suite.gql(WATCH_NODE, { id: old.id });
      expect(gone).toEqual({ data: { node: null } });
      const rows = await allWatchRows(suite.store);
      expect(rows.map((r) => r.source_id)).toEqual(['new-source']);
    });

    it('opens a new generation when the same identity is finalized again', async () => {
      const first = await seedFinalized(suite, { documentID: 'doc-1', watchSourceID: 'provider-doc-1' });
      const seeded = await seedClaim(suite, { op: 'update' });
      const res = await finalize(seeded, { currentWinnerDigest: 'digest-9' });
      expect(res.data.finalizeOperation.watch).toMatchObject({
        id: first.watchID,
        repairGeneration: 1,
        version: 1,
        observedWinnerDigest: 'digest-9',
        verificationStatus: 'PENDING_VERIFICATION',
      });
    });

    it.each([
      [{ documentID: '' }, 'input.documentID', 'must not be empty'],
      [{ documentID: 'x'.repeat(513) }, 'input.documentID', 'must be at most 512 characters'],
      [{ sourceID: '' }, 'input.sourceID', 'must not be empty'],
      [{ leaseToken: '' }, 'input.leaseToken', 'must not be empty'],
      [{ version: -1 }, 'input.version', 'must not be negative'],
    ])('rejects %j with a field-level issue and writes nothing', async (bad, path, message) => {
      const seeded = await seedClaim(suite);
      const res = await finalize(seeded, bad);
      expect(res.data.finalizeOperation).toMatchObject({ __typename: 'InputValidationError', code: 'VALIDATION_FAILED', issues: [{ path: path.split('.'), message }] });
      expect(await allWatchRows(suite.store)).toEqual([]);
      expect(await getOperationByKey(suite.store, seeded.operation)).toEqual(seeded.operation);
    });

    it('gives NotFoundError for an unknown operation id', async () => {
      const seeded = await seedClaim(suite);
      const res = await finalize({ ...seeded, id: unknownNodeID('ConnectorOperation') });
      expect(res.data.finalizeOperation).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
    });
  });

  const repull = (id: string, dueAt?: string, as: Principal = 'alice') => suite.gql(REQUEST_REPULL, { input: { id, ...(dueAt && { dueAt }) } }, { as });

  describe('requestRepull', () => {
    it('opens a new generation due at dueAt', async () => {
      const { watchID } = await seedFinalized(suite, { documentID: 'doc-1' });
      suite.clock.advance(1_000);
      const dueAt = iso(suite.clock.now() + 3_600_000);
      const res = await repull(watchID, dueAt);
      expect(res.errors).toBeUndefined();
      expect(res.data.requestRepull).toMatchObject({
        __typename: 'WatchPayload',
        watch: { id: watchID, repairGeneration: 1, version: 1, verificationStatus: 'PENDING_VERIFICATION', nextAttemptAt: dueAt, verificationAttempts: 0 },
      });
    });

    it('defaults dueAt to now and reopens a verified watch', async () => {
      const { watchID, watch } = await seedFinalized(suite, { documentID: 'doc-1' });
      const verified = await suite.gql(RECORD_VERIFICATION, {
        input: { id: watchID, version: watch.version, repairGeneration: watch.repairGeneration, result: 'MATCH', digest: 'd' },
      });
      expect(verified.data.recordVerification.watch.verificationStatus).toBe('VERIFIED');
      suite.clock.advance(2_000);
      const res = await repull(watchID, undefined, 'worker');
      expect(res.data.requestRepull.watch).toMatchObject({
        verificationStatus: 'PENDING_VERIFICATION',
        repairGeneration: 1,
        version: 2,
        nextAttemptAt: iso(suite.clock.now()),
      });
    });

    it('answers a stranger exactly as it answers an unknown id, and changes nothing', async () => {
      const { watchID } = await seedFinalized(suite, { documentID: 'doc-1' });
      const before = await allWatchRows(suite.store);
      const stranger = await repull(watchID, undefined, 'mallory');
      const unknown = await repull(unknownNodeID('ProjectionWatch'), undefined, 'mallory');
      expect(stranger.data.requestRepull).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
      expect(stranger).toEqual(unknown);
      expect(await allWatchRows(suite.store)).toEqual(before);
    });

    it('gives NotFoundError for an unknown id', async () => {
      const res = await repull(unknownNodeID('ProjectionWatch'));
      expect(res.data.requestRepull).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
    });
  });

  describe('claimWatchAttempt', () => {
    const claim = (id: string, version: number, claimMs = 60_000, as: Principal = 'worker') =>
      suite.gql(CLAIM_WATCH_ATTEMPT, { input: { id, version, claimMs } }, { as });

    it('holds the attempt by CAS on the version', async () => {
      const { watchID, watch } = await seedFinalized(suite, { documentID: 'doc-1' });
      const res = await claim(watchID, watch.version);
      expect(res.errors).toBeUndefined();
      expect(res.data.claimWatchAttempt).toMatchObject({
        __typename: 'WatchPayload',
        watch: { id: watchID, version: watch.version + 1, claimedUntil: iso(suite.clock.now() + 60_000), nextAttemptAt: iso(watch.nextAttemptAt!) },
      });
    });

    it('gives StaleVersionError when the version moved on', async () => {
      const { watchID, watch } = await seedFinalized(suite, { documentID: 'doc-1' });
      await repull(watchID);
      const before = await allWatchRows(suite.store);
      const res = await claim(watchID, watch.version);
      expect(res.data.claimWatchAttempt).toMatchObject({ __typename: 'StaleVersionError', code: 'STALE_VERSION' });
      expect(await allWatchRows(suite.store)).toEqual(before);
    });

    it('gives InvalidStateError while another claim is live, and lets an expired claim be taken over', async () => {
      const { watchID, watch } = await seedFinalized(suite, { documentID: 'doc-1' });
      const first = await claim(watchID, watch.version, 10_000);
      const claimed = first.data.claimWatchAttempt.watch;
      const second = await claim(watchID, claimed.version, 10_000);
      expect(second.data.claimWatchAttempt).toMatchObject({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });

      suite.clock.advance(10_000);
      const takeover = await claim(watchID, claimed.version, 10_000);
      expect(takeover.data.claimWatchAttempt).toMatchObject({ __typename: 'WatchPayload', watch: { version: claimed.version + 1 } });
    });

    it('gives InvalidStateError for a watch that is not pending verification', async () => {
      const { watchID, watch } = await seedFinalized(suite, { documentID: 'doc-1' });
      const verified = await suite.gql(RECORD_VERIFICATION, {
        input: { id: watchID, version: watch.version, repairGeneration: 0, result: 'MATCH', digest: 'd' },
      });
      const res = await claim(watchID, verified.data.recordVerification.watch.version);
      expect(res.data.claimWatchAttempt).toMatchObject({ __typename: 'InvalidStateError' });
    });

    it('rejects a claim shorter than a second', async () => {
      const { watchID, watch } = await seedFinalized(suite, { documentID: 'doc-1' });
      const res = await claim(watchID, watch.version, 10);
      expect(res.data.claimWatchAttempt.__typename).toBe('InputValidationError');
      expect(res.data.claimWatchAttempt.issues[0].path).toEqual(['input', 'claimMs']);
      expect((await getWatchByNodeKey(suite.store, watch.nodeKey))?.version).toBe(watch.version);
    });

    it('gives a stranger NotFoundError, as for an unknown id', async () => {
      const { watchID, watch } = await seedFinalized(suite, { documentID: 'doc-1' });
      const stranger = await claim(watchID, watch.version, 60_000, 'mallory');
      const unknown = await claim(unknownNodeID('ProjectionWatch'), watch.version, 60_000, 'mallory');
      expect(stranger.data.claimWatchAttempt.__typename).toBe('NotFoundError');
      expect(stranger).toEqual(unknown);
    });
  });

  describe('recordVerification', () => {
    const record = (input: Record<string, unknown>, as: Principal = 'worker') => suite.gql(RECORD_VERIFICATION, { input }, { as });

    async function claimed(documentID = 'doc-1') {
      const { watchID, watch } = await seedFinalized(suite, { documentID });
      const res = await suite.gql(CLAIM_WATCH_ATTEMPT, { input: { id: watchID, version: watch.version, claimMs: 60_000 } }, { as: 'worker' });
      return { id: watchID, watch: res.data.claimWatchAttempt.watch as { version: number; repairGeneration: number } };
    }

    it('refuses MATCH without a digest with InvalidInputError and changes nothing', async () => {
      const { id, watch } = await claimed();
      const before = await allWatchRows(suite.store);
      const res = await record({ id, version: watch.version, repairGeneration: watch.repairGeneration, result: 'MATCH' });
      expect(res.data.recordVerification).toMatchObject({ __typename: 'InvalidInputError', code: 'INVALID_INPUT', field: 'digest' });
      expect(await allWatchRows(suite.store)).toEqual(before);
    });

    it('MATCH verifies the watch with the digest', async () => {
      const { id, watch } = await claimed();
      const res = await record({ id, version: watch.version, repairGeneration: watch.repairGeneration, result: 'MATCH', digest: 'verified-1' });
      expect(res.data.recordVerification).toMatchObject({
        __typename: 'RecordVerificationPayload',
        stale: false,
        watch: { verificationStatus: 'VERIFIED', verifiedStateDigest: 'verified-1', version: watch.version + 1, nextAttemptAt: null, claimedUntil: null },
      });
    });

    it('MISMATCH backs off exponentially and FAILS after the maximum', async () => {
      const { id, watch: start } = await claimed();
      let watch = start;
      const delays = [30_000, 60_000, 120_000, 240_000];
      for (const [i, delay] of delays.entries()) {
        const res = await record({ id, version: watch.version, repairGeneration: watch.repairGeneration, result: 'MISMATCH', digest: `seen-${i}` });
        expect(res.data.recordVerification).toMatchObject({
          stale: false,
          watch: {
            verificationStatus: 'PENDING_VERIFICATION',
            verificationAttempts: i + 1,
            observedWinnerDigest: `seen-${i}`,
            nextAttemptAt: iso(suite.clock.now() + delay),
            claimedUntil: null,
          },
        });
        watch = res.data.recordVerification.watch;
        suite.clock.advance(delay);
      }
      const last = await record({ id, version: watch.version, repairGeneration: watch.repairGeneration, result: 'MISMATCH' });
      expect(last.data.recordVerification).toMatchObject({
        stale: false,
        watch: { verificationStatus: 'FAILED', verificationAttempts: 5, nextAttemptAt: null, observedWinnerDigest: 'seen-3' },
      });
    });

    it('OFFLINE defers without spending an attempt', async () => {
      const { id, watch } = await claimed();
      const res = await record({ id, version: watch.version, repairGeneration: watch.repairGeneration, result: 'OFFLINE' });
      expect(res.data.recordVerification).toMatchObject({
        stale: false,
        watch: {
          verificationStatus: 'PENDING_VERIFICATION',
          verificationAttempts: 0,
          deferReason: 'OFFLINE',
          nextAttemptAt: iso(suite.clock.now() + 300_000),
          version: watch.version + 1,
        },
      });
    });

    it.each([
      ['generation', (w: { version: number; repairGeneration: number }) => ({ version: w.version, repairGeneration: w.repairGeneration + 1 })],
      ['version', (w: { version: number; repairGeneration: number }) => ({ version: w.version - 1, repairGeneration: w.repairGeneration })],
    ])('reports a result for a stale %s as stale: true and changes nothing', async (_name, stale) => {
      const { id, watch } = await claimed();
      const before = await allWatchRows(suite.store);
      const res = await record({ id, ...stale(watch), result: 'MATCH', digest: 'd' });
      expect(res.data.recordVerification).toMatchObject({
        __typename: 'RecordVerificationPayload',
        stale: true,
        watch: { id, version: watch.version, verificationStatus: 'PENDING_VERIFICATION', verifiedStateDigest: null },
      });
      expect(await allWatchRows(suite.store)).toEqual(before);
    });

    it('a result after a repull opened a new generation is stale', async () => {
      const { id, watch } = await claimed();
      await suite.gql(REQUEST_REPULL, { input: { id } });
      const res = await record({ id, version: watch.version, repairGeneration: watch.repairGeneration, result: 'MATCH', digest: 'd' });
      expect(res.data.recordVerification).toMatchObject({ stale: true, watch: { repairGeneration: 1, verificationStatus: 'PENDING_VERIFICATION' } });
    });

    it('gives InvalidStateError at the current version of a watch no longer pending', async () => {
      const { id, watch } = await claimed();
      const done = await record({ id, version: watch.version, repairGeneration: watch.repairGeneration, result: 'MATCH', digest: 'd' });
      const again = await record({ id, version: done.data.recordVerification.watch.version, repairGeneration: watch.repairGeneration, result: 'MISMATCH' });
      expect(again.data.recordVerification).toMatchObject({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });
    });

    it('gives a stranger NotFoundError, as for an unknown id', async () => {
      const { id, watch } = await claimed();
      const input = { version: watch.version, repairGeneration: watch.repairGeneration, result: 'MATCH', digest: 'd' };
      const stranger = await record({ id, ...input }, 'mallory');
      const unknown = await record({ id: unknownNodeID('ProjectionWatch'), ...input }, 'mallory');
      expect(stranger.data.recordVerification.__typename).toBe('NotFoundError');
      expect(stranger).toEqual(unknown);
    });
  });

  describe('watches connection', () => {
    /** Six watches, one per ms: alice's on google and github, bob's one; newest last. */
    async function seedWatches(s: GraphQLSuite) {
      const made = [];
      for (const [documentID, owner, connectorName] of [
        ['doc-a1', 'alice', 'google'],
        ['doc-a2', 'alice', 'github'],
        ['doc-b1', 'bob', 'google'],
        ['doc-a3', 'alice', 'google'],
        ['doc-a4', 'alice', 'github'],
        ['doc-a5', 'alice', 'google'],
      ] as const) {
        s.clock.advance(1);
        made.push({ documentID, owner, connectorName, ...(await seedWatch(s, { documentID, ownerDID: s.keys[owner].did, connectorName })) });
      }
      // One verified watch of alice's.
      const verify = made.find((m) => m.documentID === 'doc-a3')!;
      await s.gql(RECORD_VERIFICATION, { input: { id: verify.id, version: verify.watch.version, repairGeneration: 0, result: 'MATCH', digest: 'd' } });
      return made;
    }
    const documentIDs = (res: GraphQLResponse): string[] => (res.data.watches.edges as { node: { documentID: string } }[]).map((e) => e.node.documentID);

    it('lists the viewer’s watches newest first with totalCount', async () => {
      await seedWatches(suite);
      const alice = await suite.gql(WATCHES, { first: 10 });
      expect(alice.errors).toBeUndefined();
      expect(documentIDs(alice)).toEqual(['doc-a5', 'doc-a4', 'doc-a3', 'doc-a2', 'doc-a1']);
      expect(alice.data.watches.totalCount).toBe(5);
      expect(alice.data.watches.pageInfo).toMatchObject({ hasNextPage: false, hasPreviousPage: false });

      const bob = await suite.gql(WATCHES, { first: 10 }, { as: 'bob' });
      expect(documentIDs(bob)).toEqual(['doc-b1']);
      const mallory = await suite.gql(WATCHES, { first: 10 }, { as: 'mallory' });
      expect(mallory.data.watches).toEqual({ totalCount: 0, edges: [], pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null } });
      const worker = await suite.gql(WATCHES, { first: 10 }, { as: 'worker' });
      expect(worker.data.watches.totalCount).toBe(6);
    });

    it('filters by status, connector, owner and document; totalCount follows the filter', async () => {
      await seedWatches(suite);
      const byConnector = await suite.gql(WATCHES, { first: 10, filter: { connectorName: 'github' } });
      expect(documentIDs(byConnector)).toEqual(['doc-a4', 'doc-a2']);
      expect(byConnector.data.watches.totalCount).toBe(2);

      const verified = await suite.gql(WATCHES, { first: 10, filter: { statuses: ['VERIFIED'] } });
      expect(documentIDs(verified)).toEqual(['doc-a3']);
      const pending = await suite.gql(WATCHES, { first: 10, filter: { statuses: ['PENDING_VERIFICATION', 'FAILED'], connectorName: 'google' } });
      expect(documentIDs(pending)).toEqual(['doc-a5', 'doc-a1']);
      expect(pending.data.watches.totalCount).toBe(2);

      const byDocument = await suite.gql(WATCHES, { first: 10, filter: { documentID: 'doc-a2' } });
      expect(documentIDs(byDocument)).toEqual(['doc-a2']);

      // An owner filter cannot widen what a user sees; a service may use it freely.
      const othersAsAlice = await suite.gql(WATCHES, { first: 10, filter: { ownerDID: suite.keys.bob.did } });
      expect(othersAsAlice.data.watches).toMatchObject({ totalCount: 0, edges: [] });
      const bobsAsWorker = await suite.gql(WATCHES, { first: 10, filter: { ownerDID: suite.keys.bob.did } }, { as: 'worker' });
      expect(documentIDs(bobsAsWorker)).toEqual(['doc-b1']);
    });

    it('pages forward by cursor without gaps or repeats', async () => {
      await seedWatches(suite);
      const seen: string[] = [];
      let after: string | null = null;
      for (let page = 0; page < 5; page++) {
        const res: any = await suite.gql(WATCHES, { first: 2, after });
        expect(res.errors).toBeUndefined();
        expect(res.data.watches.totalCount).toBe(5);
        seen.push(...documentIDs(res));
        expect(res.data.watches.pageInfo.hasPreviousPage).toBe(after !== null);
        if (!res.data.watches.pageInfo.hasNextPage) break;
        after = res.data.watches.pageInfo.endCursor;
      }
      expect(seen).toEqual(['doc-a5', 'doc-a4', 'doc-a3', 'doc-a2', 'doc-a1']);
    });

    for (const who of ['alice', 'worker'] as const) {
      it(`pages backward (last/before) and forward (first/after) over the same rows, at every page size (${who})`, async () => {
        await seedWatches(suite);
        // Two more in the same millisecond: the node key orders them.
        for (const documentID of ['doc-t1', 'doc-t2']) await seedWatch(suite, { documentID, ownerDID: suite.keys.alice.did, connectorName: 'google' });
        const full = documentIDs(await suite.gql(WATCHES, { first: 100 }, { as: who }));
        expect(full).toHaveLength(who === 'alice' ? 7 : 8);
        for (let size = 1; size <= 3; size++) {
          const forward: string[] = [];
          let after: string | null = null;
          for (let guard = 0; guard < 20; guard++) {
            const res: any = await suite.gql(WATCHES, { first: size, after }, { as: who });
            expect(res.errors).toBeUndefined();
            expect(res.data.watches.pageInfo.hasPreviousPage).toBe(after !== null);
            forward.push(...documentIDs(res));
            if (!res.data.watches.pageInfo.hasNextPage) break;
            after = res.data.watches.pageInfo.endCursor;
          }
          expect(forward, `forward, size ${size}`).toEqual(full);

          const backward: string[] = [];
          let before: string | null = null;
          for (let guard = 0; guard < 20; guard++) {
            const res: any = await suite.gql(WATCHES, { last: size, before }, { as: who });
            expect(res.errors).toBeUndefined();
            expect(res.data.watches.totalCount).toBe(full.length);
            expect(res.data.watches.pageInfo.hasNextPage).toBe(before !== null);
            backward.unshift(...documentIDs(res));
            if (!res.data.watches.pageInfo.hasPreviousPage) break;
            expect(res.data.watches.edges).toHaveLength(size);
            expect(res.data.watches.pageInfo.startCursor).toBe(res.data.watches.edges[0].cursor);
            before = res.data.watches.pageInfo.startCursor;
          }
          expect(backward, `backward, size ${size}`).toEqual(full);
        }
      });
    }

    it('bounds a page by both after and before, in either direction, with the filter applied', async () => {
      await seedWatches(suite);
      const all = await suite.gql(WATCHES, { first: 100 });
      const order = documentIDs(all);
      const after = all.data.watches.edges[0].cursor;
      const before = all.data.watches.edges[4].cursor;
      expect(documentIDs(await suite.gql(WATCHES, { first: 100, after, before }))).toEqual(order.slice(1, 4));
      expect(documentIDs(await suite.gql(WATCHES, { last: 2, after, before }))).toEqual(order.slice(2, 4));
      expect(documentIDs(await suite.gql(WATCHES, { last: 1, filter: { connectorName: 'github' } }))).toEqual(['doc-a2']);
      expect(documentIDs(await suite.gql(WATCHES, { last: 0 }))).toEqual([]);
    });

    it('refuses first with last, a cursor that is not one, and pages over 100', async () => {
      await seedWatches(suite);
      for (const variables of [{ first: 2, last: 2 }, { first: 2, before: 'abc' }, { first: 2, after: 'not-a-cursor' }, { last: 2, before: 'abc' }]) {
        const res = await suite.gql(WATCHES, variables);
        expect(res.data).toBeNull();
        expect(res.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
      }
      const tooMany = await suite.gql(WATCHES, { first: 101 });
      expect(tooMany.errors?.[0]?.message).toMatch(/between 0 and 100/);
      expect((await suite.gql(WATCHES, { last: 101 })).errors?.[0]?.message).toMatch(/last: must be between 0 and 100/);
    });
  });
});
