import { expect, it } from 'vitest';
import { hasConnectorWorkByDocumentIDs, hasDocumentConnectorWork, sweepDocumentRows } from '../../src/store/document-sweep/index.js';
import { DocumentSweepUnfinishedOperationError } from '../../src/store/errors.js';
import type { StoreContext } from '../../src/store/context.js';
import { describeEachDialect } from '../helpers/databases.js';
import {
  countRows,
  insertCandidateRow,
  insertObservationRecordRow,
  insertOperationRow,
  insertRepairRow,
  insertTrimRow,
  insertWatchRow,
  OTHER_OWNER,
} from '../helpers/row-fixtures.js';
import { withStatementCounter } from '../helpers/statement-counter.js';

const DOC = 'doc-target';
const OTHER_DOC = 'doc-bystander';

/** Every kind of connector row for `documentID`, including finished operations. */
async function insertEverything(store: StoreContext, documentID: string): Promise<void> {
  await insertObservationRecordRow(store, { id: documentID });
  await insertObservationRecordRow(store, { id: documentID, owner: OTHER_OWNER });
  await insertRepairRow(store, { document_id: documentID });
  await insertTrimRow(store, { document_id: documentID });
  await insertWatchRow(store, { document_id: documentID });
  await insertCandidateRow(store, { document_id: documentID, provenance: 'run-1' });
  await insertCandidateRow(store, { document_id: documentID, provenance: 'run-2', state: 'applied' });
  await insertOperationRow(store, { document_id: documentID, state: 'committed' });
  await insertOperationRow(store, { document_id: documentID, state: 'dead' });
}

async function rowsOf(store: StoreContext, documentID: string): Promise<Record<string, number>> {
  const count = async (query: { execute(): Promise<unknown[]> }) => (await query.execute()).length;
  const { db } = store;
  return {
    observationRecords: await count(db.selectFrom('kubun_connector_observation_records').select('id').where('id', '=', documentID)),
    repair: await count(db.selectFrom('kubun_connector_observation_repair').select('document_id').where('document_id', '=', documentID)),
    trim: await count(db.selectFrom('kubun_connector_entity_trim').select('document_id').where('document_id', '=', documentID)),
    watch: await count(db.selectFrom('kubun_connector_projection_watch').select('document_id').where('document_id', '=', documentID)),
    candidates: await count(db.selectFrom('kubun_connector_sweep_candidate').select('document_id').where('document_id', '=', documentID)),
    operations: await count(db.selectFrom('kubun_connector_operation').select('document_id').where('document_id', '=', documentID)),
  };
}

const EVERYTHING = { observationRecords: 2, repair: 1, trim: 1, watch: 1, candidates: 2, operations: 2 };
const NOTHING = { observationRecords: 0, repair: 0, trim: 0, watch: 0, candidates: 0, operations: 0 };

