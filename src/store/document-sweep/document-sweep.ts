/**
 * The connector rows of one document: whether any still need work, and
 * deleting them when the document itself is swept.
 *
 * Every function here runs plain statements on `store.db` and never opens a
 * transaction: they are called inside the caller's document-sweep
 * transaction (pass a store whose `db` is that transaction), where a nested
 * transaction would be refused. Called outside a transaction, each statement
 * commits on its own.
 */
import { inTransaction, type StoreContext } from '../context.js';
import { DocumentSweepUnfinishedOperationError } from '../errors.js';
import { LIVE_OPERATION_STATES, TERMINAL_OPERATION_STATES } from '../operations/types.js';

/** The only observation record type the store holds. */
const OBSERVATION_TYPE = 'connector.observation';

/** Tables whose mere row for a document means connector work remains. */
const WORK_TABLES = ['kubun_connector_projection_watch', 'kubun_connector_sweep_candidate', 'kubun_connector_entity_trim'] as const;

async function hasUnfinishedOperation(store: StoreContext, documentID: string): Promise<boolean> {
  const row = await store.db
    .selectFrom('kubun_connector_operation')
    .select('operation_id')
    .where('document_id', '=', documentID)
    .where('state', 'in', LIVE_OPERATION_STATES)
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

async function hasRow(store: StoreContext, table: (typeof WORK_TABLES)[number], documentID: string): Promise<boolean> {
  const row = await store.db.selectFrom(table).select('document_id').where('document_id', '=', documentID).limit(1).executeTakeFirst();
  return row !== undefined;
}

/**
 * True if a watch, a sweep candidate (any state), a trim record or an
 * unfinished (`attempted` / `reconcile_only`) operation names the document.
 */
export async function hasDocumentConnectorWork(store: StoreContext, documentID: string): Promise<boolean> {
  for (const table of WORK_TABLES) {
    if (await hasRow(store, table, documentID)) return true;
  }
  return hasUnfinishedOperation(store, documentID);
}

/**
 * {@link hasDocumentConnectorWork} for many documents in four statements (one
 * per table, whatever the number of ids). Every requested id is in the map.
 */
export async function hasConnectorWorkByDocumentIDs(store: StoreContext, documentIDs: readonly string[]): Promise<Map<string, boolean>> {
  const result = new Map<string, boolean>();
  for (const id of documentIDs) result.set(id, false);
  if (result.size === 0) return result;
  const ids = [...result.keys()];
  const lists = await Promise.all([
    ...WORK_TABLES.map((table) => store.db.selectFrom(table).select('document_id').distinct().where('document_id', 'in', ids).execute()),
    store.db
      .selectFrom('kubun_connector_operation')
      .select('document_id')
      .distinct()
      .where('document_id', 'in', ids)
      .where('state', 'in', LIVE_OPERATION_STATES)
      .execute(),
  ]);
  for (const rows of lists) {
    for (const row of rows) if (row.document_id !== null) result.set(row.document_id, true);
  }
  return result;
}

/** How many rows of each kind a document sweep deleted. */
export interface DocumentSweepResult {
  observationRecords: number;
  repairs: number;
  trims: number;
  watches: number;
  sweepCandidates: number;
  operations: number;
}

/**
 * Deletes the document's connector rows: its observation records (every
 * owner), repair obligation, trim record, watch, sweep candidates and finished
 * (`committed` / `dead`) operations, and says how many of each went. Throws
 * {@link DocumentSweepUnfinishedOperationError}, deleting nothing, while an
 * unfinished operation names the document: deleting that row would let a
 * replayed request write to the provider again.
 */
export async function sweepDocumentRows(store: StoreContext, documentID: string): Promise<DocumentSweepResult> {
  if (await hasUnfinishedOperation(store, documentID)) throw new DocumentSweepUnfinishedOperationError(documentID);
  const { db } = store;
  const count = (result: { numDeletedRows: bigint }) => Number(result.numDeletedRows);
  // Every copy, whatever its owner or signer: the document id names one document.
  const observationRecords = count(
    await db.deleteFrom('kubun_connector_observation_records').where('type', '=', OBSERVATION_TYPE).where('id', '=', documentID).executeTakeFirst(),
  );
  const repairs = count(await db.deleteFrom('kubun_connector_observation_repair').where('document_id', '=', documentID).executeTakeFirst());
  const trims = count(await db.deleteFrom('kubun_connector_entity_trim').where('document_id', '=', documentID).executeTakeFirst());
  const watches = count(await db.deleteFrom('kubun_connector_projection_watch').where('document_id', '=', documentID).executeTakeFirst());
  const sweepCandidates = count(await db.deleteFrom('kubun_connector_sweep_candidate').where('document_id', '=', documentID).executeTakeFirst());
  const operations = count(
    await db.deleteFrom('kubun_connector_operation').where('document_id', '=', documentID).where('state', 'in', TERMINAL_OPERATION_STATES).executeTakeFirst(),
  );
  return { observationRecords, repairs, trims, watches, sweepCandidates, operations };
}

/**
 * {@link sweepDocumentRows} in a transaction of its own: the check and every
 * delete commit together or not at all (for callers that hold none, like the API).
 */
export function sweepDocument(store: StoreContext, documentID: string): Promise<DocumentSweepResult> {
  return inTransaction(store, (tx) => sweepDocumentRows(tx, documentID));
}
