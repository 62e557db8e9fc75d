/**
 * Keyed requests of the write-back protocol (issue 37): every step (claim,
 * acquire, start, mark sent, record outcome, record reconcile result, renew,
 * release, finalize) may carry a client request key. The step and the record
 * of its key are written in one transaction (`kubun_connector_operation_request`,
 * migration 0013), so the same request resent after its answer was lost gets
 * the answer it had and writes nothing more, and another request under the
 * same key is an {@link IdempotencyConflictError} naming each field that
 * differs. A claim or acquire resent by its own claimant gets its lease back;
 * anyone else (another request key) is judged afresh, and sees IN_FLIGHT.
 *
 * The happy path costs one INSERT beside the step. A resent request is found
 * only when the step misses or finds its key taken: the step runs, and when
 * it fails (its fence moved on, its state is past it) or its key's row
 * already exists, the transaction is rolled back and the stored answer read.
 */
import { hash } from 'node:crypto';
import { sql, type QueryCreator, type RawBuilder } from 'kysely';
import type { OperationRequestRow, OperationRow } from '../../db/tables.js';
import { inTransaction, type StoreContext } from '../context.js';
import { IdempotencyConflictError, InvalidInputError, StoreError } from '../errors.js';
import { prepared } from '../prepared.js';
import type { ConnectorOperation, OperationKey, OperationLease } from './types.js';
import { rowToOperation } from './row.js';
import { requireNonEmptyString } from '../validate.js';

const REQUEST_TABLE = 'kubun_connector_operation_request';

/** The steps a request key can name, as the API's mutations are called. */
export type OperationRequestStep =
  | 'claimOperation'
  | 'acquireOperationLease'
  | 'startOperationAttempt'
  | 'markOperationSent'
  | 'recordOperationAttempt'
  | 'recordReconcileResult'
  | 'renewOperationLease'
  | 'releaseOperationLease'
  | 'finalizeOperation'
  | 'enqueueOperation';

/** The longest request key, in characters. */
export const MAX_REQUEST_KEY_LENGTH = 200;

/** One keyed request: the operation, the client's key, the step, and its input fields. */
export interface KeyedRequest {
  key: OperationKey;
  requestKey: string;
  step: OperationRequestStep;
  /**
   * Every input field of the request but the request key and the operation's
   * id; kept as a digest per field (a lease token or send marker is never
   * stored in the clear), compared field by field on a replay.
   */
  input: Record<string, unknown>;
}

/** How a step's answer is kept: its JSON without secrets, and the lease token it granted, if any. */
export interface AnswerCodec<A> {
  encode(answer: A): { answer: unknown; leaseToken: string | null };
  decode(answer: unknown, leaseToken: string | null): A;
  /** Whether the answer wrote anything (only those are recorded). Default: every answer. */
  wrote?(answer: A): boolean;
  /**
   * The answer of a step that returns the operation's row: a fenced step's
   * own statement (Postgres) records the row it wrote ({@link STEP_REQUEST}),
   * which a replay turns into the answer with this.
   */
  fromRow?(row: OperationRow, leaseToken: string | null, parts?: Record<string, unknown>): A;
}

/** A codec of a step that answers with the operation's row (see `fromRow`). */
export type RowAnswerCodec<A> = AnswerCodec<A> & { fromRow: (row: OperationRow, leaseToken: string | null, parts?: Record<string, unknown>) => A };

/** What a keyed step did: its answer, and whether it was the recorded answer of the same request (nothing written). */
export interface KeyedAnswer<A> {
  answer: A;
  replayed: boolean;
}

/** The request key was recorded by a concurrent request: this one's writes are rolled back. */
class RequestKeyTaken extends Error {}

/** Rounds of "run, find the key taken, read it" before giving up (the key's row vanished each time). */
const MAX_ROUNDS = 3;

/**
 * Runs `run` as the keyed request `request` (see the module comment);
 * without a request key it just runs it. `run` gets the transaction.
 */
