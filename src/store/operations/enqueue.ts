/**
 * Enqueueing write-back intents (issue 39): an operation recorded by its
 * idempotency key with no lease, due now or at `notBefore`, which a worker
 * takes through due work (`listDueOperations`, then `acquireOperationLease`)
 * exactly as it takes a released one. The same write under the same key is
 * the claim's rule (`checkSameWrite`); an enqueue's first answer is recorded
 * beside the operation (in `kubun_connector_operation_request`, under
 * {@link ENQUEUE_REQUEST_KEY}), so a resend after a lost answer gets that
 * answer field for field and writes nothing.
 */
import type { OperationRow } from '../../db/tables.js';
import { inTransaction, type StoreContext } from '../context.js';
import { IdempotencyConflictError, InvalidInputError, StaleVersionError } from '../errors.js';
import { checkSameWrite, validateOperationWrite } from './claim.js';
import { insertOperation, insertOperations, newOperationValues, type OperationWriteInput } from './insert.js';
import { differingRequestFields, digestInput, findRecordedRequest, recordRequest, recordRequests } from './requests.js';
import { rowToOperation, selectOperationRow } from './row.js';
import type { ConnectorOperation } from './types.js';
import { requireMsEpoch } from '../validate.js';

/** The most operations one {@link enqueueOperations} call may name. */
export const MAX_ENQUEUE_BATCH = 100;

/**
 * The request key an enqueue records its answer under. The operation's own
 * idempotency key names the request, so it needs no key of the client's; a
 * client's request keys are never empty, so the two cannot meet.
 */
export const ENQUEUE_REQUEST_KEY = '';

/** What {@link enqueueOperation} needs: the write, and when it may first be sent. */
export interface EnqueueOperationInput extends OperationWriteInput {
  /** When the operation is first due (ms epoch). Default, and for any earlier instant: now. */
  notBefore?: number | null;
}

/** `created`: this call recorded the operation. `replayed`: its key already held the same write; nothing was written. */
export type EnqueueOutcome = 'created' | 'replayed';

/**
 * The answer of an enqueue. A replay of an earlier enqueue carries that
 * enqueue's operation exactly as it was answered then (read the operation
 * to see where it is now); when the key was first used by a claim, there is
 * no such answer and the operation is as it is now.
 */
export interface EnqueueOperationResult {
  outcome: EnqueueOutcome;
  operation: ConnectorOperation;
}

/** One item of {@link enqueueOperations}: its answer, or the conflict that left it unwritten. */
export type EnqueueItemResult = EnqueueOperationResult | { outcome: 'conflict'; error: IdempotencyConflictError };

/** Rounds of insert-or-read when the row vanishes between the two (retention, the document sweep). */
const MAX_ENQUEUE_ROUNDS = 3;

/**
 * Records the write-back intent `input` (SPEC §8 Enqueue): a new key becomes
 * an `attempted` operation with no lease, version 0, due at `notBefore` (or
 * now). The same write under an existing key is `replayed` and writes
 * nothing; another write is an {@link IdempotencyConflictError} naming each
 * differing field (`notBefore` among them after an enqueue).
 */
export async function enqueueOperation(store: StoreContext, input: EnqueueOperationInput): Promise<EnqueueOperationResult> {
  return (await enqueueOperationStep(store, input)).result;
}

/**
 * {@link enqueueOperation} as the API's step: a batch of one
 * ({@link enqueueOperationsStep}, one path for both), so a new key on
 * Postgres is announced inside its transaction by its INSERT (`announced`),
 * as a batch's are.
 */
export async function enqueueOperationStep(store: StoreContext, input: EnqueueOperationInput): Promise<{ result: EnqueueOperationResult; announced: boolean }> {
  const { results, announced } = await enqueueOperationsStep(store, [input]);
  const result = results[0]!;
  if (result.outcome === 'conflict') throw result.error;
  return { result, announced: result.outcome === 'created' && announced.has(result.operation.nodeKey) };
}

/**
 * {@link enqueueOperation} for up to {@link MAX_ENQUEUE_BATCH} operations in
 * one transaction, answered in input order. A conflict is that item's answer
 * and leaves the others to be written; an invalid item (or a key named
 * twice) refuses the whole batch before anything is written, and a failure
 * midway writes nothing. New keys cost two statements whatever their
 * number (the operations' INSERT and their answers'); rows are written in
 * key order, so concurrent batches sharing keys lock them in the same order.
 */
export async function enqueueOperations(store: StoreContext, inputs: readonly EnqueueOperationInput[]): Promise<EnqueueItemResult[]> {
  return (await enqueueOperationsStep(store, inputs)).results;
}

/**
 * {@link enqueueOperations} as the API's step: also the node keys of the
 * created operations its own statements announced (on Postgres, the batch's
 * INSERT, inside the transaction); any other created one (a key that was
 * deleted while the batch judged it, enqueued anew alone) is the caller's
 * to announce.
 */
