import { expect, it } from 'vitest';
import { InvalidInputError } from '../../src/store/errors.js';
import { DEFAULT_DEAD_RETENTION_MS, DEFAULT_IDEMPOTENCY_WINDOW_MS, runRetention } from '../../src/store/retention/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import {
  countRows,
  insertCandidateRow,
  insertOperationRow,
  insertPendingAuthRow,
  insertReceiptRow,
  operationRowValues,
} from '../helpers/row-fixtures.js';

const HOUR = 60 * 60 * 1000;

describeEachDialect('retention', (suite) => {
  it('deletes committed operations older than the idempotency window; exactly at the window stays', async () => {
    const { store, clock } = suite;
    const now = clock.now();
    const cutoff = now - DEFAULT_IDEMPOTENCY_WINDOW_MS;
    const old = await insertOperationRow(store, { state: 'committed', updated_at: cutoff - 1 });
    const boundary = await insertOperationRow(store, { state: 'committed', updated_at: cutoff });
    const fresh = await insertOperationRow(store, { state: 'dead', updated_at: now });

    const result = await runRetention(store);
    expect(result).toEqual({
      operations: 1,
      deadOperations: 0,
      pendingAuthorizations: 0,
      sweepCandidates: 0,
      requestKeys: 0,
      activityRows: 0,
      complete: true,
      // Whose views changed: the deleted operation's caller and owner, nobody else's.
      touched: { operations: new Set([old.caller_did, old.owner_did]), sweepReceipts: new Set() },
    });
    const left = await store.db.selectFrom('kubun_connector_operation').select('operation_id').orderBy('operation_id').execute();
    expect(left.map((r) => r.operation_id).sort()).toEqual([boundary.operation_id, fresh.operation_id].sort());
    expect(left.map((r) => r.operation_id)).not.toContain(old.operation_id);

    clock.advance(1);
    expect((await runRetention(store)).operations).toBe(1);
  });

  it('keeps dead operations, with their history, for the dead retention (7 days by default), apart from the idempotency window', async () => {
    const { store, clock } = suite;
    const now = clock.now();
    const deadCutoff = now - DEFAULT_DEAD_RETENTION_MS;
    const pastWindow = await insertOperationRow(store, { state: 'dead', updated_at: now - DEFAULT_IDEMPOTENCY_WINDOW_MS - HOUR });
    const atBoundary = await insertOperationRow(store, { state: 'dead', updated_at: deadCutoff });
    const old = await insertOperationRow(store, { state: 'dead', updated_at: deadCutoff - 1 });
    await store.db
      .insertInto('kubun_connector_operation_history')
      .values([old, pastWindow].map((row) => ({ caller_did: row.caller_did, operation_id: row.operation_id, seq: 1, kind: 'attempt', attempt: 1, started_at: 0, outcome: 'fatal' })))
      .execute();
    expect(await runRetention(store)).toMatchObject({ operations: 1, deadOperations: 1 });
    const left = (await store.db.selectFrom('kubun_connector_operation').select('operation_id').execute()).map((r) => r.operation_id).sort();
    expect(left).toEqual([pastWindow.operation_id, atBoundary.operation_id].sort());
    const history = await store.db.selectFrom('kubun_connector_operation_history').select('operation_id').execute();
    expect(history.map((r) => r.operation_id)).toEqual([pastWindow.operation_id]);
    // A shorter dead retention, as DEAD_RETENTION_MS sets it.
    expect(await runRetention(store, { deadRetentionMs: HOUR })).toMatchObject({ operations: 2, deadOperations: 2 });
    expect(await countRows(store, 'kubun_connector_operation_history')).toBe(0);
  });

  it('never deletes live operations, however old', async () => {
    const { store, clock } = suite;
    await insertOperationRow(store, { state: 'attempted', updated_at: 0 });
    await insertOperationRow(store, { state: 'reconcile_only', updated_at: 0 });
    clock.advance(365 * 24 * HOUR);
    expect((await runRetention(store, { idempotencyWindowMs: 0 })).operations).toBe(0);
    expect(await countRows(store, 'kubun_connector_operation')).toBe(2);
  });

  it('honours a custom window', async () => {
    const { store, clock } = suite;
    await insertOperationRow(store, { state: 'committed', updated_at: clock.now() - 2 * HOUR });
    await insertOperationRow(store, { state: 'committed', updated_at: clock.now() - HOUR / 2 });
    expect((await runRetention(store, { idempotencyWindowMs: HOUR })).operations).toBe(1);
    expect(await countRows(store, 'kubun_connector_operation')).toBe(1);
  });

  it('deletes in batches until a batch comes back short, with right counts', async () => {
    const { store, clock } = suite;
    const old = clock.now() - DEFAULT_IDEMPOTENCY_WINDOW_MS - 1;
    for (let i = 0; i < 5; i++) await insertOperationRow(store, { state: 'committed', updated_at: old });
    for (let i = 0; i < 5; i++) await insertPendingAuthRow(store, { expires_at: clock.now() - 1 - i });
    const receipt = await insertReceiptRow(store, { committed_at: clock.now() });
    for (let i = 0; i < 5; i++) {
      await insertCandidateRow(store, { document_id: `doc-${i}`, provenance: receipt.provenance, state: ['applied', 'kept', 'failed'][i % 3]! });
    }

    const result = await runRetention(store, { batchSize: 2 });
    expect(result).toMatchObject({ operations: 5, deadOperations: 0, pendingAuthorizations: 5, sweepCandidates: 5, requestKeys: 0, activityRows: 0, complete: true });
    expect(result.touched.sweepReceipts).toEqual(new Set([receipt.owner_did]));
    expect(await countRows(store, 'kubun_connector_operation')).toBe(0);
    expect(await countRows(store, 'kubun_connector_pending_auth')).toBe(0);
    expect(await countRows(store, 'kubun_connector_sweep_candidate')).toBe(0);
    // The receipt itself is kept.
    expect(await countRows(store, 'kubun_connector_sweep_receipt')).toBe(1);
  });

  it('an exact multiple of the batch size ends on an empty batch', async () => {
    const { store, clock } = suite;
    for (let i = 0; i < 4; i++) await insertPendingAuthRow(store, { expires_at: clock.now() - 1 });
    expect((await runRetention(store, { batchSize: 2 })).pendingAuthorizations).toBe(4);
    expect(await countRows(store, 'kubun_connector_pending_auth')).toBe(0);
  });

  it('maxBatches bounds a run and reports it incomplete', async () => {
    const { store, clock } = suite;
    const old = clock.now() - DEFAULT_IDEMPOTENCY_WINDOW_MS - 1;
    for (let i = 0; i < 5; i++) await insertOperationRow(store, { state: 'committed', updated_at: old });
    const first = await runRetention(store, { batchSize: 2, maxBatches: 2 });
    expect(first).toMatchObject({ operations: 4, complete: false });
    expect(await countRows(store, 'kubun_connector_operation')).toBe(1);
    const second = await runRetention(store, { batchSize: 2, maxBatches: 2 });
    expect(second).toMatchObject({ operations: 1, complete: true });
  });

  it('pending authorization expiry is strict: expiring exactly now stays', async () => {
    const { store, clock } = suite;
    const now = clock.now();
    await insertPendingAuthRow(store, { state: 'expired', expires_at: now - 1 });
    await insertPendingAuthRow(store, { state: 'at-now', expires_at: now });
    await insertPendingAuthRow(store, { state: 'future', expires_at: now + HOUR });
    expect((await runRetention(store)).pendingAuthorizations).toBe(1);
    const left = await store.db.selectFrom('kubun_connector_pending_auth').select('state').orderBy('state').execute();
    expect(left.map((r) => r.state)).toEqual(['at-now', 'future']);
  });

  it('deletes only terminal candidates of committed receipts', async () => {
    const { store, clock } = suite;
    const committed = await insertReceiptRow(store, { committed_at: clock.now() });
    const open = await insertReceiptRow(store, { committed_at: null });
    for (const state of ['applied', 'kept', 'failed', 'pending']) {
      await insertCandidateRow(store, { document_id: `committed-${state}`, provenance: committed.provenance, state });
      await insertCandidateRow(store, { document_id: `open-${state}`, provenance: open.provenance, state });
    }
    // Same provenance, other partition: a different receipt (that does not exist), so not committed.
    await insertCandidateRow(store, { document_id: 'other-partition', provenance: committed.provenance, partition: 'p-other', state: 'applied' });

    expect((await runRetention(store)).sweepCandidates).toBe(3);
    const left = await store.db.selectFrom('kubun_connector_sweep_candidate').select('document_id').orderBy('document_id').execute();
    expect(left.map((r) => r.document_id)).toEqual([
      'committed-pending',
      'open-applied',
      'open-failed',
      'open-kept',
      'open-pending',
      'other-partition',
    ]);
  });

  it('rejects invalid options', async () => {
    const { store } = suite;
    await expect(runRetention(store, { batchSize: 0 })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(runRetention(store, { maxBatches: 0 })).rejects.toBeInstanceOf(InvalidInputError);
    await expect(runRetention(store, { idempotencyWindowMs: -1 })).rejects.toBeInstanceOf(InvalidInputError);
  });

  it.runIf(suite.dialect === 'postgres')('skips rows another transaction holds instead of waiting', async () => {
    const { store, clock } = suite;
    const old = clock.now() - DEFAULT_IDEMPOTENCY_WINDOW_MS - 1;
    const locked = await insertOperationRow(store, { state: 'committed', updated_at: old });
    await insertOperationRow(store, { state: 'committed', updated_at: old });
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let lockTaken!: () => void;
    const taken = new Promise<void>((resolve) => (lockTaken = resolve));
    const holder = store.db.transaction().execute(async (tx) => {
      await tx
        .selectFrom('kubun_connector_operation')
        .select('operation_id')
        .where('operation_id', '=', locked.operation_id)
        .forUpdate()
        .execute();
      lockTaken();
      await held;
    });
    await taken;
    try {
      const result = await runRetention(store);
      expect(result.operations).toBe(1);
    } finally {
      release();
      await holder;
    }
    expect((await runRetention(store)).operations).toBe(1);
  });

  it.runIf(suite.dialect === 'postgres')('parallel runs delete every row exactly once', async () => {
    const { store, clock } = suite;
    const old = clock.now() - DEFAULT_IDEMPOTENCY_WINDOW_MS - 1;
    await store.db
      .insertInto('kubun_connector_operation')
      .values(
        Array.from({ length: 200 }, () => operationRowValues(store, { state: 'committed', created_at: old, updated_at: old })),
      )
      .execute();
    const results = await Promise.all(Array.from({ length: 4 }, () => runRetention(store, { batchSize: 10 })));
    expect(results.reduce((sum, r) => sum + r.operations, 0)).toBe(200);
    expect(await countRows(store, 'kubun_connector_operation')).toBe(0);
  });
});

describeEachDialect('retention: request keys (issue 37)', (suite) => {
  const requestRow = (operation: { caller_did: string; operation_id: string }, requestKey: string, createdAt: number) => ({
    caller_did: operation.caller_did,
    operation_id: operation.operation_id,
    request_key: requestKey,
    step: 'renewOperationLease',
    input: '{}',
    answer: '{}',
    lease_token: null,
    created_at: createdAt,
  });
  const keysLeft = async () =>
    (await suite.store.db.selectFrom('kubun_connector_operation_request').select('request_key').orderBy('request_key').execute()).map((r) => r.request_key);

  it('deletes request keys recorded before the idempotency window, and every key of an operation deleted', async () => {
    const { store, clock } = suite;
    const now = clock.now();
    const live = await insertOperationRow(store, { state: 'attempted', updated_at: now });
    const done = await insertOperationRow(store, { state: 'committed', updated_at: now - DEFAULT_IDEMPOTENCY_WINDOW_MS - 1 });
    await store.db
      .insertInto('kubun_connector_operation_request')
      .values([
        requestRow(live, 'old', now - DEFAULT_IDEMPOTENCY_WINDOW_MS - 1),
        requestRow(live, 'recent', now - HOUR),
        requestRow(done, 'of-done', now - HOUR),
      ])
      .execute();
    const result = await runRetention(store);
    expect(result).toMatchObject({ operations: 1, requestKeys: 1 });
    // 'of-done' went with its operation (the cascade trigger), 'old' by its age.
    expect(await keysLeft()).toEqual(['recent']);
  });
});
