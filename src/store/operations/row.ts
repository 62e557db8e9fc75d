/** Row ↔ domain mapping of `kubun_connector_operation`, and small shared predicates. */
import type { ExpressionBuilder } from 'kysely';
import { OPERATION_COLUMNS, type OperationRow } from '../../db/tables.js';
import { prepared } from '../prepared.js';
import type { StoreContext } from '../context.js';
import { decodeJSONColumn } from '../json.js';
import {
  LIVE_OPERATION_STATES,
  type ConnectorOperation,
  type ConnectorOperationOp,
  type ConnectorOperationState,
  type OperationDeferReason,
  type OperationKey,
  type OperationOutcomeKind,
} from './types.js';

export const OPERATION_TABLE = 'kubun_connector_operation';

/** Maps a row to the domain type, dropping the lease token and send marker. */
export function rowToOperation(row: OperationRow): ConnectorOperation {
  return {
    callerDID: row.caller_did,
    operationID: row.operation_id,
    nodeKey: row.node_key,
    ownerDID: row.owner_did,
    connectorName: row.connector_name,
    model: row.model,
    op: row.op as ConnectorOperationOp,
    accountKey: row.account_key,
    target: row.target,
    sourceID: row.source_id,
    deterministicEventID: row.deterministic_event_id,
    payloadHash: row.payload_hash,
    reissueIntent: row.reissue_intent,
    providerEtag: row.provider_etag,
    documentID: row.document_id,
    resultEntity: decodeJSONColumn(row.result_entity),
    state: row.state as ConnectorOperationState,
    attempts: Number(row.attempts),
    nextAttemptAt: row.next_attempt_at === null ? null : Number(row.next_attempt_at),
    deferReason: row.defer_reason as OperationDeferReason | null,
    sendMarkerSet: row.send_marker !== null,
    lastKind: row.last_kind as OperationOutcomeKind | null,
    lastHTTPStatus: row.last_http_status === null ? null : Number(row.last_http_status),
    lastError: row.last_error ?? null,
    version: Number(row.version),
    incarnation: row.incarnation,
    leaseExpiresAt: row.lease_expires_at === null ? null : Number(row.lease_expires_at),
    createdAt: Number(row.created_at),
    updatedAt: Number(row.updated_at),
  };
}

/** Each field of the domain type and the column it is read from (`sendMarkerSet`: only whether the marker is set). */
const FIELD_COLUMNS = {
  callerDID: 'caller_did', operationID: 'operation_id', nodeKey: 'node_key', ownerDID: 'owner_did', connectorName: 'connector_name',
  model: 'model', op: 'op', accountKey: 'account_key', target: 'target', sourceID: 'source_id',
  deterministicEventID: 'deterministic_event_id', payloadHash: 'payload_hash', reissueIntent: 'reissue_intent', providerEtag: 'provider_etag',
  documentID: 'document_id', resultEntity: 'result_entity', state: 'state', attempts: 'attempts', nextAttemptAt: 'next_attempt_at',
  deferReason: 'defer_reason', sendMarkerSet: 'send_marker', lastKind: 'last_kind', lastHTTPStatus: 'last_http_status', lastError: 'last_error',
  version: 'version', incarnation: 'incarnation', leaseExpiresAt: 'lease_expires_at', createdAt: 'created_at', updatedAt: 'updated_at',
} as const satisfies Record<keyof ConnectorOperation, string>;

/** Every field, in the domain type's order (that of {@link rowToOperation}). */
const FULL_FIELDS = Object.keys(FIELD_COLUMNS) as (keyof ConnectorOperation)[];

/**
 * The fields of an operation's summary: what a dashboard's or the console's
 * list of operations shows (ConsoleOperationRow, the dashboard list), and
 * what the API itself reads of every operation it answers (the node key for
 * its id and cursor, the creation instant for its cursor, caller and owner
 * for visibility, the document for its watch, the state for its history).
 * Not the caller's free-form fields (target, payload hash, reissue intent,
 * …), the result entity or the last error, which can be long.
 */
export const OPERATION_SUMMARY_FIELDS = [
  'callerDID', 'operationID', 'nodeKey', 'ownerDID', 'connectorName', 'model', 'op', 'documentID', 'state', 'attempts', 'nextAttemptAt',
  'deferReason', 'lastKind', 'lastHTTPStatus', 'version', 'leaseExpiresAt', 'createdAt', 'updatedAt',
] as const satisfies readonly (keyof ConnectorOperation)[];

/** An operation as a summary read returns it ({@link OPERATION_SUMMARY_FIELDS}). */
export type OperationSummary = Pick<ConnectorOperation, (typeof OPERATION_SUMMARY_FIELDS)[number]>;

/**
 * The fields of an operation in brief, a subset of the summary: which
 * operation (and whose), its connector, state, attempts and document — what
 * a status list shows (the dashboard list of `npm run bench`, a document's
 * operations by state).
 */
export const OPERATION_BRIEF_FIELDS = [
  'callerDID', 'operationID', 'nodeKey', 'ownerDID', 'connectorName', 'documentID', 'state', 'attempts', 'createdAt',
] as const satisfies readonly (typeof OPERATION_SUMMARY_FIELDS)[number][];

/** An operation as a brief read returns it ({@link OPERATION_BRIEF_FIELDS}). */
export type OperationBrief = Pick<ConnectorOperation, (typeof OPERATION_BRIEF_FIELDS)[number]>;

/**
 * Which columns a read of operations asks the database for: `brief`
 * ({@link OPERATION_BRIEF_FIELDS}), `summary` ({@link OPERATION_SUMMARY_FIELDS})
 * or `full` (every field of the domain type). Each shape of each read is its own prepared (on Postgres, named)
 * statement. Neither ever reads the lease token or the finalize input; only
 * `full` looks at the send marker, and only at whether it is set.
 */