describeEachDialect('document sweep', (suite) => {
  it('a document with no rows has no connector work', async () => {
    expect(await hasDocumentConnectorWork(suite.store, DOC)).toBe(false);
  });

  const work: [string, (store: StoreContext) => Promise<unknown>][] = [
    ['a watch', (store) => insertWatchRow(store, { document_id: DOC })],
    ['a pending sweep candidate', (store) => insertCandidateRow(store, { document_id: DOC })],
    ['a resolved sweep candidate', (store) => insertCandidateRow(store, { document_id: DOC, state: 'applied' })],
    ['a trim record', (store) => insertTrimRow(store, { document_id: DOC })],
    ['an attempted operation', (store) => insertOperationRow(store, { document_id: DOC, state: 'attempted' })],
    ['a reconcile-only operation', (store) => insertOperationRow(store, { document_id: DOC, state: 'reconcile_only' })],
  ];
  for (const [name, insert] of work) {
    it(`${name} is connector work`, async () => {
      await insert(suite.store);
      expect(await hasDocumentConnectorWork(suite.store, DOC)).toBe(true);
      expect(await hasDocumentConnectorWork(suite.store, OTHER_DOC)).toBe(false);
    });
  }

  it('finished operations, observation records and repairs are not connector work', async () => {
    const { store } = suite;
    await insertOperationRow(store, { document_id: DOC, state: 'committed' });
    await insertOperationRow(store, { document_id: DOC, state: 'dead' });
    await insertObservationRecordRow(store, { id: DOC });
    await insertRepairRow(store, { document_id: DOC });
    expect(await hasDocumentConnectorWork(store, DOC)).toBe(false);
  });

  it('deletes exactly the document rows, of every owner, and leaves other documents alone', async () => {
    const { store } = suite;
    await insertEverything(store, DOC);
    await insertEverything(store, OTHER_DOC);
    // Another type of record with the same id is not the store's observation record.
    await store.db
      .insertInto('kubun_connector_observation_records')
      .values({ type: 'other.kind', owner: 'x', id: DOC, op_hash: 'h', hlc: '1', op_jwt: 'j', payload: null })
      .execute();
    expect(await rowsOf(store, DOC)).toEqual({ ...EVERYTHING, observationRecords: 3 });

    await sweepDocumentRows(store, DOC);

    expect(await rowsOf(store, DOC)).toEqual({ ...NOTHING, observationRecords: 1 });
    expect(await rowsOf(store, OTHER_DOC)).toEqual(EVERYTHING);
    expect(await hasDocumentConnectorWork(store, DOC)).toBe(false);
  });

  it('sweeping a document with no rows does nothing', async () => {
    const { store } = suite;
    await insertEverything(store, OTHER_DOC);
    await sweepDocumentRows(store, DOC);
    expect(await rowsOf(store, OTHER_DOC)).toEqual(EVERYTHING);
  });

  for (const state of ['attempted', 'reconcile_only']) {
    it(`refuses while a ${state} operation names the document, deleting nothing`, async () => {
      const { store } = suite;
      await insertEverything(store, DOC);
      await insertOperationRow(store, { document_id: DOC, state });
      const error = await sweepDocumentRows(store, DOC).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(DocumentSweepUnfinishedOperationError);
      expect(error).toMatchObject({ code: 'CONNECTOR_SWEEP_UNFINISHED_OPERATION', documentID: DOC });
      expect(await rowsOf(store, DOC)).toEqual({ ...EVERYTHING, operations: 3 });
    });
  }

  it('runs inside the caller transaction without opening its own', async () => {
    const { store } = suite;
    await insertEverything(store, DOC);
    await store.db.transaction().execute(async (tx) => {
      const inner = { ...store, db: tx };
      expect(await hasDocumentConnectorWork(inner, DOC)).toBe(true);
      await sweepDocumentRows(inner, DOC);
      expect(await hasDocumentConnectorWork(inner, DOC)).toBe(false);
      expect(await hasConnectorWorkByDocumentIDs(inner, [DOC])).toEqual(new Map([[DOC, false]]));
    });
    expect(await rowsOf(store, DOC)).toEqual(NOTHING);
  });

  it('a rollback of the caller transaction undoes the sweep', async () => {
    const { store } = suite;
    await insertEverything(store, DOC);
    const abort = new Error('caller aborts');
    await expect(
      store.db.transaction().execute(async (tx) => {
        await sweepDocumentRows({ ...store, db: tx }, DOC);
        expect(await rowsOf({ ...store, db: tx }, DOC)).toEqual(NOTHING);
        throw abort;
      }),
    ).rejects.toBe(abort);
    expect(await rowsOf(store, DOC)).toEqual(EVERYTHING);
  });

  it('the refusal inside a caller transaction leaves the caller able to roll back its own writes', async () => {
    const { store } = suite;
    await insertOperationRow(store, { document_id: DOC, state: 'attempted' });
    await expect(
      store.db.transaction().execute(async (tx) => {
        await insertTrimRow({ ...store, db: tx }, { document_id: 'written-by-caller' });
        await sweepDocumentRows({ ...store, db: tx }, DOC);
      }),
    ).rejects.toBeInstanceOf(DocumentSweepUnfinishedOperationError);
    expect(await countRows(store, 'kubun_connector_entity_trim')).toBe(0);
    expect(await countRows(store, 'kubun_connector_operation')).toBe(1);
  });

  it('batched has-work equals the single version for a mix of ids, in four statements', async () => {
    const { store } = suite;
    await insertWatchRow(store, { document_id: 'doc-watch' });
    await insertCandidateRow(store, { document_id: 'doc-candidate', state: 'failed' });
    await insertCandidateRow(store, { document_id: 'doc-candidate', provenance: 'run-other' });
    await insertTrimRow(store, { document_id: 'doc-trim' });
    await insertOperationRow(store, { document_id: 'doc-attempted', state: 'attempted' });
    await insertOperationRow(store, { document_id: 'doc-reconcile', state: 'reconcile_only' });
    await insertOperationRow(store, { document_id: 'doc-committed', state: 'committed' });
    await insertOperationRow(store, { document_id: 'doc-dead', state: 'dead' });
    await insertOperationRow(store, { document_id: null, state: 'attempted' });
    await insertObservationRecordRow(store, { id: 'doc-observed' });
    await insertRepairRow(store, { document_id: 'doc-repair' });
    await insertWatchRow(store, { document_id: 'doc-all' });
    await insertTrimRow(store, { document_id: 'doc-all' });
    await insertOperationRow(store, { document_id: 'doc-all', state: 'attempted' });
    const ids = [
      'doc-watch',
      'doc-candidate',
      'doc-trim',
      'doc-attempted',
      'doc-reconcile',
      'doc-committed',
      'doc-dead',
      'doc-observed',
      'doc-repair',
      'doc-all',
      'doc-unknown',
      'doc-watch',
    ];
    const { store: counting, statements } = withStatementCounter(store);
    const batched = await hasConnectorWorkByDocumentIDs(counting, ids);
    expect(statements).toHaveLength(4);
    const single = new Map<string, boolean>();
    for (const id of ids) single.set(id, await hasDocumentConnectorWork(store, id));
    expect(batched).toEqual(single);
    expect([...batched.entries()].filter(([, work]) => work).map(([id]) => id)).toEqual([
      'doc-watch',
      'doc-candidate',
      'doc-trim',
      'doc-attempted',
      'doc-reconcile',
      'doc-all',
    ]);

    const many = Array.from({ length: 300 }, (_, i) => `doc-extra-${i}`).concat(ids);
    statements.length = 0;
    const big = await hasConnectorWorkByDocumentIDs(counting, many);
    expect(statements).toHaveLength(4);
    expect(big.size).toBe(300 + 11);
    expect((await hasConnectorWorkByDocumentIDs(counting, [])).size).toBe(0);
    expect(statements).toHaveLength(4);
  });
});
