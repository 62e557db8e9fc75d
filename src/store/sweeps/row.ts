/** Row → domain mapping for the sweep tables. */
import type { SweepCandidateRow, SweepCheckpointRow, SweepReceiptRow } from '../../db/tables.js';
import type { SweepCandidate, SweepCandidateState, SweepCheckpoint, SweepReceipt } from './types.js';

/** Maps a `kubun_connector_sweep_receipt` row. */
export function rowToSweepReceipt(row: SweepReceiptRow): SweepReceipt {
  return {
    ownerDID: row.owner_did,
    connectorName: row.connector_name,
    partition: row.partition,
    provenance: row.provenance,
    nodeKey: row.node_key,
    sequence: Number(row.sequence),
    modelID: row.model_id,
    scope: row.scope,
    keep: row.keep,
    sourceFetchHLC: row.source_fetch_hlc,
    predicate: row.predicate,
    kind: row.kind,
    complete: Number(row.complete) === 1,
    createdAt: Number(row.created_at),
    committedAt: row.committed_at === null ? null : Number(row.committed_at),
  };
}

/** Maps a `kubun_connector_sweep_candidate` row. */
export function rowToSweepCandidate(row: SweepCandidateRow): SweepCandidate {
  return {
    ownerDID: row.owner_did,
    connectorName: row.connector_name,
    partition: row.partition,
    provenance: row.provenance,
    documentID: row.document_id,
    sourceID: row.source_id,
    modelID: row.model_id,
    state: row.state as SweepCandidateState,
    attempts: row.attempts,
    applyFailures: row.apply_failures,
    lastError: row.last_error,
    nextAttemptAt: Number(row.next_attempt_at),
    updatedAt: Number(row.updated_at),
  };
}

/** Maps a `kubun_connector_sweep_checkpoint` row. */
export function rowToSweepCheckpoint(row: SweepCheckpointRow): SweepCheckpoint {
  return {
    ownerDID: row.owner_did,
    connectorName: row.connector_name,
    partition: row.partition,
    provenance: row.provenance,
    receiptSequence: Number(row.receipt_sequence),
    updatedAt: Number(row.updated_at),
  };
}
