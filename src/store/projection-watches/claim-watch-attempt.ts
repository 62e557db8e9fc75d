import type { StoreContext } from '../context.js';
import { InvalidStateError, NotFoundError, StaleVersionError } from '../errors.js';
import { rowToProjectionWatch } from './row.js';
import type { ProjectionWatch, WatchRef } from './types.js';
import { matchesRef } from './watch-predicates.js';
import { requireNonNegativeInteger, requirePositiveInteger } from '../validate.js';
import { rowHas } from '../row-checks.js';

/** Input of {@link claimWatchAttempt}: the watch, the version its caller read, and how long to hold it. */
export type ClaimWatchAttemptInput = WatchRef & {
  /** The version the verifier read (from `listDueWatches`, `getWatch`, …). */
  version: number;
  /** How long the claim lasts, in ms (positive). */
  claimMs: number;
};

/**
 * Claims the watch's current verification attempt: sets `claimed_until` to
 * now + `claimMs` and bumps the version, by one conditional UPDATE guarded on
 * the version read. Returns the claimed watch; its `version` is what the
 * verifier passes to `recordVerification`.
 *
 * Refusals, checked in this order when the UPDATE matched nothing:
 * - no such watch → {@link NotFoundError};
 * - the version moved on → {@link StaleVersionError};
 * - the watch is not `pending_verification` → {@link InvalidStateError};
 * - another verifier's claim is still live (`claimed_until > now`) →
 *   {@link InvalidStateError}. An expired claim is simply taken over.
 *
 * The watch need not be due yet: a verifier may check early.
 */
export async function claimWatchAttempt(store: StoreContext, input: ClaimWatchAttemptInput): Promise<ProjectionWatch> {
  requirePositiveInteger('claimMs', input.claimMs);
  requireNonNegativeInteger('version', input.version);
  const now = store.now();
  const claimed = await store.db
    .updateTable('kubun_connector_projection_watch')
    .set((eb) => ({ claimed_until: now + input.claimMs, version: eb('version', '+', 1), updated_at: now }))
    .where(matchesRef(input))
    // Checked on the row the key found, never a way to find it (row-checks.ts).
    .where((eb) => eb.and([rowHas(eb, 'version', input.version), rowHas(eb, 'verification_status', 'pending_verification')]))
    .where((eb) => eb.or([eb('claimed_until', 'is', null), eb('claimed_until', '<=', now)]))
    .returningAll()
    .executeTakeFirst();
  if (claimed !== undefined) return rowToProjectionWatch(claimed);

  // Only to name the refusal; the UPDATE above was the decision.
  const current = await store.db
    .selectFrom('kubun_connector_projection_watch')
    .selectAll()
    .where(matchesRef(input))
    .executeTakeFirst();
  if (current === undefined) throw new NotFoundError('projection watch');
  if (current.version !== input.version) throw new StaleVersionError('projection watch');
  if (current.verification_status !== 'pending_verification') {
    throw new InvalidStateError(`projection watch is ${current.verification_status}, not pending_verification`);
  }
  throw new InvalidStateError('projection watch attempt is already claimed by another verifier');
}
