/**
 * Keyset pages in either direction, as the API's connections ask for them:
 * the direction and size of a request, and the page from the rows read.
 */
import { sql, type RawBuilder, type SqlBool } from 'kysely';
import { InvalidInputError } from './errors.js';
import { requireNonNegativeInteger } from './validate.js';

/**
 * Exactly one of `first` (forward: the rows after `after`) or `last`
 * (backward: the rows just before `before`, still returned in display
 * order). `after` and `before` may bound either direction, as in Relay.
 */
export interface KeysetPageRequest<C> {
  first?: number;
  after?: C | null;
  last?: number;
  before?: C | null;
}

/** Which way a page is read and how many rows it holds. */
export interface PageDirection {
  forward: boolean;
  size: number;
}

/** The direction and size of `request`; refuses neither or both of first/last, or a size that is not a non-negative integer. */
export function pageDirection(request: KeysetPageRequest<unknown>): PageDirection {
  const forward = request.first !== undefined;
  if (forward === (request.last !== undefined)) throw new InvalidInputError('first', 'exactly one of first and last is required');
  const size = forward ? request.first : request.last;
  requireNonNegativeInteger(forward ? 'first' : 'last', size);
  return { forward, size };
}

/**
 * The page from up to `size + 1` rows read in the direction's order (a
 * backward read runs the display order in reverse): the rows in display
 * order, and whether more lie beyond the page in the direction read.
 */
export function pageFromRows<R, T>(rows: readonly R[], { forward, size }: PageDirection, map: (row: R) => T): { items: T[]; hasMore: boolean } {
  const items = rows.slice(0, size).map(map);
  if (!forward) items.reverse();
  return { items, hasMore: rows.length > size };
}

/**
 * `node_key <> ''`: true of every row (a node key is never empty), and the predicate that makes
 * the newest-first index of every row of operations, watches and sweep
 * receipts partial (migration 0009). Postgres may use a partial index only
 * for a statement whose conditions imply its predicate, so a listing that
 * reads every tenant's rows adds this condition and may walk that index,
 * and a listing narrowed to an owner, a caller or a document leaves it out:
 * for it the index does not exist, and its own (owner | caller | document,
 * …) index stays the only ordered path however stale the statistics are.
 */
export const ACROSS_TENANTS: RawBuilder<SqlBool> = sql<SqlBool>`${sql.ref('node_key')} <> ''`;
