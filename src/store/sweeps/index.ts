/** Deletion sweeps: receipts, candidates, checkpoints (SPEC §3.6). */
export type { SweepCandidate, SweepCandidateKey, SweepCandidateState, SweepCheckpoint, SweepKey, SweepOutcome, SweepReceipt, SweepReceiptKey } from './types.js';
export { SWEEP_CANDIDATE_STATES, SWEEP_OUTCOMES, TERMINAL_SWEEP_CANDIDATE_STATES } from './types.js';
export { rowToSweepCandidate, rowToSweepCheckpoint, rowToSweepReceipt } from './row.js';
export { getSweepReceipt, recordSweepReceipt } from './receipts.js';
export type { RecordSweepReceiptInput, RecordSweepReceiptResult, SweepCandidateInput } from './receipts.js';
export {
  getSweepCandidate,
  getSweepCandidatesByDocumentIDs,
  listDueSweepCandidates,
  listSweepCandidatesOfReceipt,
  MAX_SWEEP_APPLY_ATTEMPTS,
  recordSweepApplyFailure,
  recordSweepOutcome,
  SWEEP_APPLY_BACKOFF_BASE_MS,
  SWEEP_APPLY_BACKOFF_MAX_MS,
  SWEEP_LAST_ERROR_MAX_LENGTH,
  sweepApplyBackoffMs,
} from './candidates.js';
export type { ListDueSweepCandidatesOptions, SweepApplyFailureInput, SweepOutcomeInput } from './candidates.js';
export { getSweepCheckpoint } from './checkpoints.js';
export { commitSweepReceipt } from './commit.js';
export type { CommitSweepReceiptResult } from './commit.js';
export {
  countSweepCandidatesByReceiptKeys,
  getSweepCandidatePages,
  getSweepCheckpointsByKeys,
  getSweepReceiptsByKeys,
  getSweepReceiptsByNodeKeys,
  type SweepCandidateCounts,
  type SweepCandidatePage,
  type SweepCandidateCursor,
  type SweepCandidatePageRequest,
} from './read.js';
export {
  countSweepReceipts,
  listSweepReceipts,
  type SweepReceiptCursor,
  type SweepReceiptFilter,
  type SweepReceiptPage,
  type SweepReceiptScope,
} from './list.js';
