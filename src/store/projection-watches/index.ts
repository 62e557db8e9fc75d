/** Projection watches (SPEC §3.5): arm, repull, claim, verify and read verify/repair watches. */
export * from './types.js';
export { rowToProjectionWatch } from './row.js';
export {
  armWatch,
  requestRepull,
  requestRepullByNodeKey,
  resumeOfflineWatches,
  hasOfflineWatches,
  type ArmWatchInput,
  type ArmWatchResult,
  type RequestRepullOptions,
  type RequestRepullByNodeKeyOptions,
} from './arm-watch.js';
export { claimWatchAttempt, type ClaimWatchAttemptInput } from './claim-watch-attempt.js';
export {
  DEFAULT_VERIFICATION_POLICY,
  recordVerification,
  verificationRetryDelay,
  type RecordVerificationInput,
  type RecordVerificationResult,
  type VerificationPolicy,
} from './record-verification.js';
export {
  getWatch,
  getAllWatchesByDocumentIDs,
  getWatchByDocument,
  getWatchByNodeKey,
  getWatchesByDocumentIDs,
  getWatchesByNodeKeys,
} from './read.js';
export {
  countWatches,
  listDueWatches,
  listWatches,
  type ListDueWatchesOptions,
  type ListWatchesOptions,
  type WatchCursor,
  type WatchFilter,
  type WatchPage,
} from './list.js';
