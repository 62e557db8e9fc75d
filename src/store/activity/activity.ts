/**
 * Operation activity over time (issue 22 item 7): what happened to
 * operations per UTC hour (committed, and every recorded outcome by kind),
 * read from the hourly counters the triggers of migration 0011 keep, and the
 * due backlog over time, read from samples a background job takes.
 *
 * Reads are bounded whatever the table sizes: the counters hold one row per
 * (hour, outcome, shard) of each caller/owner/connector combination that had
 * activity, and a window reads only its hours through an index on `hour`
 * (the totals' primary key; a viewer's caller and owner indexes).
 */
import { sql } from 'kysely';
import { inTransaction, type StoreContext } from '../context.js';
import { countUpTo } from '../count.js';
import { dueOperationsQuery } from '../operations/due.js';
import { requireMsEpoch, requireNonEmptyString, requireNonNegativeInteger, requireOneOf, requirePositiveInteger } from '../validate.js';

const ACTIVITY = 'kubun_connector_operation_activity';
const ACTIVITY_TOTAL = 'kubun_connector_operation_activity_total';
const BACKLOG = 'kubun_connector_backlog_sample';

/** One hour, the width of every activity bucket. */
export const HOUR_MS = 3_600_000;

/** The longest window a read may ask for, in hours (seven days). */
export const MAX_ACTIVITY_HOURS = 7 * 24;

/** How long activity counters and backlog samples are kept: the longest window plus one day, so a window read near an hour's end is whole. */
export const ACTIVITY_RETENTION_MS = (MAX_ACTIVITY_HOURS + 24) * HOUR_MS;

/** Default spacing of due-backlog samples: one per five minutes across all replicas. */
export const DEFAULT_BACKLOG_SAMPLE_INTERVAL_MS = 5 * 60_000;

/** What the activity counters count: an operation committing, or an attempt's recorded outcome by kind. */
export const ACTIVITY_OUTCOMES = ['committed', 'retryable', 'unknown', 'fatal', 'offline', 'auth'] as const;
export type ActivityOutcome = (typeof ACTIVITY_OUTCOMES)[number];

/** One hour of activity. */
export interface ActivityBucket {
  /** Start of the UTC hour (ms epoch). */
  start: number;
  /** Events of each kind in the hour; every kind is a key (0 when none). */
  counts: Record<ActivityOutcome, number>;
  /** The largest due backlog sampled in the hour; null when none was sampled there or the reader may not see it. */
  dueBacklog: number | null;
  /** Whether that sample stopped counting at the cap (then it is a lower bound). */
  dueBacklogCapped: boolean;
}

/** What {@link readOperationActivity} returns. */
export interface OperationActivity {
  /** Start of the first bucket (ms epoch). */
  from: number;
  /** End of the last bucket, exclusive: the end of the current hour. */
  to: number;
  /** Every hour of the window, oldest first, the current (partial) hour last. */
  buckets: ActivityBucket[];
  /**
   * Whether the backlog series applies to this read: samples count the whole
   * store's due work, so only a reader who sees every operation, without a
   * connector filter, gets them.
   */
  backlogIncluded: boolean;
}

/** Which activity to read. */
export interface OperationActivityScope {
  /** Whose: the DID whose operations (as caller or owner) count, or null for every operation (services). */
  visibleTo: string | null;
  /** Only this connector's operations. */
  connectorName?: string;
  /** How many hours, ending with the current one (1 to {@link MAX_ACTIVITY_HOURS}). */
  hours: number;
}

const emptyCounts = (): Record<ActivityOutcome, number> => Object.fromEntries(ACTIVITY_OUTCOMES.map((outcome) => [outcome, 0])) as Record<ActivityOutcome, number>;

/** The start of the UTC hour holding `at`. */
export const hourOf = (at: number): number => Math.floor(at / HOUR_MS) * HOUR_MS;

/**
 * Activity per hour over the last `hours` hours (the current one included),
 * every hour listed, zeros included; with the due backlog per hour when the
 * reader sees every operation.
 */
