import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { finalizeOperationAndArmWatch, type FinalizeOperationInput } from '../../src/store/finalize/index.js';
import { IdempotencyConflictError } from '../../src/store/errors.js';
import { getOperationByKey } from '../../src/store/operations/index.js';
import { getWatch } from '../../src/store/projection-watches/index.js';
import type { StoreContext } from '../../src/store/context.js';
import type { OperationRow } from '../../src/db/tables.js';
import { describeEachDialect } from '../helpers/databases.js';
import { allWatchRows, CALLER, getOperationRow, insertOperationRow, operationKey, OWNER, patchWatchRow, watchIdentity } from '../helpers/row-fixtures.js';

function finalizeInput(op: OperationRow, overrides: Partial<FinalizeOperationInput> = {}): FinalizeOperationInput {
  return {
    key: operationKey(op),
    version: op.version,
    leaseToken: op.lease_token ?? 'no-lease',
    documentID: 'doc-1',
    resultEntity: { id: 'provider-1', title: 'Lunch', attendees: ['a', 'b'] },
    currentWinnerDigest: 'digest-1',
    watchIdentity: watchIdentity(),
    ...overrides,
  };
}

async function snapshot(store: StoreContext, op: OperationRow) {
  return { operation: await getOperationRow(store, operationKey(op)), watches: await allWatchRows(store) };
}

