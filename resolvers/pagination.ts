/**
 * Keyset connections: Relay arguments → a store page request, and a store
 * page → edges and page info. Cursors are opaque base64url JSON of the
 * store's keyset position; a cursor that does not decode is a validation
 * error, never a silent first page.
 */
import { GraphQLError } from 'graphql';

/** Page size when a client sends neither `first` nor `last`. */
export const DEFAULT_PAGE_SIZE = 20;
/** Largest page a client may ask for. */
export const MAX_PAGE_SIZE = 100;

/** Relay connection arguments as Pothos passes them. */
export interface ConnectionArgs {
  first?: number | null;
  last?: number | null;
  after?: string | null;
  before?: string | null;
}

/** A store page request in one direction. */
export interface PageRequest<C> {
  first?: number;
  last?: number;
  after?: C;
  before?: C;
}

/** Encodes a store cursor as an opaque string. */
export function encodeCursor(cursor: unknown): string {
  return Buffer.from(JSON.stringify(cursor), 'utf8').toString('base64url');
}

/**
 * Decodes a cursor with `check` (which narrows the parsed JSON to the store's
 * cursor type, or returns null when it is not one).
 */
export function decodeCursor<C>(value: string, argName: string, check: (parsed: unknown) => C | null): C {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  // A NUL cannot be in any key, and Postgres refuses it in text parameters (an error, not "no rows").
  const cursor = parsed === undefined || holdsNul(parsed) ? null : check(parsed);
  if (cursor === null) throw new GraphQLError(`${argName} is not a cursor of this connection`, { extensions: { code: 'BAD_USER_INPUT' } });
  return cursor;
}

function holdsNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\0');
  if (typeof value !== 'object' || value === null) return false;
  return Object.entries(value).some(([key, inner]) => key.includes('\0') || holdsNul(inner));
}

/** Narrows a parsed cursor to the `{ createdAt, nodeKey }` keyset position (operations, watches). */
export function createdAtCursor(parsed: unknown): { createdAt: number; nodeKey: string } | null {
  if (typeof parsed !== 'object' || parsed === null) return null;
  const { createdAt, nodeKey } = parsed as Record<string, unknown>;
  return typeof createdAt === 'number' && Number.isSafeInteger(createdAt) && typeof nodeKey === 'string' && nodeKey !== ''
    ? { createdAt, nodeKey }
    : null;
}

/** Turns Relay arguments into a store page request, enforcing the page-size limits. */
export function pageRequest<C>(args: ConnectionArgs, check: (parsed: unknown) => C | null): PageRequest<C> {
  const { first, last } = args;
  if (first != null && last != null) throw badInput('pass either first or last, not both');
  for (const [name, value] of [['first', first], ['last', last]] as const) {
    if (value != null && (value < 0 || value > MAX_PAGE_SIZE)) throw badInput(`${name} must be between 0 and ${MAX_PAGE_SIZE}`);
  }
  const request: PageRequest<C> = {};
  if (last != null) request.last = last;
  else request.first = first ?? DEFAULT_PAGE_SIZE;
  if (args.after != null) request.after = decodeCursor(args.after, 'after', check);
  if (args.before != null) request.before = decodeCursor(args.before, 'before', check);
  return request;
}

/** Like {@link pageRequest} for connections that page forward only (`first`/`after`). */
export function forwardPageRequest<C>(args: ConnectionArgs, check: (parsed: unknown) => C | null): PageRequest<C> & { first: number } {
  if (args.last != null || args.before != null) throw badInput('this connection pages forward only: use first and after');
  const request = pageRequest(args, check);
  return { ...request, first: request.first ?? DEFAULT_PAGE_SIZE };
}

/**
 * Builds a connection from a page the store returned in display order.
 * `hasMore` is the store's: forward, rows follow the page; backward, rows
 * precede it. The other direction is reported only as far as it is known
 * cheaply (a cursor was given), which Relay permits.
 */
export function toConnection<T, C>(
  request: PageRequest<C>,
  page: { items: T[]; hasMore: boolean },
  cursorOf: (item: T) => unknown,
) {
  // Cursors are encoded only when selected: most pages ask for the end cursor alone, or none.
  const cursorOfItem = (item: T | undefined) => (item === undefined ? null : encodeCursor(cursorOf(item)));
  const edges = page.items.map((node) => new Edge(node, cursorOf));
  const forward = request.last === undefined;
  return {
    edges,
    pageInfo: {
      hasNextPage: forward ? page.hasMore : request.before !== undefined,
      hasPreviousPage: forward ? request.after !== undefined : page.hasMore,
      get startCursor() {
        return cursorOfItem(page.items[0]);
      },
      get endCursor() {
        return cursorOfItem(page.items.at(-1));
      },
    },
  };
}

/**
 * An edge of a page: one class, so every edge has one shape and its cursor is
 * a getter on the prototype (an object literal with a getter would make a
 * closure per edge), encoded only when selected.
 */
class Edge<T> {
  constructor(
    readonly node: T,
    private readonly cursorOf: (item: T) => unknown,
  ) {}

  get cursor(): string {
    return encodeCursor(this.cursorOf(this.node));
  }
}

function badInput(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: 'BAD_USER_INPUT' } });
}

export { COUNT_CAP, type BoundedCount } from '../src/store/count.js';
