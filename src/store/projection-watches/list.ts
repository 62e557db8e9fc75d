import { sql, type ExpressionBuilder, type SqlBool } from 'kysely';
import type { Database } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { countUpTo, type BoundedCount } from '../count.js';
import { ACROSS_TENANTS, NEWEST_FIRST, type KeysetPageRequest, type NewestFirstCursor } from '../page.js';
import { rowToProjectionWatch } from './row.js';
import type { ProjectionWatch, ProjectionWatchVerificationStatus } from './types.js';
import { requireIntegerAtLeast } from '../validate.js';

/** Options of {@link listDueWatches}. */
export interface ListDueWatchesOptions {
  /** At most this many watches (a positive integer). */
  limit: number;
  /** The instant "due" is measured against. Default: `store.now()`. */
  now?: number;
}

/**
 * Watches a verifier should take now: `pending_verification`,
 * `next_attempt_at <= now`, no live claim (absent or expired), earliest due
 * first (node key breaks ties). Offline-deferred watches are included once
 * their pushed-out time has come.
 */
export async function listDueWatches(store: StoreContext, options: ListDueWatchesOptions): Promise<ProjectionWatch[]> {
  checkCount('limit', options.limit, 1);
  const now = options.now ?? store.now();
  const rows = await store.db
    .selectFrom('kubun_connector_projection_watch')
    .selectAll()
    .where('verification_status', '=', 'pending_verification')
    .where('next_attempt_at', '<=', now)
    .where((eb) => eb.or([eb('claimed_until', 'is', null), eb('claimed_until', '<=', now)]))
    .orderBy('next_attempt_at', 'asc')
    .orderBy('node_key', 'asc')
    .limit(options.limit)
    .execute();
  return rows.map(rowToProjectionWatch);
}

/** Narrows a watch listing; every given field must match. */
export interface WatchFilter {
  /** One status or any of several. */
  status?: ProjectionWatchVerificationStatus | readonly ProjectionWatchVerificationStatus[];
  connectorName?: string;
  ownerDID?: string;
  documentID?: string;
}

/** Position in the newest-first order ({@link NEWEST_FIRST}): a watch at the edge of a page. */
export type WatchCursor = NewestFirstCursor;

/**
 * Options of {@link listWatches}: exactly one of `first` (older watches
 * after `after`, default from the newest) or `last` (the newer watches just
 * before `before`, default the oldest ones); sizes 0 or more.
 */
export interface ListWatchesOptions extends KeysetPageRequest<WatchCursor> {
  /** The viewer's DID: only their watches are listed. Null: every watch (a service principal). */
  visibleTo: string | null;
  filter?: WatchFilter;
}

/** A page of watches, newest first. */
export interface WatchPage {
  watches: ProjectionWatch[];
  /** Forward: whether more (older) watches follow this page; backward: whether more (newer) precede it. */
  hasMore: boolean;
}

/**
 * Watches the viewer may see, newest first by keyset on
 * (created_at DESC, node_key DESC), never OFFSET; a backward page reads the
 * same index the other way.
 */
export async function listWatches(store: StoreContext, options: ListWatchesOptions): Promise<WatchPage> {
  let query = store.db.selectFrom('kubun_connector_projection_watch').selectAll().where(visibleWatches(options.visibleTo, options.filter));
  const filter = options.filter;
  if (options.visibleTo === null && filter?.ownerDID === undefined && filter?.documentID === undefined) query = query.where(ACROSS_TENANTS);
  const page = await NEWEST_FIRST.page(query, options, rowToProjectionWatch);
  return { watches: page.items, hasMore: page.hasMore };
}

/** How many watches {@link listWatches} would list over all pages, up to the count cap. */
export async function countWatches(
  store: StoreContext,
  options: Pick<ListWatchesOptions, 'visibleTo' | 'filter'>,
): Promise<BoundedCount> {
  return countUpTo(store, store.db.selectFrom('kubun_connector_projection_watch').where(visibleWatches(options.visibleTo, options.filter)));
}

function visibleWatches(visibleTo: string | null, filter: WatchFilter = {}) {
  return (eb: ExpressionBuilder<Database, 'kubun_connector_projection_watch'>) => {
    const parts = [];
    if (visibleTo !== null) parts.push(eb('owner_did', '=', visibleTo));
    if (filter.ownerDID !== undefined) parts.push(eb('owner_did', '=', filter.ownerDID));
    if (filter.connectorName !== undefined) parts.push(eb('connector_name', '=', filter.connectorName));
    if (filter.documentID !== undefined) parts.push(eb('document_id', '=', filter.documentID));
    if (filter.status !== undefined) {
      const statuses: readonly string[] = typeof filter.status === 'string' ? [filter.status] : filter.status;
      // An empty status list matches nothing, as an empty IN would.
      parts.push(statuses.length === 0 ? sql<SqlBool>`1 = 0` : eb('verification_status', 'in', [...statuses]));
    }
    return eb.and(parts);
  };
}

function checkCount(field: string, value: number, min: number): void {
  requireIntegerAtLeast(field, value, min);
}
