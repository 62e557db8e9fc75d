/** A holder's attempts at the provider write: start, mark sent, record the outcome (SPEC §3.3). */
import type { OperationRow } from '../../db/tables.js';
import { inTransaction, type StoreContext } from '../context.js';
import { IdempotencyConflictError, InvalidInputError, InvalidStateError } from '../errors.js';
import { rowHas } from '../row-checks.js';
import { closeAttempt, markAttemptSent, openAttempt, redactAttemptMessage, STEP_HISTORY } from './history.js';
import { operationBackoffDelay, resolveRetryPolicy, type OperationRetryPolicy } from './backoff.js';
import { fencedComputedUpdate, preparedFencedUpdate, type FenceGuard, type FenceRule, type OperationEB, type OperationUpdate } from './fence.js';
import { runFencedStep, type FencedStepAnswer, type FencedStepCall, type FencedStepDefinition } from './fenced-step.js';
import { OPERATION_ANSWER } from './requests.js';
import { DEFAULT_SEND_TIMEOUT_MS, rowToOperation, SEND_WINDOW_MARGIN_MS } from './row.js';
import { LIVE_OPERATION_STATES, OPERATION_OUTCOME_KINDS, type ConnectorOperation, type ConnectorOperationState, type OperationFence, type OperationOutcomeKind } from './types.js';
import { requireNonEmptyString, requireNonNegativeInteger, requireOneOf, requirePositiveMs } from '../validate.js';
import { requireFence } from './validate.js';

const START: FenceRule = { action: 'start an attempt', states: ['attempted'], requireLiveLease: true };
const MARK_SENT: FenceRule = { action: 'mark a request sent', states: ['attempted'], requireLiveLease: true };
/**
 * `attempts + 1`; send marker, last kind and HTTP status cleared. Refused
 * while the current attempt was marked sent and has no recorded outcome:
 * clearing that marker would erase the only evidence that a request may have
 * reached the provider, and the next holder would send without reconciling.
 */
const START_SET = (eb: OperationEB, v: { now: number }): OperationUpdate => ({
  attempts: eb('attempts', '+', 1),
  send_marker: null,
  send_deadline_at: null,
  last_kind: null,
  last_http_status: null,
  updated_at: v.now,
});
const START_GUARD: FenceGuard<object> = {
  where: (eb) => eb.or([eb('send_marker', 'is', null), eb('last_kind', 'is not', null)]),
  onMiss: (row) => {
    if (row.send_marker !== null && row.last_kind === null) throw new InvalidStateError(MARKED_WITHOUT_OUTCOME);
    return undefined;
  },
};
const START_UPDATE = preparedFencedUpdate<object>(START, START_SET, START_GUARD);

/** Why a start is refused after a marked send with no outcome. */
export const MARKED_WITHOUT_OUTCOME =
  'cannot start an attempt: the current attempt was marked sent and no outcome is recorded (record the outcome, or reconcile)';

/**
 * Sets the marker of an attempt that has none. The same marker again is the
 * same request: answered with the row, nothing written. Another marker in
 * the same attempt is an {@link IdempotencyConflictError} naming `sendMarker`
 * (silently replacing it would lose the evidence of the first send).
 */
type MarkSentValues = { sendMarker: string; sendTimeoutMs: number | null; defaultTimeoutMs: number };
const MARK_SENT_SET = (eb: OperationEB, v: MarkSentValues & { now: number }): OperationUpdate => ({
  send_marker: v.sendMarker,
  // The window opens now: this mark's timeout, else the claim's, else the default.
  send_deadline_at: eb(eb.val(v.now), '+', eb.fn.coalesce(eb.val(v.sendTimeoutMs), eb.ref('send_timeout_ms'), eb.val(v.defaultTimeoutMs))),
  updated_at: v.now,
});
const MARK_SENT_GUARD: FenceGuard<MarkSentValues> = {
  where: (eb) => eb('send_marker', 'is', null),
  onMiss: (row, v) => {
    if (row.send_marker === null) return undefined;
    if (row.send_marker === v.sendMarker) return row;
    throw new IdempotencyConflictError(['sendMarker']);
  },
};
const MARK_SENT_UPDATE = preparedFencedUpdate<MarkSentValues>(MARK_SENT, MARK_SENT_SET, MARK_SENT_GUARD);

/** {@link startOperationAttempt} as the API's step: by node key, one statement on Postgres (src/store/operations/fenced-step.ts). */
export const START_STEP: FencedStepDefinition<object, ConnectorOperation> = {
  step: 'startOperationAttempt',
  rule: START,
  set: START_SET,
  valueTypes: {},
  guard: START_GUARD,
  history: STEP_HISTORY.openAttempt,
  grantsLease: false,
  codec: OPERATION_ANSWER,
  inTransaction: (tx, fence) => startOperationAttempt(tx, fence),
};