describeEachDialect('finalize', (suite) => {
  describe('finalizeOperationAndArmWatch', () => {
    it('commits the operation, clears its lease and creates the watch exactly as §3.4', async () => {
      const op = await insertOperationRow(suite.store);
      const start = suite.clock.now();
      suite.clock.advance(1_000);
      const result = await finalizeOperationAndArmWatch(suite.store, finalizeInput(op));

      expect(result.finalized).toBe(true);
      const after = await getOperationRow(suite.store, operationKey(op));
      expect(after).toEqual({
        ...op,
        state: 'committed',
        document_id: 'doc-1',
        result_entity: JSON.stringify({ id: 'provider-1', title: 'Lunch', attendees: ['a', 'b'] }),
        updated_at: start + 1_000,
        lease_token: null,
        lease_expires_at: null,
        // A digest of the finalizing token (recognises a replay), never the token itself.
        finalized_lease_digest: createHash('sha256').update(op.lease_token!).digest('base64url'),
        // What else it was finalized with, for comparing a replay (migration 0012).
        finalized_input: JSON.stringify({ ownerDID: OWNER, connectorName: 'google', model: 'calendar.event', accountKey: 'account-1', sourceID: 'source-1', currentWinnerDigest: 'digest-1' }),
      });
      expect(JSON.stringify(after)).not.toContain(op.lease_token!);
      expect(after?.version).toBe(op.version);

      const rows = await allWatchRows(suite.store);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toEqual({
        owner_did: OWNER,
        connector_name: 'google',
        model: 'calendar.event',
        account_key: 'account-1',
        source_id: 'source-1',
        node_key: expect.any(String),
        document_id: 'doc-1',
        verified_state_digest: null,
        observed_winner_digest: 'digest-1',
        verification_status: 'pending_verification',
        verification_attempts: 0,
        repair_generation: 0,
        next_attempt_at: start + 1_000,
        claimed_until: null,
        defer_reason: null,
        version: 0,
        created_at: start + 1_000,
        updated_at: start + 1_000,
      });
      expect(result.watch).toEqual(await getWatch(suite.store, watchIdentity()));
      expect(result.watch?.nodeKey).toBe(rows[0]?.node_key);
      // The committed operation comes back with the write, exactly as a read would give it.
      expect(result.operation).toEqual(await getOperationByKey(suite.store, operationKey(after!)));
    });

    it('stores a null result entity as SQL NULL', async () => {
      const op = await insertOperationRow(suite.store);
      await finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { resultEntity: null }));
      expect((await getOperationRow(suite.store, operationKey(op)))?.result_entity).toBeNull();
    });

    it('a repeated identical finalize is a replay: true with the recorded result and watch, and nothing is written or armed again', async () => {
      const op = await insertOperationRow(suite.store);
      const first = await finalizeOperationAndArmWatch(suite.store, finalizeInput(op));
      const before = await snapshot(suite.store, op);
      suite.clock.advance(5_000);
      // The same values, the result's keys in another order (compared as JSON values).
      const again = await finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { resultEntity: { attendees: ['a', 'b'], title: 'Lunch', id: 'provider-1' } }));
      expect(again).toEqual({ finalized: true, replayed: true, operation: first.operation, watch: first.watch });
      expect(await snapshot(suite.store, op)).toEqual(before);
      // Another token at the same version is not the holder that finalized it.
      const other = await finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { leaseToken: 'someone-else' }));
      expect(other).toEqual({ finalized: false, replayed: false, operation: null, watch: null });
    });

    it('refuses a second finalize by the same holder with other values, naming each (documentID, resultEntity, the watch identity, the digest), and changes nothing', async () => {
      const op = await insertOperationRow(suite.store);
      expect((await finalizeOperationAndArmWatch(suite.store, finalizeInput(op))).finalized).toBe(true);
      const before = await snapshot(suite.store, op);
      suite.clock.advance(5_000);

      await expect(finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { documentID: 'doc-2', currentWinnerDigest: 'digest-2' }))).rejects.toMatchObject({
        code: 'IDEMPOTENCY_CONFLICT',
        fields: ['documentID', 'currentWinnerDigest'],
      });
      await expect(finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { resultEntity: { other: true } }))).rejects.toBeInstanceOf(IdempotencyConflictError);
      await expect(
        finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { watchIdentity: watchIdentity({ sourceID: 'source-2', accountKey: 'account-2' }) })),
      ).rejects.toMatchObject({ fields: ['accountKey', 'sourceID'] });
      expect(await snapshot(suite.store, op)).toEqual(before);
    });

    it('an operation claimed for a document is finalized for that document only: another is a conflict naming documentID, nothing written', async () => {
      const op = await insertOperationRow(suite.store, { document_id: 'doc-claimed' });
      const before = await snapshot(suite.store, op);
      await expect(finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { documentID: 'doc-1' }))).rejects.toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', fields: ['documentID'] });
      expect(await snapshot(suite.store, op)).toEqual(before);
      expect((await finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { documentID: 'doc-claimed' }))).finalized).toBe(true);
    });

    it('refuses a stale lease token without writing a watch', async () => {
      const op = await insertOperationRow(suite.store);
      const before = await snapshot(suite.store, op);
      const result = await finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { leaseToken: 'taken-over-token' }));
      expect(result).toEqual({ finalized: false, replayed: false, operation: null, watch: null });
      expect(await snapshot(suite.store, op)).toEqual(before);
      expect(before.watches).toEqual([]);
    });

    it('refuses a stale version without writing or changing a watch', async () => {
      const op = await insertOperationRow(suite.store, { version: 3 });
      // An existing watch of the identity must not be re-armed by a lost CAS.
      const other = await insertOperationRow(suite.store);
      await finalizeOperationAndArmWatch(suite.store, finalizeInput(other));
      const before = await snapshot(suite.store, op);

      const result = await finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { version: 2 }));

      expect(result).toEqual({ finalized: false, replayed: false, operation: null, watch: null });
      expect(await snapshot(suite.store, op)).toEqual(before);
    });

    it('refuses operations that are not attempted or committed, and unknown keys', async () => {
      const reconcile = await insertOperationRow(suite.store, { state: 'reconcile_only' });
      const dead = await insertOperationRow(suite.store, { state: 'dead' });
      for (const op of [reconcile, dead]) {
        const before = await snapshot(suite.store, op);
        expect((await finalizeOperationAndArmWatch(suite.store, finalizeInput(op))).finalized).toBe(false);
        expect(await snapshot(suite.store, op)).toEqual(before);
      }
      const unknown = await finalizeOperationAndArmWatch(
        suite.store,
        finalizeInput(reconcile, { key: { callerDID: CALLER, operationID: 'never-claimed' } }),
      );
      expect(unknown.finalized).toBe(false);
      expect(await allWatchRows(suite.store)).toEqual([]);
    });

    it('accepts a committed operation that still holds the lease (reference: state IN attempted, committed)', async () => {
      const op = await insertOperationRow(suite.store, { state: 'committed', document_id: 'doc-1' });
      const result = await finalizeOperationAndArmWatch(suite.store, finalizeInput(op));
      expect(result.finalized).toBe(true);
      expect((await getOperationRow(suite.store, operationKey(op)))?.lease_token).toBeNull();
    });

    it('supersedes the document watch held under another identity', async () => {
      const first = await insertOperationRow(suite.store);
      const oldIdentity = watchIdentity({ accountKey: 'account-0', sourceID: 'source-0' });
      const armed = await finalizeOperationAndArmWatch(suite.store, finalizeInput(first, { watchIdentity: oldIdentity }));
      // Watches of the same document id under another owner or model are other documents' rows.
      const otherOwner = watchIdentity({ ownerDID: 'did:key:zSomeoneElse' });
      const otherModel = watchIdentity({ model: 'calendar.calendar' });
      await finalizeOperationAndArmWatch(suite.store, finalizeInput(await insertOperationRow(suite.store), { watchIdentity: otherOwner }));
      await finalizeOperationAndArmWatch(suite.store, finalizeInput(await insertOperationRow(suite.store), { watchIdentity: otherModel }));

      for (const identity of [
        watchIdentity({ connectorName: 'outlook' }),
        watchIdentity({ accountKey: 'account-2' }),
        watchIdentity({ sourceID: 'source-2' }),
      ]) {
        const op = await insertOperationRow(suite.store);
        const result = await finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { watchIdentity: identity }));
        expect(result.finalized).toBe(true);
        const ofDocument = (await allWatchRows(suite.store)).filter(
          (row) => row.owner_did === OWNER && row.model === 'calendar.event' && row.document_id === 'doc-1',
        );
        expect(ofDocument).toHaveLength(1);
        expect(ofDocument[0]).toMatchObject({
          connector_name: identity.connectorName,
          account_key: identity.accountKey,
          source_id: identity.sourceID,
          repair_generation: 0,
          version: 0,
        });
      }
      expect(await getWatch(suite.store, oldIdentity)).toBeNull();
      expect(armed.watch?.nodeKey).toBeDefined();
      expect(await getWatch(suite.store, otherOwner)).not.toBeNull();
      expect(await getWatch(suite.store, otherModel)).not.toBeNull();
      expect(await allWatchRows(suite.store)).toHaveLength(3);
    });

    it('re-arms an existing watch of the identity: new generation, digest replaced, version + 1', async () => {
      const identity = watchIdentity();
      const first = await finalizeOperationAndArmWatch(suite.store, finalizeInput(await insertOperationRow(suite.store)));
      // A watch somewhere in its life: verified, with attempts, a claim and a defer reason.
      await patchWatchRow(suite.store, identity, {
        verification_status: 'verified',
        verified_state_digest: 'verified-digest',
        verification_attempts: 3,
        repair_generation: 4,
        next_attempt_at: null,
        claimed_until: suite.clock.now() + 60_000,
        defer_reason: 'offline',
        version: 9,
      });
      const [before] = await allWatchRows(suite.store);
      suite.clock.advance(2_000);

      const result = await finalizeOperationAndArmWatch(
        suite.store,
        finalizeInput(await insertOperationRow(suite.store), { currentWinnerDigest: 'digest-2' }),
      );

      expect(result.finalized).toBe(true);
      const rows = await allWatchRows(suite.store);
      expect(rows).toEqual([
        {
          ...before,
          verification_status: 'pending_verification',
          verified_state_digest: null,
          observed_winner_digest: 'digest-2',
          verification_attempts: 0,
          repair_generation: 5,
          next_attempt_at: suite.clock.now(),
          claimed_until: null,
          defer_reason: null,
          version: 10,
          updated_at: suite.clock.now(),
        },
      ]);
      expect(rows[0]?.node_key).toBe(first.watch?.nodeKey);
      expect(result.watch).toEqual(await getWatch(suite.store, identity));
    });

    it('joins a caller transaction: rolling it back undoes the finalize and the watch', async () => {
      const op = await insertOperationRow(suite.store);
      const before = await snapshot(suite.store, op);
      await expect(
        suite.store.db.transaction().execute(async (tx) => {
          const result = await finalizeOperationAndArmWatch({ ...suite.store, db: tx }, finalizeInput(op));
          expect(result.finalized).toBe(true);
          throw new Error('caller aborts');
        }),
      ).rejects.toThrow('caller aborts');
      expect(await snapshot(suite.store, op)).toEqual(before);
    });

    describe('concurrency (Postgres, real parallel connections)', () => {
      it.runIf(suite.dialect === 'postgres')('100 concurrent identical finalizes: 100 × true, one commit, one arm (the others are replays)', async () => {
        const op = await insertOperationRow(suite.store);
        const results = await Promise.all(Array.from({ length: 100 }, () => finalizeOperationAndArmWatch(suite.store, finalizeInput(op))));
        expect(results.every((r) => r.finalized)).toBe(true);
        expect(results.filter((r) => !r.replayed)).toHaveLength(1);
        const rows = await allWatchRows(suite.store);
        expect(rows).toHaveLength(1);
        expect(rows[0]).toMatchObject({ repair_generation: 0, version: 0, verification_status: 'pending_verification' });
        const winner = results.find((r) => !r.replayed);
        expect(rows[0]?.observed_winner_digest).toBe(winner?.watch?.observedWinnerDigest);
        for (const replay of results.filter((r) => r.replayed)) expect(replay.watch?.nodeKey).toBe(rows[0]?.node_key);
        expect((await getOperationRow(suite.store, operationKey(op)))?.state).toBe('committed');
      });

      it.runIf(suite.dialect === 'postgres')('concurrent finalizes by the holder with different digests: one commits, every other is a conflict naming the digest, never a silent replay', async () => {
        const op = await insertOperationRow(suite.store);
        const results = await Promise.allSettled(
          Array.from({ length: 20 }, (_, i) => finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { currentWinnerDigest: `digest-${i}` }))),
        );
        const committed = results.filter((r) => r.status === 'fulfilled');
        expect(committed).toHaveLength(1);
        for (const r of results) if (r.status === 'rejected') expect(r.reason).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', fields: ['currentWinnerDigest'] });
        expect((await allWatchRows(suite.store))[0]?.observed_winner_digest).toBe((committed[0] as PromiseFulfilledResult<{ watch: { observedWinnerDigest: string | null } | null }>).value.watch?.observedWinnerDigest);
      });

      it.runIf(suite.dialect === 'postgres')('stale leases racing the current one: only the current holder finalizes', async () => {
        // The lease was taken over: epoch 2 holds token "current"; epoch 1's holder still tries.
        const op = await insertOperationRow(suite.store, { version: 2, lease_token: 'current' });
        const attempts = [
          ...Array.from({ length: 10 }, () => ({ version: 1, leaseToken: 'old', good: false })),
          ...Array.from({ length: 5 }, () => ({ version: 2, leaseToken: 'old', good: false })),
          { version: 2, leaseToken: 'current', good: true },
        ];
        const results = await Promise.all(
          attempts.map((a) =>
            finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { version: a.version, leaseToken: a.leaseToken })),
          ),
        );
        expect(results.map((r) => r.finalized)).toEqual(attempts.map((a) => a.good));
        const rows = await allWatchRows(suite.store);
        expect(rows).toHaveLength(1);
        expect(rows[0]).toMatchObject({ repair_generation: 0, version: 0 });
      });

      it.runIf(suite.dialect === 'postgres')('a finalize racing a lease takeover: either it wins and arms, or it writes nothing', async () => {
        for (let round = 0; round < 10; round++) {
          await suite.database.truncate();
          const op = await insertOperationRow(suite.store);
          const [finalize, takeover] = await Promise.all([
            finalizeOperationAndArmWatch(suite.store, finalizeInput(op)),
            // What a claim does to an expired lease: CAS on the version, new token, version + 1.
            suite.store.db
              .updateTable('kubun_connector_operation')
              .set({ version: op.version + 1, lease_token: 'new-holder', lease_expires_at: suite.clock.now() + 30_000 })
              .where('caller_did', '=', op.caller_did)
              .where('operation_id', '=', op.operation_id)
              .where('state', '=', 'attempted')
              .where('version', '=', op.version)
              .executeTakeFirst(),
          ]);
          const tookOver = takeover.numUpdatedRows > 0n;
          expect(finalize.finalized).toBe(!tookOver);
          expect(await allWatchRows(suite.store)).toHaveLength(finalize.finalized ? 1 : 0);
        }
      });

      it.runIf(suite.dialect === 'postgres')('first finalizes of one document under different identities race: one watch survives', async () => {
        for (let round = 0; round < 5; round++) {
          await suite.database.truncate();
          const ops = [];
          for (let i = 0; i < 10; i++) ops.push(await insertOperationRow(suite.store));
          const results = await Promise.all(
            ops.map((op, i) =>
              finalizeOperationAndArmWatch(suite.store, finalizeInput(op, { watchIdentity: watchIdentity({ sourceID: `source-${i}` }) })),
            ),
          );
          expect(results.every((r) => r.finalized)).toBe(true);
          const rows = await allWatchRows(suite.store);
          expect(rows).toHaveLength(1);
          expect(rows[0]).toMatchObject({ document_id: 'doc-1', repair_generation: 0, version: 0 });
        }
      });

      it.runIf(suite.dialect === 'postgres')('finalizes of several operations on one watch identity queue up: one generation each', async () => {
        const ops = [];
        for (let i = 0; i < 12; i++) ops.push(await insertOperationRow(suite.store));
        const results = await Promise.all(ops.map((op) => finalizeOperationAndArmWatch(suite.store, finalizeInput(op))));
        expect(results.every((r) => r.finalized)).toBe(true);
        const rows = await allWatchRows(suite.store);
        expect(rows).toHaveLength(1);
        expect(rows[0]).toMatchObject({ repair_generation: 11, version: 11 });
        const generations = results.map((r) => r.watch?.repairGeneration).sort((a, b) => (a ?? 0) - (b ?? 0));
        expect(generations).toEqual(Array.from({ length: 12 }, (_, i) => i));
      });
    });
  });
});
