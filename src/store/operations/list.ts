/** Listing operations for the API: visibility, filters, keyset pages newest first. */
import type { ExpressionBuilder, Kysely, SelectQueryBuilder } from 'kysely';
import { OPERATION_COLUMNS, type Database, type OperationRow } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { prepared } from '../prepared.js';
import { ACROSS_TENANTS, NEWEST_FIRST, pageDirection, pageFromRows, type KeysetPageRequest, type NewestFirstCursor } from '../page.js';
import { finishOperation, OPERATION_TABLE, operationAsDomain } from './row.js';
import {
  LIVE_OPERATION_STATES,
  OPERATION_DEFER_REASONS,
  OPERATION_OUTCOME_KINDS,
  OPERATION_STATES,
  type ConnectorOperation,
  type ConnectorOperationState,
  type OperationDeferReason,
  type OperationOutcomeKind,
} from './types.js';
import { requireNonEmptyString, requireNonNegativeInteger, requireOneOf } from '../validate.js';

/** A position in the newest-first order ({@link NEWEST_FIRST}): the operation at a page's edge. */
export type OperationCursor = NewestFirstCursor;

/** How long a live operation may stay due, with no live lease, before it counts as stuck. */
export const DEFAULT_STUCK_AFTER_MS = 15 * 60 * 1000;

/** Narrows a listing or count; every field is optional and they combine with AND. */
export interface OperationFilter {
  /** Any of these states. An empty list matches nothing. */
  states?: readonly ConnectorOperationState[];
  connectorName?: string;
  ownerDID?: string;
  documentID?: string;
  /** This idempotency key, whoever the caller (keys are unique per caller, so this may match one row per caller). */
  operationID?: string;
  model?: string;
  /** Any of these last outcome kinds. An empty list matches nothing. */
  lastKinds?: readonly OperationOutcomeKind[];
  /** Any of these defer reasons. An empty list matches nothing. */
  deferReasons?: readonly OperationDeferReason[];
  /** At least this many attempts started. */
  minAttempts?: number;
  /**
   * True: live operations nobody is moving — a lease that expired, or due
   * for longer than `stuckAfterMs` (default 15 min) with no live lease.
   * False: every other operation.
   */
  stuck?: boolean;
  /** With `stuck`: the threshold in ms. */
  stuckAfterMs?: number;
  /** Live and due (next attempt) strictly before this instant (ms epoch). */
  dueBefore?: number;
  /** Created at or after / strictly before these instants (ms epoch). */
  createdAfter?: number;
  createdBefore?: number;
  /** Last updated at or after / strictly before these instants (ms epoch). */
  updatedAfter?: number;
  updatedBefore?: number;
}

/** Whether a filter matches nothing by construction (an empty list). */
export function filterMatchesNothing(filter: OperationFilter | undefined): boolean {
  return filter?.states?.length === 0 || filter?.lastKinds?.length === 0 || filter?.deferReasons?.length === 0;
}

/** Whose operations, and which of them. */
export interface OperationScope {
  /** `null`: a service principal, every row. A DID: rows where it is the caller or the owner. */
  visibleTo: string | null;
  filter?: OperationFilter;
}

/**
 * A page request: exactly one of `first` (forward, older rows after
 * `after`) or `last` (backward, the newest-first page that ends just
 * before `before`, read in reverse). `after` and `before` may both bound
 * either direction, as in Relay.
 */
export interface ListOperationsInput extends OperationScope, KeysetPageRequest<OperationCursor> {}

/**
 * Always newest first. `hasMore`: forward, whether rows follow the page
 * (older); backward, whether rows precede it (newer).
 */
export interface OperationPage {
  operations: ConnectorOperation[];
  hasMore: boolean;
}

type OperationQuery = SelectQueryBuilder<Database, typeof OPERATION_TABLE, OperationRow>;
type OperationEB = ExpressionBuilder<Database, typeof OPERATION_TABLE>;

/**
 * A keyset page of the visible operations, newest first by
 * (`created_at`, `node_key`) descending; never OFFSET. For a viewer the two
 * visibility paths (as caller, as owner but not caller) are read as two
 * index-ordered branches merged by the database, each from an index that
 * holds only its rows.
 */
export async function listOperations(store: StoreContext, input: ListOperationsInput): Promise<OperationPage> {
  const direction = pageDirection(input);
  checkScope(input);
  if (filterMatchesNothing(input.filter)) return { operations: [], hasMore: false };

  const take = direction.size + 1;
  // A first page without filter (the dashboard's, every view's first read): prepared per visibility.
  const firstPage = setsNoCondition(input.filter) && input.after == null && input.before == null && direction.forward;
  const { rows } = firstPage
    ? input.visibleTo === null
      ? await FIRST_PAGE_ACROSS_TENANTS(store, { take })
      : await FIRST_PAGE_OF_VIEWER(store, { viewer: input.visibleTo, take })
    : await store.db.executeQuery(pageQuery(store.db, input, direction.forward, take, store.now()));
  const page = pageFromRows(rows as Record<string, unknown>[], direction, finishOperation);
  return { operations: page.items, hasMore: page.hasMore };
}

