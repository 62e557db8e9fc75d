/**
 * Keyset paging, the one owner of it: each list's order (its keyset), the
 * shape of a cursor and which values are one, the condition that starts a
 * page after or before a cursor, the order a page is read in, and the
 * first/last rule. The API encodes cursors opaquely (resolvers/pagination.ts)
 * and parses them with the keyset here, so a cursor the API accepts is one the
 * store accepts, and the other way round.
 */
import { sql, type Expression, type RawBuilder, type SelectQueryBuilder, type SqlBool } from 'kysely';
import { InvalidInputError } from './errors.js';
import { requireNonNegativeInteger } from './validate.js';

/** Page size when a client sends neither `first` nor `last`. */
export const DEFAULT_PAGE_SIZE = 20;
/** Largest page a client of the API may ask for. */
export const MAX_PAGE_SIZE = 100;

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

/** The size arguments of a connection as a client sends them (null and absent alike), and whether it sent `before`. */
export interface ConnectionSize {
  first?: number | null;
  last?: number | null;
  before?: unknown;
}

/**
 * The API's rule for a connection's size: `first` or `last`, not both;
 * neither is the first {@link DEFAULT_PAGE_SIZE}; each from 0 to
 * {@link MAX_PAGE_SIZE}. A forward-only connection refuses `last` and `before`.
 */
