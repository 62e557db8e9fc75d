/** Listing operations for the API: visibility, filters, keyset pages newest first. */
import { sql, type ExpressionBuilder, type Kysely, type SelectQueryBuilder } from 'kysely';
import type { Database, OperationRow } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { prepared, type PreparedStatement } from '../prepared.js';
import { ACROSS_TENANTS, NEWEST_FIRST, pageDirection, pageFromRows, type KeysetPageRequest, type NewestFirstCursor } from '../page.js';
import { finishOperation, OPERATION_TABLE, operationColumns, operationTableColumns, type OperationOfShape, type OperationShape } from './row.js';
import {
  LIVE_OPERATION_STATES,
  OPERATION_DEFER_REASONS,
  OPERATION_OUTCOME_KINDS,
  OPERATION_STATES,
  TERMINAL_OPERATION_STATES,
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
export interface OperationPage<O = ConnectorOperation> {
  operations: O[];
  hasMore: boolean;
}

type OperationQuery = SelectQueryBuilder<Database, typeof OPERATION_TABLE, OperationRow>;
type OperationEB = ExpressionBuilder<Database, typeof OPERATION_TABLE>;

/**
 * A keyset page of the visible operations, newest first by
 * (`created_at`, `node_key`) descending; never OFFSET. For a viewer the two
 * visibility paths (as caller, as owner but not caller) are read as two
 * index-ordered branches merged by the database, each from an index that
 * holds only its rows. Every page is a prepared statement of its shape
 * ({@link PageShape}), so on Postgres a page after a cursor or under a
 * filter runs named, parsed once per connection, as the first page does.
 * `columns` (default `full`): which of each operation's fields the page
 * reads ({@link OperationShape}).
 */
export async function listOperations<S extends OperationShape = 'full'>(
  store: StoreContext,
  input: ListOperationsInput,
  columns: S = 'full' as S,
): Promise<OperationPage<OperationOfShape<S>>> {
  const direction = pageDirection(input);
  checkScope(input);
  if (filterMatchesNothing(input.filter)) return { operations: [], hasMore: false };
  const after = input.after == null ? null : NEWEST_FIRST.require('after', input.after);
  const before = input.before == null ? null : NEWEST_FIRST.require('before', input.before);

  const filter = withoutRepeats(input.filter);
  const take = direction.size + 1;
  // The clock is only read by `stuck`.
  const clock = filter?.stuck === undefined ? NO_CLOCK : clockAt(store.now(), filter);
  const shape = pageShape(columns, input.visibleTo !== null, filter, after !== null, before !== null, direction.forward);
  const statement = pageStatement(shape);
  const { rows } = statement
    ? await statement(store, pageValues(input.visibleTo, filter, after, before, take, clock))
    : await store.db.executeQuery(pageQuery(store.db, columns, { visibleTo: input.visibleTo, filter }, after, before, direction.forward, take, clock, shape.hints));
  const page = pageFromRows(rows as Record<string, unknown>[], direction, finishOperation);
  return { operations: page.items as OperationOfShape<S>[], hasMore: page.hasMore };
}

/**
 * The statement of a page: `take` rows of `scope` between the cursors in
 * the newest-first order (read backward when not `forward`).
 */
function pageQuery(
  db: Kysely<Database>,
  columns: OperationShape,
  scope: OperationScope,
  after: OperationCursor | null,
  before: OperationCursor | null,
  forward: boolean,
  take: number,
  clock: FilterClock,
  hints: IndexHints,
) {
  const branch = (visibility: ((eb: OperationEB) => ReturnType<OperationEB['and']>) | null): OperationQuery => {
    // Columns by name, never `*`: a prepared page then runs as a named statement (src/db/named-statements.ts).
    let query = NEWEST_FIRST.between(filteredAt(db.selectFrom(OPERATION_TABLE).select(operationTableColumns(columns) as (keyof OperationRow)[]), scope.filter, clock, hints), after, before);
    if (visibility !== null) query = query.where(visibility);
    return NEWEST_FIRST.ordered(query, forward).limit(take);
  };
  const viewer = scope.visibleTo;
  if (viewer === null) {
    const query = branch(null).clearSelect().select(operationColumns(columns));
    return readsAcrossTenants(scope.filter) ? query.where(ACROSS_TENANTS) : query;
  }
  const asCaller = branch((eb) => eb.and([eb('caller_did', '=', viewer)]));
  // `caller_did <> owner_did` (the same rows, owner being the viewer): the predicate of the partial index
  // that holds only such rows (migration 0008), so the branch reads no row the viewer called.
  const asOwnerOnly = branch((eb) => eb.and([eb('owner_did', '=', viewer), eb('caller_did', '<>', eb.ref('owner_did'))]));
  // The union carries only the shape's columns through both branches.
  const carried = operationTableColumns(columns) as (keyof OperationRow)[];
  const visible = db
    .selectFrom(db.selectFrom(asCaller.as('as_caller')).select(carried).unionAll(db.selectFrom(asOwnerOnly.as('as_owner')).select(carried)).as('visible'))
    .select(operationColumns(columns));
  return NEWEST_FIRST.ordered(visible, forward).limit(take);
}

/** Filter fields whose value is a list (`in (…)`): a shape holds each one's length. */
const LIST_FIELDS = ['states', 'lastKinds', 'deferReasons'] as const;
/** Filter fields whose value is one value: a shape holds whether each is set. */
const VALUE_FIELDS = ['connectorName', 'ownerDID', 'documentID', 'operationID', 'model', 'minAttempts', 'dueBefore', 'createdAfter', 'createdBefore', 'updatedAfter', 'updatedBefore'] as const;
type ListField = (typeof LIST_FIELDS)[number];
type ValueField = (typeof VALUE_FIELDS)[number];
// Every filter field has its place in a shape (`stuck` by its value, `stuckAfterMs` through the clock): one left out would be dropped from a prepared page.
const EVERY_FILTER_FIELD_SHAPED: Exclude<keyof OperationFilter, ListField | ValueField | 'stuck' | 'stuckAfterMs'> extends never ? true : false = true;
void EVERY_FILTER_FIELD_SHAPED;

/**
 * What decides a page statement's text, never a value: which columns it
 * reads ({@link OperationShape}), whose page (a viewer's or a service's), which cursors bound it, its direction, which
 * filter fields are set, each list's length, `stuck` (true and false
 * are different conditions) and which conditions are said twice for an
 * index's sake ({@link indexHints}).
 */
interface PageShape {
  columns: OperationShape;
  viewer: boolean;
  after: boolean;
  before: boolean;
  forward: boolean;
  lists: [ListField, number][];
  values: ValueField[];
  stuck: boolean | undefined;
  hints: IndexHints;
}

function pageShape(columns: OperationShape, viewer: boolean, filter: OperationFilter | undefined, after: boolean, before: boolean, forward: boolean): PageShape {
  const lists: [ListField, number][] = [];
  const values: ValueField[] = [];
  for (const field of LIST_FIELDS) if (filter?.[field] !== undefined) lists.push([field, filter[field].length]);
  for (const field of VALUE_FIELDS) if (filter?.[field] !== undefined) values.push(field);
  return { columns, viewer, after, before, forward, lists, values, stuck: filter?.stuck, hints: indexHints(filter) };
}

/**
 * How many page shapes with a filter are prepared. Without a filter there
 * are 16 (viewer or service × cursors × direction), always prepared; with
 * one the count is bounded by the filter's fields but large, and on Postgres
 * each shape a connection has run holds a parsed statement (about 44 KiB,
 * src/store/prepared.ts). A filtered shape past this many is built for each
 * request and sent unnamed, Postgres parsing it on every run.
 */
const MAX_FILTERED_PAGE_SHAPES = 64;
const pageStatements = new Map<string, PreparedStatement<Record<string, unknown>, unknown>>();
let filteredPageShapes = 0;

/** The prepared statement of `shape`, prepared on first use; null when too many filtered shapes are. */
function pageStatement(shape: PageShape): PreparedStatement<Record<string, unknown>, unknown> | null {
  const key = JSON.stringify(shape);
  let statement = pageStatements.get(key);
  if (statement !== undefined) return statement;
  const hasFilter = shape.lists.length > 0 || shape.values.length > 0 || shape.stuck !== undefined;
  if (hasFilter) {
    if (filteredPageShapes >= MAX_FILTERED_PAGE_SHAPES) return null;
    filteredPageShapes++;
  }
  statement = prepared((db, v: Record<string, unknown>) => {
    // Stand-ins by the names pageValues gives the values; the shape alone decides what is read.
    const filter: Record<string, unknown> = {};
    for (const [field, length] of shape.lists) filter[field] = Array.from({ length }, (_, i) => v[`${field}.${i}`]);
    for (const field of shape.values) filter[field] = v[field];
    if (shape.stuck !== undefined) filter.stuck = shape.stuck;
    const clock = shape.stuck === undefined ? NO_CLOCK : { now: v.now as number, stuckBefore: v.stuckBefore as number };
    const cursor = (side: 'after' | 'before') => ({ createdAt: v[`${side}CreatedAt`], nodeKey: v[`${side}NodeKey`] }) as OperationCursor;
    const scope = { visibleTo: shape.viewer ? (v.viewer as string) : null, filter: filter as OperationFilter };
    return pageQuery(db, shape.columns, scope, shape.after ? cursor('after') : null, shape.before ? cursor('before') : null, shape.forward, v.take as number, clock, shape.hints);
  });
  pageStatements.set(key, statement);
  return statement;
}

/** A page's values by the names its prepared statement reads them (lists item by item: `states.0`, `states.1`, …). */
function pageValues(viewer: string | null, filter: OperationFilter | undefined, after: OperationCursor | null, before: OperationCursor | null, take: number, clock: FilterClock): Record<string, unknown> {
  const values: Record<string, unknown> = { viewer, take, now: clock.now, stuckBefore: clock.stuckBefore };
  if (after !== null) Object.assign(values, { afterCreatedAt: after.createdAt, afterNodeKey: after.nodeKey });
  if (before !== null) Object.assign(values, { beforeCreatedAt: before.createdAt, beforeNodeKey: before.nodeKey });
  for (const field of LIST_FIELDS) filter?.[field]?.forEach((item, i) => (values[`${field}.${i}`] = item));
  for (const field of VALUE_FIELDS) values[field] = filter?.[field];
  return values;
}

/** `filter` with each list's repeated values dropped (`in` reads a set): fewer list lengths, so fewer shapes. */
function withoutRepeats(filter: OperationFilter | undefined): OperationFilter | undefined {
  if (filter === undefined) return undefined;
  const unique: Record<string, unknown> = { ...filter };
  for (const field of LIST_FIELDS) if (filter[field] !== undefined) unique[field] = [...new Set<string>(filter[field])];
  return unique as OperationFilter;
}

/** The instants a filter compares with: now (lapsed leases), and the end of `stuck`'s overdue window. */
interface FilterClock {
  now: number;
  stuckBefore: number;
}

/** For a filter without `stuck`, which reads no clock. */
const NO_CLOCK: FilterClock = { now: 0, stuckBefore: 0 };

function clockAt(now: number, filter: OperationFilter | undefined): FilterClock {
  return { now, stuckBefore: now - (filter?.stuckAfterMs ?? DEFAULT_STUCK_AFTER_MS) };
}

/** Applies an operation filter's conditions to a query of the operations table. */
export function filtered<Q extends SelectQueryBuilder<Database, typeof OPERATION_TABLE, any>>(query: Q, filter: OperationFilter | undefined, now: number): Q {
  return filteredAt(query, filter, clockAt(now, filter), indexHints(filter));
}

/**
 * Conditions a filter's rows meet that are said a second time, on a column
 * an index of migration 0017 keys, so that index serves them (the columns a
 * live operation's steps write are in no index, so start and mark sent are
 * HOT; these generated columns are null while an operation is live):
 * - `retried`: `minAttempts` asks for operations past their first attempt (2
 *   or more): the rows of idx_connector_operation_retried_attempts, whose key,
 *   `retried_attempts`, is `attempts` from the second attempt on. One attempt
 *   or more is most started work, which no index picks out.
 * - `terminalUpdated`: `states` names only finished states (COMMITTED, DEAD)
 *   and `updatedAfter` or `updatedBefore` bounds `updated_at`: for those rows
 *   `terminal_updated_at` is `updated_at`, and idx_connector_operation_terminal_updated
 *   (state, terminal_updated_at) reads the range per state, as the
 *   (state, updated_at) index it replaced did. A live state's updates have no
 *   index: a window over live work reads the listing's own order.
 */
interface IndexHints {
  retried: boolean;
  terminalUpdated: boolean;
}

function indexHints(filter: OperationFilter | undefined): IndexHints {
  const states = filter?.states;
  return {
    retried: filter?.minAttempts !== undefined && filter.minAttempts > 1,
    terminalUpdated:
      states !== undefined &&
      states.length > 0 &&
      states.every((state) => (TERMINAL_OPERATION_STATES as readonly string[]).includes(state)) &&
      (filter?.updatedAfter !== undefined || filter?.updatedBefore !== undefined),
  };
}

/**
 * {@link filtered} with the clock's instants computed and its {@link indexHints}
 * decided (a prepared page passes stand-ins for the values, and both by its shape).
 */
function filteredAt<Q extends SelectQueryBuilder<Database, typeof OPERATION_TABLE, any>>(query: Q, filter: OperationFilter | undefined, clock: FilterClock, hints: IndexHints): Q {
  let q = query as SelectQueryBuilder<Database, typeof OPERATION_TABLE, any>;
  if (filter === undefined) return query;
  const { now, stuckBefore } = clock;
  if (filter.states !== undefined) q = q.where('state', 'in', [...filter.states]);
  if (filter.connectorName !== undefined) q = q.where('connector_name', '=', filter.connectorName);
  if (filter.ownerDID !== undefined) q = q.where('owner_did', '=', filter.ownerDID);
  if (filter.documentID !== undefined) q = q.where('document_id', '=', filter.documentID);
  if (filter.operationID !== undefined) q = q.where('operation_id', '=', filter.operationID);
  if (filter.model !== undefined) q = q.where('model', '=', filter.model);
  if (filter.lastKinds !== undefined) q = q.where('last_kind', 'in', [...filter.lastKinds]);
  if (filter.deferReasons !== undefined) q = q.where('defer_reason', 'in', [...filter.deferReasons]);
  if (filter.minAttempts !== undefined) q = q.where('attempts', '>=', filter.minAttempts);
  // The same rows, said so that the retried attempts' index serves them.
  if (hints.retried) q = q.where(sql.ref('retried_attempts'), '>=', filter.minAttempts!);
  // Only live work is due (a committed one keeps its last schedule): the due index (state, next_attempt_at) serves it.
  if (filter.dueBefore !== undefined) q = q.where('state', 'in', [...LIVE_OPERATION_STATES]).where('next_attempt_at', '<', filter.dueBefore);
  if (filter.createdAfter !== undefined) q = q.where('created_at', '>=', filter.createdAfter);
  if (filter.createdBefore !== undefined) q = q.where('created_at', '<', filter.createdBefore);
  if (filter.updatedAfter !== undefined) q = q.where('updated_at', '>=', filter.updatedAfter);
  if (filter.updatedBefore !== undefined) q = q.where('updated_at', '<', filter.updatedBefore);
  // The same rows, said so that the terminal index serves them.
  if (hints.terminalUpdated && filter.updatedAfter !== undefined) q = q.where(sql.ref('terminal_updated_at'), '>=', filter.updatedAfter);
  if (hints.terminalUpdated && filter.updatedBefore !== undefined) q = q.where(sql.ref('terminal_updated_at'), '<', filter.updatedBefore);
  if (filter.stuck !== undefined) {
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
