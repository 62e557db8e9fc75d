/** Retry scheduling of write-back attempts: backoff, attempt budget, deferral. */
import { InvalidInputError } from '../errors.js';
import { requireNonNegativeInteger, requirePositiveInteger } from '../validate.js';

/** How failed attempts are rescheduled. Every field has a default. */
export interface OperationRetryPolicy {
  /** Backoff after the first failed attempt, in ms. Default 1 000 (1 s). */
  baseDelayMs: number;
  /** Largest backoff in ms (a larger retry-after still wins). Default 300 000 (5 min). */
  maxDelayMs: number;
  /** Attempts allowed; a retryable failure of the last one makes the operation dead. Default 8. */
  maxAttempts: number;
  /** How far an offline or auth deferral pushes the operation out, in ms. Default 900 000 (15 min). */
  deferralDelayMs: number;
  /** Random source in [0, 1) for jitter. Default `Math.random`. */
  random: () => number;
}

/** The defaults of {@link OperationRetryPolicy}. */
export const DEFAULT_OPERATION_RETRY_POLICY: Readonly<OperationRetryPolicy> = Object.freeze({
  baseDelayMs: 1_000,
  maxDelayMs: 300_000,
  maxAttempts: 8,
  deferralDelayMs: 900_000,
  random: Math.random,
});

/** Fills in the defaults and checks the values. */
export function resolveRetryPolicy(policy: Partial<OperationRetryPolicy> = {}): OperationRetryPolicy {
  const resolved = { ...DEFAULT_OPERATION_RETRY_POLICY, ...policy };
  for (const field of ['baseDelayMs', 'maxDelayMs', 'maxAttempts', 'deferralDelayMs'] as const) {
    if (field === 'maxAttempts') requirePositiveInteger(field, resolved[field]);
    else requireNonNegativeInteger(field, resolved[field]);
  }
  if (resolved.maxDelayMs < resolved.baseDelayMs) throw new InvalidInputError('maxDelayMs', 'must not be less than baseDelayMs');
  return resolved;
}

/**
 * Backoff after `attempts` failed attempts ("equal jitter"): the exponential
 * step `min(maxDelayMs, baseDelayMs · 2^(attempts − 1))`, of which the upper
 * half is random, so the delay lies in [step / 2, step). A `retryAfterMs`
 * from the provider wins when it is longer.
 */
export function operationBackoffDelay(attempts: number, policy: OperationRetryPolicy, retryAfterMs?: number): number {
  const exponent = Math.max(attempts, 1) - 1;
  // 2^exponent overflows to Infinity long after it passed any sane cap; min() handles both.
  const step = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** exponent);
  const r = Math.min(Math.max(policy.random(), 0), 1);
  const jittered = Math.floor(step / 2 + (step / 2) * r);
  return Math.max(jittered, retryAfterMs ?? 0);
}