export async function runKeyedRequest<A>(
  store: StoreContext,
  request: KeyedRequest | undefined,
  codec: AnswerCodec<A>,
  run: (tx: StoreContext) => Promise<A>,
): Promise<KeyedAnswer<A>> {
  if (request === undefined) return { answer: await run(store), replayed: false };
  requireRequestKey(request.requestKey);
  const input = digestInput(request.input);
  for (let round = 0; round < MAX_ROUNDS; round++) {
    try {
      const answer = await inTransaction(store, async (tx) => {
        const result = await run(tx);
        if (codec.wrote?.(result) === false) return result;
        const { answer: json, leaseToken } = codec.encode(result);
        const recorded = await recordRequest(tx, { key: request.key, requestKey: request.requestKey, step: request.step, input, answer: json, leaseToken });
        if (!recorded) throw new RequestKeyTaken();
        return result;
      });
      // An answer that wrote nothing (a claim found IN_FLIGHT) may still be the recorded one's replay.
      if (codec.wrote?.(answer) === false) {
        const stored = await selectRequest(store, request);
        if (stored !== undefined) return replay(stored, request, input, codec);
      }
      return { answer, replayed: false };
    } catch (error) {
      if (!(error instanceof RequestKeyTaken) && !(error instanceof StoreError)) throw error;
      const stored = await selectRequest(store, request);
      if (stored !== undefined) return replay(stored, request, input, codec);
      if (!(error instanceof RequestKeyTaken)) throw error;
    }
  }
  throw new RequestKeyTaken('the request key was taken and released repeatedly');
}

/** The recorded answer of `stored`, or the conflict when this request is not the one recorded under its key (`input` digested). */
export function replay<A>(stored: OperationRequestRow, request: KeyedRequest, input: Record<string, string>, codec: AnswerCodec<A>): KeyedAnswer<A> {
  const fields = differingRequestFields(stored, request.step, input);
  if (fields.length > 0) throw new IdempotencyConflictError(fields);
  return { answer: decodeAnswer(stored, codec), replayed: true };
}

/**
 * A recorded answer: the codec's JSON, or the row a fenced step's statement
 * recorded ({@link STEP_REQUEST}), made the answer the step gave with the
 * codec's `fromRow` and then replayed as its JSON would be.
 */
export function decodeAnswer<A>(stored: OperationRequestRow, codec: AnswerCodec<A>): A {
  const answer = JSON.parse(stored.answer) as unknown;
  if (codec.fromRow !== undefined && typeof answer === 'object' && answer !== null && STEP_ROW in answer) {
    const { [STEP_ROW]: row, sendMarkerSet, ...parts } = answer as { [STEP_ROW]: OperationRow; sendMarkerSet: boolean };
    // The marker itself is never recorded; the domain type only says whether one is set.
    const given = codec.fromRow({ ...row, lease_token: stored.lease_token, send_marker: sendMarkerSet ? MARKER_SET : null }, stored.lease_token, parts);
    return codec.decode(codec.encode(given).answer, stored.lease_token);
  }
  return codec.decode(answer, stored.lease_token);
}

/** The key of a recorded answer that is the operation's row. */
const STEP_ROW = 'row';
/** Stands in for a send marker known only to be set (the row recorded with a step's answer never keeps it). */
const MARKER_SET = '[set]';

/**
 * The request record a fenced step's single statement writes (Postgres,
 * src/store/operations/fenced-step.ts) from its CTE `u`, only when the step
 * wrote the row: the answer is the row as written, without the lease token
 * and the send marker (`sendMarkerSet` instead), which {@link decodeAnswer}
 * maps with the codec's `fromRow`. `keepsLeaseToken`: the step's answer
 * grants the lease (a renewal), kept in its own column as the others do.
 * A request key recorded already makes the insert collide on the table's
 * primary key, which rolls the whole statement back.
 */
