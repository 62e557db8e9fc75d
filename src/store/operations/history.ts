/**
 * Attempt history (migration 0005): one row per attempt, written in the
 * transaction of the holder write it records. Start opens a row, mark-sent
 * stamps it, the recorded outcome closes it with the outcome's kind, HTTP
 * status, retry-after, defer reason and message. Messages are bounded and
 * never hold a secret: the lease token, the send marker and anything that
 * looks like a bearer token or JWT are replaced before they are stored.
 */
import { sql, type ExpressionBuilder, type Kysely, type QueryCreator } from 'kysely';
import type { Database, OperationHistoryRow } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { countUpTo, type BoundedCount } from '../count.js';
import { prepared } from '../prepared.js';
import { ATTEMPT_HISTORY_ORDER, type CursorOfKeyset } from '../page.js';
import type { OperationDeferReason, OperationKey, OperationOutcomeKind } from './types.js';

const HISTORY_TABLE = 'kubun_connector_operation_history';

/** The longest message kept, in characters; longer ones are cut and end with '…'. */
export const MAX_ATTEMPT_MESSAGE = 2_000;

const REDACTED = '[redacted]';
const BEARER = /\bBearer\s+[A-Za-z0-9._~+/-]+=*/gi;
const JWT = /\beyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*/g;

/** What a history entry records: an attempt, or an operator action. */
export type OperationHistoryKind = 'attempt' | 'retry' | 'cancel' | 'requeue';

/** One attempt (or operator action) as the API shows it. */
export interface OperationAttempt {
  /** Position in the operation's history, from 1; newer attempts have higher numbers. */
  seq: number;
  kind: OperationHistoryKind;
  /** Who acted, for an operator action; null for attempts. */
  actorDID: string | null;
  /** The operation's attempt counter when it started (an attempt given back by a deferral repeats its number). */
  attempt: number;
  startedAt: number;
  sentAt: number | null;
  /** Null while the attempt is open. */
  endedAt: number | null;
  outcome: OperationOutcomeKind | null;
  httpStatus: number | null;
  retryAfterMs: number | null;
  deferReason: OperationDeferReason | null;
  message: string | null;
}

/**
 * A client's message made safe to keep: every secret it names and anything
 * shaped like a bearer token or JWT replaced, control characters other than
 * newline and tab dropped, cut to {@link MAX_ATTEMPT_MESSAGE} characters.
 * Empty after that → null.
 */
export function redactAttemptMessage(message: string | null | undefined, secrets: readonly (string | null | undefined)[]): string | null {
  if (message === null || message === undefined) return null;
  let text = message;
  for (const secret of secrets) {
    if (secret !== null && secret !== undefined && secret.length >= 4) text = text.split(secret).join(REDACTED);
  }
  text = text.replace(BEARER, `Bearer ${REDACTED}`).replace(JWT, REDACTED);
  // eslint-disable-next-line no-control-regex
  text = text.replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '').trim();
  const characters = [...text];
  if (characters.length > MAX_ATTEMPT_MESSAGE) text = `${characters.slice(0, MAX_ATTEMPT_MESSAGE - 1).join('')}…`;
  return text === '' ? null : text;
}

/** The row of an attempt just started: the next seq of the operation's history. */
const OPEN_ATTEMPT = prepared((db, v: OperationKey & { attempt: number; now: number }) =>
  db
    .insertInto(HISTORY_TABLE)
    .columns(['caller_did', 'operation_id', 'seq', 'kind', 'attempt', 'started_at'])
    .expression((eb) =>
      eb
        .selectFrom(HISTORY_TABLE)
        .select([
          eb.val(v.callerDID).as('caller_did'),
          eb.val(v.operationID).as('operation_id'),
          eb(eb.fn.coalesce(eb.fn.max('seq'), eb.lit(0)), '+', 1).as('seq'),
          eb.val('attempt').as('kind'),
          eb.val(v.attempt).as('attempt'),
          eb.val(v.now).as('started_at'),
        ])
        .where('caller_did', '=', v.callerDID)
        .where('operation_id', '=', v.operationID),
    ),
);

/**
 * The history writes of a fenced step's single statement (Postgres,
 * src/store/operations/fenced-step.ts), reading the operation's updated row
 * from the statement's CTE `u`: they write only when the step did. The next
 * seq is read from the statement's snapshot; a concurrent entry for the same
 * operation (its holder racing its own steps) makes the insert collide on
 * the history's primary key, and the step runs again.
 */
