/**
 * Counting operations without scanning them: visibility and the filters on
 * counted columns are answered from the counter table the triggers of
 * migration 0004 keep (exact, whatever the table size); a filter on another
 * column (the document) counts matching index entries up to the cap.
 */
import type { SelectQueryBuilder } from 'kysely';
import type { Database } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { countUpTo, COUNT_CAP, type BoundedCount } from '../count.js';
import { ACROSS_TENANTS } from '../page.js';
import { checkScope, filtered, filterMatchesNothing, readsAcrossTenants, type OperationFilter, type OperationScope } from './list.js';
import { OPERATION_TABLE } from './row.js';
import { OPERATION_STATES, type ConnectorOperationState } from './types.js';

const COUNT_TABLE = 'kubun_connector_operation_count';
/** Counters without caller and owner: what a service's counts read when no owner is involved. */
const TOTAL_TABLE = 'kubun_connector_operation_total';

/** A column operations can be grouped by when counted. */
export type OperationCountDimension = 'state' | 'connectorName' | 'ownerDID' | 'lastKind' | 'deferReason';

const COLUMN_OF = {
  state: 'state',
  connectorName: 'connector_name',
  ownerDID: 'owner_did',
  lastKind: 'last_kind',
  deferReason: 'defer_reason',
} as const satisfies Record<OperationCountDimension, string>;

/** One group: its value of each grouped dimension (`null`: the operation has none, e.g. no last kind yet) and how many. */
export interface OperationCountGroup {
  key: Partial<Record<OperationCountDimension, string | null>>;
  count: number;
}

/** Groups with a count above zero, largest first; `capped`: counting stopped at the cap, each count is a lower bound. */
export interface OperationCountGroups {
  groups: OperationCountGroup[];
  capped: boolean;
}

/** Whether the counter table can answer this filter (every condition is on a counted column). */
function servedByCounters(filter: OperationFilter | undefined): boolean {
  if (filter === undefined) return true;
  const counted = new Set(['states', 'connectorName', 'ownerDID', 'model', 'lastKinds', 'deferReasons']);
  return Object.entries(filter).every(([field, value]) => value === undefined || counted.has(field));
}

/** How many operations are visible and match the filter. */
export async function countOperations(store: StoreContext, scope: OperationScope): Promise<BoundedCount> {
  const { groups, capped } = await countOperationGroups(store, scope, []);
  return { count: groups.reduce((sum, group) => sum + group.count, 0), capped };
}

/** Visible, filtered operations counted per state; every state is a key (0 when none). */
export async function countOperationsByState(
  store: StoreContext,
  scope: OperationScope,
): Promise<{ counts: Record<ConnectorOperationState, number>; capped: boolean }> {
  const counts = Object.fromEntries(OPERATION_STATES.map((state) => [state, 0])) as Record<ConnectorOperationState, number>;
  const { groups, capped } = await countOperationGroups(store, scope, ['state']);
  for (const group of groups) {
    const state = group.key.state as ConnectorOperationState;
    if (state in counts) counts[state] = group.count;
  }
  return { counts, capped };
}

/**
 * Visible, filtered operations counted per combination of `groupBy`
 * (no dimensions: one group, the total). Groups of zero are left out.
 */
export async function countOperationGroups(
  store: StoreContext,
  scope: OperationScope,
  groupBy: readonly OperationCountDimension[],
): Promise<OperationCountGroups> {
  checkScope(scope);
  const dimensions = [...new Set(groupBy)];
  if (filterMatchesNothing(scope.filter)) return { groups: [], capped: false };
  const columns = dimensions.map((dimension) => COLUMN_OF[dimension]);

  if (servedByCounters(scope.filter)) {
    const viewer = scope.visibleTo;
    const everyone = viewer === null && scope.filter?.ownerDID === undefined && !dimensions.includes('ownerDID');
    let query = store.db.selectFrom(everyone ? TOTAL_TABLE : COUNT_TABLE).select((eb) => eb.fn.sum<number | string>('n').as('count')) as CounterQuery;
    if (viewer !== null) query = query.where((eb) => eb.or([eb('caller_did', '=', viewer), eb('owner_did', '=', viewer)]));
    query = countedFilter(query, scope.filter);
    for (const column of columns) query = query.select(column).groupBy(column);
    const rows = (await query.execute()) as Record<string, unknown>[];
    return { groups: toGroups(rows, dimensions, ''), capped: false };
  }

  // Outside the counted columns: count the matching rows, at most COUNT_CAP of them.
  let matching = store.db.selectFrom(OPERATION_TABLE);
  const viewer = scope.visibleTo;
  if (viewer !== null) matching = matching.where((eb) => eb.or([eb('caller_did', '=', viewer), eb('owner_did', '=', viewer)]));
  // Across every tenant the newest-first index of every row may serve a created range (migration 0009).
  else if (readsAcrossTenants(scope.filter)) matching = matching.where(ACROSS_TENANTS);
  matching = filtered(matching, scope.filter, store.now());
  if (columns.length === 0) {
    const { count, capped } = await countUpTo(store, matching);
    return { groups: count > 0 ? [{ key: {}, count }] : [], capped };
  }
  const sample = matching.select(columns).limit(COUNT_CAP + 1).as('sample');
  let grouped = store.db.selectFrom(sample).select((eb) => eb.fn.countAll<number | string>().as('count'));
  for (const column of columns) grouped = grouped.select(`sample.${column}` as any).groupBy(`sample.${column}` as any);
  const rows = (await grouped.execute()) as Record<string, unknown>[];
  // Past the cap the groups are those of the first COUNT_CAP + 1 matching rows: each a lower bound.
  const total = rows.reduce((sum, row) => sum + Number(row.count), 0);
  return { groups: toGroups(rows, dimensions, null), capped: total > COUNT_CAP };
}

type CounterQuery = SelectQueryBuilder<Database, typeof COUNT_TABLE, { count: number | string }>;

function countedFilter<Q>(query: Q, filter: OperationFilter | undefined): Q {
  let q = query as unknown as SelectQueryBuilder<Database, typeof COUNT_TABLE, any>;
  if (filter?.states !== undefined) q = q.where('state', 'in', [...filter.states]);
  if (filter?.connectorName !== undefined) q = q.where('connector_name', '=', filter.connectorName);
  if (filter?.ownerDID !== undefined) q = q.where('owner_did', '=', filter.ownerDID);
  if (filter?.model !== undefined) q = q.where('model', '=', filter.model);
  if (filter?.lastKinds !== undefined) q = q.where('last_kind', 'in', [...filter.lastKinds]);
  if (filter?.deferReasons !== undefined) q = q.where('defer_reason', 'in', [...filter.deferReasons]);
  return q as unknown as Q;
}

/** Rows of a grouped count → groups, largest first, zero groups dropped; `absent` is how the source spells "none". */
function toGroups(rows: readonly Record<string, unknown>[], dimensions: readonly OperationCountDimension[], absent: '' | null): OperationCountGroup[] {
  const groups: OperationCountGroup[] = [];
  for (const row of rows) {
    const count = Number(row.count ?? 0);
    if (count <= 0) continue;
    const key: OperationCountGroup['key'] = {};
    for (const dimension of dimensions) {
      const value = row[COLUMN_OF[dimension]];
      key[dimension] = value === absent || value === null || value === undefined ? null : String(value);
    }
    groups.push({ key, count });
  }
  return groups.sort((a, b) => b.count - a.count || JSON.stringify(a.key).localeCompare(JSON.stringify(b.key)));
}
