/** Operation activity per hour and the due backlog over time (migration 0011; the console's charts). */
export {
  ACTIVITY_OUTCOMES,
  ACTIVITY_RETENTION_MS,
  DEFAULT_BACKLOG_SAMPLE_INTERVAL_MS,
  HOUR_MS,
  MAX_ACTIVITY_HOURS,
  hourOf,
  pruneActivityBatch,
  readOperationActivity,
  sampleDueBacklog,
  type ActivityBucket,
  type ActivityOutcome,
  type BacklogSampleResult,
  type OperationActivity,
  type OperationActivityScope,
} from './activity.js';