export const STEP_HISTORY = {
  /** {@link openAttempt} for the row `u`: a new attempt numbered by its `attempts`. */
  openAttempt: (qc: QueryCreator<any>, now: unknown) =>
    qc
      .insertInto(HISTORY_TABLE)
      .columns(['caller_did', 'operation_id', 'seq', 'kind', 'attempt', 'started_at'])
      .expression((eb) =>
        eb
          .selectFrom('u')
          .select([
            'u.caller_did',
            'u.operation_id',
            sql<number>`coalesce((select max(h.seq) from ${sql.table(HISTORY_TABLE)} as h where h.caller_did = u.caller_did and h.operation_id = u.operation_id), 0) + 1`.as('seq'),
            sql.lit('attempt').as('kind'),
            'u.attempts',
            eb.val(now).as('started_at'),
          ]),
      ),
  /** {@link markAttemptSent} for the row `u`: its open attempt stamped as sent. */
  markAttemptSent: (qc: QueryCreator<any>, now: unknown) =>
    qc
      .updateTable(`${HISTORY_TABLE} as h`)
      .from('u')
      .set({ sent_at: now })
      .whereRef('h.caller_did', '=', 'u.caller_did')
      .whereRef('h.operation_id', '=', 'u.operation_id')
      .where('h.ended_at', 'is', null)
      .where('h.seq', '=', sql<number>`(select max(m.seq) from ${sql.table(HISTORY_TABLE)} as m where m.caller_did = u.caller_did and m.operation_id = u.operation_id)`),
};

/** Opens the row of the attempt just started (inside the start's transaction). */
export async function openAttempt(tx: StoreContext, key: OperationKey, attempt: number, now: number): Promise<void> {
  await OPEN_ATTEMPT(tx, { callerDID: key.callerDID, operationID: key.operationID, attempt, now });
}

/** What an operator action records. */
export interface ActionEntry {
  action: Exclude<OperationHistoryKind, 'attempt'>;
  actorDID: string;
  reason: string | null;
}

/**
 * Records an operator action (inside the action's transaction): a closed
 * entry of its own, with who did it and the reason; an attempt left open by
 * the holder the action fenced out is closed at the same instant.
 */
export async function recordAction(tx: StoreContext, key: OperationKey, entry: ActionEntry & { attempt: number }, now: number): Promise<void> {
  await recordActions(tx, [{ key, attempt: entry.attempt }], entry, now);
}

/** {@link recordAction} for many operations at once: two statements whatever their number. */
export async function recordActions(tx: StoreContext, targets: readonly { key: OperationKey; attempt: number }[], entry: ActionEntry, now: number): Promise<void> {
  if (targets.length === 0) return;
  const inKeys = (eb: ExpressionBuilder<Database, any>) =>
    eb(eb.refTuple('caller_did', 'operation_id'), 'in', targets.map((t) => eb.tuple(t.key.callerDID, t.key.operationID)));
  await tx.db.updateTable(HISTORY_TABLE).set({ ended_at: now }).where(inKeys).where('ended_at', 'is', null).execute();
  const message = redactAttemptMessage(entry.reason, []);
  await tx.db
    .insertInto(HISTORY_TABLE)
    .columns(['caller_did', 'operation_id', 'seq', 'kind', 'attempt', 'started_at', 'ended_at', 'actor_did', 'message'])
    .expression((eb) =>
      eb
        .selectFrom('kubun_connector_operation as o')
        .select((e) => [
          'o.caller_did',
          'o.operation_id',
          e(
            e.fn.coalesce(
              e
                .selectFrom(`${HISTORY_TABLE} as h`)
                .select((h) => h.fn.max('h.seq').as('seq'))
                .whereRef('h.caller_did', '=', 'o.caller_did')
                .whereRef('h.operation_id', '=', 'o.operation_id'),
              e.lit(0),
            ),
            '+',
            1,
          ).as('seq'),
          e.val(entry.action).as('kind'),
          'o.attempts',
          e.val(now).as('started_at'),
          e.val(now).as('ended_at'),
          e.val(entry.actorDID).as('actor_did'),
          e.val(message).as('message'),
        ])
        .where((e) => e(e.refTuple('o.caller_did', 'o.operation_id'), 'in', targets.map((t) => e.tuple(t.key.callerDID, t.key.operationID)))),
    )
    .execute();
}

/** The newest attempt's row, if it is still open. */
function openRow(db: Kysely<Database>, key: OperationKey) {
  return db
    .updateTable(HISTORY_TABLE)
    .where('caller_did', '=', key.callerDID)
    .where('operation_id', '=', key.operationID)
    .where('ended_at', 'is', null)
    .where('seq', '=', (eb) =>
      eb.selectFrom(HISTORY_TABLE).select((e) => e.fn.max('seq').as('seq')).where('caller_did', '=', key.callerDID).where('operation_id', '=', key.operationID),
    );
}

const MARK_ATTEMPT_SENT = prepared((db, v: OperationKey & { now: number }) => openRow(db, v).set({ sent_at: v.now }));

/** Stamps the open attempt as sent (inside mark-sent's transaction). */
export async function markAttemptSent(tx: StoreContext, key: OperationKey, now: number): Promise<void> {
  await MARK_ATTEMPT_SENT(tx, { callerDID: key.callerDID, operationID: key.operationID, now });
}

/** What an outcome records about the attempt it closes. */
export interface AttemptOutcome {
  outcome: OperationOutcomeKind;
  httpStatus: number | null;
  retryAfterMs: number | null;
  deferReason: string | null;
  /** Already redacted ({@link redactAttemptMessage}). */
  message: string | null;
  /** The operation's attempt counter before the outcome, for a row the outcome has to open itself. */
  attempt: number;
}