/**
 * The statement of a page: `take` rows of `input`'s scope, filter and
 * cursors in the newest-first order (read backward when not `forward`).
 */
function pageQuery(db: Kysely<Database>, input: OperationScope & Pick<ListOperationsInput, 'after' | 'before'>, forward: boolean, take: number, now: number) {
  const branch = (visibility: ((eb: OperationEB) => ReturnType<OperationEB['and']>) | null): OperationQuery => {
    // Columns by name, never `*`: a prepared page then runs as a named statement (src/db/named-statements.ts).
    let query = NEWEST_FIRST.bounded(filtered(db.selectFrom(OPERATION_TABLE).select(OPERATION_COLUMNS), input.filter, now), input);
    if (visibility !== null) query = query.where(visibility);
    return NEWEST_FIRST.ordered(query, forward).limit(take);
  };
  const viewer = input.visibleTo;
  if (viewer === null) {
    const query = branch(null).clearSelect().select(operationAsDomain);
    return readsAcrossTenants(input.filter) ? query.where(ACROSS_TENANTS) : query;
  }
  const asCaller = branch((eb) => eb.and([eb('caller_did', '=', viewer)]));
  // `caller_did <> owner_did` (the same rows, owner being the viewer): the predicate of the partial index
  // that holds only such rows (migration 0008), so the branch reads no row the viewer called.
  const asOwnerOnly = branch((eb) => eb.and([eb('owner_did', '=', viewer), eb('caller_did', '<>', eb.ref('owner_did'))]));
  const visible = db
    .selectFrom(db.selectFrom(asCaller.as('as_caller')).select(OPERATION_COLUMNS).unionAll(db.selectFrom(asOwnerOnly.as('as_owner')).select(OPERATION_COLUMNS)).as('visible'))
    .select(operationAsDomain);
  return NEWEST_FIRST.ordered(visible, forward).limit(take);
}

// No filter, so no clock: `now` is only read by filters.
const FIRST_PAGE_ACROSS_TENANTS = prepared((db, v: { take: number }) => pageQuery(db, { visibleTo: null }, true, v.take, 0));
const FIRST_PAGE_OF_VIEWER = prepared((db, v: { viewer: string; take: number }) => pageQuery(db, { visibleTo: v.viewer }, true, v.take, 0));

/** Applies an operation filter's conditions to a query of the operations table. */
export function filtered<Q extends SelectQueryBuilder<Database, typeof OPERATION_TABLE, any>>(query: Q, filter: OperationFilter | undefined, now: number): Q {
  let q = query as SelectQueryBuilder<Database, typeof OPERATION_TABLE, any>;
  if (filter === undefined) return query;
  if (filter.states !== undefined) q = q.where('state', 'in', [...filter.states]);
  if (filter.connectorName !== undefined) q = q.where('connector_name', '=', filter.connectorName);
  if (filter.ownerDID !== undefined) q = q.where('owner_did', '=', filter.ownerDID);
  if (filter.documentID !== undefined) q = q.where('document_id', '=', filter.documentID);
  if (filter.operationID !== undefined) q = q.where('operation_id', '=', filter.operationID);
  if (filter.model !== undefined) q = q.where('model', '=', filter.model);
  if (filter.lastKinds !== undefined) q = q.where('last_kind', 'in', [...filter.lastKinds]);
  if (filter.deferReasons !== undefined) q = q.where('defer_reason', 'in', [...filter.deferReasons]);
  if (filter.minAttempts !== undefined) q = q.where('attempts', '>=', filter.minAttempts);
  // Only live work is due (a committed one keeps its last schedule): the due index (state, next_attempt_at) serves it.
  if (filter.dueBefore !== undefined) q = q.where('state', 'in', [...LIVE_OPERATION_STATES]).where('next_attempt_at', '<', filter.dueBefore);
  if (filter.createdAfter !== undefined) q = q.where('created_at', '>=', filter.createdAfter);
  if (filter.createdBefore !== undefined) q = q.where('created_at', '<', filter.createdBefore);
  if (filter.updatedAfter !== undefined) q = q.where('updated_at', '>=', filter.updatedAfter);
  if (filter.updatedBefore !== undefined) q = q.where('updated_at', '<', filter.updatedBefore);
  if (filter.stuck !== undefined) {
    const stuckBefore = now - (filter.stuckAfterMs ?? DEFAULT_STUCK_AFTER_MS);
    // Two branches each an index range: lapsed leases (by expiry), overdue work (the due index).
    const isStuck = (eb: OperationEB) =>
      eb.or([
        eb.and([eb('state', 'in', [...LIVE_OPERATION_STATES]), eb('lease_token', 'is not', null), eb('lease_expires_at', '<=', now)]),
        eb.and([
          eb('state', 'in', [...LIVE_OPERATION_STATES]),
          eb('next_attempt_at', '<', stuckBefore),
          eb.or([eb('lease_token', 'is', null), eb('lease_expires_at', '<=', now)]),
        ]),
      ]);
    q = q.where((eb) => (filter.stuck ? isStuck(eb) : eb.not(isStuck(eb))));
  }
  return q as Q;
}

