/** Domain types of observation records and repair obligations (SPEC §3.6). */
import type { CursorOfKeyset, REPAIR_WRITTEN_ORDER } from '../page.js';

/** The only record type this store keeps. */
export const OBSERVATION_RECORD_TYPE = 'connector.observation';

/** A signed observation op of a document. */
export interface ObservationRecord {
  /** Always {@link OBSERVATION_RECORD_TYPE}. */
  type: string;
  /** The owner (signer) of the op. */
  owner: string;
  /** The document the op observes. */
  id: string;
  opHash: string;
  hlc: string;
  opJWT: string;
  /** Raw payload bytes, `null` when the op has none. */
  payload: Uint8Array | null;
}

/** What `putObservationRecord` takes; `payload` defaults to `null`. */
export interface ObservationRecordInput {
  type: string;
  owner: string;
  id: string;
  opHash: string;
  hlc: string;
  opJWT: string;
  payload?: Uint8Array | null;
}

/** A repair obligation for a document. */
export interface ObservationRepair {
  documentID: string;
  owner: string;
  fetchHLC: string;
  decisionHLC: string;
  /** Whether the document is present at the provider as of `fetchHLC`. */
  present: boolean;
  valueDigest: string | null;
  /** ms epoch of the last upsert. */
  writtenAt: number;
}

/** What `upsertObservationRepair` takes; `valueDigest` defaults to `null`. */
export interface ObservationRepairInput {
  documentID: string;
  owner: string;
  fetchHLC: string;
  decisionHLC: string;
  present: boolean;
  valueDigest?: string | null;
}

/** Keyset position in the "written since" order ({@link REPAIR_WRITTEN_ORDER}): the last repair a reader has seen. */
export type RepairCursor = CursorOfKeyset<typeof REPAIR_WRITTEN_ORDER>;
