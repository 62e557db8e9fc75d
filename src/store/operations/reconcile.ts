/** Recording what the provider said about a `reconcile_only` operation (SPEC §3.3). */
import type { StoreContext } from '../context.js';
import { requireBoolean } from '../validate.js';
import { resolveRetryPolicy, type OperationRetryPolicy } from './backoff.js';
import { fencedComputedUpdate, type FenceRule } from './fence.js';
import { rowToOperation } from './row.js';
import { rowHas } from '../row-checks.js';
import type { ConnectorOperation, OperationFence } from './types.js';
import { requireFence } from './validate.js';

const RECONCILE: FenceRule = { action: 'record a reconcile result', states: ['reconcile_only'], requireLiveLease: false };

/** What the holder of a `reconcile_only` operation found at the provider. */
export interface RecordReconcileResultInput extends OperationFence {
  /** Whether the write landed (found by source id or deterministic event id). */
  landed: boolean;
  /** The provider's etag of what it found. Omitted: the stored etag is kept. */
  providerEtag?: string | null;
}

/**
 * Landed: back to `attempted`, due now, send marker kept (so a holder that
 * crashes before finalizing is followed by another reconcile, not a resend);
 * the holder then finalizes. Not landed: back to `attempted`, send marker
 * cleared, due now: it may be sent again; but if its attempts already reached
 * `policy.maxAttempts` (default 8) it is `dead` instead, since it is now
 * known not to have landed and no attempt is left. Version unchanged.
 */
export async function recordReconcileResult(
  store: StoreContext,
  input: RecordReconcileResultInput,
  policy?: Partial<Pick<OperationRetryPolicy, 'maxAttempts'>>,
): Promise<ConnectorOperation> {
  requireFence(input);
  requireBoolean('landed', input.landed);
  const { maxAttempts } = resolveRetryPolicy(policy);
  const now = store.now();
  const etag = input.providerEtag !== undefined ? { provider_etag: input.providerEtag } : {};
  const row = await fencedComputedUpdate(store, input, RECONCILE, now, (current) => {
    const attempts = Number(current.attempts);
    // The look-up was made after the send window closed (a takeover waits for it): it is spent.
    const schedule = input.landed
      ? { state: 'attempted', next_attempt_at: now, defer_reason: null, send_deadline_at: null }
      : attempts >= maxAttempts
        ? { state: 'dead', send_marker: null, next_attempt_at: null, defer_reason: null, send_deadline_at: null }
        : { state: 'attempted', send_marker: null, next_attempt_at: now, defer_reason: null, send_deadline_at: null };
    return {
      set: () => ({ ...schedule, ...etag, updated_at: now }),
      guard: (eb) => rowHas(eb, 'attempts', attempts),
    };
  });
  return rowToOperation(row);
}
