/**
 * The store's health at a glance, for `/metrics`: one statement (a UNION ALL
 * of index-served parts) that never reads more than a bounded number of rows
 * whatever the table sizes. Operations by state come from the counter table
 * (exact); every other count reads at most {@link COUNT_CAP} + 1 index
 * entries and says when it stopped there.
 */
import { sql, type SelectQueryBuilder } from 'kysely';
import type { Database } from '../db/tables.js';
import type { StoreContext } from './context.js';
import { COUNT_CAP, type BoundedCount } from './count.js';
import { dueOperationsQuery } from './operations/due.js';
import { filtered } from './operations/list.js';
import { OPERATION_TABLE } from './operations/row.js';
import { LIVE_OPERATION_STATES, OPERATION_STATES, type ConnectorOperationState } from './operations/types.js';
import { PROJECTION_WATCH_VERIFICATION_STATUSES, type ProjectionWatchVerificationStatus } from './projection-watches/types.js';

/** What {@link readStoreGauges} returns; counts other than `operationsByState` are bounded by the cap. */
export interface StoreGauges {
  /** Every operation by state (exact, from the counters); every state is a key. */
  operationsByState: Record<ConnectorOperationState, number>;
  /** Live operations a worker could claim now (due, not deferred, no live lease). */
  dueBacklog: BoundedCount;
  /** When the longest-waiting due operation became due (ms epoch); null when none is due. */
  oldestDueAt: number | null;
  /** Live operations whose lease has expired without an outcome. */
  expiredLeases: BoundedCount;
  /** Live operations that count as stuck (the `stuck` filter of `operations`, default threshold). */
  stuck: BoundedCount;
  /** Watches by verification status; every status is a key. */
  watchesByStatus: Record<ProjectionWatchVerificationStatus, BoundedCount>;
  /** Sync states by their (free-text) status, counted over at most the first COUNT_CAP + 1 rows. */
  syncStatesByStatus: Record<string, number>;
  /** Whether the sync-state counts stopped at the cap (each is then a lower bound). */
  syncStatesCapped: boolean;
}

type Part = SelectQueryBuilder<Database, any, { metric: string; label: string | null; value: number | string | null }>;

/** Reads every gauge in one statement. `now` is the store clock. */
export async function readStoreGauges(store: StoreContext): Promise<StoreGauges> {
  const now = store.now();
  const db = store.db;
  const live = [...LIVE_OPERATION_STATES];
  const noLabel = sql<string | null>`cast(null as text)`;
  const metric = (name: string) => sql<string>`${sql.lit(name)}`.as('metric');
  // Due exactly as listDueOperations lists it.
  const due = () => dueOperationsQuery(store, now);
  const bounded = (name: string, label: string | null, query: SelectQueryBuilder<Database, any, {}>): Part =>
    db
      .selectFrom(query.select(sql<number>`1`.as('one')).limit(COUNT_CAP + 1).as('bounded'))
      .select([metric(name), (label === null ? noLabel : sql<string>`${sql.lit(label)}`).as('label'), (eb) => eb.fn.countAll<number | string>().as('value')]) as Part;

  const parts: Part[] = [
    db
      .selectFrom('kubun_connector_operation_total')
      .select([metric('operations'), 'state as label', (eb) => eb.fn.sum<number | string>('n').as('value')])
      .groupBy('state') as Part,
    bounded('due', null, due()),
    // The oldest due: the head of each live state's range of the due index, the older of the
    // two. One `order by … limit 1` over both states would read every due row to sort them
    // (the index orders by time within a state only): a backlog of a million, every scrape.
    db
      .selectFrom(
        live
          .map((state, i) =>
            db.selectFrom(due().where('state', '=', state).select('next_attempt_at').orderBy('next_attempt_at').limit(1).as(`head_${i}`)).select(`head_${i}.next_attempt_at as at`),
          )
          .reduce((heads, head) => heads.unionAll(head))
          .as('heads'),
      )
      .select([metric('oldest_due'), noLabel.as('label'), (eb) => eb.fn.min('heads.at').as('value')]) as Part,
    bounded(
      'expired_leases',
      null,
      db.selectFrom(OPERATION_TABLE).where('state', 'in', live).where('lease_token', 'is not', null).where('lease_expires_at', '<=', now),
    ),
    bounded('stuck', null, filtered(db.selectFrom(OPERATION_TABLE), { stuck: true }, now)),
    ...PROJECTION_WATCH_VERIFICATION_STATUSES.map((status) =>
      bounded('watches', status, db.selectFrom('kubun_connector_projection_watch').where('verification_status', '=', status)),
    ),
    db
      .selectFrom(db.selectFrom('kubun_connector_sync_state').select('status').limit(COUNT_CAP + 1).as('sample'))
      .select([metric('sync_states'), 'sample.status as label', (eb) => eb.fn.countAll<number | string>().as('value')])
      .groupBy('sample.status') as Part,
  ];
  let query = parts[0]!;
  for (const part of parts.slice(1)) query = query.unionAll(part);
  const rows = await query.execute();

  const gauges: StoreGauges = {
    operationsByState: Object.fromEntries(OPERATION_STATES.map((state) => [state, 0])) as Record<ConnectorOperationState, number>,
    dueBacklog: { count: 0, capped: false },
    oldestDueAt: null,
    expiredLeases: { count: 0, capped: false },
    stuck: { count: 0, capped: false },
    watchesByStatus: Object.fromEntries(PROJECTION_WATCH_VERIFICATION_STATUSES.map((s) => [s, { count: 0, capped: false }])) as Record<
      ProjectionWatchVerificationStatus,
      BoundedCount
    >,
    syncStatesByStatus: {},
    syncStatesCapped: false,
  };
  const boundedOf = (value: unknown): BoundedCount => {
    const count = Number(value ?? 0);
    return count > COUNT_CAP ? { count: COUNT_CAP, capped: true } : { count, capped: false };
  };
  let sampled = 0;
  for (const { metric: name, label, value } of rows) {
    if (name === 'operations' && label !== null && label in gauges.operationsByState) {
      gauges.operationsByState[label as ConnectorOperationState] += Number(value ?? 0);
    } else if (name === 'due') gauges.dueBacklog = boundedOf(value);
    else if (name === 'oldest_due') gauges.oldestDueAt = value === null ? null : Number(value);
    else if (name === 'expired_leases') gauges.expiredLeases = boundedOf(value);
    else if (name === 'stuck') gauges.stuck = boundedOf(value);
    else if (name === 'watches' && label !== null) gauges.watchesByStatus[label as ProjectionWatchVerificationStatus] = boundedOf(value);
    else if (name === 'sync_states' && label !== null) {
      gauges.syncStatesByStatus[label] = Number(value ?? 0);
      sampled += Number(value ?? 0);
    }
  }
  gauges.syncStatesCapped = sampled > COUNT_CAP;
  return gauges;
}
