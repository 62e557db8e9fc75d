/**
 * Retention: deletes rows nothing needs any more, in bounded batches.
 *
 * Each batch is one DELETE of at most `batchSize` rows chosen by a key
 * subselect with LIMIT, so each batch is its own short (single-statement)
 * transaction and no lock is held across batches. On Postgres the subselect
 * skips rows another transaction has locked, so replicas running retention
 * at once (or a worker touching a row) never wait on each other. Call it on
 * the root store, not inside a transaction: inside one, every batch would
 * share the caller's transaction and its locks.
 */
import { sql } from 'kysely';
import type { StoreContext } from '../context.js';
import { ACTIVITY_RETENTION_MS, pruneActivityBatch } from '../activity/activity.js';
import { ENQUEUE_REQUEST_KEY } from '../operations/enqueue.js';
import { TERMINAL_OPERATION_STATES } from '../operations/types.js';
import { TERMINAL_SWEEP_CANDIDATE_STATES } from '../sweeps/types.js';
import { requireNonNegativeInteger, requirePositiveInteger } from '../validate.js';

/** Default idempotency window: a finished operation is kept this long after its last update. */
export const DEFAULT_IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

/** Default dead-operation retention: a dead operation (and its attempt history) is kept a week after its last update, for operators. */
export const DEFAULT_DEAD_RETENTION_MS = 7 * 24 * 60 * 60 * 1000;

/** Default rows per DELETE statement. */
export const DEFAULT_RETENTION_BATCH_SIZE = 500;

/** Options of {@link runRetention}. */
export interface RetentionOptions {
  /**
   * How long a finished (`committed` / `dead`) operation is kept after its
   * `updated_at`. A replay of its idempotency key after that is a new
   * operation. Default 24 h.
   */
  idempotencyWindowMs?: number;
  /**
   * How long a `dead` operation, with its attempt history, is kept after its
   * `updated_at`: long enough for an operator to see why and retry it. Its
   * key stays taken as long (a claim of it answers DEAD). Default 7 days.
   */
  deadRetentionMs?: number;
  /** How long hourly activity counters and due-backlog samples are kept (by their hour / slot). Default 8 days. */
  activityRetentionMs?: number;
  /** Rows deleted per statement. Default 500. */
  batchSize?: number;
  /** At most this many batches per kind of row in one run. Default: until a batch comes back short. */
  maxBatches?: number;
}

/** Rows deleted by one {@link runRetention} run, per kind. */
export interface RetentionResult {
  /** Finished operations deleted: committed ones past the idempotency window plus dead ones past the dead retention. */
  operations: number;
  /** Of those, dead ones. */
  deadOperations: number;
  /** Pending authorizations with `expires_at < now`. */
  pendingAuthorizations: number;
  /** Terminal (`applied` / `kept` / `failed`) candidates of committed receipts. */
  sweepCandidates: number;
  /** Request keys of the write-back protocol recorded before the idempotency window (their operations' go with them). */
  requestKeys: number;
  /** Hourly activity counter rows (viewer and total tables) and due-backlog samples older than the activity retention. */
  activityRows: number;
  /** False when `maxBatches` stopped a kind while its last batch was still full. */
  complete: boolean;
  /**
   * The DIDs whose views changed: callers and owners of the deleted
   * operations, owners of the receipts whose candidates went. The server
   * tells their subscribers (one event per DID, not per row).
   */
  touched: { operations: ReadonlySet<string>; sweepReceipts: ReadonlySet<string> };
}

/**
 * Deletes finished operations whose `updated_at < now - idempotencyWindowMs`
 * (exactly at the boundary stays), pending authorizations with
 * `expires_at < now` (strict, as consume treats them), terminal sweep
 * candidates of committed receipts, and activity counters and backlog
 * samples older than `activityRetentionMs`. Returns how many rows of each kind went.
 */
