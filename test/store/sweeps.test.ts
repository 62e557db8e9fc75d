import { expect, it } from 'vitest';
import { IdempotencyConflictError, InvalidInputError, InvalidStateError, NotFoundError } from '../../src/store/errors.js';
import {
  commitSweepReceipt,
  getSweepCandidate,
  getSweepCandidatesByDocumentIDs,
  getSweepCheckpoint,
  getSweepReceipt,
  listDueSweepCandidates,
  listSweepCandidatesOfReceipt,
  MAX_SWEEP_APPLY_ATTEMPTS,
  recordSweepApplyFailure,
  recordSweepOutcome,
  recordSweepReceipt,
  SWEEP_APPLY_BACKOFF_BASE_MS,
  SWEEP_APPLY_BACKOFF_MAX_MS,
  sweepApplyBackoffMs,
  type RecordSweepReceiptInput,
  type SweepCandidateKey,
  type SweepKey,
  type SweepReceiptKey,
} from '../../src/store/sweeps/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { countRows } from '../helpers/row-fixtures.js';
import { withStatementCounter } from '../helpers/statement-counter.js';

const OWNER = 'did:key:z6MkSweepOwner';
const OTHER_OWNER = 'did:key:z6MkSweepOther';
const CONNECTOR = 'google';
const PARTITION: SweepKey = { ownerDID: OWNER, connectorName: CONNECTOR, partition: 'calendar:primary' };

function receiptKey(provenance: string, partition: SweepKey = PARTITION): SweepReceiptKey {
  return { ...partition, provenance };
}

function candidateKey(provenance: string, documentID: string, partition: SweepKey = PARTITION): SweepCandidateKey {
  return { ...receiptKey(provenance, partition), documentID };
}

function receiptInput(provenance: string, overrides: Partial<RecordSweepReceiptInput> = {}): RecordSweepReceiptInput {
  return {
    key: receiptKey(provenance),
    sequence: 1,
    modelID: 'model-event',
    scope: 'calendar:primary',
    keep: 'listed',
    sourceFetchHLC: '0000018d-0001',
    kind: 'full',
    complete: true,
    candidates: [
      { documentID: 'doc-a', sourceID: 'src-a', modelID: 'model-event' },
      { documentID: 'doc-b', sourceID: 'src-b', modelID: 'model-event' },
    ],
    ...overrides,
  };
}

