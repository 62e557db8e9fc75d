/** Signed observation records (SPEC §3.6). */
import type { Kysely } from 'kysely';
import { OBSERVATION_RECORD_COLUMNS, type Database } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { MAX_PREPARED_KEYS } from '../node-keys.js';
import { preparedForList } from '../prepared.js';
import { IdempotencyConflictError, ObservationRecordTypeError } from '../errors.js';
import { rowToObservationRecord, toDriverBytes } from './row.js';
import { OBSERVATION_RECORD_TYPE, type ObservationRecord, type ObservationRecordInput } from './types.js';

/**
 * Stores a signed observation op. Only type `connector.observation` is
 * accepted ({@link ObservationRecordTypeError} otherwise). Idempotent on
 * (type, owner, id, op hash): storing the same record again changes nothing;
 * the same key with another HLC, op JWT or payload is an
 * {@link IdempotencyConflictError} naming each, and the stored record stays.
 * Returns whether a new record was inserted.
 */
export async function putObservationRecord(store: StoreContext, input: ObservationRecordInput): Promise<boolean> {
  if (input.type !== OBSERVATION_RECORD_TYPE) throw new ObservationRecordTypeError(input.type);
  const inserted = await store.db
    .insertInto('kubun_connector_observation_records')
    .values({
      type: input.type,
      owner: input.owner,
      id: input.id,
      op_hash: input.opHash,
      hlc: input.hlc,
      op_jwt: input.opJWT,
      payload: toDriverBytes(input.payload),
    })
    .onConflict((oc) => oc.columns(['type', 'owner', 'id', 'op_hash']).doNothing())
    .returning('op_hash')
    .executeTakeFirst();
  if (inserted !== undefined) return true;
  const stored = await store.db
    .selectFrom('kubun_connector_observation_records')
    .select(['hlc', 'op_jwt', 'payload'])
    .where('type', '=', input.type)
    .where('owner', '=', input.owner)
    .where('id', '=', input.id)
    .where('op_hash', '=', input.opHash)
    .executeTakeFirst();
  if (stored === undefined) return false;
  const differing: string[] = [];
  if (stored.hlc !== input.hlc) differing.push('hlc');
  if (stored.op_jwt !== input.opJWT) differing.push('opJWT');
  if (!sameBytes(stored.payload, input.payload ?? null)) differing.push('payload');
  if (differing.length > 0) throw new IdempotencyConflictError(differing);
  return false;
}

function sameBytes(a: Uint8Array | null, b: Uint8Array | null): boolean {
  if (a === null || b === null) return a === b;
  return Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));
}

/** Options of {@link listObservationRecords}. */
export interface ListObservationRecordsOptions {
  documentID: string;
  /** Only this owner's records; every owner's when absent. */
  owner?: string;
}

/** Records of documents in the order {@link listObservationRecords} gives, each document's together. */
function recordsOf(db: Kysely<Database>, ids: readonly string[]) {
  return db
    .selectFrom('kubun_connector_observation_records')
    .select(OBSERVATION_RECORD_COLUMNS)
    .where('type', '=', OBSERVATION_RECORD_TYPE)
    .where('id', 'in', ids)
    .orderBy('id')
    .orderBy('hlc')
    .orderBy('owner')
    .orderBy('op_hash');
}

const RECORDS_BY_DOCUMENT_IDS = preparedForList(MAX_PREPARED_KEYS, recordsOf);

/**
 * The observation records of many documents in one statement, each list
 * ordered like {@link listObservationRecords}; every requested id is in the
 * map (an empty list when none). With `owner`, only that owner's records.
 */
export async function getObservationRecordsByDocumentIDs(
  store: StoreContext,
  documentIDs: readonly string[],
  options: { owner?: string } = {},
): Promise<Map<string, ObservationRecord[]>> {
  const result = new Map<string, ObservationRecord[]>();
  for (const id of documentIDs) result.set(id, []);
  if (result.size === 0) return result;
  const ids = [...result.keys()];
  // One owner's records (a device's own) are read unprepared: its own shape, for a rarer reader.
  const rows = options.owner === undefined ? (await RECORDS_BY_DOCUMENT_IDS(store, ids)).rows : await recordsOf(store.db, ids).where('owner', '=', options.owner).execute();
  for (const row of rows) result.get(row.id)?.push(rowToObservationRecord(row));
  return result;
}

/** Lists a document's observation records, ordered by HLC, then owner and op hash. */
export async function listObservationRecords(store: StoreContext, options: ListObservationRecordsOptions): Promise<ObservationRecord[]> {
  let query = store.db
    .selectFrom('kubun_connector_observation_records')
    .selectAll()
    .where('type', '=', OBSERVATION_RECORD_TYPE)
    .where('id', '=', options.documentID);
  if (options.owner !== undefined) query = query.where('owner', '=', options.owner);
  const rows = await query.orderBy('hlc').orderBy('owner').orderBy('op_hash').execute();
  return rows.map(rowToObservationRecord);
}
