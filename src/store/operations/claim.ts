/** Claiming an operation by idempotency key: create, take over, replay or refuse (SPEC §3.3). */
import type { OperationRow } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { IdempotencyConflictError, StaleVersionError } from '../errors.js';
import { isLeaseLive, isSendWindowOpen, rowToOperation, selectOperationRow } from './row.js';
import { takeOverLease } from './takeover.js';
import { OPERATION_OPS, type ConnectorOperation, type OperationLease } from './types.js';
import { requireNonEmptyString, requireOneOf, requirePositiveMs } from '../validate.js';
import { insertOperation, newOperationInsert, newOperationValues, type NewOperationValues, type OperationWriteInput } from './insert.js';
import type { QueryCreator } from 'kysely';
import { prepared } from '../prepared.js';
import { digestInput, REQUEST_KEY_CONSTRAINT, runKeyedRequest, STEP_REQUEST, withToken, withoutToken, type RowAnswerCodec } from './requests.js';
import { selectWritten, type FencedStepAnswer } from './fenced-step.js';
import { isUniqueViolation } from '../../db/errors.js';

/** What {@link claimOperation} needs: the idempotency key, the write it stands for, and the lease length. */
export interface ClaimOperationInput extends OperationWriteInput {
  /** Lease length in ms (a positive integer). */
  leaseMs: number;
}

/**
 * CLAIMED: the caller holds a lease (a new operation, or a taken-over one).
 * REPLAYED: the operation committed before; here is its result.
 * DEAD: the operation was given up. IN_FLIGHT: another holder's lease is live.
 */
export type ClaimOutcome = 'CLAIMED' | 'REPLAYED' | 'DEAD' | 'IN_FLIGHT';

/** The result of a claim. `lease` only with CLAIMED, `replay` only with REPLAYED. */
export interface ClaimOperationResult {
  outcome: ClaimOutcome;
  operation: ConnectorOperation;
  lease?: OperationLease;
  replay?: { documentID: string | null; resultEntity: unknown };
}

/**
 * Every field a claim records, checked in this order; each that differs from
 * the stored row is named in the conflict (the first is `field`). A replay
 * that differs in any of them (the account, the deterministic event id, the
 * reissue intent, the source id included: issue 37) would otherwise be
 * answered with the first claim's values and hide the change.
 */
const RECORDED_FIELDS = [
  ['ownerDID', 'owner_did'],
  ['connectorName', 'connector_name'],
  ['model', 'model'],
  ['op', 'op'],
  ['target', 'target'],
  ['payloadHash', 'payload_hash'],
  ['accountKey', 'account_key'],
  ['deterministicEventID', 'deterministic_event_id'],
  ['reissueIntent', 'reissue_intent'],
] as const satisfies readonly (readonly [keyof OperationWriteInput, keyof OperationRow])[];

/** Rounds of reload-and-re-evaluate after a lost insert or takeover race. */
const MAX_CLAIM_ROUNDS = 5;

/**
 * Claims the operation `(callerDID, operationID)`: inserts it as `attempted`
 * with a lease when new, takes over an absent or expired lease of a live one
 * (an attempted row with a send marker becomes `reconcile_only`), replays a
 * committed one, reports a dead one or a live lease held by someone else, and
 * refuses with {@link IdempotencyConflictError} when the stored write differs.
 */
export async function claimOperation(store: StoreContext, input: ClaimOperationInput): Promise<ClaimOperationResult> {
  validateClaim(input);
  const now = store.now();
  // A new key is the common case: one INSERT. It conflicts only when the row exists (or a concurrent claim just made it).
  const inserted = await insertClaimed(store, input, now);
  if (inserted !== undefined) return inserted;
  for (let round = 0; round < MAX_CLAIM_ROUNDS; round++) {
    const row = await selectOperationRow(store, input);
    if (row === undefined) {
      // Gone since (retention, the document sweep): claim it anew.
      const anew = await insertClaimed(store, input, now);
      if (anew !== undefined) return anew;
      continue; // a concurrent claim inserted first: judge its row
    }
    const settled = judgeExisting(row, input, now);
    if (settled !== undefined) return settled;
    const taken = await takeOverLease(store, row, input.leaseMs, now);
    if (taken !== undefined) return claimed(taken.row, taken.token);
  }
  // Every round lost a race: someone else keeps winning the row.
  const row = await selectOperationRow(store, input);
  if (row === undefined) throw new StaleVersionError('operation');
  return judgeExisting(row, input, now) ?? { outcome: 'IN_FLIGHT', operation: rowToOperation(row) };
}

/** A new key's claim as one statement (Postgres): the INSERT, the request key's record and the NOTIFY, all or nothing. */
function claimStatement(keyed: boolean) {
  return prepared((db, v: NewOperationValues & { requestKey?: string; requestInput?: string }) => {
    let query: any = db.with('u', (qc) => newOperationInsert(qc, v));
    if (keyed) query = query.with('r', (qc: QueryCreator<any>) => STEP_REQUEST(qc, { requestKey: v.requestKey, step: 'claimOperation', input: v.requestInput, now: v.now }, true));
    return selectWritten(query);
  });
}

const CLAIM_STATEMENTS = { plain: claimStatement(false), keyed: claimStatement(true) };

/**
 * {@link claimOperation} as the API's step, keyed by the client's request
 * key (src/store/operations/requests.ts). A new key on Postgres is one
 * statement: the INSERT, the record of the request key and the NOTIFY of the
 * change (`announced`). An existing key, and SQLite, run the claim and the
 * record in one transaction, as {@link claimOperation} judges the row.
 */
