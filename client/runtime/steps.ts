/**
 * How `writeBack` sends its fenced steps (start, mark sent, record outcome,
 * finalize): one request each ({@link singleSteps}, the default), or, in
 * `runWorker`, gathered across its operations ({@link batchedSteps}): the
 * steps its operations reach in the same turn of the event loop go as one
 * request of the step's batch form (`startOperationAttempts`, …), each item
 * answered exactly as its single step would be (issue 40 item 3). Each item
 * keeps its own request key, so a batch resent after a lost answer is
 * answered item by item as before.
 */
import {
  RuntimeFinalizeOperationDocument,
  RuntimeFinalizeOperationsDocument,
  RuntimeMarkOperationSentDocument,
  RuntimeMarkOperationsSentDocument,
  RuntimeRecordOperationAttemptDocument,
  RuntimeRecordOperationAttemptsDocument,
  RuntimeStartOperationAttemptDocument,
  RuntimeStartOperationAttemptsDocument,
  type FinalizeOperationInput,
  type MarkOperationSentInput,
  type RecordOperationAttemptInput,
  type RuntimeFinalizeOperationMutation,
  type RuntimeMarkOperationSentMutation,
  type RuntimeRecordOperationAttemptMutation,
  type RuntimeStartOperationAttemptMutation,
  type StartOperationAttemptInput,
} from '../generated/graphql.js';
import type { StoreClient } from './store-client.js';

/** The fenced steps `writeBack` sends, each answering what its single mutation answers. */
export interface WriteBackSteps {
  start(input: StartOperationAttemptInput): Promise<RuntimeStartOperationAttemptMutation['startOperationAttempt']>;
  mark(input: MarkOperationSentInput): Promise<RuntimeMarkOperationSentMutation['markOperationSent']>;
  record(input: RecordOperationAttemptInput): Promise<RuntimeRecordOperationAttemptMutation['recordOperationAttempt']>;
  finalize(input: FinalizeOperationInput): Promise<RuntimeFinalizeOperationMutation['finalizeOperation']>;
}

/** Resent on a lost answer or any 5xx: every step carries its request key. */
const KEYED = { retryServerErrors: true } as const;

/** The most items one batch carries (the server's cap). */
const MAX_BATCH = 100;

/** One request per step. */
export function singleSteps(client: StoreClient): WriteBackSteps {
  return {
    start: async (input) => (await client.request(RuntimeStartOperationAttemptDocument, { input }, KEYED)).startOperationAttempt,
    mark: async (input) => (await client.request(RuntimeMarkOperationSentDocument, { input }, KEYED)).markOperationSent,
    record: async (input) => (await client.request(RuntimeRecordOperationAttemptDocument, { input }, KEYED)).recordOperationAttempt,
    finalize: async (input) => (await client.request(RuntimeFinalizeOperationDocument, { input }, KEYED)).finalizeOperation,
  };
}

/** The steps reached in the same turn of the event loop, sent as one request per kind of step. */
export function batchedSteps(client: StoreClient): WriteBackSteps {
  return {
    start: gathered(async (items: StartOperationAttemptInput[]) => itemsOf((await client.request(RuntimeStartOperationAttemptsDocument, { input: { items } }, KEYED)).startOperationAttempts, items.length)),
    mark: gathered(async (items: MarkOperationSentInput[]) => itemsOf((await client.request(RuntimeMarkOperationsSentDocument, { input: { items } }, KEYED)).markOperationsSent, items.length)),
    record: gathered(async (items: RecordOperationAttemptInput[]) => itemsOf((await client.request(RuntimeRecordOperationAttemptsDocument, { input: { items } }, KEYED)).recordOperationAttempts, items.length)),
    finalize: gathered(async (items: FinalizeOperationInput[]) => itemsOf((await client.request(RuntimeFinalizeOperationsDocument, { input: { items } }, KEYED)).finalizeOperations, items.length)),
  };
}

/** A batch's results; a refusal of the whole batch (its input) is every item's answer. */
function itemsOf<R, E extends { __typename: string }>(answer: { __typename: string; results?: R[] } | E, count: number): (R | E)[] {
  if ('results' in answer && answer.results !== undefined) return answer.results;
  return Array.from({ length: count }, () => answer as E);
}

/** Calls of `send` gathered until the current turn of the event loop ends, then sent at most {@link MAX_BATCH} at a time. */
function gathered<I, R>(send: (items: I[]) => Promise<R[]>): (item: I) => Promise<any> {
  let waiting: { item: I; resolve: (result: R) => void; reject: (error: unknown) => void }[] = [];
  const flush = () => {
    const all = waiting;
    waiting = [];
    for (let first = 0; first < all.length; first += MAX_BATCH) {
      const batch = all.slice(first, first + MAX_BATCH);
      send(batch.map((entry) => entry.item)).then(
        (results) => batch.forEach((entry, i) => entry.resolve(results[i]!)),
        (error: unknown) => batch.forEach((entry) => entry.reject(error)),
      );
    }
  };
  return (item) =>
    new Promise<R>((resolve, reject) => {
      if (waiting.length === 0) setTimeout(flush, 0);
      waiting.push({ item, resolve, reject });
    });
}