export function STEP_REQUEST(
  qc: QueryCreator<any>,
  v: { requestKey: unknown; step: OperationRequestStep; input: unknown; now: unknown },
  keepsLeaseToken: boolean,
  /** Another row of the statement recorded with the answer (finalize's watch): its CTE, read beside `u`, under `part` in the answer. */
  beside?: { table: string; part: string; on?: RawBuilder<unknown> },
  /** Columns of `u` that are not the operation's (a gathered batch's input): left out of the answer. */
  omit: readonly string[] = [],
) {
  const row = sql.ref('u');
  // Several keys are left out in one pass (`- text[]`): each `- key` copies the whole object.
  const without = omit.length === 0 ? sql`'lease_token' - 'send_marker'` : sql`array[${sql.join(['lease_token', 'send_marker', ...omit].map((column) => sql.lit(column)))}]::text[]`;
  const parts = beside === undefined ? sql`` : sql`, ${sql.lit(beside.part)}, to_jsonb(${sql.ref(beside.table)})`;
  const from = beside === undefined ? qc.selectFrom('u') : beside.on === undefined ? qc.selectFrom(['u', beside.table]) : qc.selectFrom(['u', beside.table]).where(beside.on as never);
  return qc
    .insertInto(REQUEST_TABLE)
    .columns(['caller_did', 'operation_id', 'request_key', 'step', 'input', 'answer', 'lease_token', 'created_at'])
    .expression(
      from.select((eb) => [
        'u.caller_did',
        'u.operation_id',
        eb.val(v.requestKey).as('request_key'),
        sql.lit(v.step).as('step'),
        eb.val(v.input).as('input'),
        sql<string>`jsonb_build_object(${sql.lit(STEP_ROW)}, to_jsonb(${row}) - ${without}, 'sendMarkerSet', u.send_marker is not null${parts})::text`.as('answer'),
        keepsLeaseToken ? sql<string>`u.lease_token`.as('lease_token') : sql<null>`null`.as('lease_token'),
        eb.val(v.now).as('created_at'),
      ]),
    );
}

/** The primary key a recorded request key collides on. */
export const REQUEST_KEY_CONSTRAINT = 'kubun_connector_operation_request_pkey';

/**
 * The fields in which a request (its step and digested input) differs from
 * the one recorded in `stored`: `mutation` alone when it was another step,
 * none when it is the same request.
 */
export function differingRequestFields(stored: OperationRequestRow, step: OperationRequestStep, input: Record<string, string>): string[] {
  if (stored.step !== step) return ['mutation'];
  const recorded = JSON.parse(stored.input) as Record<string, string>;
  return [...new Set([...Object.keys(recorded), ...Object.keys(input)])].filter((field) => recorded[field] !== input[field]);
}

/** Each field's value as a digest: comparable, and nothing secret kept in the clear. Absent (undefined) fields are left out. */
export function digestInput(input: Record<string, unknown>): Record<string, string> {
  const digests: Record<string, string> = {};
  for (const [field, value] of Object.entries(input)) {
    if (value === undefined) continue;
    digests[field] = hash('sha256', JSON.stringify(value), 'base64url');
  }
  return digests;
}

/** A request key is 1 to 200 characters of text. */
export function requireRequestKey(requestKey: string): void {
  requireNonEmptyString('requestKey', requestKey);
  if (requestKey.length > MAX_REQUEST_KEY_LENGTH) throw new InvalidInputError('requestKey', `must be at most ${MAX_REQUEST_KEY_LENGTH} characters`);
}

const INSERT_REQUEST = prepared(
  (
    db,
    v: { callerDID: string; operationID: string; requestKey: string; step: string; input: string; answer: string; leaseToken: string | null; now: number },
  ) =>
    db
      .insertInto(REQUEST_TABLE)
      .values({
        caller_did: v.callerDID,
        operation_id: v.operationID,
        request_key: v.requestKey,
        step: v.step,
        input: v.input,
        answer: v.answer,
        lease_token: v.leaseToken,
        created_at: v.now,
      })
      .onConflict((oc) => oc.columns(['caller_did', 'operation_id', 'request_key']).doNothing())
      .returning(['request_key']),
);

const SELECT_REQUEST = prepared((db, v: { callerDID: string; operationID: string; requestKey: string }) =>
  db
    .selectFrom(REQUEST_TABLE)
    .select(['caller_did', 'operation_id', 'request_key', 'step', 'input', 'answer', 'lease_token', 'created_at'])
    .where('caller_did', '=', v.callerDID)
    .where('operation_id', '=', v.operationID)
    .where('request_key', '=', v.requestKey),
);

async function selectRequest(store: StoreContext, request: KeyedRequest): Promise<OperationRequestRow | undefined> {
  return findRecordedRequest(store, request.key, request.requestKey);
}

/** The request recorded under `requestKey` for the operation `key`, if any. */
export async function findRecordedRequest(store: StoreContext, key: OperationKey, requestKey: string): Promise<OperationRequestRow | undefined> {
  const { rows } = await SELECT_REQUEST(store, { callerDID: key.callerDID, operationID: key.operationID, requestKey });
  return rows[0];
}

/**
 * Records a request's digested input and its answer under `requestKey` (in
 * the caller's transaction); false when the key was already recorded.
 */
