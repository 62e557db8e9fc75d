import { describe, expect, it } from 'vitest';
import type { StoreContext } from '../../src/store/context.js';
import { InvalidInputError, InvalidStateError, NotFoundError, StaleVersionError } from '../../src/store/errors.js';
import { finalizeOperationAndArmWatch } from '../../src/store/finalize/index.js';
import {
  DEFAULT_VERIFICATION_POLICY,
  armWatch,
  claimWatchAttempt,
  countWatches,
  getWatch,
  getWatchByDocument,
  getWatchByNodeKey,
  getWatchesByDocumentIDs,
  getWatchesByNodeKeys,
  listDueWatches,
  listWatches,
  recordVerification,
  requestRepull,
  requestRepullByNodeKey,
  resumeOfflineWatches,
  verificationRetryDelay,
  type ArmWatchReason,
  type ProjectionWatch,
  type ProjectionWatchIdentity,
} from '../../src/store/projection-watches/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { withStatementCounter } from '../helpers/statement-counter.js';
import { allWatchRows, insertOperationRow, operationKey, OTHER_OWNER, OWNER, patchWatchRow, watchIdentity } from '../helpers/row-fixtures.js';
import { NEWEST_FIRST } from '../../src/store/page.js';

const SECOND = 1_000;
const MINUTE = 60 * SECOND;

