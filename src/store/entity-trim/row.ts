/** Row → domain mapping of `kubun_connector_entity_trim`. */
import type { EntityTrimRow } from '../../db/tables.js';
import { decodeJSONColumn } from '../json.js';
import type { EntityTrimRecord, TrimmedFields } from './types.js';

/** Maps a row to the domain shape, trimmed fields decoded. */
export function rowToEntityTrim(row: EntityTrimRow): EntityTrimRecord {
  return {
    documentID: row.document_id,
    ownerDID: row.owner_did,
    connectorName: row.connector_name,
    trimmedFields: decodeJSONColumn<TrimmedFields>(row.trimmed_fields) ?? {},
    updatedAt: Number(row.updated_at),
  };
}