export async function recordRequest(
  store: StoreContext,
  request: { key: OperationKey; requestKey: string; step: OperationRequestStep; input: Record<string, string>; answer: unknown; leaseToken: string | null },
): Promise<boolean> {
  const { rows } = await INSERT_REQUEST(store, {
    callerDID: request.key.callerDID,
    operationID: request.key.operationID,
    requestKey: request.requestKey,
    step: request.step,
    input: JSON.stringify(request.input),
    answer: JSON.stringify(request.answer),
    leaseToken: request.leaseToken,
    now: store.now(),
  });
  return rows.length > 0;
}

/**
 * {@link recordRequest} for many requests in one INSERT (the answers of an
 * enqueue batch's new operations, whose keys no request can have used yet);
 * a key recorded already is left as it is.
 */
export async function recordRequests(
  store: StoreContext,
  requests: readonly { key: OperationKey; requestKey: string; step: OperationRequestStep; input: Record<string, string>; answer: unknown; leaseToken: string | null }[],
): Promise<void> {
  if (requests.length === 0) return;
  const now = store.now();
  if (store.dialect === 'postgres') {
    // One named statement whatever the number: each column one array.
    await RECORD_REQUESTS(store, {
      callerDIDs: requests.map((request) => request.key.callerDID),
      operationIDs: requests.map((request) => request.key.operationID),
      requestKeys: requests.map((request) => request.requestKey),
      steps: requests.map((request) => request.step),
      inputs: requests.map((request) => JSON.stringify(request.input)),
      answers: requests.map((request) => JSON.stringify(request.answer)),
      leaseTokens: requests.map((request) => request.leaseToken),
      now,
    });
    return;
  }
  await store.db
    .insertInto(REQUEST_TABLE)
    .values(
      requests.map((request) => ({
        caller_did: request.key.callerDID,
        operation_id: request.key.operationID,
        request_key: request.requestKey,
        step: request.step,
        input: JSON.stringify(request.input),
        answer: JSON.stringify(request.answer),
        lease_token: request.leaseToken,
        created_at: now,
      })),
    )
    .onConflict((oc) => oc.columns(['caller_did', 'operation_id', 'request_key']).doNothing())
    .execute();
}

/** {@link recordRequests} as one statement (Postgres): the requests' columns as arrays, unnested. */
const RECORD_REQUESTS = prepared(
  (
    db,
    v: { callerDIDs: string[]; operationIDs: string[]; requestKeys: string[]; steps: string[]; inputs: string[]; answers: string[]; leaseTokens: (string | null)[]; now: number },
  ) =>
    db
      .insertInto(REQUEST_TABLE)
      .columns(['caller_did', 'operation_id', 'request_key', 'step', 'input', 'answer', 'lease_token', 'created_at'])
      .expression(
        db
          .selectFrom(
            sql`unnest(${v.callerDIDs}::text[], ${v.operationIDs}::text[], ${v.requestKeys}::text[], ${v.steps}::text[], ${v.inputs}::text[], ${v.answers}::text[], ${v.leaseTokens}::text[])`.as(
              sql`i(caller_did, operation_id, request_key, step, input, answer, lease_token)` as never,
            ),
          )
          .select([
            sql.ref('i.caller_did').as('caller_did'),
            sql.ref('i.operation_id').as('operation_id'),
            sql.ref('i.request_key').as('request_key'),
            sql.ref('i.step').as('step'),
            sql.ref('i.input').as('input'),
            sql.ref('i.answer').as('answer'),
            sql.ref('i.lease_token').as('lease_token'),
            sql`${v.now}::bigint`.as('created_at'),
          ]) as never,
      )
      .onConflict((oc) => oc.columns(['caller_did', 'operation_id', 'request_key']).doNothing()),
);

/** A lease kept without its token (the token goes to its own column). */
export const withoutToken = (lease: OperationLease) => ({ expiresAt: lease.expiresAt, version: lease.version });
/** A kept lease given its token back. */
export const withToken = (lease: { expiresAt: number; version: number }, token: string | null): OperationLease => ({ ...lease, token: token ?? '' });

/** The answer of start, mark sent, record outcome, record reconcile result and release: the operation after it. */
export const OPERATION_ANSWER: RowAnswerCodec<ConnectorOperation> = {
  encode: (operation) => ({ answer: operation, leaseToken: null }),
  decode: (answer) => answer as ConnectorOperation,
  fromRow: (row) => rowToOperation(row),
};
