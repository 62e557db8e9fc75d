/** Row → domain mapping of the observation tables. */
import type { ObservationRecordRow, ObservationRepairRow } from '../../db/tables.js';
import type { ObservationRecord, ObservationRepair } from './types.js';

/** Maps a record row; the payload becomes a plain `Uint8Array`. */
export function rowToObservationRecord(row: ObservationRecordRow): ObservationRecord {
  return {
    type: row.type,
    owner: row.owner,
    id: row.id,
    opHash: row.op_hash,
    hlc: row.hlc,
    opJWT: row.op_jwt,
    payload: toBytes(row.payload),
  };
}

/** Maps a repair row; `present` 0/1 becomes a boolean. */
export function rowToObservationRepair(row: ObservationRepairRow): ObservationRepair {
  return {
    documentID: row.document_id,
    owner: row.owner,
    fetchHLC: row.fetch_hlc,
    decisionHLC: row.decision_hlc,
    present: Number(row.present) === 1,
    valueDigest: row.value_digest,
    writtenAt: Number(row.written_at),
  };
}

/**
 * Both drivers return a Node `Buffer`, which may be a view into a shared
 * pool; callers get a plain `Uint8Array` copy they own.
 */
function toBytes(value: Uint8Array | null): Uint8Array | null {
  return value === null ? null : new Uint8Array(value);
}

/** The driver-side form of bytes: both pg and better-sqlite3 bind a `Buffer` (not every `Uint8Array`). */
export function toDriverBytes(value: Uint8Array | null | undefined): Buffer | null {
  if (value === null || value === undefined) return null;
  return Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
}