export async function readOperationActivity(store: StoreContext, scope: OperationActivityScope): Promise<OperationActivity> {
  requirePositiveInteger('hours', scope.hours);
  if (scope.hours > MAX_ACTIVITY_HOURS) throw new RangeError(`hours must be at most ${MAX_ACTIVITY_HOURS}`);
  if (scope.connectorName !== undefined) requireNonEmptyString('connectorName', scope.connectorName);
  const current = hourOf(store.now());
  const from = current - (scope.hours - 1) * HOUR_MS;
  const to = current + HOUR_MS;

  const viewer = scope.visibleTo;
  let rows: { hour: number | string; outcome: string; n: number | string | null }[];
  if (viewer === null) {
    let query = store.db
      .selectFrom(ACTIVITY_TOTAL)
      .select(['hour', 'outcome', (eb) => eb.fn.sum<number | string>('n').as('n')])
      .where('hour', '>=', from)
      .groupBy(['hour', 'outcome']);
    if (scope.connectorName !== undefined) query = query.where('connector_name', '=', scope.connectorName);
    rows = await query.execute();
  } else {
    // Caller or owner: one row holds both when they are the same DID, so it is counted once.
    let query = store.db
      .selectFrom(ACTIVITY)
      .select(['hour', 'outcome', (eb) => eb.fn.sum<number | string>('n').as('n')])
      .where((eb) => eb.or([eb.and([eb('caller_did', '=', viewer), eb('hour', '>=', from)]), eb.and([eb('owner_did', '=', viewer), eb('hour', '>=', from)])]))
      .groupBy(['hour', 'outcome']);
    if (scope.connectorName !== undefined) query = query.where('connector_name', '=', scope.connectorName);
    rows = await query.execute();
  }

  const buckets: ActivityBucket[] = [];
  const byHour = new Map<number, ActivityBucket>();
  for (let start = from; start < to; start += HOUR_MS) {
    const bucket: ActivityBucket = { start, counts: emptyCounts(), dueBacklog: null, dueBacklogCapped: false };
    buckets.push(bucket);
    byHour.set(start, bucket);
  }
  for (const row of rows) {
    const bucket = byHour.get(Number(row.hour));
    const outcome = row.outcome as ActivityOutcome;
    // An hour past the current one (a replica's clock ahead) or an unknown kind is not shown.
    if (bucket !== undefined && outcome in bucket.counts) bucket.counts[outcome] += Number(row.n ?? 0);
  }

  const backlogIncluded = viewer === null && scope.connectorName === undefined;
  if (backlogIncluded) {
    const hour = sql<number | string>`(sampled_at / ${sql.lit(HOUR_MS)}) * ${sql.lit(HOUR_MS)}`;
    const samples = await store.db
      .selectFrom(BACKLOG)
      .select([hour.as('hour'), (eb) => eb.fn.max('due').as('due'), (eb) => eb.fn.max('capped').as('capped')])
      .where('sampled_at', '>=', from)
      .groupBy(hour)
      .execute();
    for (const sample of samples) {
      const bucket = byHour.get(Number(sample.hour));
      if (bucket === undefined) continue;
      bucket.dueBacklog = Number(sample.due);
      bucket.dueBacklogCapped = Number(sample.capped) === 1;
    }
  }
  return { from, to, buckets, backlogIncluded };
}

/** What one {@link sampleDueBacklog} call did. */
export interface BacklogSampleResult {
  /** The slot (ms epoch) the sample belongs to. */
  slot: number;
  /** False when another run (this replica's or another's) had already sampled this slot. */
  sampled: boolean;
  /** The due backlog counted, when this run sampled. */
  due?: number;
  capped?: boolean;
}

/**
 * Counts the due backlog (as `/metrics` does: due, not deferred, no live
 * lease; at most COUNT_CAP + 1 index entries) and records it for the
 * current slot of `intervalMs`, unless the slot already has a sample.
 * Replicas sampling at once keep the first row (the slot is the key).
 */
export async function sampleDueBacklog(store: StoreContext, intervalMs: number = DEFAULT_BACKLOG_SAMPLE_INTERVAL_MS): Promise<BacklogSampleResult> {
  requirePositiveInteger('intervalMs', intervalMs);
  const now = store.now();
  const slot = Math.floor(now / intervalMs) * intervalMs;
  const taken = await store.db.selectFrom(BACKLOG).select('sampled_at').where('sampled_at', '=', slot).executeTakeFirst();
  if (taken !== undefined) return { slot, sampled: false };
  const { count, capped } = await countUpTo(store, dueOperationsQuery(store, now));
  const inserted = await store.db
    .insertInto(BACKLOG)
    .values({ sampled_at: slot, due: count, capped: capped ? 1 : 0 })
    .onConflict((oc) => oc.column('sampled_at').doNothing())
    .returning('sampled_at')
    .executeTakeFirst();
  const sampled = inserted !== undefined;
  return sampled ? { slot, sampled, due: count, capped } : { slot, sampled };
}

/**
 * Deletes at most `batchSize` activity counter rows (viewer table first, then
 * totals) and backlog samples older than `cutoff`; returns how many went.
 * Postgres skips rows another transaction holds, so replicas pruning at once
 * never wait on each other.
 */