export type OperationShape = 'brief' | 'summary' | 'full';

/** An operation as a read of `shape` returns it. */
export type OperationOfShape<S extends OperationShape> = S extends 'brief' ? OperationBrief : S extends 'summary' ? OperationSummary : ConnectorOperation;

const SHAPE_FIELDS: Record<OperationShape, readonly (keyof ConnectorOperation)[]> = { brief: OPERATION_BRIEF_FIELDS, summary: OPERATION_SUMMARY_FIELDS, full: FULL_FIELDS };
/** The shapes smaller than `full`, smallest first, with their fields. */
const PARTIAL_SHAPES = (['brief', 'summary'] as const).map((shape) => [shape, new Set<string>(SHAPE_FIELDS[shape])] as const);

/** The smallest shape that returns every field of `fields` (domain field names); a name that is no field of the summary gives `full`. */
export function operationShapeFor(fields: Iterable<string>): OperationShape {
  const wanted = [...fields];
  for (const [shape, has] of PARTIAL_SHAPES) if (wanted.every((field) => has.has(field))) return shape;
  return 'full';
}

/**
 * The table's columns a read of `shape` needs, by name (the inner select of
 * a union whose outer select is {@link operationColumns}).
 */
export function operationTableColumns(shape: OperationShape): string[] {
  return SHAPE_FIELDS[shape].map((field) => FIELD_COLUMNS[field]);
}

/**
 * The columns of `shape` named as the domain type names its fields, in its
 * order, for reads of many rows (a page): each row comes back as the
 * operation it maps to but for two values {@link finishOperation} sets in
 * place, so a page makes one object per row instead of a row and then its
 * copy (issue 21). Used with a select builder's expression builder:
 * `.select(operationColumns('summary'))`.
 */
export function operationColumns(shape: OperationShape) {
  const fields = SHAPE_FIELDS[shape];
  return (eb: ExpressionBuilder<any, any>) =>
    fields.map((field) => (field === 'sendMarkerSet' ? eb(eb.ref('send_marker'), 'is not', null).as(field) : eb.ref(FIELD_COLUMNS[field]).as(field)));
}

/** Every field of the domain type: `.select(operationAsDomain)` (see {@link operationColumns}). */
export const operationAsDomain = operationColumns('full');

/**
 * A row read with {@link operationColumns}, made the domain type in place:
 * the result entity decoded, the send marker's presence a boolean (SQLite
 * answers 0 or 1), where the shape has them. The same values
 * {@link rowToOperation} gives.
 */
export function finishOperation(row: Record<string, unknown>): ConnectorOperation {
  if ('resultEntity' in row) row.resultEntity = decodeJSONColumn(row.resultEntity);
  if ('sendMarkerSet' in row) row.sendMarkerSet = row.sendMarkerSet === true || row.sendMarkerSet === 1;
  return row as unknown as ConnectorOperation;
}

/**
 * A lease is live while `lease_expires_at > now`; at exactly its expiry
 * instant it is already expired (and may be taken over).
 */
export function isLeaseLive(row: Pick<OperationRow, 'lease_token' | 'lease_expires_at'>, now: number): boolean {
  return row.lease_token !== null && row.lease_expires_at !== null && Number(row.lease_expires_at) > now;
}

/**
 * The send window (issue 37): a send marked at `t` with timeout `T` may still
 * be applied by the provider until `t + T`; a takeover waits `SEND_WINDOW_MARGIN_MS`
 * more (the request's trip, and the replicas' clocks, which judge it). Until
 * then no one may take the operation over, so no reconcile can miss a request
 * the provider is still applying. The sender's own recorded outcome other
 * than UNKNOWN (the provider answered) closes it.
 */
export const DEFAULT_SEND_TIMEOUT_MS = 30_000;
/** See {@link DEFAULT_SEND_TIMEOUT_MS}. */
export const SEND_WINDOW_MARGIN_MS = 2_000;

/** Whether a marked send may still be reaching the provider at `now` (nobody may take the operation over). */
export function isSendWindowOpen(row: Pick<OperationRow, 'send_deadline_at'>, now: number): boolean {
  return row.send_deadline_at !== null && Number(row.send_deadline_at) + SEND_WINDOW_MARGIN_MS > now;
}

/** SQL of "the send window is closed at `now`" ({@link isSendWindowOpen} negated). */
export function sendWindowClosedAt(eb: ExpressionBuilder<any, any>, now: number) {
  return sendWindowClosedBy(eb, now - SEND_WINDOW_MARGIN_MS);
}

/** {@link sendWindowClosedAt} with its cutoff (`now - SEND_WINDOW_MARGIN_MS`) given: a prepared statement's value. */
export function sendWindowClosedBy(eb: ExpressionBuilder<any, any>, cutoff: number) {
  return eb.or([eb('send_deadline_at', 'is', null), eb('send_deadline_at', '<=', cutoff)]);
}

/** Whether an operation in `state` can still change (see `LIVE_OPERATION_STATES`). */
export function isLiveState(state: string): boolean {
  return (LIVE_OPERATION_STATES as readonly string[]).includes(state);
}

/** Reads the raw row of `key` (lease token included: internal use only). */
export async function selectOperationRow(store: StoreContext, key: OperationKey): Promise<OperationRow | undefined> {
  const { rows } = await SELECT_BY_KEY(store, { callerDID: key.callerDID, operationID: key.operationID });
  return rows[0];
}

const SELECT_BY_KEY = prepared((db, v: OperationKey) =>
  db.selectFrom(OPERATION_TABLE).select(OPERATION_COLUMNS).where('caller_did', '=', v.callerDID).where('operation_id', '=', v.operationID),
);
