/** Write-back operations (SPEC §3.3): claim, fenced leases, attempts, reconcile, due work, reads and listings. */
export * from './types.js';
export {
  DEFAULT_SEND_TIMEOUT_MS,
  OPERATION_BRIEF_FIELDS,
  OPERATION_SUMMARY_FIELDS,
  operationShapeFor,
  rowToOperation,
  SEND_WINDOW_MARGIN_MS,
  type OperationBrief,
  type OperationOfShape,
  type OperationShape,
  type OperationSummary,
} from './row.js';
export { CLAIM_ANSWER, claimOperation, claimOperationStep, type ClaimOperationInput, type ClaimOperationResult, type ClaimOutcome } from './claim.js';
export { ACQUIRE_ANSWER, RENEW_ANSWER, acquireOperationLease, renewOperationLease, releaseOperationLease, renewLeaseStep, releaseLeaseStep, type AcquireOperationLeaseResult } from './leases.js';
export { startOperationAttempt, markOperationSent, recordOperationOutcome, startAttemptStep, markSentStep, type RecordOperationOutcomeInput } from './attempts.js';
export { runFencedStep, type FencedStepAnswer, type FencedStepCall, type FencedStepTarget } from './fenced-step.js';
export { leaseDueOperations, leaseDueOperationsStep, MAX_LEASE_DUE_BATCH, type LeaseDueOperationsInput, type LeasedOperation } from './lease-due.js';
export { DEFAULT_OPERATION_RETRY_POLICY, operationBackoffDelay, resolveRetryPolicy, type OperationRetryPolicy } from './backoff.js';
export {
  applyOperationAction,
  applyOperationActionToMany,
  MAX_BULK_ACTION,
  type BulkOperationActionInput,
  type BulkOperationActionResult,
  type OperationAction,
  type OperationActionInput,
} from './actions.js';
export { countAttemptHistory, getAttemptHistories, MAX_ATTEMPT_MESSAGE, redactAttemptMessage, type AttemptCursor, type AttemptHistoryRequest, type OperationAttempt } from './history.js';
export { recordReconcileResult, type RecordReconcileResultInput } from './reconcile.js';
export { hasDeferredOperations, listDueOperations, resumeDeferred, type ResumeDeferredInput } from './due.js';
export { listOperationsByIDPrefix, MAX_OPERATION_ID_PREFIX, prefixUpperBound, type OperationIDPrefixInput } from './search.js';
export { getOperationByKey, getOperationByNodeKey, getOperationsByDocumentIDs, getOperationsByNodeKeys } from './read.js';
export {
  countOperationGroups,
  countOperations,
  countOperationsByState,
  type OperationCountDimension,
  type OperationCountGroup,
  type OperationCountGroups,
} from './count.js';
export {
  DEFAULT_STUCK_AFTER_MS,
  matchesOperationFilter,
  listOperations,
  type ListOperationsInput,
  type OperationCursor,
  type OperationFilter,
  type OperationPage,
  type OperationScope,
} from './list.js';
export {
  MAX_REQUEST_KEY_LENGTH,
  OPERATION_ANSWER,
  runKeyedRequest,
  type AnswerCodec,
  type KeyedAnswer,
  type KeyedRequest,
  type OperationRequestStep,
} from './requests.js';
export {
  enqueueOperation,
  enqueueOperations,
  enqueueOperationsStep,
  enqueueOperationStep,
  ENQUEUE_REQUEST_KEY,
  MAX_ENQUEUE_BATCH,
  type EnqueueItemResult,
  type EnqueueOperationInput,
  type EnqueueOperationResult,
  type EnqueueOutcome,
} from './enqueue.js';
export { type OperationWriteInput } from './insert.js';
