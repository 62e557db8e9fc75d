/**
 * `enqueue`: how write-back work comes to exist (docs/worker.md). A device
 * or a service records the write by its idempotency key, with no lease; a
 * worker (`runWorker`) takes it through `dueOperations` once it is due. The
 * server recognises a resent enqueue by that key and answers it as the first
 * time, so the client resends one whose answer was lost (a reset connection,
 * a 5xx) and the caller never sees the difference.
 */
import {
  EnqueueOperationDocument,
  EnqueueOperationsDocument,
  type ConnectorOperationFieldsFragment,
  type EnqueueOperationInput,
} from '../generated/graphql.js';
import { StoreRequestError, type StoreClient, type StoreRequestOptions } from './store-client.js';

/** What {@link enqueue} and {@link enqueueAll} answer for one operation. */
export type EnqueueResult =
  /** Recorded now: ATTEMPTED, no lease, due at `operation.nextAttemptAt`. */
  | { status: 'created'; operation: ConnectorOperationFieldsFragment }
  /** The key already held this same write; nothing was written. `operation` is as the first enqueue answered it. */
  | { status: 'replayed'; operation: ConnectorOperationFieldsFragment }
  /** The key was used before for another write: `fields` names what differs. Send the original write, or use a new key. */
  | { status: 'conflict'; code: 'IDEMPOTENCY_CONFLICT'; message: string; field: string; fields: string[] };

/** The most operations one {@link enqueueAll} call sends (the server's `enqueueOperations` cap). */
export const MAX_ENQUEUE_BATCH = 100;

/** Resent after a lost answer: the server answers an enqueue again by its key. */
const RESENDABLE: StoreRequestOptions = { retryServerErrors: true };

type Refusal = { __typename: string; code?: string; message?: string; field?: string; fields?: string[] };

/**
 * Enqueues one write-back intent (`enqueueOperation`): due now, or at
 * `input.notBefore`. Resolves with what the server did; rejects with a
 * {@link StoreRequestError} when the server refused the input
 * (`VALIDATION_FAILED`, `FORBIDDEN` for another owner unless you are a
 * service, `INVALID_INPUT`) or could not be reached within the retries.
 */
export async function enqueue(client: StoreClient, input: EnqueueOperationInput, options: Pick<StoreRequestOptions, 'signal'> = {}): Promise<EnqueueResult> {
  const { enqueueOperation: result } = await client.request(EnqueueOperationDocument, { input }, { ...RESENDABLE, ...options });
  if (result.__typename === 'EnqueueOperationPayload') return { status: result.outcome === 'CREATED' ? 'created' : 'replayed', operation: result.operation };
  if (result.__typename === 'IdempotencyConflictError') return conflict(result);
  throw refusal(result);
}

/**
 * Enqueues up to {@link MAX_ENQUEUE_BATCH} intents in one transaction
 * (`enqueueOperations`): one result per input, in order; a conflict is that
 * item's result and the others are written. Rejects, with nothing written,
 * when the server refused the batch (an invalid item, an owner you may not
 * act for, a key named twice, more than the cap).
 */
export async function enqueueAll(client: StoreClient, inputs: readonly EnqueueOperationInput[], options: Pick<StoreRequestOptions, 'signal'> = {}): Promise<EnqueueResult[]> {
  const { enqueueOperations: result } = await client.request(EnqueueOperationsDocument, { input: { operations: [...inputs] } }, { ...RESENDABLE, ...options });
  if (result.__typename !== 'EnqueueOperationsPayload') throw refusal(result);
  return result.results.map((item) =>
    item.__typename === 'EnqueueOperationPayload' ? { status: item.outcome === 'CREATED' ? 'created' : 'replayed', operation: item.operation } : conflict(item),
  );
}

function conflict(error: Refusal): EnqueueResult {
  return { status: 'conflict', code: 'IDEMPOTENCY_CONFLICT', message: error.message ?? 'idempotency conflict', field: error.field ?? '', fields: error.fields ?? [] };
}

function refusal(error: Refusal): StoreRequestError {
  return new StoreRequestError({ code: error.code ?? error.__typename, message: error.message ?? 'refused', retryable: false });
}