export async function runRetention(store: StoreContext, options: RetentionOptions = {}): Promise<RetentionResult> {
  const windowMs = options.idempotencyWindowMs ?? DEFAULT_IDEMPOTENCY_WINDOW_MS;
  const deadMs = options.deadRetentionMs ?? DEFAULT_DEAD_RETENTION_MS;
  requireNonNegativeInteger('deadRetentionMs', deadMs);
  const activityMs = options.activityRetentionMs ?? ACTIVITY_RETENTION_MS;
  requireNonNegativeInteger('activityRetentionMs', activityMs);
  const batchSize = options.batchSize ?? DEFAULT_RETENTION_BATCH_SIZE;
  const maxBatches = options.maxBatches ?? Number.POSITIVE_INFINITY;
  requireNonNegativeInteger('idempotencyWindowMs', windowMs);
  requirePositiveInteger('batchSize', batchSize);
  if (maxBatches !== Number.POSITIVE_INFINITY) requirePositiveInteger('maxBatches', maxBatches);

  const now = store.now();
  const operationCutoff = now - windowMs;
  const postgres = store.dialect === 'postgres';
  let complete = true;

  const drain = async (deleteBatch: () => Promise<number>): Promise<number> => {
    let total = 0;
    for (let batch = 0; ; batch++) {
      if (batch >= maxBatches) {
        complete = false;
        return total;
      }
      const deleted = await deleteBatch();
      total += deleted;
      if (deleted < batchSize) return total;
    }
  };

  // One state and cutoff per pass: each is a range of idx_connector_operation_terminal_updated
  // (state, terminal_updated_at: a terminal row's updated_at, migration 0017).
  const touchedOperations = new Set<string>();
  const touchedSweepReceipts = new Set<string>();
  const finished = (state: (typeof TERMINAL_OPERATION_STATES)[number], cutoff: number) =>
    drain(async () => {
      const result = await store.db
        .deleteFrom('kubun_connector_operation')
        .where(({ eb, refTuple }) => {
          let keys = store.db
            .selectFrom('kubun_connector_operation')
            .select(['caller_did', 'operation_id'])
            .where('state', '=', state)
            .where(sql.ref('terminal_updated_at'), '<', cutoff)
            .limit(batchSize);
          if (postgres) keys = keys.forUpdate().skipLocked();
          return eb(refTuple('caller_did', 'operation_id'), 'in', keys.$asTuple('caller_did', 'operation_id'));
        })
        .returning(['caller_did', 'owner_did'])
        .execute();
      for (const row of result) touchedOperations.add(row.caller_did).add(row.owner_did);
      return result.length;
    });
  const committedOperations = await finished('committed', operationCutoff);
  const deadOperations = await finished('dead', now - deadMs);
  const operations = committedOperations + deadOperations;

  const pendingAuthorizations = await drain(async () => {
    let keys = store.db
      .selectFrom('kubun_connector_pending_auth')
      .select('state')
      .where('expires_at', '<', now)
      .orderBy('expires_at')
      .limit(batchSize);
    if (postgres) keys = keys.forUpdate().skipLocked();
    const result = await store.db.deleteFrom('kubun_connector_pending_auth').where('state', 'in', keys).executeTakeFirst();
    return Number(result.numDeletedRows);
  });

  const sweepCandidates = await drain(async () => {
    const result = await store.db
      .deleteFrom('kubun_connector_sweep_candidate')
      .where(({ eb, refTuple }) => {
        let keys = store.db
          .selectFrom('kubun_connector_sweep_candidate as c')
          .innerJoin('kubun_connector_sweep_receipt as r', (join) =>
            join
              .onRef('r.owner_did', '=', 'c.owner_did')
              .onRef('r.connector_name', '=', 'c.connector_name')
              .onRef('r.partition', '=', 'c.partition')
              .onRef('r.provenance', '=', 'c.provenance'),
          )
          .select(['c.owner_did', 'c.connector_name', 'c.partition', 'c.provenance', 'c.document_id'])
          .where('r.committed_at', 'is not', null)
          .where('c.state', 'in', TERMINAL_SWEEP_CANDIDATE_STATES)
          .limit(batchSize);
        // Lock only the candidate rows: the receipt stays free for readers and commits.
        if (postgres) keys = keys.modifyEnd(sql`for update of c skip locked`);
        return eb(
          refTuple('owner_did', 'connector_name', 'partition', 'provenance', 'document_id'),
          'in',
          keys.$asTuple('owner_did', 'connector_name', 'partition', 'provenance', 'document_id'),
        );
      })
      .returning('owner_did')
      .execute();
    for (const row of result) touchedSweepReceipts.add(row.owner_did);
    return result.length;
  });

  // Request keys (issue 37) outlive no resend: a lost answer is resent within seconds, and the row goes with its operation anyway.
  // An enqueue's answer (issue 39) is the operation's own key's: it stays while the operation does, so a late resend is still answered as the first time.
  const requestKeys = await drain(async () => {
    const result = await store.db
      .deleteFrom('kubun_connector_operation_request')
      .where(({ eb, refTuple }) => {
        let keys = store.db
          .selectFrom('kubun_connector_operation_request')
          .select(['caller_did', 'operation_id', 'request_key'])
          .where('created_at', '<', operationCutoff)
          .where('request_key', '<>', ENQUEUE_REQUEST_KEY)
          .limit(batchSize);
        if (postgres) keys = keys.forUpdate().skipLocked();
        return eb(refTuple('caller_did', 'operation_id', 'request_key'), 'in', keys.$asTuple('caller_did', 'operation_id', 'request_key'));
      })
      .executeTakeFirst();
    return Number(result.numDeletedRows);
  });

  let activityRows = 0;
  for (const table of ['activity', 'totals', 'backlog'] as const) {
    activityRows += await drain(() => pruneActivityBatch(store, table, now - activityMs, batchSize));
  }

  return {
    operations,
    deadOperations,
    pendingAuthorizations,
    sweepCandidates,
    requestKeys,
    activityRows,
    complete,
    touched: { operations: touchedOperations, sweepReceipts: touchedSweepReceipts },
  };
}
