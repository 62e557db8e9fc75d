/** Repair obligations per document and the "written since" feed over them (SPEC §3.6). */
import { OBSERVATION_REPAIR_COLUMNS } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { MAX_PREPARED_KEYS } from '../node-keys.js';
import { preparedForList } from '../prepared.js';
import { changedAny } from '../context.js';
import { countUpTo, type BoundedCount } from '../count.js';
import { REPAIR_WRITTEN_ORDER } from '../page.js';
import { rowToObservationRepair } from './row.js';
import type { ObservationRepair, ObservationRepairInput, RepairCursor } from './types.js';
import { requirePositiveInteger } from '../validate.js';

/**
 * Writes a document's repair obligation, replacing every field of an earlier
 * one, with `writtenAt` set to the store clock, so a rewrite moves the repair
 * to the end of the "written since" order. Returns the stored repair. With
 * `ifOwnedBy`, an obligation another owner holds for the document is left
 * alone and `null` returned (the upsert's update is conditional).
 */
export async function upsertObservationRepair(store: StoreContext, input: ObservationRepairInput): Promise<ObservationRepair>;
export async function upsertObservationRepair(
  store: StoreContext,
  input: ObservationRepairInput,
  options: { ifOwnedBy: string },
): Promise<ObservationRepair | null>;
export async function upsertObservationRepair(
  store: StoreContext,
  input: ObservationRepairInput,
  options?: { ifOwnedBy: string },
): Promise<ObservationRepair | null> {
  const values = {
    owner: input.owner,
    fetch_hlc: input.fetchHLC,
    decision_hlc: input.decisionHLC,
    present: input.present ? 1 : 0,
    value_digest: input.valueDigest ?? null,
    written_at: store.now(),
  };
  const row = await store.db
    .insertInto('kubun_connector_observation_repair')
    .values({ document_id: input.documentID, ...values })
    .onConflict((oc) => {
      const update = oc.column('document_id').doUpdateSet(values);
      return options === undefined ? update : update.where('kubun_connector_observation_repair.owner', '=', options.ifOwnedBy);
    })
    .returningAll()
    .executeTakeFirst();
  if (row === undefined) {
    if (options === undefined) throw new Error('observation repair upsert returned no row');
    return null;
  }
  return rowToObservationRepair(row);
}

/** Reads a document's repair obligation, or `null`. */
export async function getObservationRepair(store: StoreContext, documentID: string): Promise<ObservationRepair | null> {
  const row = await store.db.selectFrom('kubun_connector_observation_repair').selectAll().where('document_id', '=', documentID).executeTakeFirst();
  return row === undefined ? null : rowToObservationRepair(row);
}

const REPAIRS_BY_DOCUMENT_IDS = preparedForList(MAX_PREPARED_KEYS, (db, documentIDs: readonly string[]) =>
  db.selectFrom('kubun_connector_observation_repair').select(OBSERVATION_REPAIR_COLUMNS).where('document_id', 'in', documentIDs),
);

/** Reads the repairs of many documents in one statement; documents without one are absent from the map. */
export async function getObservationRepairsByDocumentIDs(
  store: StoreContext,
  documentIDs: readonly string[],
): Promise<Map<string, ObservationRepair>> {
  if (documentIDs.length === 0) return new Map();
  const { rows } = await REPAIRS_BY_DOCUMENT_IDS(store, [...new Set(documentIDs)]);
  return new Map(rows.map((row) => [row.document_id, rowToObservationRepair(row)]));
}

/**
 * Removes a document's repair obligation (it was carried out); says whether
 * there was one. With `owner`, only that owner's obligation is removed.
 */
export async function deleteObservationRepair(store: StoreContext, documentID: string, options: { owner?: string } = {}): Promise<boolean> {
  let query = store.db.deleteFrom('kubun_connector_observation_repair').where('document_id', '=', documentID);
  if (options.owner !== undefined) query = query.where('owner', '=', options.owner);
  return changedAny(await query.executeTakeFirst());
}

/** How many repair obligations there are (the "written since" feed's total), up to the count cap. */
export async function countObservationRepairs(store: StoreContext): Promise<BoundedCount> {
  return countUpTo(store, store.db.selectFrom('kubun_connector_observation_repair'));
}

/** Options of {@link listRepairsWrittenSince}. */
export interface ListRepairsWrittenSinceOptions {
  /** Start after this position (exclusive); from the beginning when absent. */
  after?: RepairCursor | null;
  /** Page size, a positive integer. */
  limit: number;
}

/** A page of {@link listRepairsWrittenSince}. */
export interface RepairPage {
  repairs: ObservationRepair[];
  /** Where the next call starts: the last repair returned, or the given cursor when the page is empty. */
  next: RepairCursor | null;
  /** Whether more repairs were already written after this page. */
  hasMore: boolean;
}

/**
 * Pages through repairs in (writtenAt, documentID) order after a cursor.
 * Only repairs written before the current millisecond are returned: a later
 * write in this millisecond could otherwise land behind a cursor handed out
 * now (same `writtenAt`, smaller document id) and be skipped. Across
 * replicas this relies on their clocks agreeing.
 */
export async function listRepairsWrittenSince(store: StoreContext, options: ListRepairsWrittenSinceOptions): Promise<RepairPage> {
  const { after, limit } = options;
  requirePositiveInteger('limit', limit);
  const query = store.db.selectFrom('kubun_connector_observation_repair').selectAll().where('written_at', '<', store.now());
  const { items: repairs, hasMore } = await REPAIR_WRITTEN_ORDER.page(query, { first: limit, after: after ?? null }, rowToObservationRepair);
  const last = repairs.at(-1);
  return {
    repairs,
    next: last === undefined ? (after ?? null) : REPAIR_WRITTEN_ORDER.cursorOf(last),
    hasMore,
  };
}