/** {@link markOperationSent} as the API's step (see {@link START_STEP}). */
export const MARK_SENT_STEP: FencedStepDefinition<MarkSentValues, ConnectorOperation> = {
  step: 'markOperationSent',
  rule: MARK_SENT,
  set: MARK_SENT_SET,
  valueTypes: { sendMarker: 'text', sendTimeoutMs: 'bigint', defaultTimeoutMs: 'bigint' },
  guard: MARK_SENT_GUARD,
  history: STEP_HISTORY.markAttemptSent,
  grantsLease: false,
  codec: OPERATION_ANSWER,
  inTransaction: (tx, fence, v) => markOperationSent(tx, { ...fence, sendMarker: v.sendMarker, ...(v.sendTimeoutMs !== null && { sendTimeoutMs: v.sendTimeoutMs }) }),
};

/** Starts the next attempt of the operation `call` names (the API's `startOperationAttempt`). */
export function startAttemptStep(store: StoreContext, call: FencedStepCall): Promise<FencedStepAnswer<ConnectorOperation>> {
  return runFencedStep(store, START_STEP, call, {});
}

/** Marks the request of the operation `call` names as sent (the API's `markOperationSent`; checks as {@link markOperationSent}). */
export function markSentStep(store: StoreContext, call: FencedStepCall, input: { sendMarker: string; sendTimeoutMs?: number | null }): Promise<FencedStepAnswer<ConnectorOperation>> {
  requireNonEmptyString('sendMarker', input.sendMarker);
  if (input.sendTimeoutMs != null) requirePositiveMs('sendTimeoutMs', input.sendTimeoutMs);
  return runFencedStep(store, MARK_SENT_STEP, call, { sendMarker: input.sendMarker, sendTimeoutMs: input.sendTimeoutMs ?? null, defaultTimeoutMs: DEFAULT_SEND_TIMEOUT_MS });
}

const RECORD: FenceRule = { action: 'record an attempt outcome', states: LIVE_OPERATION_STATES, requireLiveLease: false };

/**
 * Opens an attempt: `attempts + 1`, send marker cleared (this attempt has
 * sent nothing yet), last kind and HTTP status cleared (no outcome yet).
 * Needs a live lease on an `attempted` operation: a `reconcile_only` one
 * must be reconciled first ({@link InvalidStateError}).
 */
export async function startOperationAttempt(store: StoreContext, input: OperationFence): Promise<ConnectorOperation> {
  requireFence(input);
  const now = store.now();
  return inTransaction(store, async (tx) => {
    const { row } = await START_UPDATE(tx, input, now, {});
    await openAttempt(tx, input.key, Number(row.attempts), now);
    return rowToOperation(row);
  });
}

/**
 * Records, before the provider request goes out, that this run is sending
 * it: a holder that takes over later sees the marker and reconciles instead
 * of resending. Needs a live lease on an `attempted` operation. Opens the
 * send window: until `now + sendTimeoutMs` (this mark's, else the claim's,
 * else {@link DEFAULT_SEND_TIMEOUT_MS}) plus {@link SEND_WINDOW_MARGIN_MS}
 * nobody may take the operation over, and an UNKNOWN outcome is not due.
 */
export async function markOperationSent(store: StoreContext, input: OperationFence & { sendMarker: string; sendTimeoutMs?: number }): Promise<ConnectorOperation> {
  requireFence(input);
  requireNonEmptyString('sendMarker', input.sendMarker);
  if (input.sendTimeoutMs !== undefined) requirePositiveMs('sendTimeoutMs', input.sendTimeoutMs);
  const now = store.now();
  return inTransaction(store, async (tx) => {
    const { row, replayed } = await MARK_SENT_UPDATE(tx, input, now, {
      sendMarker: input.sendMarker,
      sendTimeoutMs: input.sendTimeoutMs ?? null,
      defaultTimeoutMs: DEFAULT_SEND_TIMEOUT_MS,
    });
    if (!replayed) await markAttemptSent(tx, input.key, now);
    return rowToOperation(row);
  });
}

/** How an attempt (or a reconcile query) ended short of success. */
export interface RecordOperationOutcomeInput extends OperationFence {
  kind: OperationOutcomeKind;
  /** The provider's HTTP status, if a response came back. Default `null` (stored as such). */
  lastHTTPStatus?: number | null;
  /** The provider's etag. Omitted: the stored etag is kept (an offline failure has none). */
  providerEtag?: string | null;
  /** The provider's retry-after, in ms; wins over a shorter backoff. */
  retryAfterMs?: number;
  /**
   * What went wrong, in the client's words (e.g. the provider's error). Kept
   * on the attempt and as the operation's `lastError`, at most 2 000
   * characters, with the lease token, the send marker and anything shaped like
   * a bearer token or JWT replaced by `[redacted]`. Omitted: none.
   */
  message?: string | null;
}

