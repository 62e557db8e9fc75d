/**
 * Operator actions (issue 11 item 3): retry a dead operation, cancel a live
 * one, requeue a live one now. Each is one conditional UPDATE guarded by the
 * operation's `version` as the operator read it (a CAS: of concurrent
 * actions on one operation exactly one wins) that also advances the version
 * and clears the lease, so a worker holding a lease is fenced out: every
 * write it tries afterwards is a StaleLeaseError and changes nothing. The
 * action is recorded in the attempt history with who did it, in the same
 * transaction.
 */
import type { Expression, ExpressionBuilder, SqlBool } from 'kysely';
import type { Database, OperationRow } from '../../db/tables.js';
import { inTransaction, type StoreContext } from '../context.js';
import { InvalidInputError, InvalidStateError, NotFoundError, StaleVersionError } from '../errors.js';
import { rowHas } from '../row-checks.js';
import { notDueAt } from './due.js';
import { recordAction, recordActions, redactAttemptMessage } from './history.js';
import { ACROSS_TENANTS } from '../page.js';
import { checkScope, filtered, filterMatchesNothing, readsAcrossTenants, type OperationFilter } from './list.js';
import { OPERATION_TABLE, rowToOperation, selectOperationRow } from './row.js';
import { LIVE_OPERATION_STATES, type ConnectorOperation, type ConnectorOperationState, type OperationKey } from './types.js';
import { requireNonEmptyString, requireNonNegativeInteger, requirePositiveInteger } from '../validate.js';

/** What an operator may do to an operation. */
export type OperationAction = 'retry' | 'cancel' | 'requeue';

/** Input of {@link applyOperationAction}. */
export interface OperationActionInput {
  key: OperationKey;
  /** The version the operator saw; the action applies only if it is still current. */
  version: number;
  action: OperationAction;
  /** Who acts (recorded in the history). */
  actorDID: string;
  /** Why (required to cancel; recorded, bounded like attempt messages). */
  reason?: string | null;
}

/** States each action applies to. */
const FROM: Record<OperationAction, readonly ConnectorOperationState[]> = {
  retry: ['dead'],
  cancel: LIVE_OPERATION_STATES,
  requeue: LIVE_OPERATION_STATES,
};

type OperationEB = ExpressionBuilder<Database, typeof OPERATION_TABLE>;

/**
 * What a bulk action also requires of a row, beyond a state in {@link FROM}:
 * that the action is still to be done to it. Retry and cancel move a row out
 * of FROM, so a repeat with the same filter finds only the rest by itself;
 * a requeued row stays live, so requeue takes only rows not already due (a
 * requeued row is due now, with no lease). This is a condition on the row,
 * not on the caller, so it holds across calls, replicas and concurrent
 * operators alike: nothing is requeued twice while it waits to be claimed.
 */
const STILL_TO_DO: Record<OperationAction, ((eb: OperationEB, now: number) => Expression<SqlBool>) | null> = {
  retry: null,
  cancel: null,
  requeue: notDueAt,
};

/** A row in a state the action applies to and still to be done (bulk actions). */
function bulkApplies(eb: OperationEB, action: OperationAction, now: number): Expression<SqlBool> {
  const stillToDo = STILL_TO_DO[action];
  return stillToDo === null ? rowHas(eb, 'state', FROM[action]) : eb.and([rowHas(eb, 'state', FROM[action]), stillToDo(eb, now)]);
}

/**
 * Applies an operator action:
 * - `retry`: `dead` → `attempted`, or `reconcile_only` when a provider request
 *   may have been sent (a send marker is set, or the last outcome was
 *   `unknown`) — never a blind resend; attempts start a new budget (0), due
 *   now, deferral and last outcome cleared; the history is kept.
 * - `cancel`: live → `dead`, with the reason as `lastError` (`cancelled: …`).
 * - `requeue`: live → due now, deferral cleared.
 * All three advance the version and clear the lease. A version that moved is
 * {@link StaleVersionError}; a state the action does not apply to is
 * {@link InvalidStateError}; an unknown operation {@link NotFoundError}.
 */
export async function applyOperationAction(store: StoreContext, input: OperationActionInput): Promise<ConnectorOperation> {
  requireNonNegativeInteger('version', input.version);
  requireNonEmptyString('actorDID', input.actorDID);
  if (input.action === 'cancel') requireNonEmptyString('reason', input.reason);
  else if (input.reason != null && typeof input.reason !== 'string') throw new InvalidInputError('reason', 'must be a string');
  const now = store.now();
  return inTransaction(store, async (tx) => {
    const row = await tx.db
      .updateTable(OPERATION_TABLE)
      .set((eb) => ({ ...changes(eb, input, now), version: eb('version', '+', 1), lease_token: null, lease_expires_at: null, updated_at: now }))
      .where('caller_did', '=', input.key.callerDID)
      .where('operation_id', '=', input.key.operationID)
      .where((eb) => eb.and([rowHas(eb, 'version', input.version), rowHas(eb, 'state', FROM[input.action])]))
      .returningAll()
      .executeTakeFirst();
    if (row === undefined) throw await whyRefused(tx, input);
    await recordAction(tx, input.key, { action: input.action, actorDID: input.actorDID, reason: input.reason ?? null, attempt: Number(row.attempts) }, now);
    return rowToOperation(row);
  });
}

