/**
 * Keyset connections over the store's pages: Relay arguments → a store page
 * request, and a store page → edges and page info. Cursors are opaque
 * base64url JSON of the connection's name and the store's keyset position,
 * parsed by the list's keyset (src/store/page.ts owns their shape and the
 * first/last rule); a cursor that does not parse, or that another connection
 * issued (operations, watches and sweep receipts share one keyset shape), is
 * a BAD_USER_INPUT error, never a silent first page.
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

/**
 * The cursors of one connection: its name (part of every cursor it issues)
 * and the store keyset that orders it. One per connection, at module scope.
 */
export class ConnectionCursors<C> {
  constructor(
    /** The connection's field name (`operations`, `watches`, …): a cursor of another connection is refused. */
    readonly connection: string,
    readonly keyset: AnyKeyset<C>,
  ) {}

  /** The cursor of an item, as the store's keyset names it. */
  cursorOf(item: unknown): C {
    return this.keyset.cursorOf(item as C & Record<string, number | string>);
  }

  /** An opaque string: base64url JSON of `[connection, position]`. */
  encode(cursor: C): string {
    return Buffer.from(JSON.stringify([this.connection, cursor]), 'utf8').toString('base64url');
  }

  /** A cursor this connection issued, or BAD_USER_INPUT naming `argName` ("after is not a cursor of this connection"). */
  decode(value: string, argName: string): C {
    let parsed: unknown;
    try {
      parsed = JSON.parse(Buffer.from(value, 'base64url').toString('utf8'));
    } catch {
      parsed = undefined;
    }
    const cursor = Array.isArray(parsed) && parsed.length === 2 && parsed[0] === this.connection ? this.keyset.parse(parsed[1]) : null;
    if (cursor === null) throw new GraphQLError(`${argName} is not a cursor of this connection`, { extensions: { code: 'BAD_USER_INPUT' } });
    return cursor;
  }
}

/** Turns Relay arguments into a store page request by the store's first/last rule; `forwardOnly` refuses `last` and `before`. */
export function pageRequest<C>(args: ConnectionArgs, cursors: ConnectionCursors<C>, forwardOnly = false): PageRequest<C> {
  let size: { first: number } | { last: number };
  try {
    size = connectionSize(args, forwardOnly);
  } catch (error) {
    if (error instanceof InvalidInputError) throw new GraphQLError(error.message, { extensions: { code: 'BAD_USER_INPUT', field: error.field } });
    throw error;
  }
  const request: PageRequest<C> = { ...size };
  if (args.after != null) request.after = cursors.decode(args.after, 'after');
  if (args.before != null) request.before = cursors.decode(args.before, 'before');
  return request;
}

/** {@link pageRequest} for connections that page forward only (`first`/`after`). */
export function forwardPageRequest<C>(args: ConnectionArgs, cursors: ConnectionCursors<C>): PageRequest<C> & { first: number } {
  return pageRequest(args, cursors, true) as PageRequest<C> & { first: number };
}

/**
 * Builds a connection from a page the store returned in display order.
 * `hasMore` is the store's: forward, rows follow the page; backward, rows
 * precede it. The other direction is reported only as far as it is known
 * cheaply (a cursor was given), which Relay permits.
 */
export function toConnection<T, C>(request: PageRequest<C>, page: { items: T[]; hasMore: boolean }, cursors: ConnectionCursors<C>) {
  const cursorOf = (item: T) => cursors.encode(cursors.cursorOf(item));
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
    private readonly cursorOf: (item: T) => string,
    readonly hasNextPage: boolean,
    readonly hasPreviousPage: boolean,
  ) {}

  get startCursor(): string | null {
    return this.items.length === 0 ? null : this.cursorOf(this.items[0]!);
  }

  get endCursor(): string | null {
    return this.items.length === 0 ? null : this.cursorOf(this.items[this.items.length - 1]!);
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
    private readonly cursorOf: (item: T) => string,
  ) {}

  get cursor(): string {
    return this.cursorOf(this.node);
  }
}

export { COUNT_CAP, type BoundedCount } from '../src/store/count.js';