export async function pruneActivityBatch(store: StoreContext, table: 'activity' | 'totals' | 'backlog', cutoff: number, batchSize: number): Promise<number> {
  const name = table === 'activity' ? ACTIVITY : table === 'totals' ? ACTIVITY_TOTAL : BACKLOG;
  const column = table === 'backlog' ? 'sampled_at' : 'hour';
  // The tables' keys have up to six columns; the physical row id names a row in one.
  const result =
    store.dialect === 'postgres'
      ? await sql`delete from ${sql.table(name)} where ctid = any(array(
          select ctid from ${sql.table(name)} where ${sql.ref(column)} < ${cutoff} limit ${batchSize} for update skip locked))`.execute(store.db)
      : await sql`delete from ${sql.table(name)} where rowid in (select rowid from ${sql.table(name)} where ${sql.ref(column)} < ${cutoff} limit ${batchSize})`.execute(
          store.db,
        );
  return Number(result.numAffectedRows ?? 0);
}

/** Counts to add to one hour of one caller/owner/connector, for {@link importActivity}. */
export interface ImportedActivity {
  /** Any instant in the hour (ms epoch); counted in the hour that holds it. */
  at: number;
  callerDID: string;
  ownerDID: string;
  connectorName: string;
  outcome: ActivityOutcome;
  count: number;
}

/**
 * Adds activity that happened before this store kept counters (an import, or
 * the demo's imagined week), in one transaction: each (hour, caller, owner,
 * connector, outcome) is written once, as a row of its own shard-0 slot, and
 * added to the totals only when that row was new, so importing the same
 * entries again adds nothing. Returns how many entries were new.
 */
export async function importActivity(store: StoreContext, entries: readonly ImportedActivity[]): Promise<number> {
  for (const entry of entries) {
    requireNonEmptyString('callerDID', entry.callerDID);
    requireNonEmptyString('ownerDID', entry.ownerDID);
    requireNonEmptyString('connectorName', entry.connectorName);
    requireOneOf('outcome', entry.outcome, ACTIVITY_OUTCOMES);
    requireMsEpoch('at', entry.at);
    requirePositiveInteger('count', entry.count);
  }
  return inTransaction(store, async (tx) => {
    let added = 0;
    for (let i = 0; i < entries.length; i += IMPORT_CHUNK) {
      const chunk = entries.slice(i, i + IMPORT_CHUNK);
      const inserted = await tx.db
        .insertInto(ACTIVITY)
        .values(
          chunk.map((entry) => ({
            caller_did: entry.callerDID,
            hour: hourOf(entry.at),
            owner_did: entry.ownerDID,
            connector_name: entry.connectorName,
            outcome: entry.outcome,
            shard: 0,
            n: entry.count,
          })),
        )
        .onConflict((oc) => oc.columns(['caller_did', 'hour', 'owner_did', 'connector_name', 'outcome', 'shard']).doNothing())
        .returning(['hour', 'connector_name', 'outcome', 'n'])
        .execute();
      // Rows of one hour, connector and outcome from several callers meet in one total.
      const totals = new Map<string, { hour: number; connector_name: string; outcome: string; shard: number; n: number }>();
      for (const row of inserted) {
        const key = JSON.stringify([row.hour, row.connector_name, row.outcome]);
        const total = totals.get(key) ?? { hour: Number(row.hour), connector_name: row.connector_name, outcome: row.outcome, shard: 0, n: 0 };
        total.n += Number(row.n);
        totals.set(key, total);
      }
      if (totals.size > 0) {
        await tx.db
          .insertInto(ACTIVITY_TOTAL)
          .values([...totals.values()])
          .onConflict((oc) => oc.columns(['hour', 'connector_name', 'outcome', 'shard']).doUpdateSet((eb) => ({ n: eb(`${ACTIVITY_TOTAL}.n` as 'n', '+', eb.ref('excluded.n')) })))
          .execute();
      }
      added += inserted.length;
    }
    return added;
  });
}

/** Rows per INSERT of an import: well under SQLite's bound-parameter limit. */
const IMPORT_CHUNK = 200;

/** Backlog samples taken before this store kept them (the demo's week); a slot already sampled keeps its sample. Returns how many were new. */
export async function importBacklogSamples(store: StoreContext, samples: readonly { sampledAt: number; due: number; capped?: boolean }[]): Promise<number> {
  for (const sample of samples) {
    requireMsEpoch('sampledAt', sample.sampledAt);
    requireNonNegativeInteger('due', sample.due);
  }
  let added = 0;
  for (let i = 0; i < samples.length; i += IMPORT_CHUNK) {
    const inserted = await store.db
      .insertInto(BACKLOG)
      .values(samples.slice(i, i + IMPORT_CHUNK).map((sample) => ({ sampled_at: sample.sampledAt, due: sample.due, capped: sample.capped === true ? 1 : 0 })))
      .onConflict((oc) => oc.column('sampled_at').doNothing())
      .returning('sampled_at')
      .execute();
    added += inserted.length;
  }
  return added;
}
