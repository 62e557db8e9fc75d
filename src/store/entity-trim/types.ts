/** Domain types of entity trim records (SPEC §3.6). */

/** The source values trimmed away to fit a model's caps, by field name (decoded JSON). */
export type TrimmedFields = Record<string, unknown>;

/** What was trimmed from a document at its last write. */
export interface EntityTrimRecord {
  documentID: string;
  ownerDID: string;
  connectorName: string;
  trimmedFields: TrimmedFields;
  /** ms epoch of the last `setEntityTrim`. */
  updatedAt: number;
}

/** What `setEntityTrim` takes. */
export interface EntityTrimInput {
  documentID: string;
  ownerDID: string;
  connectorName: string;
  trimmedFields: TrimmedFields;
}