describeEachDialect('projection watches', (suite) => {
  /** A fresh pending watch (generation 0, version 0), due now. */
  async function createWatch(
    identity: ProjectionWatchIdentity = watchIdentity(),
    documentID = 'doc-1',
    store: StoreContext = suite.store,
  ): Promise<ProjectionWatch> {
    const { outcome, watch } = await armWatch(store, { identity, documentID, reason: 'ingest', observedWinnerDigest: 'observed-0' });
    expect(outcome).toBe('created');
    return watch;
  }

  async function rowOf(identity: ProjectionWatchIdentity = watchIdentity()) {
    return (await allWatchRows(suite.store)).find(
      (row) =>
        row.owner_did === identity.ownerDID &&
        row.connector_name === identity.connectorName &&
        row.model === identity.model &&
        row.account_key === identity.accountKey &&
        row.source_id === identity.sourceID,
    );
  }

  describe('armWatch', () => {
    it('refuses a missing watch without a document id', async () => {
      await expect(armWatch(suite.store, { identity: watchIdentity(), reason: 'manual' })).rejects.toBeInstanceOf(NotFoundError);
      expect(await allWatchRows(suite.store)).toEqual([]);
    });

    it('creates a missing watch when given its document', async () => {
      const dueAt = suite.clock.now() + 10 * SECOND;
      const { outcome, watch } = await armWatch(suite.store, {
        identity: watchIdentity(),
        documentID: 'doc-1',
        reason: 'ingest',
        dueAt,
        observedWinnerDigest: 'observed-1',
      });
      expect(outcome).toBe('created');
      expect(watch).toEqual({
        ...watchIdentity(),
        nodeKey: expect.any(String),
        documentID: 'doc-1',
        verifiedStateDigest: null,
        observedWinnerDigest: 'observed-1',
        verificationStatus: 'pending_verification',
        verificationAttempts: 0,
        repairGeneration: 0,
        nextAttemptAt: dueAt,
        claimedUntil: null,
        deferReason: null,
        version: 0,
        createdAt: suite.clock.now(),
        updatedAt: suite.clock.now(),
      });
      expect(await getWatch(suite.store, watchIdentity())).toEqual(watch);
    });

    it('creating a watch supersedes the document watch under another identity, and only that one', async () => {
      await createWatch(watchIdentity({ sourceID: 'old-source' }), 'doc-1');
      await createWatch(watchIdentity({ ownerDID: OTHER_OWNER, sourceID: 'old-source' }), 'doc-1');
      await createWatch(watchIdentity({ sourceID: 'unrelated' }), 'doc-2');

      await createWatch(watchIdentity({ connectorName: 'outlook' }), 'doc-1');

      const rows = await allWatchRows(suite.store);
      expect(rows.map((r) => [r.owner_did, r.connector_name, r.source_id, r.document_id])).toEqual([
        [OTHER_OWNER, 'google', 'old-source', 'doc-1'],
        [OWNER, 'google', 'unrelated', 'doc-2'],
        [OWNER, 'outlook', 'source-1', 'doc-1'],
      ]);
    });

    for (const reason of ['manual', 'repair', 'write'] as const satisfies readonly ArmWatchReason[]) {
      it(`'${reason}' opens a new generation on a pending, claimed, deferred watch`, async () => {
        const created = await createWatch();
        await patchWatchRow(suite.store, watchIdentity(), {
          verification_attempts: 2,
          verified_state_digest: 'verified-old',
          claimed_until: suite.clock.now() + MINUTE,
          defer_reason: 'offline',
          next_attempt_at: suite.clock.now() + 5 * MINUTE,
          version: 7,
          repair_generation: 3,
        });
        const before = await rowOf();
        suite.clock.advance(SECOND);
        const dueAt = suite.clock.now() + 30 * SECOND;

        const { outcome, watch } = await armWatch(suite.store, { identity: watchIdentity(), reason, dueAt, documentID: 'ignored-doc' });

        expect(outcome).toBe('rearmed');
        expect(await rowOf()).toEqual({
          ...before,
          repair_generation: 4,
          verification_attempts: 0,
          verification_status: 'pending_verification',
          next_attempt_at: dueAt,
          claimed_until: null,
          defer_reason: null,
          version: 8,
          updated_at: suite.clock.now(),
          // A write changed the local state the old digest described.
          verified_state_digest: reason === 'write' ? null : 'verified-old',
        });
        expect(watch.nodeKey).toBe(created.nodeKey);
        expect(watch.documentID).toBe('doc-1');
      });
    }

    it('a new generation replaces the observed digest when one is given, and defaults the due time to now', async () => {
      await createWatch();
      suite.clock.advance(SECOND);
      const { watch } = await armWatch(suite.store, { identity: watchIdentity(), reason: 'repair', observedWinnerDigest: 'observed-2' });
      expect(watch).toMatchObject({ observedWinnerDigest: 'observed-2', nextAttemptAt: suite.clock.now(), repairGeneration: 1, version: 1 });
      const again = await armWatch(suite.store, { identity: watchIdentity(), reason: 'manual' });
      expect(again.watch.observedWinnerDigest).toBe('observed-2');
    });

    for (const status of ['verified', 'failed'] as const) {
      it(`'ingest' on a ${status} watch opens a new generation`, async () => {
        await createWatch();
        await patchWatchRow(suite.store, watchIdentity(), { verification_status: status, next_attempt_at: null, verification_attempts: 5 });
        const { outcome, watch } = await armWatch(suite.store, { identity: watchIdentity(), reason: 'ingest' });
        expect(outcome).toBe('rearmed');
        expect(watch).toMatchObject({
          verificationStatus: 'pending_verification',
          verificationAttempts: 0,
          repairGeneration: 1,
          version: 1,
          nextAttemptAt: suite.clock.now(),
        });
      });

      it(`'manual' on a ${status} watch opens a new generation`, async () => {
        await createWatch();
        await patchWatchRow(suite.store, watchIdentity(), { verification_status: status, next_attempt_at: null });
        const { outcome, watch } = await armWatch(suite.store, { identity: watchIdentity(), reason: 'manual' });
        expect(outcome).toBe('rearmed');
        expect(watch.verificationStatus).toBe('pending_verification');
      });
    }

    it("'ingest' on a pending watch coalesces: only the due time moves, the version stays", async () => {
      await createWatch();
      await patchWatchRow(suite.store, watchIdentity(), {
        claimed_until: suite.clock.now() + MINUTE,
        verification_attempts: 1,
        version: 4,
        repair_generation: 2,
      });
      const before = await rowOf();
      suite.clock.advance(SECOND);
      const dueAt = suite.clock.now() + 20 * SECOND;

      const { outcome, watch } = await armWatch(suite.store, {
        identity: watchIdentity(),
        reason: 'ingest',
        dueAt,
        observedWinnerDigest: 'ignored-by-coalesce',
      });

      expect(outcome).toBe('coalesced');
      expect(await rowOf()).toEqual({ ...before, next_attempt_at: dueAt, updated_at: suite.clock.now() });
      expect(watch.version).toBe(4);
    });

    it('a coalesce leaves a verifier claim in flight valid; a manual arm invalidates it', async () => {
      const created = await createWatch();
      const claimed = await claimWatchAttempt(suite.store, { identity: watchIdentity(), version: created.version, claimMs: MINUTE });
      await armWatch(suite.store, { identity: watchIdentity(), reason: 'ingest' });
      const applied = await recordVerification(suite.store, {
        identity: watchIdentity(),
        version: claimed.version,
        repairGeneration: claimed.repairGeneration,
        outcome: { kind: 'match', digest: 'local-1' },
      });
      expect(applied.status).toBe('applied');

      await armWatch(suite.store, { identity: watchIdentity(), reason: 'manual' });
      const second = await claimWatchAttempt(suite.store, { identity: watchIdentity(), version: 3, claimMs: MINUTE });
      await armWatch(suite.store, { identity: watchIdentity(), reason: 'manual' });
      const before = await rowOf();
      const stale = await recordVerification(suite.store, {
        identity: watchIdentity(),
        version: second.version,
        repairGeneration: second.repairGeneration,
        outcome: { kind: 'match', digest: 'local-2' },
      });
      expect(stale.status).toBe('stale');
      expect(await rowOf()).toEqual(before);
    });

    it('rejects a non-integer due time', async () => {
      await createWatch();
      await expect(armWatch(suite.store, { identity: watchIdentity(), reason: 'manual', dueAt: 1.5 })).rejects.toBeInstanceOf(InvalidInputError);
    });
  });

  describe('requestRepull', () => {
    it('is a manual arm: a new generation due at dueAt', async () => {
      await createWatch();
      await patchWatchRow(suite.store, watchIdentity(), { verification_status: 'verified', next_attempt_at: null });
      const dueAt = suite.clock.now() + MINUTE;
      const watch = await requestRepull(suite.store, watchIdentity(), { dueAt });
      expect(watch).toMatchObject({ verificationStatus: 'pending_verification', repairGeneration: 1, version: 1, nextAttemptAt: dueAt });
    });

    it('refuses a missing watch', async () => {
      await expect(requestRepull(suite.store, watchIdentity())).rejects.toBeInstanceOf(NotFoundError);
      expect(await allWatchRows(suite.store)).toEqual([]);
    });

    it('by node key: re-arms that watch, hides others’ watches and unknown keys alike', async () => {
      const created = await createWatch();
      const watch = await requestRepullByNodeKey(suite.store, created.nodeKey, { visibleTo: OWNER });
      expect(watch).toMatchObject({ nodeKey: created.nodeKey, repairGeneration: 1, version: 1 });

      const before = await rowOf();
      await expect(requestRepullByNodeKey(suite.store, created.nodeKey, { visibleTo: 'did:key:zStranger' })).rejects.toBeInstanceOf(
        NotFoundError,
      );
      await expect(requestRepullByNodeKey(suite.store, 'no-such-key')).rejects.toBeInstanceOf(NotFoundError);
      expect(await rowOf()).toEqual(before);

      const asService = await requestRepullByNodeKey(suite.store, created.nodeKey, { visibleTo: null });
      expect(asService.repairGeneration).toBe(2);
    });
  });

  describe('claimWatchAttempt', () => {
    it('sets claimed_until and bumps the version, nothing else', async () => {
      const created = await createWatch();
      const before = await rowOf();
      suite.clock.advance(SECOND);
      const claimed = await claimWatchAttempt(suite.store, { identity: watchIdentity(), version: created.version, claimMs: 45 * SECOND });
      expect(await rowOf()).toEqual({
        ...before,
        claimed_until: suite.clock.now() + 45 * SECOND,
        version: 1,
        updated_at: suite.clock.now(),
      });
      expect(claimed.version).toBe(1);
    });

    it('works by node key', async () => {
      const created = await createWatch();
      const claimed = await claimWatchAttempt(suite.store, { nodeKey: created.nodeKey, version: 0, claimMs: SECOND });
      expect(claimed.claimedUntil).toBe(suite.clock.now() + SECOND);
    });

    it('refuses a stale version and changes nothing', async () => {
      const created = await createWatch();
      await armWatch(suite.store, { identity: watchIdentity(), reason: 'manual' });
      const before = await rowOf();
      await expect(
        claimWatchAttempt(suite.store, { identity: watchIdentity(), version: created.version, claimMs: MINUTE }),
      ).rejects.toBeInstanceOf(StaleVersionError);
      expect(await rowOf()).toEqual(before);
    });

    it('refuses while another claim is live and takes over an expired one', async () => {
      await createWatch();
      const first = await claimWatchAttempt(suite.store, { identity: watchIdentity(), version: 0, claimMs: MINUTE });
      const before = await rowOf();
      const live = claimWatchAttempt(suite.store, { identity: watchIdentity(), version: first.version, claimMs: MINUTE });
      await expect(live).rejects.toBeInstanceOf(InvalidStateError);
      await expect(live).rejects.toThrow(/already claimed/);
      expect(await rowOf()).toEqual(before);

      suite.clock.advance(MINUTE); // claimed_until == now: expired
      const takeover = await claimWatchAttempt(suite.store, { identity: watchIdentity(), version: first.version, claimMs: MINUTE });
      expect(takeover).toMatchObject({ version: 2, claimedUntil: suite.clock.now() + MINUTE });
    });

    it('refuses a watch that is not pending verification', async () => {
      await createWatch();
      for (const status of ['verified', 'failed']) {
        await patchWatchRow(suite.store, watchIdentity(), { verification_status: status });
        const before = await rowOf();
        const attempt = claimWatchAttempt(suite.store, { identity: watchIdentity(), version: 0, claimMs: MINUTE });
        await expect(attempt).rejects.toBeInstanceOf(InvalidStateError);
        await expect(attempt).rejects.toThrow(new RegExp(status));
        expect(await rowOf()).toEqual(before);
      }
    });

    it('refuses a missing watch, a recreated one under its old node key, and bad input', async () => {
      await expect(claimWatchAttempt(suite.store, { identity: watchIdentity(), version: 0, claimMs: MINUTE })).rejects.toBeInstanceOf(
        NotFoundError,
      );
      const old = await createWatch();
      await suite.store.db.deleteFrom('kubun_connector_projection_watch').execute();
      await createWatch();
      await expect(
        claimWatchAttempt(suite.store, { identity: watchIdentity(), nodeKey: old.nodeKey, version: 0, claimMs: MINUTE }),
      ).rejects.toBeInstanceOf(NotFoundError);
      await expect(claimWatchAttempt(suite.store, { identity: watchIdentity(), version: 0, claimMs: 0 })).rejects.toBeInstanceOf(
        InvalidInputError,
      );
    });
  });

  describe('recordVerification', () => {
    async function claimFresh() {
      await createWatch();
      return claimWatchAttempt(suite.store, { identity: watchIdentity(), version: 0, claimMs: MINUTE });
    }

    it('match → verified with the digest, claim cleared, nothing due, version + 1', async () => {
      const claimed = await claimFresh();
      const before = await rowOf();
      suite.clock.advance(SECOND);
      const result = await recordVerification(suite.store, {
        identity: watchIdentity(),
        version: claimed.version,
        repairGeneration: claimed.repairGeneration,
        outcome: { kind: 'match', digest: 'local-digest' },
      });
      expect(result.status).toBe('applied');
      expect(await rowOf()).toEqual({
        ...before,
        verification_status: 'verified',
        verified_state_digest: 'local-digest',
        next_attempt_at: null,
        claimed_until: null,
        version: claimed.version + 1,
        updated_at: suite.clock.now(),
      });
    });

    it('mismatch → attempts + 1 with exponential backoff, observed digest replaced', async () => {
      let watch = await claimFresh();
      const delays: number[] = [];
      for (let i = 0; i < 3; i++) {
        const result = await recordVerification(suite.store, {
          nodeKey: watch.nodeKey,
          version: watch.version,
          repairGeneration: watch.repairGeneration,
          outcome: { kind: 'mismatch', observedDigest: `observed-${i + 1}` },
        });
        if (result.status !== 'applied') throw new Error('expected applied');
        watch = result.watch;
        expect(watch).toMatchObject({
          verificationStatus: 'pending_verification',
          verificationAttempts: i + 1,
          observedWinnerDigest: `observed-${i + 1}`,
          claimedUntil: null,
          deferReason: null,
        });
        delays.push((watch.nextAttemptAt ?? 0) - suite.clock.now());
      }
      expect(delays).toEqual([30 * SECOND, 60 * SECOND, 120 * SECOND]);
      expect(watch.version).toBe(4);

      const keep = await recordVerification(suite.store, {
        identity: watchIdentity(),
        version: watch.version,
        repairGeneration: watch.repairGeneration,
        outcome: { kind: 'mismatch' },
      });
      expect(keep.watch?.observedWinnerDigest).toBe('observed-3');
    });

    it('mismatch → failed once attempts reach the maximum (default 5, configurable)', async () => {
      let watch = await claimFresh();
      const statuses: string[] = [];
      for (let i = 0; i < DEFAULT_VERIFICATION_POLICY.maxAttempts; i++) {
        const result = await recordVerification(suite.store, {
          identity: watchIdentity(),
          version: watch.version,
          repairGeneration: 0,
          outcome: { kind: 'mismatch' },
        });
        if (result.status !== 'applied') throw new Error('expected applied');
        watch = result.watch;
        statuses.push(watch.verificationStatus);
      }
      expect(statuses).toEqual(['pending_verification', 'pending_verification', 'pending_verification', 'pending_verification', 'failed']);
      expect(watch).toMatchObject({ verificationAttempts: 5, nextAttemptAt: null });

      await armWatch(suite.store, { identity: watchIdentity(), reason: 'manual' });
      let current = (await getWatch(suite.store, watchIdentity()))!;
      for (let i = 0; i < 2; i++) {
        const result = await recordVerification(suite.store, {
          identity: watchIdentity(),
          version: current.version,
          repairGeneration: current.repairGeneration,
          outcome: { kind: 'mismatch' },
          policy: { maxAttempts: 2 },
        });
        if (result.status !== 'applied') throw new Error('expected applied');
        current = result.watch;
      }
      expect(current).toMatchObject({ verificationStatus: 'failed', verificationAttempts: 2, repairGeneration: 1 });
    });

    it('offline → deferred without spending an attempt; resumeOfflineWatches makes it due now', async () => {
      const claimed = await claimFresh();
      const result = await recordVerification(suite.store, {
        identity: watchIdentity(),
        version: claimed.version,
        repairGeneration: 0,
        outcome: { kind: 'offline' },
      });
      expect(result.status).toBe('applied');
      expect(result.watch).toMatchObject({
        verificationStatus: 'pending_verification',
        verificationAttempts: 0,
        deferReason: 'offline',
        nextAttemptAt: suite.clock.now() + DEFAULT_VERIFICATION_POLICY.offlineRetryMs,
        claimedUntil: null,
        version: claimed.version + 1,
      });
      expect(await listDueWatches(suite.store, { limit: 10 })).toEqual([]);

      await createWatch(watchIdentity({ ownerDID: OTHER_OWNER }), 'doc-9');
      suite.clock.advance(SECOND);
      expect(await resumeOfflineWatches(suite.store, { ownerDID: OTHER_OWNER })).toHaveLength(0);
      expect(await resumeOfflineWatches(suite.store)).toHaveLength(1);
      const resumed = await getWatch(suite.store, watchIdentity());
      expect(resumed).toMatchObject({ deferReason: null, nextAttemptAt: suite.clock.now(), version: claimed.version + 1 });
    });

    it('a result for an older generation is stale and changes nothing', async () => {
      const claimed = await claimFresh();
      await armWatch(suite.store, { identity: watchIdentity(), reason: 'repair' });
      const current = (await getWatch(suite.store, watchIdentity()))!;
      const before = await rowOf();
      // Even with the current version, the old generation's verdict does not apply.
      const result = await recordVerification(suite.store, {
        identity: watchIdentity(),
        version: current.version,
        repairGeneration: claimed.repairGeneration,
        outcome: { kind: 'match', digest: 'old-generation' },
      });
      expect(result).toEqual({ status: 'stale', watch: current });
      expect(await rowOf()).toEqual(before);
    });

    it('a result for an older version is stale and changes nothing', async () => {
      const claimed = await claimFresh();
      const before = await rowOf();
      for (const outcome of [{ kind: 'match', digest: 'x' }, { kind: 'mismatch' }, { kind: 'offline' }] as const) {
        const result = await recordVerification(suite.store, {
          identity: watchIdentity(),
          version: claimed.version - 1,
          repairGeneration: claimed.repairGeneration,
          outcome,
        });
        expect(result.status).toBe('stale');
      }
      expect(await rowOf()).toEqual(before);
    });

    it('a result for a deleted or recreated watch is stale', async () => {
      const claimed = await claimFresh();
      await suite.store.db.deleteFrom('kubun_connector_projection_watch').execute();
      const gone = await recordVerification(suite.store, {
        identity: watchIdentity(),
        version: claimed.version,
        repairGeneration: 0,
        outcome: { kind: 'match', digest: 'x' },
      });
      expect(gone).toEqual({ status: 'stale', watch: null });

      const recreated = await createWatch();
      await claimWatchAttempt(suite.store, { identity: watchIdentity(), version: 0, claimMs: MINUTE });
      const before = await rowOf();
      // Same identity, version and generation as the old claim: the node key tells them apart.
      const aba = await recordVerification(suite.store, {
        nodeKey: claimed.nodeKey,
        version: claimed.version,
        repairGeneration: 0,
        outcome: { kind: 'match', digest: 'x' },
      });
      expect(aba).toEqual({ status: 'stale', watch: null });
      expect(await rowOf()).toEqual(before);
      expect(recreated.nodeKey).not.toBe(claimed.nodeKey);
    });

    it('refuses a result at the current version of a watch that is no longer pending', async () => {
      const claimed = await claimFresh();
      const verified = await recordVerification(suite.store, {
        identity: watchIdentity(),
        version: claimed.version,
        repairGeneration: 0,
        outcome: { kind: 'match', digest: 'x' },
      });
      const before = await rowOf();
      await expect(
        recordVerification(suite.store, {
          identity: watchIdentity(),
          version: verified.watch!.version,
          repairGeneration: 0,
          outcome: { kind: 'mismatch' },
        }),
      ).rejects.toBeInstanceOf(InvalidStateError);
      expect(await rowOf()).toEqual(before);
    });

    it('rejects an invalid policy', async () => {
      const claimed = await claimFresh();
      await expect(
        recordVerification(suite.store, {
          identity: watchIdentity(),
          version: claimed.version,
          repairGeneration: 0,
          outcome: { kind: 'mismatch' },
          policy: { maxAttempts: 0 },
        }),
      ).rejects.toBeInstanceOf(InvalidInputError);
    });

    it('backoff doubles and is capped', () => {
      const policy = { baseRetryMs: 1_000, maxRetryMs: 10_000 };
      expect([1, 2, 3, 4, 5, 100].map((n) => verificationRetryDelay(n, policy))).toEqual([1_000, 2_000, 4_000, 8_000, 10_000, 10_000]);
    });
  });

  describe('listDueWatches', () => {
    it('lists pending, due, unclaimed (or expired-claim) watches, earliest due first', async () => {
      const now = suite.clock.now();
      const ids = (name: string) => watchIdentity({ sourceID: name });
      await createWatch(ids('due-late'), 'd1');
      await patchWatchRow(suite.store, ids('due-late'), { next_attempt_at: now - SECOND });
      await createWatch(ids('due-early'), 'd2');
      await patchWatchRow(suite.store, ids('due-early'), { next_attempt_at: now - MINUTE });
      await createWatch(ids('due-now'), 'd3');
      await createWatch(ids('expired-claim'), 'd4');
      await patchWatchRow(suite.store, ids('expired-claim'), { next_attempt_at: now - 2 * SECOND, claimed_until: now });
      await createWatch(ids('future'), 'd5');
      await patchWatchRow(suite.store, ids('future'), { next_attempt_at: now + 1 });
      await createWatch(ids('live-claim'), 'd6');
      await patchWatchRow(suite.store, ids('live-claim'), { claimed_until: now + 1 });
      await createWatch(ids('verified'), 'd7');
      await patchWatchRow(suite.store, ids('verified'), { verification_status: 'verified', next_attempt_at: now - MINUTE });
      await createWatch(ids('failed'), 'd8');
      await patchWatchRow(suite.store, ids('failed'), { verification_status: 'failed', next_attempt_at: now - MINUTE });

      const due = await listDueWatches(suite.store, { limit: 10 });
      expect(due.map((w) => w.sourceID)).toEqual(['due-early', 'expired-claim', 'due-late', 'due-now']);
      expect((await listDueWatches(suite.store, { limit: 2 })).map((w) => w.sourceID)).toEqual(['due-early', 'expired-claim']);
      expect((await listDueWatches(suite.store, { limit: 10, now: now + 1 })).map((w) => w.sourceID)).toContain('future');
      expect((await listDueWatches(suite.store, { limit: 10, now: now - 30 * SECOND })).map((w) => w.sourceID)).toEqual(['due-early']);
      await expect(listDueWatches(suite.store, { limit: 0 })).rejects.toBeInstanceOf(InvalidInputError);
    });
  });

  describe('reads', () => {
    it('get by identity, by node key and by document', async () => {
      const a = await createWatch(watchIdentity({ sourceID: 'a' }), 'doc-a');
      expect(await getWatch(suite.store, watchIdentity({ sourceID: 'a' }))).toEqual(a);
      expect(await getWatch(suite.store, watchIdentity({ sourceID: 'b' }))).toBeNull();
      expect(await getWatchByNodeKey(suite.store, a.nodeKey)).toEqual(a);
      expect(await getWatchByNodeKey(suite.store, 'nope')).toBeNull();
      expect(await getWatchByDocument(suite.store, 'doc-a')).toEqual(a);
      expect(await getWatchByDocument(suite.store, 'doc-z')).toBeNull();
    });

    it('getWatchesByNodeKeys: one statement, aligned with the keys', async () => {
      const a = await createWatch(watchIdentity({ sourceID: 'a' }), 'doc-a');
      const b = await createWatch(watchIdentity({ sourceID: 'b' }), 'doc-b');
      const { store, statements } = withStatementCounter(suite.store);
      const result = await getWatchesByNodeKeys(store, [b.nodeKey, 'missing', a.nodeKey, b.nodeKey]);
      expect(result).toEqual([b, null, a, b]);
      expect(statements).toHaveLength(1);
      expect(await getWatchesByNodeKeys(store, [])).toEqual([]);
      expect(statements).toHaveLength(1);
    });

    it('getWatchesByDocumentIDs: one statement, a map by document id', async () => {
      const a = await createWatch(watchIdentity({ sourceID: 'a' }), 'doc-a');
      const b = await createWatch(watchIdentity({ sourceID: 'b' }), 'doc-b');
      const { store, statements } = withStatementCounter(suite.store);
      const result = await getWatchesByDocumentIDs(store, ['doc-a', 'doc-b', 'doc-none', 'doc-a']);
      expect(result).toEqual(new Map([['doc-a', a], ['doc-b', b]]));
      expect(statements).toHaveLength(1);
      expect((await getWatchesByDocumentIDs(store, [])).size).toBe(0);
      expect(statements).toHaveLength(1);
    });

    it('a document id watched under two owners resolves to the newest watch', async () => {
      await createWatch(watchIdentity({ ownerDID: 'did:key:zFirst' }), 'doc-shared');
      suite.clock.advance(SECOND);
      const newer = await createWatch(watchIdentity({ ownerDID: 'did:key:zSecond' }), 'doc-shared');
      expect(await getWatchByDocument(suite.store, 'doc-shared')).toEqual(newer);
      expect((await getWatchesByDocumentIDs(suite.store, ['doc-shared'])).get('doc-shared')).toEqual(newer);
    });
  });

  describe('listWatches / countWatches', () => {
    async function seed() {
      const made: ProjectionWatch[] = [];
      const specs = [
        { ownerDID: 'did:key:zAlice', connectorName: 'google', sourceID: 's1' },
        { ownerDID: 'did:key:zBob', connectorName: 'google', sourceID: 's2' },
        { ownerDID: 'did:key:zAlice', connectorName: 'github', sourceID: 's3' },
        { ownerDID: 'did:key:zAlice', connectorName: 'google', sourceID: 's4' },
        { ownerDID: 'did:key:zBob', connectorName: 'github', sourceID: 's5' },
      ];
      for (const [i, spec] of specs.entries()) {
        // s4 and s5 share a creation time: node key breaks the tie.
        if (i !== 4) suite.clock.advance(SECOND);
        made.push(await createWatch(watchIdentity(spec), `doc-${spec.sourceID}`));
      }
      return made;
    }

    it('pages newest first by keyset, with hasMore', async () => {
      const made = await seed();
      // The tie on created_at is broken by node_key in the database's collation,
      // so the full order is taken from one unpaged listing.
      const all = (await listWatches(suite.store, { visibleTo: null, first: 100 })).watches;
      expect(all.map((w) => w.nodeKey).sort()).toEqual(made.map((w) => w.nodeKey).sort());
      expect(all.map((w) => w.createdAt)).toEqual([...all.map((w) => w.createdAt)].sort((a, b) => b - a));
      expect(all.at(-1)).toEqual(made[0]);

      const seen: ProjectionWatch[] = [];
      let after;
      let pages = 0;
      for (;;) {
        const page = await listWatches(suite.store, { visibleTo: null, first: 2, after });
        seen.push(...page.watches);
        pages += 1;
        if (!page.hasMore) break;
        after = NEWEST_FIRST.cursorOf(page.watches.at(-1)!);
      }
      expect(seen).toEqual(all);
      expect(pages).toBe(3);
      const empty = await listWatches(suite.store, { visibleTo: null, first: 0 });
      expect(empty).toEqual({ watches: [], hasMore: true });
      await expect(listWatches(suite.store, { visibleTo: null, first: -1 })).rejects.toBeInstanceOf(InvalidInputError);
    });

    it('shows an owner only their watches, and filters', async () => {
      const made = await seed();
      const alice = (await listWatches(suite.store, { visibleTo: 'did:key:zAlice', first: 10 })).watches;
      expect(alice.map((w) => w.sourceID)).toEqual(['s4', 's3', 's1']);
      expect(await countWatches(suite.store, { visibleTo: 'did:key:zAlice' })).toEqual({ count: 3, capped: false });
      expect(await countWatches(suite.store, { visibleTo: null })).toEqual({ count: 5, capped: false });

      // An owner filter cannot widen visibility.
      expect((await listWatches(suite.store, { visibleTo: 'did:key:zAlice', filter: { ownerDID: 'did:key:zBob' }, first: 10 })).watches).toEqual([]);
      const bobs = await listWatches(suite.store, { visibleTo: null, filter: { ownerDID: 'did:key:zBob' }, first: 10 });
      expect(bobs.watches.map((w) => w.sourceID).sort()).toEqual(['s2', 's5']);

      const github = await listWatches(suite.store, { visibleTo: null, filter: { connectorName: 'github' }, first: 10 });
      expect(github.watches.map((w) => w.sourceID).sort()).toEqual(['s3', 's5']);
      const byDocument = await listWatches(suite.store, { visibleTo: null, filter: { documentID: 'doc-s2' }, first: 10 });
      expect(byDocument.watches).toEqual([made[1]]);

      await patchWatchRow(suite.store, watchIdentity({ ownerDID: 'did:key:zAlice', connectorName: 'github', sourceID: 's3' }), {
        verification_status: 'verified',
      });
      await patchWatchRow(suite.store, watchIdentity({ ownerDID: 'did:key:zBob', connectorName: 'google', sourceID: 's2' }), {
        verification_status: 'failed',
      });
      const verified = await listWatches(suite.store, { visibleTo: null, filter: { status: 'verified' }, first: 10 });
      expect(verified.watches.map((w) => w.sourceID)).toEqual(['s3']);
      expect(await countWatches(suite.store, { visibleTo: null, filter: { status: ['verified', 'failed'] } })).toEqual({ count: 2, capped: false });
      expect(await countWatches(suite.store, { visibleTo: null, filter: { status: [] } })).toEqual({ count: 0, capped: false });
      expect(
        await countWatches(suite.store, { visibleTo: 'did:key:zAlice', filter: { status: 'pending_verification', connectorName: 'google' } }),
      ).toEqual({ count: 2, capped: false });
    });
  });

  describe('concurrency (Postgres, real parallel connections)', () => {
    it.runIf(suite.dialect === 'postgres')("20 concurrent manual arms: repair_generation and version advance exactly 20", async () => {
      await createWatch();
      const results = await Promise.all(
        Array.from({ length: 20 }, () => armWatch(suite.store, { identity: watchIdentity(), reason: 'manual' })),
      );
      expect(results.every((r) => r.outcome === 'rearmed')).toBe(true);
      expect(results.map((r) => r.watch.repairGeneration).sort((a, b) => a - b)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1));
      expect(await getWatch(suite.store, watchIdentity())).toMatchObject({ repairGeneration: 20, version: 20 });
    });

    it.runIf(suite.dialect === 'postgres')('20 concurrent arms of a missing watch: one creates it, the rest re-arm it', async () => {
      const results = await Promise.all(
        Array.from({ length: 20 }, () => armWatch(suite.store, { identity: watchIdentity(), documentID: 'doc-1', reason: 'manual' })),
      );
      expect(results.filter((r) => r.outcome === 'created')).toHaveLength(1);
      expect(results.filter((r) => r.outcome === 'rearmed')).toHaveLength(19);
      expect(await allWatchRows(suite.store)).toHaveLength(1);
      expect(await getWatch(suite.store, watchIdentity())).toMatchObject({ repairGeneration: 19, version: 19 });
    });

    it.runIf(suite.dialect === 'postgres')('finalizes and manual arms of one identity queue on the row: no lost generation', async () => {
      const ops = [];
      for (let i = 0; i < 10; i++) ops.push(await insertOperationRow(suite.store));
      const work: Promise<unknown>[] = [];
      for (const op of ops) {
        work.push(
          finalizeOperationAndArmWatch(suite.store, {
            key: operationKey(op),
            version: op.version,
            leaseToken: op.lease_token!,
            documentID: 'doc-1',
            resultEntity: { ok: true },
            currentWinnerDigest: 'w',
            watchIdentity: watchIdentity(),
          }),
        );
        work.push(armWatch(suite.store, { identity: watchIdentity(), documentID: 'doc-1', reason: 'manual' }));
      }
      await Promise.all(work);
      expect(await allWatchRows(suite.store)).toHaveLength(1);
      expect(await getWatch(suite.store, watchIdentity())).toMatchObject({ repairGeneration: 19, version: 19 });
    });

    it.runIf(suite.dialect === 'postgres')('arms creating one document under different identities race: one watch survives', async () => {
      for (let round = 0; round < 5; round++) {
        await suite.database.truncate();
        const results = await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            armWatch(suite.store, { identity: watchIdentity({ accountKey: `account-${i}` }), documentID: 'doc-1', reason: 'ingest' }),
          ),
        );
        expect(results.every((r) => r.outcome === 'created')).toBe(true);
        expect(await allWatchRows(suite.store)).toHaveLength(1);
      }
    });

    it.runIf(suite.dialect === 'postgres')('20 concurrent claims of one version: exactly one wins', async () => {
      await createWatch();
      const results = await Promise.allSettled(
        Array.from({ length: 20 }, () => claimWatchAttempt(suite.store, { identity: watchIdentity(), version: 0, claimMs: MINUTE })),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const r of results) {
        if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(StaleVersionError);
      }
      expect(await getWatch(suite.store, watchIdentity())).toMatchObject({ version: 1 });
    });

    it.runIf(suite.dialect === 'postgres')('20 concurrent results for one version: exactly one applies', async () => {
      await createWatch();
      const claimed = await claimWatchAttempt(suite.store, { identity: watchIdentity(), version: 0, claimMs: MINUTE });
      const results = await Promise.all(
        Array.from({ length: 20 }, () =>
          recordVerification(suite.store, {
            identity: watchIdentity(),
            version: claimed.version,
            repairGeneration: 0,
            outcome: { kind: 'mismatch' },
          }),
        ),
      );
      expect(results.filter((r) => r.status === 'applied')).toHaveLength(1);
      expect(await getWatch(suite.store, watchIdentity())).toMatchObject({ verificationAttempts: 1, version: 2 });
    });
  });
});

/** A store whose statements are counted (the batched readers must use one). */