function changes(eb: OperationEB, input: Pick<OperationActionInput, 'action' | 'reason'>, now: number) {
  switch (input.action) {
    case 'retry':
      return {
        state: eb
          .case()
          .when(eb.or([eb('send_marker', 'is not', null), eb('last_kind', '=', 'unknown')]))
          .then('reconcile_only')
          .else('attempted')
          .end(),
        attempts: 0,
        next_attempt_at: now,
        defer_reason: null,
        last_kind: null,
        last_http_status: null,
        last_error: null,
      };
    case 'cancel':
      return { state: 'dead', next_attempt_at: null, defer_reason: null, last_error: redactAttemptMessage(`cancelled: ${input.reason}`, []) };
    case 'requeue':
      return { next_attempt_at: now, defer_reason: null };
  }
}

async function whyRefused(tx: StoreContext, input: OperationActionInput): Promise<Error> {
  const row: OperationRow | undefined = await selectOperationRow(tx, input.key);
  if (row === undefined) return new NotFoundError('operation');
  if (Number(row.version) !== input.version) return new StaleVersionError('operation');
  return new InvalidStateError(`cannot ${input.action} an operation that is ${row.state} (only ${FROM[input.action].join(' or ')})`);
}

/** The most operations one bulk action may change. */
export const MAX_BULK_ACTION = 1_000;

/** Input of {@link applyOperationActionToMany}. */
export interface BulkOperationActionInput {
  /** Which operations: at least one condition (an empty filter is refused, never "all"). */
  filter: OperationFilter;
  /** Only this owner's operations (a user acting on their own); null: a service, any owner. */
  ownerDID: string | null;
  action: OperationAction;
  actorDID: string;
  reason?: string | null;
  /** At most this many, newest first (1 to {@link MAX_BULK_ACTION}). */
  cap: number;
}

/** What a bulk action changed. */
export interface BulkOperationActionResult {
  /** The operations as changed, newest first. */
  operations: ConnectorOperation[];
  /** True when more operations matched than the cap: run it again for the rest. */
  more: boolean;
}

/**
 * An operator action on every operation the filter matches (and the action
 * applies to), up to `cap`, in one transaction: all of them change, each
 * with its history entry, or none (an error rolls the whole batch back).
 * Rows are locked as they are chosen (Postgres), so a concurrent action or
 * holder write waits and then finds the new version.
 */
export async function applyOperationActionToMany(store: StoreContext, input: BulkOperationActionInput): Promise<BulkOperationActionResult> {
  requirePositiveInteger('cap', input.cap);
  if (input.cap > MAX_BULK_ACTION) throw new InvalidInputError('cap', `must be at most ${MAX_BULK_ACTION}`);
  requireNonEmptyString('actorDID', input.actorDID);
  if (input.action === 'cancel') requireNonEmptyString('reason', input.reason);
  if (input.ownerDID !== null) requireNonEmptyString('ownerDID', input.ownerDID);
  const narrowing = Object.entries(input.filter).filter(([, value]) => value !== undefined);
  if (narrowing.length === 0) throw new InvalidInputError('filter', 'must name at least one condition: a bulk action never applies to everything');
  checkScope({ visibleTo: input.ownerDID, filter: input.filter });
  if (filterMatchesNothing(input.filter)) return { operations: [], more: false };
  const now = store.now();
  return inTransaction(store, async (tx) => {
    let chosen = filtered(tx.db.selectFrom(OPERATION_TABLE).select(['caller_did', 'operation_id']), input.filter, now)
      .where('state', 'in', [...FROM[input.action]])
      .orderBy('created_at', 'desc')
      .orderBy('node_key', 'desc')
      .limit(input.cap + 1);
    const stillToDo = STILL_TO_DO[input.action];
    if (stillToDo !== null) chosen = chosen.where((eb) => stillToDo(eb, now));
    if (input.ownerDID !== null) chosen = chosen.where('owner_did', '=', input.ownerDID);
    else if (readsAcrossTenants(input.filter)) chosen = chosen.where(ACROSS_TENANTS);
    if (tx.dialect === 'postgres') chosen = chosen.forUpdate();
    const keys = await chosen.execute();
    const more = keys.length > input.cap;
    const batch = keys.slice(0, input.cap);
    if (batch.length === 0) return { operations: [], more: false };
    const rows = await tx.db
      .updateTable(OPERATION_TABLE)
      .set((eb) => ({ ...changes(eb, input, now), version: eb('version', '+', 1), lease_token: null, lease_expires_at: null, updated_at: now }))
      .where((eb) => eb(eb.refTuple('caller_did', 'operation_id'), 'in', batch.map((k) => eb.tuple(k.caller_did, k.operation_id))))
      .where((eb) => bulkApplies(eb, input.action, now))
      .returningAll()
      .execute();
    await recordActions(
      tx,
      rows.map((row) => ({ key: { callerDID: row.caller_did, operationID: row.operation_id }, attempt: Number(row.attempts) })),
      { action: input.action, actorDID: input.actorDID, reason: input.reason ?? null },
      now,
    );
    const operations = rows.map(rowToOperation).sort((a, b) => b.createdAt - a.createdAt || (a.nodeKey < b.nodeKey ? 1 : -1));
    return { operations, more };
  });
}