export async function claimOperationStep(
  store: StoreContext,
  input: ClaimOperationInput,
  request?: { requestKey: string; input: Record<string, unknown> },
): Promise<FencedStepAnswer<ClaimOperationResult>> {
  validateClaim(input);
  if (store.dialect === 'postgres' && !store.db.isTransaction) {
    const now = store.now();
    const token = store.getRandomID();
    const values = newOperationValues(store, input, { now, nextAttemptAt: now, lease: { token, expiresAt: now + input.leaseMs } });
    try {
      const { rows } =
        request === undefined
          ? await CLAIM_STATEMENTS.plain(store, values)
          : await CLAIM_STATEMENTS.keyed(store, { ...values, requestKey: request.requestKey, requestInput: JSON.stringify(digestInput(request.input)) });
      const row = rows[0] as OperationRow | undefined;
      if (row !== undefined) return { answer: claimed(row, token), replayed: false, announced: true };
    } catch (error) {
      // The request key was recorded for this key before (its row since deleted): judged below, as a resend.
      if (!isUniqueViolation(error, REQUEST_KEY_CONSTRAINT)) throw error;
    }
  }
  const keyed = request === undefined ? undefined : { key: { callerDID: input.callerDID, operationID: input.operationID }, requestKey: request.requestKey, step: 'claimOperation' as const, input: request.input };
  return { ...(await runKeyedRequest(store, keyed, CLAIM_ANSWER, (tx) => claimOperation(tx, input))), announced: false };
}

/** The outcome for an existing row, or `undefined` when its lease may be taken over. */
function judgeExisting(row: OperationRow, input: ClaimOperationInput, now: number): ClaimOperationResult | undefined {
  checkSameWrite(row, input);
  if (row.state === 'committed') {
    const operation = rowToOperation(row);
    return { outcome: 'REPLAYED', operation, replay: { documentID: operation.documentID, resultEntity: operation.resultEntity } };
  }
  if (row.state === 'dead') return { outcome: 'DEAD', operation: rowToOperation(row) };
  // A marked send still inside its window is in flight too, whoever held it.
  if (isLeaseLive(row, now) || isSendWindowOpen(row, now)) return { outcome: 'IN_FLIGHT', operation: rowToOperation(row) };
  return undefined;
}

async function insertClaimed(store: StoreContext, input: ClaimOperationInput, now: number): Promise<ClaimOperationResult | undefined> {
  const token = store.getRandomID();
  const row = await insertOperation(store, input, { now, nextAttemptAt: now, lease: { token, expiresAt: now + input.leaseMs } });
  return row === undefined ? undefined : claimed(row, token);
}

function claimed(row: OperationRow, token: string): ClaimOperationResult {
  const operation = rowToOperation(row);
  return {
    outcome: 'CLAIMED',
    operation,
    lease: { token, expiresAt: operation.leaseExpiresAt as number, version: operation.version },
  };
}

/**
 * Refuses with {@link IdempotencyConflictError}, naming every differing
 * field, unless `input` is the write `row` recorded (the claim's rule, which
 * enqueue shares).
 */
export function checkSameWrite(row: OperationRow, input: OperationWriteInput): void {
  const differing: string[] = RECORDED_FIELDS.filter(([field, column]) => row[column] !== input[field]).map(([field]) => field);
  // An absent source id is recorded as null: a replay naming none matches a claim that named none.
  if (row.source_id !== (input.sourceID ?? null)) differing.push('sourceID');
  // A claim that names its document is the same write only for that document (one that names none: finalize may have set it).
  if (input.documentID != null && row.document_id !== input.documentID) differing.push('documentID');
  // Likewise a claim that names its send timeout.
  if (input.sendTimeoutMs != null && (row.send_timeout_ms === null ? null : Number(row.send_timeout_ms)) !== input.sendTimeoutMs) differing.push('sendTimeoutMs');
  if (differing.length > 0) throw new IdempotencyConflictError(differing);
}

function validateClaim(input: ClaimOperationInput): void {
  validateOperationWrite(input);
  requirePositiveMs('leaseMs', input.leaseMs);
}

/** The input checks of a new operation's write (claim and enqueue). */
export function validateOperationWrite(input: OperationWriteInput): void {
  for (const field of [
    'callerDID',
    'operationID',
    'ownerDID',
    'connectorName',
    'model',
    'accountKey',
    'target',
    'deterministicEventID',
    'payloadHash',
    'reissueIntent',
  ] as const) {
    requireNonEmptyString(field, input[field]);
  }
  requireOneOf('op', input.op, OPERATION_OPS);
  if (input.sourceID !== undefined && input.sourceID !== null) requireNonEmptyString('sourceID', input.sourceID);
  if (input.documentID !== undefined && input.documentID !== null) requireNonEmptyString('documentID', input.documentID);
  if (input.sendTimeoutMs != null) requirePositiveMs('sendTimeoutMs', input.sendTimeoutMs);
}

/** The answer of a claim that took a lease (REPLAYED, DEAD and IN_FLIGHT wrote nothing and are judged afresh). */
export const CLAIM_ANSWER: RowAnswerCodec<ClaimOperationResult> = {
  fromRow: (row, token) => {
    const operation = rowToOperation(row);
    return { outcome: 'CLAIMED', operation, lease: withToken({ expiresAt: operation.leaseExpiresAt as number, version: operation.version }, token) };
  },
  encode: (result) => ({
    answer: { outcome: result.outcome, operation: result.operation, lease: result.lease === undefined ? null : withoutToken(result.lease) },
    leaseToken: result.lease?.token ?? null,
  }),
  decode: (answer, token) => {
    const { outcome, operation, lease } = answer as { outcome: ClaimOperationResult['outcome']; operation: ConnectorOperation; lease: { expiresAt: number; version: number } | null };
    return { outcome, operation, ...(lease !== null && { lease: withToken(lease, token) }) };
  },
  wrote: (result) => result.outcome === 'CLAIMED',
};
