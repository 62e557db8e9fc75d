/**
 * Keyset pages in either direction, as the API's connections ask for them:
 * the direction and size of a request, and the page from the rows read.
 */
import { sql, type Expression, type SqlBool } from 'kysely';
import type { DialectName } from '../db/connect.js';
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

/** A position in a newest-first list ordered by (`created_at`, `node_key`). */
export interface CreatedCursor {
  createdAt: number;
  nodeKey: string;
}

/**
 * One tenant's rows (`column` = `tenant`: a viewer's operations as caller or
 * owner, their watches, their receipts) strictly between the cursors, for a
 * read ordered by (`column`, `created_at`, `node_key`) from the index that
 * leads with `column`, whatever the statistics say (issue 21,
 * test/store/list-plans.test.ts). On Postgres the tenant is bounded as a
 * range on both sides, never `column = tenant`, and the cursors compare the
 * whole index key: Postgres treats an equality as making the column a
 * constant, drops it from the order, and may then walk the newest-first index
 * of every row instead, which statistics taken before another tenant's newest
 * rows existed make look cheap (60 000 rows skipped for a page of 20). With
 * the range only the tenant's index yields the order, and a deep page starts
 * at its cursor in that index. SQLite keeps the equality: given the range it
 * may read the primary key's range of the tenant and sort all of its rows.
 */
export function tenantKeysetRange(
  dialect: DialectName,
  column: string,
  tenant: string,
  bounds: { after?: CreatedCursor | null; before?: CreatedCursor | null },
): Expression<SqlBool> {
  const ref = sql.ref(column);
  if (dialect === 'sqlite') {
    const created = sql`(${sql.ref('created_at')}, ${sql.ref('node_key')})`;
    const after = bounds.after != null ? sql<SqlBool>` and ${created} < (${bounds.after.createdAt}, ${bounds.after.nodeKey})` : sql``;
    const before = bounds.before != null ? sql<SqlBool>` and ${created} > (${bounds.before.createdAt}, ${bounds.before.nodeKey})` : sql``;
    return sql<SqlBool>`(${ref} = ${tenant}${after}${before})`;
  }
  const key = sql`(${ref}, ${sql.ref('created_at')}, ${sql.ref('node_key')})`;
  const lower = bounds.before != null ? sql<SqlBool>`${key} > (${tenant}, ${bounds.before.createdAt}, ${bounds.before.nodeKey})` : sql<SqlBool>`${ref} >= ${tenant}`;
  const upper = bounds.after != null ? sql<SqlBool>`${key} < (${tenant}, ${bounds.after.createdAt}, ${bounds.after.nodeKey})` : sql<SqlBool>`${ref} <= ${tenant}`;
  return sql<SqlBool>`(${lower} and ${upper})`;
}