/**
 * Records an outcome and reschedules (version unchanged; the lease is left
 * to the holder to release or let expire). On a live operation:
 * - `retryable`: backoff with jitter (retry-after wins when longer); on an
 *   `attempted` operation whose attempts reached `maxAttempts`, `dead`.
 * - `unknown`: `reconcile_only`, due after the same backoff (never dead: the
 *   write may have landed).
 * - `fatal`: `dead`.
 * - `offline` / `auth`: `defer_reason` set, due after `deferralDelayMs`,
 *   and the attempt is not spent: the one opened by the last
 *   {@link startOperationAttempt} is given back if no outcome was recorded
 *   for it yet (so recording twice, or without starting, gives nothing back).
 * On a `reconcile_only` operation (its holder could not reconcile) the state
 * stays, except `fatal` → `dead`; no attempt is spent or given back there.
 */
export async function recordOperationOutcome(
  store: StoreContext,
  input: RecordOperationOutcomeInput,
  policy?: Partial<OperationRetryPolicy>,
): Promise<ConnectorOperation> {
  requireFence(input);
  requireOneOf('kind', input.kind, OPERATION_OUTCOME_KINDS);
  if (input.lastHTTPStatus !== undefined && input.lastHTTPStatus !== null) requireNonNegativeInteger('lastHTTPStatus', input.lastHTTPStatus);
  if (input.retryAfterMs !== undefined) requireNonNegativeInteger('retryAfterMs', input.retryAfterMs);
  const resolved = resolveRetryPolicy(policy);
  if (input.message != null && typeof input.message !== 'string') throw new InvalidInputError('message', 'must be a string');
  const now = store.now();
  return inTransaction(store, async (tx) => {
    let message: string | null = null;
    let attemptBefore = 0;
    const row = await fencedComputedUpdate(tx, input, RECORD, now, (current) => {
      const next = reschedule(current, input, resolved, now);
      message = redactAttemptMessage(input.message, [input.leaseToken, current.send_marker]);
      attemptBefore = Number(current.attempts);
      return {
        set: () => ({
          ...next,
          last_error: message,
          last_kind: input.kind,
          last_http_status: input.lastHTTPStatus ?? null,
          ...(input.providerEtag !== undefined ? { provider_etag: input.providerEtag } : {}),
          updated_at: now,
        }),
        // The values the schedule was computed from.
        guard: (eb) =>
          eb.and([rowHas(eb, 'state', current.state), rowHas(eb, 'attempts', Number(current.attempts)), rowHas(eb, 'last_kind', current.last_kind)]),
      };
    });
    await closeAttempt(
      tx,
      input.key,
      {
        outcome: input.kind,
        httpStatus: input.lastHTTPStatus ?? null,
        retryAfterMs: input.retryAfterMs ?? null,
        deferReason: input.kind === 'offline' || input.kind === 'auth' ? input.kind : null,
        message,
        attempt: attemptBefore,
      },
      now,
    );
    return rowToOperation(row);
  });
}

interface Schedule {
  state: ConnectorOperationState;
  attempts: number;
  next_attempt_at: number | null;
  defer_reason: string | null;
  /**
   * The send window: kept by UNKNOWN (the request may still be applied until
   * it closes), closed by every other outcome (the provider answered, or
   * nothing left the device).
   */
  send_deadline_at: number | null;
}

function reschedule(row: OperationRow, input: RecordOperationOutcomeInput, policy: OperationRetryPolicy, now: number): Schedule {
  const state = row.state as ConnectorOperationState;
  const attempts = Number(row.attempts);
  const dead: Schedule = { state: 'dead', attempts, next_attempt_at: null, defer_reason: null, send_deadline_at: null };
  switch (input.kind) {
    case 'fatal':
      return dead;
    case 'offline':
    case 'auth': {
      const attemptOpen = state === 'attempted' && row.last_kind === null;
      return {
        state,
        attempts: attemptOpen ? Math.max(attempts - 1, 0) : attempts,
        next_attempt_at: now + policy.deferralDelayMs,
        defer_reason: input.kind,
        send_deadline_at: null,
      };
    }
    case 'unknown': {
      const deadline = row.send_deadline_at === null ? null : Number(row.send_deadline_at);
      // Not due before the window closes: a reconcile then cannot miss what the provider is still applying.
      const due = Math.max(now + operationBackoffDelay(attempts, policy, input.retryAfterMs), deadline === null ? 0 : deadline + SEND_WINDOW_MARGIN_MS);
      return { state: 'reconcile_only', attempts, next_attempt_at: due, defer_reason: null, send_deadline_at: deadline };
    }
    case 'retryable':
      if (state === 'attempted' && attempts >= policy.maxAttempts) return dead;
      return { state, attempts, next_attempt_at: now + operationBackoffDelay(attempts, policy, input.retryAfterMs), defer_reason: null, send_deadline_at: null };
  }
}