export async function enqueueOperationsStep(
  store: StoreContext,
  inputs: readonly EnqueueOperationInput[],
): Promise<{ results: EnqueueItemResult[]; announced: ReadonlySet<string> }> {
  if (!Array.isArray(inputs) || inputs.length < 1 || inputs.length > MAX_ENQUEUE_BATCH) {
    throw new InvalidInputError('operations', `must name 1 to ${MAX_ENQUEUE_BATCH} operations`);
  }
  const seen = new Set<string>();
  for (const input of inputs) {
    validateEnqueue(input);
    const key = JSON.stringify([input.callerDID, input.operationID]);
    if (seen.has(key)) throw new InvalidInputError('operations', `operationID ${JSON.stringify(input.operationID)} is named more than once`);
    seen.add(key);
  }
  const order = inputs.map((_input, index) => index).sort((a, b) => compareKeys(inputs[a]!, inputs[b]!));
  return inTransaction(store, async (tx) => {
    const now = tx.now();
    const results: (EnqueueItemResult | undefined)[] = new Array(inputs.length);
    // Every new key in one INSERT and their answers in another, whatever the batch's size.
    const inserted = await insertOperations(
      tx,
      order.map((index) => newOperationValues(tx, inputs[index]!, { now, nextAttemptAt: Math.max(now, inputs[index]!.notBefore ?? now), lease: null })),
    );
    const announced = new Set(inserted.announced ? inserted.rows.map((row) => row.node_key) : []);
    const insertedByKey = new Map(inserted.rows.map((row) => [keyText(row.caller_did, row.operation_id), row]));
    const answers = [];
    for (const index of order) {
      const input = inputs[index]!;
      const row = insertedByKey.get(keyText(input.callerDID, input.operationID));
      if (row === undefined) continue;
      const operation = rowToOperation(row);
      results[index] = { outcome: 'created', operation };
      answers.push({ key: { callerDID: input.callerDID, operationID: input.operationID }, requestKey: ENQUEUE_REQUEST_KEY, step: 'enqueueOperation' as const, input: digestInput(requestFieldsOf(input)), answer: operation, leaseToken: null });
    }
    await recordRequests(tx, answers);
    // Keys that existed: each judged as a single enqueue judges it (a replay, or its conflict).
    for (const index of order) {
      if (results[index] !== undefined) continue;
      try {
        results[index] = await enqueueOne(tx, inputs[index]!, now);
      } catch (error) {
        // Found before anything of this item was written: the batch goes on.
        if (!(error instanceof IdempotencyConflictError)) throw error;
        results[index] = { outcome: 'conflict', error };
      }
    }
    return { results: results as EnqueueItemResult[], announced };
  });
}

/** An idempotency key as one string. */
const keyText = (callerDID: string, operationID: string) => JSON.stringify([callerDID, operationID]);

/** Inserts the operation and records its answer, or judges the row its key already holds. */
async function enqueueOne(tx: StoreContext, input: EnqueueOperationInput, now: number): Promise<EnqueueOperationResult> {
  const key = { callerDID: input.callerDID, operationID: input.operationID };
  const request = digestInput(requestFieldsOf(input));
  for (let round = 0; round < MAX_ENQUEUE_ROUNDS; round++) {
    const inserted = await insertOperation(tx, input, { now, nextAttemptAt: Math.max(now, input.notBefore ?? now), lease: null });
    if (inserted !== undefined) {
      const operation = rowToOperation(inserted);
      await recordRequest(tx, { key, requestKey: ENQUEUE_REQUEST_KEY, step: 'enqueueOperation', input: request, answer: operation, leaseToken: null });
      return { outcome: 'created', operation };
    }
    const row = await selectOperationRow(tx, key);
    if (row === undefined) continue; // gone since: enqueue it anew
    return judgeExisting(tx, row, input, request);
  }
  throw new StaleVersionError('operation');
}

/** The replay of an existing key, or its conflict. */
async function judgeExisting(tx: StoreContext, row: OperationRow, input: EnqueueOperationInput, request: Record<string, string>): Promise<EnqueueOperationResult> {
  const recorded = await findRecordedRequest(tx, input, ENQUEUE_REQUEST_KEY);
  if (recorded === undefined) {
    // The key was first used by a claim: the claim's rule, and the operation as it is.
    checkSameWrite(row, input);
    return { outcome: 'replayed', operation: rowToOperation(row) };
  }
  const fields = differingRequestFields(recorded, 'enqueueOperation', request);
  if (fields.length > 0) throw new IdempotencyConflictError(fields);
  return { outcome: 'replayed', operation: JSON.parse(recorded.answer) as ConnectorOperation };
}

/** Every field of an enqueue but its key, absent and null alike left out (a replay that omits one names the same write). */
function requestFieldsOf(input: EnqueueOperationInput): Record<string, unknown> {
  const { callerDID: _caller, operationID: _operation, ...fields } = input;
  return Object.fromEntries(Object.entries(fields).filter(([, value]) => value != null));
}

function compareKeys(a: EnqueueOperationInput, b: EnqueueOperationInput): number {
  if (a.callerDID !== b.callerDID) return a.callerDID < b.callerDID ? -1 : 1;
  return a.operationID < b.operationID ? -1 : a.operationID > b.operationID ? 1 : 0;
}

function validateEnqueue(input: EnqueueOperationInput): void {
  validateOperationWrite(input);
  if (input.notBefore != null) requireMsEpoch('notBefore', input.notBefore);
}
