/** Retention of finished operations, expired authorizations and settled sweep candidates (SPEC §3.6). */
export { DEFAULT_DEAD_RETENTION_MS, DEFAULT_IDEMPOTENCY_WINDOW_MS, DEFAULT_RETENTION_BATCH_SIZE, runRetention } from './retention.js';
export type { RetentionOptions, RetentionResult } from './retention.js';