export function connectionSize({ first, last, before }: ConnectionSize, forwardOnly = false): { first: number } | { last: number } {
  if (forwardOnly && (last != null || before != null)) {
    throw new InvalidInputError(last != null ? 'last' : 'before', 'this connection pages forward only: use first and after');
  }
  if (first != null && last != null) throw new InvalidInputError('first', 'pass either first or last, not both');
  for (const [name, value] of [['first', first], ['last', last]] as const) {
    if (value != null && !(Number.isInteger(value) && value >= 0 && value <= MAX_PAGE_SIZE)) throw new InvalidInputError(name, `must be between 0 and ${MAX_PAGE_SIZE}`);
  }
  return last != null ? { last } : { first: first ?? DEFAULT_PAGE_SIZE };
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

/** One column of a keyset: the cursor field holding its value, the column, and what a value is. */
interface KeyPart {
  field: string;
  column: string;
  /** `integer`: a non-negative safe integer (ms instants, sequence numbers); `text`: a non-empty string without NUL. */
  kind: 'integer' | 'text';
}

type CursorValue<K extends KeyPart['kind']> = K extends 'integer' ? number : string;
type CursorOf<P extends readonly KeyPart[]> = { [Part in P[number] as Part['field']]: CursorValue<Part['kind']> };

/**
 * A list's order, unique over its rows: the columns in display order, all
 * ascending or all descending (so one row-value comparison is the range of
 * an index on them, read forward or backward), and the cursor that names a
 * position in it: the values of those columns as the store's items name
 * them (`{ createdAt, nodeKey }` for `created_at, node_key`).
 */
export class Keyset<C extends Record<string, number | string>> {
  constructor(
    /** For messages: "is not a cursor of <name>". */
    readonly name: string,
    readonly order: 'asc' | 'desc',
    private readonly parts: readonly KeyPart[],
  ) {}

  /** The cursor of an item (a row as the store returns it). */
  cursorOf(item: C): C {
    const cursor: Record<string, number | string> = {};
    for (const { field } of this.parts) cursor[field] = item[field]!;
    return cursor as C;
  }

  /**
   * `value` as a cursor of this keyset, or null when it is not one: an object
   * with exactly the keyset's fields, each a value a row could hold.
   */
  parse(value: unknown): C | null {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return null;
    const record = value as Record<string, unknown>;
    if (Object.keys(record).length !== this.parts.length) return null;
    for (const { field, kind } of this.parts) {
      const part = record[field];
      const valid =
        kind === 'integer'
          ? typeof part === 'number' && Number.isSafeInteger(part) && part >= 0
          : typeof part === 'string' && part !== '' && !part.includes('\0');
      if (!valid) return null;
    }
    return this.cursorOf(record as C);
  }

  /** {@link parse} for a store caller's argument: the cursor, or an {@link InvalidInputError} naming `field`. */
  require(field: string, value: unknown): C {
    const cursor = this.parse(value);
    if (cursor === null) throw new InvalidInputError(field, `is not a cursor of ${this.name}`);
    return cursor;
  }

  /**
   * Rows strictly after `cursor` in display order (`after`), or strictly
   * before it (`before`): one row-value comparison, which an index on the
   * keyset's columns serves as a range (an OR of comparisons would be a
   * filter applied row by row).
   */
  beyond(cursor: C, side: 'after' | 'before'): RawBuilder<SqlBool> {
    const greater = (side === 'after') === (this.order === 'asc');
    const columns = sql.join(this.parts.map(({ column }) => sql.ref(column)));
    const values = sql.join(this.parts.map(({ field }) => cursor[field]));
    return sql<SqlBool>`(${columns}) ${sql.raw(greater ? '>' : '<')} (${values})`;
  }

  /** `query` narrowed to the rows between the request's `after` and `before`. */
  bounded<Q extends SelectQueryBuilder<any, any, any>>(query: Q, request: KeysetPageRequest<C>): Q {
    const after = request.after == null ? null : this.require('after', request.after);
    const before = request.before == null ? null : this.require('before', request.before);
    return this.between(query, after, before);
  }

  /**
   * `query` narrowed to the rows strictly after `after` and before `before`
   * (null: unbounded on that side). The cursors are taken as they are,
   * already parsed (a prepared statement passes stand-ins for their values).
   */
  between<Q extends SelectQueryBuilder<any, any, any>>(query: Q, after: C | null, before: C | null): Q {
    let bounded = query;
    if (after !== null) bounded = bounded.where(this.beyond(after, 'after')) as Q;
    if (before !== null) bounded = bounded.where(this.beyond(before, 'before')) as Q;
    return bounded;
  }

  /** `query` in display order (`forward`) or its reverse, by the keyset's columns. */
  ordered<Q extends SelectQueryBuilder<any, any, any>>(query: Q, forward: boolean): Q {
    const direction = forward === (this.order === 'asc') ? 'asc' : 'desc';
    let ordered = query;
    for (const { column } of this.parts) ordered = ordered.orderBy(sql.ref(column) as Expression<unknown>, direction) as Q;
    return ordered;
  }

  /**
   * A page of `query`'s rows: bounded by the request's cursors, read in the
   * direction's order, at most `size + 1` rows (one more tells whether more
   * lie beyond), returned in display order. Never OFFSET.
   */
  async page<R, T>(query: SelectQueryBuilder<any, any, R>, request: KeysetPageRequest<C>, map: (row: R) => T): Promise<{ items: T[]; hasMore: boolean }> {
    const direction = pageDirection(request);
    const rows = await this.ordered(this.bounded(query, request), direction.forward).limit(direction.size + 1).execute();
    return pageFromRows(rows, direction, map);
  }
}

function keyset<const P extends readonly KeyPart[]>(name: string, order: 'asc' | 'desc', parts: P): Keyset<CursorOf<P>> {
  return new Keyset<CursorOf<P>>(name, order, parts);
}

/** Operations, watches and sweep receipts: newest first, ties broken by node key. */
export const NEWEST_FIRST = keyset('a newest-first list', 'desc', [
  { field: 'createdAt', column: 'created_at', kind: 'integer' },
  { field: 'nodeKey', column: 'node_key', kind: 'text' },
] as const);
/** Sync states: by connector, then owner (the primary key's order). */
export const SYNC_STATE_ORDER = keyset('the sync states', 'asc', [
  { field: 'connectorName', column: 'connector_name', kind: 'text' },
  { field: 'ownerDID', column: 'owner_did', kind: 'text' },
] as const);
/** One operation's attempt history: newest attempt first. */
export const ATTEMPT_HISTORY_ORDER = keyset('an attempt history', 'desc', [{ field: 'seq', column: 'seq', kind: 'integer' }] as const);
/** One sweep receipt's candidates: by document id. */
export const SWEEP_CANDIDATE_ORDER = keyset('the sweep candidates', 'asc', [{ field: 'documentID', column: 'document_id', kind: 'text' }] as const);
/** Observation repairs in the order they were written (the "written since" feed). */
export const REPAIR_WRITTEN_ORDER = keyset('the repairs written since', 'asc', [
  { field: 'writtenAt', column: 'written_at', kind: 'integer' },
  { field: 'documentID', column: 'document_id', kind: 'text' },
] as const);

/** The cursor type of a keyset. */
export type CursorOfKeyset<K> = K extends Keyset<infer C> ? C : never;
/** A position in {@link NEWEST_FIRST}: the created instant and node key of the row at the page's edge. */
export type NewestFirstCursor = CursorOfKeyset<typeof NEWEST_FIRST>;

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
