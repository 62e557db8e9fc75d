/** Scheduling reads and writes that are not a holder's: due work and resuming deferrals (SPEC §3.3). */
import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import type { Database } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { LIVE_OPERATION_STATES, OPERATION_DEFER_REASONS, type ConnectorOperation } from './types.js';
import { OPERATION_TABLE, rowToOperation, SEND_WINDOW_MARGIN_MS, sendWindowClosedBy } from './row.js';
import { requireNonEmptyString, requireNonNegativeInteger, requireOneOf, requirePositiveInteger } from '../validate.js';

/** Which deferred operations to make due: every offline one, or one owner's connector's auth ones. */
export type ResumeDeferredInput =
  | { reason: 'offline'; ownerDID?: string }
  | { reason: 'auth'; ownerDID: string; connectorName: string };

/**
 * Makes matching deferred live operations due now (`next_attempt_at = now`,
 * `defer_reason` null); leases and versions are untouched. `offline`: every
 * owner's (the device reconnected), or one owner's when `ownerDID` is given. `auth`: one owner's connector (they just
 * authorized). Returns the node keys of the operations it resumed.
 */
export async function resumeDeferred(store: StoreContext, input: ResumeDeferredInput, options: { limit?: number } = {}): Promise<string[]> {
  const matching = deferredOperations(input);
  const now = store.now();
  const update = store.db.updateTable(OPERATION_TABLE).set({ next_attempt_at: now, defer_reason: null, updated_at: now });
  if (options.limit === undefined) return (await update.where(matching).returning('node_key').execute()).map((row) => row.node_key);
  requirePositiveInteger('limit', options.limit);
  // At most `limit` rows: what this call resumed no longer matches, so the next call moves on to the rest.
  const keys = store.db.selectFrom(OPERATION_TABLE).select(['caller_did', 'operation_id']).where(matching).limit(options.limit);
  const rows = await update
    .where(({ eb, refTuple }) => eb(refTuple('caller_did', 'operation_id'), 'in', keys.$asTuple('caller_did', 'operation_id')))
    .returning('node_key')
    .execute();
  return rows.map((row) => row.node_key);
}

/** Whether deferred work {@link resumeDeferred} would resume is left (one index probe). */
export async function hasDeferredOperations(store: StoreContext, input: ResumeDeferredInput): Promise<boolean> {
  const row = await store.db.selectFrom(OPERATION_TABLE).select('node_key').where(deferredOperations(input)).limit(1).executeTakeFirst();
  return row !== undefined;
}

/** The live operations deferred for `input.reason` (and, as given, its owner and connector), validated. */
function deferredOperations(input: ResumeDeferredInput) {
  requireOneOf('reason', input.reason, OPERATION_DEFER_REASONS);
  if (input.reason === 'offline' && input.ownerDID !== undefined) requireNonEmptyString('ownerDID', input.ownerDID);
  if (input.reason === 'auth') {
    requireNonEmptyString('ownerDID', input.ownerDID);
    requireNonEmptyString('connectorName', input.connectorName);
  }
  return (eb: OperationEB) => {
    const conditions = [eb('state', 'in', [...LIVE_OPERATION_STATES]), eb('defer_reason', '=', input.reason)];
    if (input.ownerDID !== undefined) conditions.push(eb('owner_did', '=', input.ownerDID));
    if (input.reason === 'auth') conditions.push(eb('connector_name', '=', input.connectorName));
    return eb.and(conditions);
  };
}

type OperationEB = ExpressionBuilder<Database, typeof OPERATION_TABLE>;

/** Whether a live operation's lease is absent or expired at `now` (a worker may take it). */
const leaseFreeAt = (eb: OperationEB, now: number, windowCutoff: number) =>
  eb.and([eb.or([eb('lease_token', 'is', null), eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<=', now)]), sendWindowClosedBy(eb, windowCutoff)]);

/**
 * The exact negation of "due at `now`" for a live operation, written out so
 * that a NULL column counts as not due rather than as unknown: no next
 * attempt, a next attempt after `now`, deferred, or a lease live past `now`.
 * Bulk requeue leaves the rest (already due: nothing to make due) alone, so
 * running it again with the same filter moves on (issue 19 item 6c).
 */
export function notDueAt(eb: OperationEB, now: number): Expression<SqlBool> {
  return eb.or([
    eb('next_attempt_at', 'is', null),
    eb('next_attempt_at', '>', now),
    eb('defer_reason', 'is not', null),
    eb.and([eb('lease_token', 'is not', null), eb('lease_expires_at', 'is not', null), eb('lease_expires_at', '>', now)]),
    eb('send_deadline_at', '>', now - SEND_WINDOW_MARGIN_MS),
  ]);
}

/**
 * The rows that are due at `now` (live, `next_attempt_at <= now`, not
 * deferred, lease absent or expired, no marked send inside its window), served by the due index; what
 * {@link listDueOperations} lists and the `/metrics` backlog counts.
 * {@link notDueAt} is its negation.
 */
export function dueOperationsQuery(store: Pick<StoreContext, 'db'>, now: number, windowCutoff = now - SEND_WINDOW_MARGIN_MS) {
  return store.db
    .selectFrom(OPERATION_TABLE)
    .where('state', 'in', [...LIVE_OPERATION_STATES])
    .where('next_attempt_at', '<=', now)
    .where('defer_reason', 'is', null)
    .where((eb) => leaseFreeAt(eb, now, windowCutoff));
}

/**
 * Live operations ready for a worker: `next_attempt_at <= now`, not
 * deferred, lease absent or expired; oldest first (`next_attempt_at`, then
 * `node_key`), at most `limit`. `now` defaults to the store clock;
 * `connectorName`, when given, keeps only that connector's operations
 * (default: every connector's).
 */
export async function listDueOperations(
  store: StoreContext,
  input: { limit: number; now?: number; connectorName?: string },
): Promise<ConnectorOperation[]> {
  requireNonNegativeInteger('limit', input.limit);
  if (input.connectorName !== undefined) requireNonEmptyString('connectorName', input.connectorName);
  if (input.limit === 0) return [];
  const now = input.now ?? store.now();
  let query = dueOperationsQuery(store, now);
  // Here, not in dueOperationsQuery: the /metrics backlog counts every connector's due work.
  if (input.connectorName !== undefined) query = query.where('connector_name', '=', input.connectorName);
  const rows = await query
    .selectAll()
    .orderBy('next_attempt_at', 'asc')
    .orderBy('node_key', 'asc')
    .limit(input.limit)
    .execute();
  return rows.map(rowToOperation);
}
