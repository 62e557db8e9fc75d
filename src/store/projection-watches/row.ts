import type { ProjectionWatchRow } from '../../db/tables.js';
import type { ProjectionWatch, ProjectionWatchVerificationStatus, WatchDeferReason } from './types.js';

/** Maps a watch row to the domain shape. */
export function rowToProjectionWatch(row: ProjectionWatchRow): ProjectionWatch {
  return {
    ownerDID: row.owner_did,
    connectorName: row.connector_name,
    model: row.model,
    accountKey: row.account_key,
    sourceID: row.source_id,
    nodeKey: row.node_key,
    documentID: row.document_id,
    verifiedStateDigest: row.verified_state_digest,
    observedWinnerDigest: row.observed_winner_digest,
    verificationStatus: row.verification_status as ProjectionWatchVerificationStatus,
    verificationAttempts: Number(row.verification_attempts),
    repairGeneration: Number(row.repair_generation),
    nextAttemptAt: row.next_attempt_at === null ? null : Number(row.next_attempt_at),
    claimedUntil: row.claimed_until === null ? null : Number(row.claimed_until),
    deferReason: row.defer_reason as WatchDeferReason | null,
    version: Number(row.version),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}