/**
 * Whether a service's read under `filter` spans every tenant (no owner, no
 * document, no idempotency key): only such a read may walk the newest-first index of every row
 * ({@link ACROSS_TENANTS}).
 */
export function readsAcrossTenants(filter: OperationFilter | undefined): boolean {
  return filter?.ownerDID === undefined && filter?.documentID === undefined && filter?.operationID === undefined;
}

/**
 * {@link filtered} for one operation in memory (the change streams' filter):
 * the same conditions, so a subscription and a listing agree on what matches.
 */
export function matchesOperationFilter(op: ConnectorOperation, filter: OperationFilter | undefined, now: number): boolean {
  if (filter === undefined) return true;
  const leaseLive = op.leaseExpiresAt !== null && op.leaseExpiresAt > now;
  const stuck =
    (LIVE_OPERATION_STATES as readonly string[]).includes(op.state) &&
    ((op.leaseExpiresAt !== null && !leaseLive) || (op.nextAttemptAt !== null && op.nextAttemptAt < now - (filter.stuckAfterMs ?? DEFAULT_STUCK_AFTER_MS) && !leaseLive));
  return (
    (filter.states === undefined || filter.states.includes(op.state)) &&
    (filter.connectorName === undefined || filter.connectorName === op.connectorName) &&
    (filter.ownerDID === undefined || filter.ownerDID === op.ownerDID) &&
    (filter.documentID === undefined || filter.documentID === op.documentID) &&
    (filter.operationID === undefined || filter.operationID === op.operationID) &&
    (filter.model === undefined || filter.model === op.model) &&
    (filter.lastKinds === undefined || (op.lastKind !== null && filter.lastKinds.includes(op.lastKind))) &&
    (filter.deferReasons === undefined || (op.deferReason !== null && filter.deferReasons.includes(op.deferReason))) &&
    (filter.minAttempts === undefined || op.attempts >= filter.minAttempts) &&
    (filter.dueBefore === undefined || ((LIVE_OPERATION_STATES as readonly string[]).includes(op.state) && op.nextAttemptAt !== null && op.nextAttemptAt < filter.dueBefore)) &&
    (filter.createdAfter === undefined || op.createdAt >= filter.createdAfter) &&
    (filter.createdBefore === undefined || op.createdAt < filter.createdBefore) &&
    (filter.updatedAfter === undefined || op.updatedAt >= filter.updatedAfter) &&
    (filter.updatedBefore === undefined || op.updatedAt < filter.updatedBefore) &&
    (filter.stuck === undefined || filter.stuck === stuck)
  );
}

/**
 * Whether a filter sets no condition: absent, or every field undefined (the
 * API passes `{}` when a client sends no filter).
 */
export function setsNoCondition(filter: OperationFilter | undefined): boolean {
  if (filter === undefined) return true;
  for (const key in filter) if ((filter as Record<string, unknown>)[key] !== undefined) return false;
  return true;
}

/** Refuses a scope with an empty viewer or an unknown state. */
export function checkScope(scope: OperationScope): void {
  if (scope.visibleTo !== null) requireNonEmptyString('visibleTo', scope.visibleTo);
  const filter = scope.filter ?? {};
  for (const state of filter.states ?? []) requireOneOf('states', state, OPERATION_STATES);
  for (const kind of filter.lastKinds ?? []) requireOneOf('lastKinds', kind, OPERATION_OUTCOME_KINDS);
  for (const reason of filter.deferReasons ?? []) requireOneOf('deferReasons', reason, OPERATION_DEFER_REASONS);
  for (const field of ['minAttempts', 'stuckAfterMs', 'dueBefore', 'createdAfter', 'createdBefore', 'updatedAfter', 'updatedBefore'] as const) {
    if (filter[field] !== undefined) requireNonNegativeInteger(field, filter[field]);
  }
}
