/**
 * Keyset connections over the store's pages: Relay arguments → a store page
 * request, and a store page → edges and page info. Cursors are opaque
 * base64url JSON of the store's keyset position, parsed by the list's keyset
 * (src/store/page.ts owns their shape and the first/last rule); a cursor that
 * does not parse is a BAD_USER_INPUT error, never a silent first page.
 */
import { GraphQLError } from 'graphql';
import { InvalidInputError } from '../src/store/errors.js';
import { connectionSize, type Keyset } from '../src/store/page.js';

export { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../src/store/page.js';

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

type AnyKeyset<C> = Keyset<C & Record<string, number | string>>;

/** Encodes a store cursor as an opaque string. */
export function encodeCursor(cursor: unknown): string {
  return Buffer.from(JSON.stringify(cursor), 'utf8').toString('base64url');
}

/** Decodes a cursor of `keyset`'s list, or refuses it as BAD_USER_INPUT naming `argName`. */
export function decodeCursor<C>(value: string, argName: string, keyset: AnyKeyset<C>): C {
  let parsed: unknown;
  try {
    parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
  } catch {
    parsed = undefined;
  }
  const cursor = keyset.parse(parsed);
  if (cursor === null) throw new GraphQLError(`${argName} is not a cursor of this connection`, { extensions: { code: 'BAD_USER_INPUT' } });
  return cursor;
}

/** Turns Relay arguments into a store page request by the store's first/last rule; `forwardOnly` refuses `last` and `before`. */
export function pageRequest<C>(args: ConnectionArgs, keyset: AnyKeyset<C>, forwardOnly = false): PageRequest<C> {
  let size: { first: number } | { last: number };
  try {
    size = connectionSize(args, forwardOnly);
  } catch (error) {
    if (error instanceof InvalidInputError) throw new GraphQLError(error.message, { extensions: { code: 'BAD_USER_INPUT', field: error.field } });
    throw error;
  }
  const request: PageRequest<C> = { ...size };
  if (args.after != null) request.after = decodeCursor(args.after, 'after', keyset);
  if (args.before != null) request.before = decodeCursor(args.before, 'before', keyset);
  return request;
}

/** {@link pageRequest} for connections that page forward only (`first`/`after`). */
export function forwardPageRequest<C>(args: ConnectionArgs, keyset: AnyKeyset<C>): PageRequest<C> & { first: number } {
  return pageRequest(args, keyset, true) as PageRequest<C> & { first: number };
}

/**
 * Builds a connection from a page the store returned in display order.
 * `hasMore` is the store's: forward, rows follow the page; backward, rows
 * precede it. The other direction is reported only as far as it is known
 * cheaply (a cursor was given), which Relay permits.
 */
export function toConnection<T, C>(request: PageRequest<C>, page: { items: T[]; hasMore: boolean }, keyset: { cursorOf(item: NoInfer<T>): unknown }) {
  const cursorOf = (item: T) => keyset.cursorOf(item);
  const edges = page.items.map((node) => new Edge(node, cursorOf));
  const forward = request.last === undefined;
  const hasNextPage = forward ? page.hasMore : request.before !== undefined;
  const hasPreviousPage = forward ? request.after !== undefined : page.hasMore;
  return { edges, pageInfo: new PageInfo(page.items, cursorOf, hasNextPage, hasPreviousPage) };
}

/**
 * Where a page stands: a class, its cursors getters on the prototype,
 * encoded only when selected (most pages ask for the end cursor alone, or
 * none). With an object literal whose getters closed over the page, V8
 * kept every listed row alive through the young-generation collections
 * until a full one (issue 21: with only `pageInfo` selected, 22 KiB
 * promoted per request of 50 rows; none with the class;
 * `npx tsx bench/gc-shapes.ts`, getter-literal against class).
 */
class PageInfo<T> {
  constructor(
    private readonly items: readonly T[],
    private readonly cursorOf: (item: T) => unknown,
    readonly hasNextPage: boolean,
    readonly hasPreviousPage: boolean,
  ) {}

  get startCursor(): string | null {
    return this.items.length === 0 ? null : encodeCursor(this.cursorOf(this.items[0]!));
  }

  get endCursor(): string | null {
    return this.items.length === 0 ? null : encodeCursor(this.cursorOf(this.items[this.items.length - 1]!));
  }
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

export { COUNT_CAP, type BoundedCount } from '../src/store/count.js';
