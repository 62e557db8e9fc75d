/**
 * The write-back runtime (`connector-store-client/runtime`): a GraphQL client
 * for the server ({@link createStoreClient}), one operation through the
 * fenced protocol ({@link writeBack}), and a worker that runs a connector's
 * due operations ({@link runWorker}), and how that work comes to exist
 * ({@link enqueue}, {@link enqueueAll}). See docs/worker.md of the server.
 */
export { createStoreClient, fetchTransport, StoreRequestError, type StoreClient, type StoreClientOptions, type StoreRequestOptions, type StoreSubscriptionSink, type StoreTokens, type StoreTransport, type StoreTransportAnswer, type StoreTransportRequest } from './store-client.js';
export {
  writeBack,
  LeaseLostError,
  SendNotAllowedError,
  SendTimeoutError,
  type AcquireInput,
  type LeasedInput,
  type CommittedOutcome,
  type FailedOutcome,
  type ReconcileContext,
  type ReconcileOutcome,
  type SendContext,
  type SendOutcome,
  type WriteBackEvent,
  type WriteBackHandler,
  type WriteBackOperation,
  type WriteBackOptions,
  type WriteBackResult,
} from './write-back.js';
export { batchedSteps, singleSteps, type WriteBackSteps } from './steps.js';
export { runWorker, type RunWorkerOptions, type Worker, type WorkerCounters, type WorkerEvent } from './worker.js';
export { enqueue, enqueueAll, MAX_ENQUEUE_BATCH, type EnqueueResult } from './enqueue.js';
