/** Get / set / clear the trim record of a document (SPEC §3.6). */
import { ENTITY_TRIM_COLUMNS } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { MAX_PREPARED_KEYS } from '../node-keys.js';
import { preparedForList } from '../prepared.js';
import { changedAny } from '../context.js';
import { rowToEntityTrim } from './row.js';
import type { EntityTrimInput, EntityTrimRecord } from './types.js';

/** Reads a document's trim record, or `null`. */
export async function getEntityTrim(store: StoreContext, documentID: string): Promise<EntityTrimRecord | null> {
  const row = await store.db.selectFrom('kubun_connector_entity_trim').selectAll().where('document_id', '=', documentID).executeTakeFirst();
  return row === undefined ? null : rowToEntityTrim(row);
}

const TRIMS_BY_DOCUMENT_IDS = preparedForList(MAX_PREPARED_KEYS, (db, documentIDs: readonly string[]) =>
  db.selectFrom('kubun_connector_entity_trim').select(ENTITY_TRIM_COLUMNS).where('document_id', 'in', documentIDs),
);

/** Reads the trim records of many documents in one statement; documents without one are absent from the map. */
export async function getEntityTrimsByDocumentIDs(store: StoreContext, documentIDs: readonly string[]): Promise<Map<string, EntityTrimRecord>> {
  if (documentIDs.length === 0) return new Map();
  const { rows } = await TRIMS_BY_DOCUMENT_IDS(store, [...new Set(documentIDs)]);
  return new Map(rows.map((row) => [row.document_id, rowToEntityTrim(row)]));
}

/** Options of {@link setEntityTrim}. */
export interface SetEntityTrimOptions {
  /** Replace an existing record only if it belongs to this owner; `null` is returned when it belongs to another. */
  ifOwnedBy: string;
}

/**
 * Records what a write trimmed from a document, replacing any earlier record:
 * the trimmed fields and `updatedAt` (the store clock) are replaced; owner
 * and connector stay as first recorded, as in the reference. Returns the
 * stored record. With `ifOwnedBy`, a record of another owner is left alone
 * and `null` returned (one statement: the upsert's update is conditional).
 */
export async function setEntityTrim(store: StoreContext, input: EntityTrimInput): Promise<EntityTrimRecord>;
export async function setEntityTrim(store: StoreContext, input: EntityTrimInput, options: SetEntityTrimOptions): Promise<EntityTrimRecord | null>;
export async function setEntityTrim(store: StoreContext, input: EntityTrimInput, options?: SetEntityTrimOptions): Promise<EntityTrimRecord | null> {
  const trimmedFields = JSON.stringify(input.trimmedFields);
  const updatedAt = store.now();
  const row = await store.db
    .insertInto('kubun_connector_entity_trim')
    .values({
      document_id: input.documentID,
      owner_did: input.ownerDID,
      connector_name: input.connectorName,
      trimmed_fields: trimmedFields,
      updated_at: updatedAt,
    })
    .onConflict((oc) => {
      const update = oc.column('document_id').doUpdateSet({ trimmed_fields: trimmedFields, updated_at: updatedAt });
      return options === undefined ? update : update.where('kubun_connector_entity_trim.owner_did', '=', options.ifOwnedBy);
    })
    .returningAll()
    .executeTakeFirst();
  if (row === undefined) {
    if (options === undefined) throw new Error('entity trim upsert returned no row');
    return null;
  }
  return rowToEntityTrim(row);
}

/**
 * Removes a document's trim record (a write that trimmed nothing); says
 * whether there was one. With `ownerDID`, only a record of that owner is
 * removed (another owner's answers false, like none).
 */
export async function clearEntityTrim(store: StoreContext, documentID: string, options: { ownerDID?: string } = {}): Promise<boolean> {
  let query = store.db.deleteFrom('kubun_connector_entity_trim').where('document_id', '=', documentID);
  if (options.ownerDID !== undefined) query = query.where('owner_did', '=', options.ownerDID);
  return changedAny(await query.executeTakeFirst());
}