/**
 * Closes the open attempt with its outcome (inside the outcome's
 * transaction). An outcome with no open attempt (recorded twice, without a
 * start, or by a reconcile query) is kept as a row of its own, started and
 * ended at `now`.
 */
export async function closeAttempt(tx: StoreContext, key: OperationKey, outcome: AttemptOutcome, now: number): Promise<void> {
  const values = {
    ended_at: now,
    outcome: outcome.outcome,
    http_status: outcome.httpStatus,
    retry_after_ms: outcome.retryAfterMs,
    defer_reason: outcome.deferReason,
    message: outcome.message,
  };
  const closed = await openRow(tx.db, key).set(values).executeTakeFirst();
  if (Number(closed.numUpdatedRows) > 0) return;
  await openAttempt(tx, key, outcome.attempt, now);
  await openRow(tx.db, key).set(values).execute();
}

function rowToAttempt(row: OperationHistoryRow): OperationAttempt {
  return {
    seq: Number(row.seq),
    kind: row.kind as OperationHistoryKind,
    actorDID: row.actor_did,
    attempt: Number(row.attempt),
    startedAt: Number(row.started_at),
    sentAt: row.sent_at === null ? null : Number(row.sent_at),
    endedAt: row.ended_at === null ? null : Number(row.ended_at),
    outcome: row.outcome as OperationOutcomeKind | null,
    httpStatus: row.http_status === null ? null : Number(row.http_status),
    retryAfterMs: row.retry_after_ms === null ? null : Number(row.retry_after_ms),
    deferReason: row.defer_reason as OperationDeferReason | null,
    message: row.message,
  };
}

/** A position in an attempt history ({@link ATTEMPT_HISTORY_ORDER}): the attempt at a page's edge. */
export type AttemptCursor = CursorOfKeyset<typeof ATTEMPT_HISTORY_ORDER>;

/** A page of one operation's history request: newest first, `first` rows, older than `after` when given. */
export interface AttemptHistoryRequest {
  key: OperationKey;
  first: number;
  after?: AttemptCursor;
}

/**
 * Pages of several operations' histories (the API's loader): one statement
 * per distinct `after` (so every first page of a request level is one),
 * each newest first, at most `first` + 1 rows per operation read (a window
 * over the primary key), `hasMore` when more are older.
 */
export async function getAttemptHistories(
  store: StoreContext,
  requests: readonly AttemptHistoryRequest[],
): Promise<{ attempts: OperationAttempt[]; hasMore: boolean }[]> {
  // Requests that share a bound read together (one statement for every first page of a request level).
  const groups = new Map<number | undefined, number[]>();
  requests.forEach((request, index) => {
    const bound = request.after === undefined ? undefined : ATTEMPT_HISTORY_ORDER.require('after', request.after).seq;
    groups.set(bound, [...(groups.get(bound) ?? []), index]);
  });
  const results: { attempts: OperationAttempt[]; hasMore: boolean }[] = new Array(requests.length);
  for (const [bound, indexes] of groups) {
    const group = indexes.map((index) => requests[index]!);
    const keys = [...new Map(group.map((request) => [JSON.stringify([request.key.callerDID, request.key.operationID]), request.key])).values()];
    const ranked = store.db
      .selectFrom(HISTORY_TABLE)
      .selectAll()
      .select((eb) => eb.fn.agg<number>('row_number').over((over) => over.partitionBy(['caller_did', 'operation_id']).orderBy('seq', 'desc')).as('rank'))
      .where((eb) => eb.or(keys.map((key) => eb.and([eb('caller_did', '=', key.callerDID), eb('operation_id', '=', key.operationID)]))))
      .$if(bound !== undefined, (query) => query.where(ATTEMPT_HISTORY_ORDER.beyond({ seq: bound! }, 'after')));
    const largest = Math.max(...group.map((request) => request.first));
    const rows = await ATTEMPT_HISTORY_ORDER.ordered(store.db.selectFrom(ranked.as('ranked')).selectAll().where('rank', '<=', largest + 1), true).execute();
    const byKey = new Map<string, OperationHistoryRow[]>();
    for (const row of rows) {
      const key = JSON.stringify([row.caller_did, row.operation_id]);
      byKey.set(key, [...(byKey.get(key) ?? []), row]);
    }
    for (const index of indexes) {
      const request = requests[index]!;
      const own = byKey.get(JSON.stringify([request.key.callerDID, request.key.operationID])) ?? [];
      results[index] = { attempts: own.slice(0, request.first).map(rowToAttempt), hasMore: own.length > request.first };
    }
  }
  return results;
}

/** How many history rows an operation has, up to the count cap. */
export async function countAttemptHistory(store: StoreContext, key: OperationKey): Promise<BoundedCount> {
  return countUpTo(store, store.db.selectFrom(HISTORY_TABLE).where('caller_did', '=', key.callerDID).where('operation_id', '=', key.operationID));
}
