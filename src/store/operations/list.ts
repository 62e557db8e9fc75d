/** Listing operations for the API: visibility, filters, keyset pages newest first. */
import type { ExpressionBuilder, SelectQueryBuilder } from 'kysely';
import type { Database, OperationRow } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { InvalidInputError } from '../errors.js';
import { OPERATION_TABLE, rowToOperation } from './row.js';
import { OPERATION_STATES, type ConnectorOperation, type ConnectorOperationState } from './types.js';
import { requireNonEmptyString, requireNonNegativeInteger, requireOneOf } from '../validate.js';

/**
 * A position in the newest-first order: the last operation of a page.
 * The API encodes it opaquely; callers never build one by hand.
 */
export interface OperationCursor {
  createdAt: number;
  nodeKey: string;
}

/** The cursor of an operation, for the edge that holds it. */
export function operationCursor(operation: Pick<ConnectorOperation, 'createdAt' | 'nodeKey'>): OperationCursor {
  return { createdAt: operation.createdAt, nodeKey: operation.nodeKey };
}

/** Narrows a listing or count; every field is optional and they combine with AND. */
export interface OperationFilter {
  /** Any of these states. An empty list matches nothing. */
  states?: readonly ConnectorOperationState[];
  connectorName?: string;
  ownerDID?: string;
  documentID?: string;
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
export interface ListOperationsInput extends OperationScope {
  first?: number;
  after?: OperationCursor;
  last?: number;
  before?: OperationCursor;
}

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
 * index-ordered branches merged by the database.
 */
export async function listOperations(store: StoreContext, input: ListOperationsInput): Promise<OperationPage> {
  const forward = input.first !== undefined;
  if (forward === (input.last !== undefined)) throw new InvalidInputError('first', 'exactly one of first and last is required');
  const size = forward ? input.first : input.last;
  requireNonNegativeInteger(forward ? 'first' : 'last', size);
  checkScope(input);
  if (input.after !== undefined) checkCursor('after', input.after);
  if (input.before !== undefined) checkCursor('before', input.before);
  if (input.filter?.states?.length === 0) return { operations: [], hasMore: false };

  const direction = forward ? 'desc' : 'asc';
  const take = size + 1;
  const branch = (visibility: ((eb: OperationEB) => ReturnType<OperationEB['and']>) | null): OperationQuery => {
    let query = bounded(filtered(store.db.selectFrom(OPERATION_TABLE).selectAll(), input.filter), input);
    if (visibility !== null) query = query.where(visibility);
    return query.orderBy('created_at', direction).orderBy('node_key', direction).limit(take);
  };

  let rows: OperationRow[];
  const viewer = input.visibleTo;
  if (viewer === null) {
    rows = await branch(null).execute();
  } else {
    const asCaller = branch((eb) => eb.and([eb('caller_did', '=', viewer)]));
    const asOwnerOnly = branch((eb) => eb.and([eb('owner_did', '=', viewer), eb('caller_did', '!=', viewer)]));
    rows = await store.db
      .selectFrom(
        store.db
          .selectFrom(asCaller.as('as_caller'))
          .selectAll()
          .unionAll(store.db.selectFrom(asOwnerOnly.as('as_owner')).selectAll())
          .as('visible'),
      )
      .selectAll()
      .orderBy('created_at', direction)
      .orderBy('node_key', direction)
      .limit(take)
      .execute();
  }
  const hasMore = rows.length > size;
  const page = rows.slice(0, size).map(rowToOperation);
  if (!forward) page.reverse();
  return { operations: page, hasMore };
}

/** Applies an operation filter's conditions to a query of the operations table. */
export function filtered<Q extends SelectQueryBuilder<Database, typeof OPERATION_TABLE, any>>(query: Q, filter: OperationFilter | undefined): Q {
  let q = query as SelectQueryBuilder<Database, typeof OPERATION_TABLE, any>;
  if (filter?.states !== undefined) q = q.where('state', 'in', [...filter.states]);
  if (filter?.connectorName !== undefined) q = q.where('connector_name', '=', filter.connectorName);
  if (filter?.ownerDID !== undefined) q = q.where('owner_did', '=', filter.ownerDID);
  if (filter?.documentID !== undefined) q = q.where('document_id', '=', filter.documentID);
  return q as Q;
}

/** Rows strictly older than `after` and strictly newer than `before`. */
function bounded(query: OperationQuery, input: ListOperationsInput): OperationQuery {
  let q = query;
  const { after, before } = input;
  if (after !== undefined) {
    // A row-value comparison: the (…, created_at, node_key) indexes serve it as a range, where the
    // equivalent OR of two comparisons is applied as a filter row by row.
    q = q.where((eb) => eb(eb.refTuple('created_at', 'node_key'), '<', eb.tuple(after.createdAt, after.nodeKey)));
  }
  if (before !== undefined) {
    q = q.where((eb) => eb(eb.refTuple('created_at', 'node_key'), '>', eb.tuple(before.createdAt, before.nodeKey)));
  }
  return q;
}

/** Refuses a scope with an empty viewer or an unknown state. */
export function checkScope(scope: OperationScope): void {
  if (scope.visibleTo !== null) requireNonEmptyString('visibleTo', scope.visibleTo);
  const states = scope.filter?.states;
  if (states !== undefined) {
    for (const state of states) {
      requireOneOf('states', state, OPERATION_STATES);
    }
  }
}

function checkCursor(field: string, cursor: OperationCursor): void {
  if (typeof cursor?.createdAt !== 'number' || !Number.isSafeInteger(cursor.createdAt) || typeof cursor.nodeKey !== 'string') {
    throw new InvalidInputError(field, 'is not a valid operation cursor');
  }
}
