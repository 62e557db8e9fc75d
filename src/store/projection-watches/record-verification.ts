import type { Updateable } from 'kysely';
import type { ProjectionWatchTable } from '../../db/tables.js';
import { forUpdate, inTransaction, type StoreContext } from '../context.js';
import { InvalidStateError } from '../errors.js';
import { rowToProjectionWatch } from './row.js';
import type { ProjectionWatch, VerificationOutcome, WatchRef } from './types.js';
import { matchesRef } from './watch-predicates.js';
import { requireNonNegativeInteger, requirePositiveInteger } from '../validate.js';
import { rowHas } from '../row-checks.js';

/** How verification results reschedule a watch. */
export interface VerificationPolicy {
  /** Mismatches in one generation after which the watch is `failed`. Default 5. */
  maxAttempts: number;
  /** Delay after the first mismatch, in ms; doubled after each further one. Default 30 000 (30 s). */
  baseRetryMs: number;
  /** Upper bound of the mismatch delay, in ms. Default 3 600 000 (1 h). */
  maxRetryMs: number;
  /**
   * How far an `offline` result pushes the attempt out, in ms, without
   * spending an attempt. `resumeOfflineWatches` brings it back sooner.
   * Default 300 000 (5 min).
   */
  offlineRetryMs: number;
}

/** The policy used for every field a caller leaves out. */
export const DEFAULT_VERIFICATION_POLICY: Readonly<VerificationPolicy> = Object.freeze({
  maxAttempts: 5,
  baseRetryMs: 30_000,
  maxRetryMs: 3_600_000,
  offlineRetryMs: 300_000,
});

/**
 * Delay before the next attempt after the `attempts`-th mismatch:
 * `baseRetryMs * 2^(attempts - 1)`, capped at `maxRetryMs`. No jitter:
 * verifiers take attempts by CAS, so simultaneous retries cannot double up.
 */
export function verificationRetryDelay(attempts: number, policy: Pick<VerificationPolicy, 'baseRetryMs' | 'maxRetryMs'>): number {
  const exponent = Math.max(0, attempts - 1);
  // 2^31 ms is ~25 days: past that only the cap matters.
  return Math.min(policy.maxRetryMs, policy.baseRetryMs * 2 ** Math.min(exponent, 31));
}

/** Input of {@link recordVerification}. */
export type RecordVerificationInput = WatchRef & {
  /** The version the verifier holds (the one `claimWatchAttempt` returned, or the one it read). */
  version: number;
  /** The generation the verifier checked. */
  repairGeneration: number;
  outcome: VerificationOutcome;
  /** Overrides of {@link DEFAULT_VERIFICATION_POLICY}. */
  policy?: Partial<VerificationPolicy>;
};

/** `applied`: the result was written. `stale`: the watch moved on (or is gone); nothing changed. */
export type RecordVerificationResult =
  | { status: 'applied'; watch: ProjectionWatch }
  | { status: 'stale'; watch: ProjectionWatch | null };

/**
 * Records one verification result, by CAS on the version the verifier holds
 * (version + 1 when applied):
 * - `match` → `verified` with the verified digest, nothing due;
 * - `mismatch` → attempts + 1 and due again after an exponential backoff, or
 *   `failed` once attempts reach `maxAttempts`; `observedDigest` (if given)
 *   replaces the observed winner digest;
 * - `offline` → pushed out by `offlineRetryMs` with defer reason `offline`,
 *   without spending an attempt.
 * Every result clears the claim. A result for another generation or version,
 * or for a watch that no longer exists, is `stale` and changes nothing. A
 * result at the current version of a watch that is not pending verification
 * is an {@link InvalidStateError} (no verifier can hold that version).
 */
export async function recordVerification(store: StoreContext, input: RecordVerificationInput): Promise<RecordVerificationResult> {
  const policy = resolvePolicy(input.policy);
  return inTransaction(store, async (tx) => {
    const now = tx.now();
    const row = await forUpdate(
      tx,
      tx.db.selectFrom('kubun_connector_projection_watch').selectAll().where(matchesRef(input)),
    ).executeTakeFirst();
    if (row === undefined) return { status: 'stale', watch: null };
    if (row.version !== input.version || row.repair_generation !== input.repairGeneration) {
      return { status: 'stale', watch: rowToProjectionWatch(row) };
    }
    if (row.verification_status !== 'pending_verification') {
      throw new InvalidStateError(`projection watch is ${row.verification_status}, not pending_verification`);
    }

    const changes = resultChanges(input.outcome, row.verification_attempts, policy, now);
    const updated = await tx.db
      .updateTable('kubun_connector_projection_watch')
      .set({ ...changes, claimed_until: null, version: row.version + 1, updated_at: now })
      .where(matchesRef(input))
      .where((eb) => eb.and([rowHas(eb, 'version', input.version), rowHas(eb, 'repair_generation', input.repairGeneration)]))
      .returningAll()
      .executeTakeFirst();
    if (updated === undefined) {
      const current = await tx.db
        .selectFrom('kubun_connector_projection_watch')
        .selectAll()
        .where(matchesRef(input))
        .executeTakeFirst();
      return { status: 'stale', watch: current === undefined ? null : rowToProjectionWatch(current) };
    }
    return { status: 'applied', watch: rowToProjectionWatch(updated) };
  });
}

function resultChanges(
  outcome: VerificationOutcome,
  attemptsSoFar: number,
  policy: VerificationPolicy,
  now: number,
): Updateable<ProjectionWatchTable> {
  switch (outcome.kind) {
    case 'match':
      return {
        verification_status: 'verified',
        verified_state_digest: outcome.digest,
        next_attempt_at: null,
        defer_reason: null,
      };
    case 'mismatch': {
      const attempts = attemptsSoFar + 1;
      const exhausted = attempts >= policy.maxAttempts;
      return {
        verification_attempts: attempts,
        verification_status: exhausted ? 'failed' : 'pending_verification',
        next_attempt_at: exhausted ? null : now + verificationRetryDelay(attempts, policy),
        defer_reason: null,
        ...(outcome.observedDigest !== undefined ? { observed_winner_digest: outcome.observedDigest } : {}),
      };
    }
    case 'offline':
      return { next_attempt_at: now + policy.offlineRetryMs, defer_reason: 'offline' };
  }
}

function resolvePolicy(overrides: Partial<VerificationPolicy> | undefined): VerificationPolicy {
  const policy = { ...DEFAULT_VERIFICATION_POLICY, ...overrides };
  requirePositiveInteger('policy.maxAttempts', policy.maxAttempts);
  for (const field of ['baseRetryMs', 'maxRetryMs', 'offlineRetryMs'] as const) requireNonNegativeInteger(`policy.${field}`, policy[field]);
  return policy;
}