describeEachDialect('sweeps', (suite) => {
  it('records a receipt and its candidates as pending, due now', async () => {
    const { store, clock } = suite;
    const result = await recordSweepReceipt(store, receiptInput('run-1', { predicate: 'updated>0', sequence: 7 }));
    expect(result.created).toBe(true);
    expect(result.receipt).toEqual({
      ...receiptKey('run-1'),
      nodeKey: expect.stringMatching(/^[A-Za-z0-9_-]{16,64}$/),
      sequence: 7,
      modelID: 'model-event',
      scope: 'calendar:primary',
      keep: 'listed',
      sourceFetchHLC: '0000018d-0001',
      predicate: 'updated>0',
      kind: 'full',
      complete: true,
      createdAt: clock.now(),
      committedAt: null,
    });
    expect(await getSweepReceipt(store, receiptKey('run-1'))).toEqual(result.receipt);
    const candidates = await listSweepCandidatesOfReceipt(store, receiptKey('run-1'));
    expect(candidates).toEqual([
      {
        ...candidateKey('run-1', 'doc-a'),
        sourceID: 'src-a',
        modelID: 'model-event',
        state: 'pending',
        attempts: 0,
        applyFailures: 0,
        lastError: null,
        nextAttemptAt: clock.now(),
        updatedAt: clock.now(),
      },
      expect.objectContaining({ documentID: 'doc-b', sourceID: 'src-b', state: 'pending' }),
    ]);
  });

  it('records an incomplete receipt without candidates and reads predicate null by default', async () => {
    const { store } = suite;
    const { receipt } = await recordSweepReceipt(store, receiptInput('run-1', { complete: false, candidates: [] }));
    expect(receipt.complete).toBe(false);
    expect(receipt.predicate).toBeNull();
    expect(await listSweepCandidatesOfReceipt(store, receiptKey('run-1'))).toEqual([]);
  });

  it('records many candidates across insert chunks', async () => {
    const { store } = suite;
    const candidates = Array.from({ length: 1_203 }, (_, i) => ({ documentID: `doc-${i}`, sourceID: `src-${i}`, modelID: 'm' }));
    await recordSweepReceipt(store, receiptInput('run-big', { candidates }));
    expect(await countRows(store, 'kubun_connector_sweep_candidate')).toBe(1_203);
  });

  it('a re-record of the same receipt (candidates in any order) writes nothing and keeps candidate progress', async () => {
    const { store, clock } = suite;
    const first = await recordSweepReceipt(store, receiptInput('run-1'));
    await recordSweepOutcome(store, { candidateKey: candidateKey('run-1', 'doc-a'), outcome: 'applied' });
    clock.advance(1_000);
    const again = await recordSweepReceipt(store, receiptInput('run-1', { candidates: [...receiptInput('run-1').candidates].reverse() }));
    expect(again.created).toBe(false);
    expect(again.receipt).toEqual(first.receipt);
    const candidates = await listSweepCandidatesOfReceipt(store, receiptKey('run-1'));
    expect(candidates.map((c) => [c.documentID, c.state])).toEqual([
      ['doc-a', 'applied'],
      ['doc-b', 'pending'],
    ]);
  });

  it('a re-record with different fields is an idempotency conflict and writes nothing', async () => {
    const { store } = suite;
    await recordSweepReceipt(store, receiptInput('run-1'));
    await expect(recordSweepReceipt(store, receiptInput('run-1', { sequence: 2 }))).rejects.toMatchObject({
      code: 'IDEMPOTENCY_CONFLICT',
      field: 'sequence',
    });
    await expect(recordSweepReceipt(store, receiptInput('run-1', { complete: false }))).rejects.toBeInstanceOf(IdempotencyConflictError);
    await expect(recordSweepReceipt(store, receiptInput('run-1', { predicate: 'x' }))).rejects.toMatchObject({ field: 'predicate' });
    // Every differing field is named, the candidate list too (another document, or another source id of one).
    await expect(recordSweepReceipt(store, receiptInput('run-1', { sequence: 2, scope: 'other', kind: 'delta' }))).rejects.toMatchObject({
      fields: ['sequence', 'scope', 'kind'],
    });
    await expect(
      recordSweepReceipt(store, receiptInput('run-1', { candidates: [{ documentID: 'doc-c', sourceID: 'src-c', modelID: 'model-event' }] })),
    ).rejects.toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', fields: ['candidates'] });
    await expect(
      recordSweepReceipt(store, receiptInput('run-1', { candidates: [{ documentID: 'doc-a', sourceID: 'src-a', modelID: 'model-event' }, { documentID: 'doc-b', sourceID: 'src-x', modelID: 'model-event' }] })),
    ).rejects.toMatchObject({ fields: ['candidates'] });
    expect((await getSweepReceipt(store, receiptKey('run-1')))?.sequence).toBe(1);
    expect(await countRows(store, 'kubun_connector_sweep_candidate')).toBe(2);
  });

  it('rejects invalid input before writing anything', async () => {
    const { store } = suite;
    const duplicate = { documentID: 'doc-a', sourceID: 's', modelID: 'm' };
    await expect(recordSweepReceipt(store, receiptInput('run-1', { candidates: [duplicate, duplicate] }))).rejects.toBeInstanceOf(
      InvalidInputError,
    );
    await expect(recordSweepReceipt(store, receiptInput('run-1', { sequence: -1 }))).rejects.toBeInstanceOf(InvalidInputError);
    await expect(recordSweepReceipt(store, receiptInput(''))).rejects.toBeInstanceOf(InvalidInputError);
    expect(await countRows(store, 'kubun_connector_sweep_receipt')).toBe(0);
    await expect(listDueSweepCandidates(store, { ownerDID: OWNER, connectorName: CONNECTOR, limit: 0 })).rejects.toBeInstanceOf(
      InvalidInputError,
    );
  });

  it('rolls back the receipt when a candidate insert fails', async () => {
    const { store } = suite;
    // The store does not check sourceID; the database's NOT NULL rejects it after the receipt row went in.
    const bad = { documentID: 'doc-x', sourceID: null as unknown as string, modelID: 'm' };
    await expect(recordSweepReceipt(store, receiptInput('run-1', { candidates: [bad] }))).rejects.toThrow();
    expect(await getSweepReceipt(store, receiptKey('run-1'))).toBeNull();
  });

  it('lists due candidates of one owner and connector, earliest first, up to the limit', async () => {
    const { store, clock } = suite;
    await recordSweepReceipt(store, receiptInput('run-1'));
    clock.advance(10);
    await recordSweepReceipt(
      store,
      receiptInput('run-0', { key: receiptKey('run-0', { ...PARTITION, partition: 'calendar:aaa' }), candidates: [{ documentID: 'doc-z', sourceID: 's', modelID: 'm' }] }),
    );
    await recordSweepReceipt(
      store,
      receiptInput('run-9', { key: receiptKey('run-9', { ...PARTITION, ownerDID: OTHER_OWNER }), candidates: [{ documentID: 'doc-o', sourceID: 's', modelID: 'm' }] }),
    );
    await recordSweepReceipt(
      store,
      receiptInput('run-8', { key: receiptKey('run-8', { ...PARTITION, connectorName: 'github' }), candidates: [{ documentID: 'doc-g', sourceID: 's', modelID: 'm' }] }),
    );

    const due = await listDueSweepCandidates(store, { ownerDID: OWNER, connectorName: CONNECTOR, limit: 10 });
    expect(due.map((c) => c.documentID)).toEqual(['doc-a', 'doc-b', 'doc-z']);
    const limited = await listDueSweepCandidates(store, { ownerDID: OWNER, connectorName: CONNECTOR, limit: 2 });
    expect(limited.map((c) => c.documentID)).toEqual(['doc-a', 'doc-b']);
    // `now` before the later receipt: only the earlier pass is due.
    const early = await listDueSweepCandidates(store, { ownerDID: OWNER, connectorName: CONNECTOR, limit: 10, now: clock.now() - 10 });
    expect(early.map((c) => c.documentID)).toEqual(['doc-a', 'doc-b']);
  });

  it('leaves resolved candidates and candidates in backoff out of the due list', async () => {
    const { store, clock } = suite;
    await recordSweepReceipt(
      store,
      receiptInput('run-1', {
        candidates: ['doc-a', 'doc-b', 'doc-c'].map((documentID) => ({ documentID, sourceID: `s-${documentID}`, modelID: 'm' })),
      }),
    );
    await recordSweepOutcome(store, { candidateKey: candidateKey('run-1', 'doc-a'), outcome: 'applied' });
    await recordSweepApplyFailure(store, { candidateKey: candidateKey('run-1', 'doc-b'), error: 'locked' });
    const due = await listDueSweepCandidates(store, { ownerDID: OWNER, connectorName: CONNECTOR, limit: 10 });
    expect(due.map((c) => c.documentID)).toEqual(['doc-c']);
    clock.advance(SWEEP_APPLY_BACKOFF_BASE_MS - 1);
    expect((await listDueSweepCandidates(store, { ownerDID: OWNER, connectorName: CONNECTOR, limit: 10 })).length).toBe(1);
    clock.advance(1);
    // Exactly at next_attempt_at it is due again, and it now sorts after doc-c (due earlier).
    const later = await listDueSweepCandidates(store, { ownerDID: OWNER, connectorName: CONNECTOR, limit: 10 });
    expect(later.map((c) => c.documentID)).toEqual(['doc-c', 'doc-b']);
  });

  it('records an outcome once; a repeat of the same outcome is a no-op, another is refused', async () => {
    const { store, clock } = suite;
    await recordSweepReceipt(store, receiptInput('run-1'));
    clock.advance(5);
    const kept = await recordSweepOutcome(store, { candidateKey: candidateKey('run-1', 'doc-a'), outcome: 'kept' });
    expect(kept).toMatchObject({ state: 'kept', attempts: 1, applyFailures: 0, updatedAt: clock.now() });
    clock.advance(5);
    const repeat = await recordSweepOutcome(store, { candidateKey: candidateKey('run-1', 'doc-a'), outcome: 'kept' });
    expect(repeat).toEqual(kept);
    await expect(recordSweepOutcome(store, { candidateKey: candidateKey('run-1', 'doc-a'), outcome: 'applied' })).rejects.toBeInstanceOf(
      InvalidStateError,
    );
    expect((await getSweepCandidate(store, candidateKey('run-1', 'doc-a')))?.state).toBe('kept');
    await expect(recordSweepOutcome(store, { candidateKey: candidateKey('run-1', 'doc-nope'), outcome: 'applied' })).rejects.toBeInstanceOf(
      NotFoundError,
    );
    await expect(
      recordSweepOutcome(store, { candidateKey: candidateKey('run-1', 'doc-b'), outcome: 'deleted' as 'applied' }),
    ).rejects.toBeInstanceOf(InvalidInputError);
  });

  it('accepts a listed candidate (with its extra fields) as its own key; rejects an incomplete key', async () => {
    const { store } = suite;
    await recordSweepReceipt(store, receiptInput('run-1'));
    const [first, second] = await listDueSweepCandidates(store, { ownerDID: OWNER, connectorName: CONNECTOR, limit: 10 });
    expect((await recordSweepOutcome(store, { candidateKey: first!, outcome: 'applied' })).state).toBe('applied');
    expect((await recordSweepApplyFailure(store, { candidateKey: second!, error: 'e' })).applyFailures).toBe(1);
    const { documentID: _omitted, ...receiptOnly } = candidateKey('run-1', 'doc-b');
    await expect(
      recordSweepOutcome(store, { candidateKey: receiptOnly as SweepCandidateKey, outcome: 'kept' }),
    ).rejects.toMatchObject({ code: 'INVALID_INPUT', field: 'candidateKey.documentID' });
  });

  it('backs off exponentially on apply failures and fails the candidate after the maximum', async () => {
    const { store, clock } = suite;
    await recordSweepReceipt(store, receiptInput('run-1'));
    const key = candidateKey('run-1', 'doc-a');
    for (let failure = 1; failure < MAX_SWEEP_APPLY_ATTEMPTS; failure++) {
      const candidate = await recordSweepApplyFailure(store, { candidateKey: key, error: `boom ${failure}` });
      expect(candidate).toMatchObject({
        state: 'pending',
        applyFailures: failure,
        attempts: failure,
        lastError: `boom ${failure}`,
        nextAttemptAt: clock.now() + Math.min(SWEEP_APPLY_BACKOFF_MAX_MS, SWEEP_APPLY_BACKOFF_BASE_MS * 2 ** (failure - 1)),
      });
      clock.set(candidate.nextAttemptAt);
    }
    const failed = await recordSweepApplyFailure(store, { candidateKey: key, error: 'last straw' });
    expect(failed).toMatchObject({ state: 'failed', applyFailures: MAX_SWEEP_APPLY_ATTEMPTS, lastError: 'last straw' });
    clock.advance(SWEEP_APPLY_BACKOFF_MAX_MS * 10);
    const due = await listDueSweepCandidates(store, { ownerDID: OWNER, connectorName: CONNECTOR, limit: 10 });
    expect(due.map((c) => c.documentID)).toEqual(['doc-b']);
    await expect(recordSweepApplyFailure(store, { candidateKey: key, error: 'again' })).rejects.toBeInstanceOf(InvalidStateError);
    await expect(recordSweepOutcome(store, { candidateKey: key, outcome: 'applied' })).rejects.toBeInstanceOf(InvalidStateError);
    await expect(recordSweepApplyFailure(store, { candidateKey: candidateKey('run-1', 'nope'), error: 'x' })).rejects.toBeInstanceOf(
      NotFoundError,
    );
  });

  it('backoff doubles from the base and is capped; long errors are cut', async () => {
    expect(sweepApplyBackoffMs(1)).toBe(SWEEP_APPLY_BACKOFF_BASE_MS);
    expect(sweepApplyBackoffMs(2)).toBe(2 * SWEEP_APPLY_BACKOFF_BASE_MS);
    expect(sweepApplyBackoffMs(50)).toBe(SWEEP_APPLY_BACKOFF_MAX_MS);
    const { store } = suite;
    await recordSweepReceipt(store, receiptInput('run-1'));
    const candidate = await recordSweepApplyFailure(store, { candidateKey: candidateKey('run-1', 'doc-a'), error: 'x'.repeat(10_000) });
    expect(candidate.lastError?.length).toBe(2_000);
  });

  it('commits a receipt and advances the checkpoint; a second commit is idempotent', async () => {
    const { store, clock } = suite;
    await recordSweepReceipt(store, receiptInput('run-1', { sequence: 3 }));
    expect(await getSweepCheckpoint(store, PARTITION)).toBeNull();
    await recordSweepOutcome(store, { candidateKey: candidateKey('run-1', 'doc-a'), outcome: 'applied' });
    await recordSweepOutcome(store, { candidateKey: candidateKey('run-1', 'doc-b'), outcome: 'kept' });
    clock.advance(100);
    const committedAt = clock.now();
    const first = await commitSweepReceipt(store, receiptKey('run-1'));
    expect(first).toMatchObject({ newlyCommitted: true, checkpointAdvanced: true });
    expect(first.receipt.committedAt).toBe(committedAt);
    expect(first.checkpoint).toEqual({ ...PARTITION, provenance: 'run-1', receiptSequence: 3, updatedAt: committedAt });

    clock.advance(100);
    const again = await commitSweepReceipt(store, receiptKey('run-1'));
    expect(again).toMatchObject({ newlyCommitted: false, checkpointAdvanced: false });
    expect(again.receipt.committedAt).toBe(committedAt);
    expect(again.checkpoint).toEqual(first.checkpoint);
    expect((await getSweepReceipt(store, receiptKey('run-1')))?.committedAt).toBe(committedAt);
  });

  it('never moves the checkpoint backwards', async () => {
    const { store, clock } = suite;
    await recordSweepReceipt(store, receiptInput('run-new', { sequence: 10, candidates: [] }));
    await recordSweepReceipt(store, receiptInput('run-old', { sequence: 4, candidates: [] }));
    await recordSweepReceipt(store, receiptInput('run-same', { sequence: 10, candidates: [] }));
    await recordSweepReceipt(store, receiptInput('run-newer', { sequence: 11, candidates: [] }));
    await commitSweepReceipt(store, receiptKey('run-new'));
    clock.advance(1);
    const old = await commitSweepReceipt(store, receiptKey('run-old'));
    expect(old).toMatchObject({ newlyCommitted: true, checkpointAdvanced: false });
    expect(old.checkpoint).toMatchObject({ provenance: 'run-new', receiptSequence: 10 });
    const same = await commitSweepReceipt(store, receiptKey('run-same'));
    expect(same.checkpointAdvanced).toBe(false);
    expect(same.checkpoint).toMatchObject({ provenance: 'run-new', receiptSequence: 10 });
    const newer = await commitSweepReceipt(store, receiptKey('run-newer'));
    expect(newer.checkpointAdvanced).toBe(true);
    expect(await getSweepCheckpoint(store, PARTITION)).toMatchObject({ provenance: 'run-newer', receiptSequence: 11, updatedAt: clock.now() });
    // Checkpoints are per partition.
    expect(await getSweepCheckpoint(store, { ...PARTITION, partition: 'other' })).toBeNull();
  });

  it('refuses to commit while a candidate is pending; failed candidates do not block', async () => {
    const { store } = suite;
    await recordSweepReceipt(store, receiptInput('run-1', { sequence: 2 }));
    await recordSweepOutcome(store, { candidateKey: candidateKey('run-1', 'doc-a'), outcome: 'applied' });
    await expect(commitSweepReceipt(store, receiptKey('run-1'))).rejects.toBeInstanceOf(InvalidStateError);
    expect((await getSweepReceipt(store, receiptKey('run-1')))?.committedAt).toBeNull();
    expect(await getSweepCheckpoint(store, PARTITION)).toBeNull();
    for (let i = 0; i < MAX_SWEEP_APPLY_ATTEMPTS; i++) {
      await recordSweepApplyFailure(store, { candidateKey: candidateKey('run-1', 'doc-b'), error: 'no' });
    }
    const committed = await commitSweepReceipt(store, receiptKey('run-1'));
    expect(committed.checkpoint.receiptSequence).toBe(2);
  });

  it('commit of a missing receipt is not found', async () => {
    await expect(commitSweepReceipt(suite.store, receiptKey('nope'))).rejects.toBeInstanceOf(NotFoundError);
    expect(await getSweepReceipt(suite.store, receiptKey('nope'))).toBeNull();
  });

  it('reads candidates for many documents in one statement, every id present', async () => {
    const { store } = suite;
    await recordSweepReceipt(store, receiptInput('run-1'));
    await recordSweepReceipt(
      store,
      receiptInput('run-2', { key: receiptKey('run-2', { ...PARTITION, partition: 'p2' }), candidates: [{ documentID: 'doc-a', sourceID: 's', modelID: 'm' }] }),
    );
    const { store: counting, statements } = withStatementCounter(store);
    const map = await getSweepCandidatesByDocumentIDs(counting, ['doc-a', 'doc-b', 'doc-none', 'doc-a']);
    expect(statements).toHaveLength(1);
    expect([...map.keys()]).toEqual(['doc-a', 'doc-b', 'doc-none']);
    expect(map.get('doc-a')?.map((c) => c.partition)).toEqual(['calendar:primary', 'p2']);
    expect(map.get('doc-b')).toHaveLength(1);
    expect(map.get('doc-none')).toEqual([]);
    expect((await getSweepCandidatesByDocumentIDs(counting, [])).size).toBe(0);
    expect(statements).toHaveLength(1);
  });

  it.runIf(suite.dialect === 'postgres')('concurrent records of one receipt create it once', async () => {
    const { store } = suite;
    const results = await Promise.all(Array.from({ length: 10 }, () => recordSweepReceipt(store, receiptInput('run-race'))));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    expect(await countRows(store, 'kubun_connector_sweep_candidate')).toBe(2);
  });

  it.runIf(suite.dialect === 'postgres')('concurrent commits of different sequences leave the highest', async () => {
    const { store } = suite;
    const sequences = [5, 3, 9, 1, 8, 2, 7, 4, 6];
    for (const sequence of sequences) await recordSweepReceipt(store, receiptInput(`run-${sequence}`, { sequence, candidates: [] }));
    const results = await Promise.all(sequences.map((sequence) => commitSweepReceipt(store, receiptKey(`run-${sequence}`))));
    expect(results.every((r) => r.newlyCommitted)).toBe(true);
    expect(await getSweepCheckpoint(store, PARTITION)).toMatchObject({ receiptSequence: 9, provenance: 'run-9' });
  });

  it.runIf(suite.dialect === 'postgres')('concurrent failures of one candidate each count once', async () => {
    const { store } = suite;
    await recordSweepReceipt(store, receiptInput('run-1'));
    const key = candidateKey('run-1', 'doc-a');
    const results = await Promise.allSettled(
      Array.from({ length: MAX_SWEEP_APPLY_ATTEMPTS + 3 }, (_, i) => recordSweepApplyFailure(store, { candidateKey: key, error: `e${i}` })),
    );
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(MAX_SWEEP_APPLY_ATTEMPTS);
    for (const r of results) if (r.status === 'rejected') expect(r.reason).toBeInstanceOf(InvalidStateError);
    expect(await getSweepCandidate(store, key)).toMatchObject({ state: 'failed', applyFailures: MAX_SWEEP_APPLY_ATTEMPTS });
  });
});
