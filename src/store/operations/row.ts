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

/**
 * The columns of an operation named as the domain type names its fields, in
 * its order (that of {@link rowToOperation}), for reads of many rows (a
 * page): each row comes back as the `ConnectorOperation` it maps to but for
 * two values {@link finishOperation} sets in place, so a page makes one
 * object per row instead of a row and then its copy (issue 21). Never the
 * lease token; of the send marker, only whether it is set. Used with a
 * select builder's expression builder: `.select(operationAsDomain)`.
 */
export function operationAsDomain(eb: ExpressionBuilder<any, any>) {
  const columns = (...pairs: [string, string][]) => pairs.map(([column, field]) => eb.ref(column).as(field));
  return [
    ...columns(
      ['caller_did', 'callerDID'], ['operation_id', 'operationID'], ['node_key', 'nodeKey'], ['owner_did', 'ownerDID'], ['connector_name', 'connectorName'],
      ['model', 'model'], ['op', 'op'], ['account_key', 'accountKey'], ['target', 'target'], ['source_id', 'sourceID'],
      ['deterministic_event_id', 'deterministicEventID'], ['payload_hash', 'payloadHash'], ['reissue_intent', 'reissueIntent'], ['provider_etag', 'providerEtag'],
      ['document_id', 'documentID'], ['result_entity', 'resultEntity'], ['state', 'state'], ['attempts', 'attempts'], ['next_attempt_at', 'nextAttemptAt'],
      ['defer_reason', 'deferReason'],
    ),
    eb(eb.ref('send_marker'), 'is not', null).as('sendMarkerSet'),
    ...columns(
      ['last_kind', 'lastKind'], ['last_http_status', 'lastHTTPStatus'], ['last_error', 'lastError'], ['version', 'version'], ['incarnation', 'incarnation'],
      ['lease_expires_at', 'leaseExpiresAt'], ['created_at', 'createdAt'], ['updated_at', 'updatedAt'],
    ),
  ];
}

/**
 * A row read with {@link operationAsDomain}, made the domain type in place:
 * the result entity decoded, the send marker's presence a boolean (SQLite
 * answers 0 or 1). The same values {@link rowToOperation} gives.
 */
export function finishOperation(row: Record<string, unknown>): ConnectorOperation {
  row.resultEntity = decodeJSONColumn(row.resultEntity);
  row.sendMarkerSet = row.sendMarkerSet === true || row.sendMarkerSet === 1;
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
  return eb.or([eb('send_deadline_at', 'is', null), eb('send_deadline_at', '<=', now - SEND_WINDOW_MARGIN_MS)]);
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
