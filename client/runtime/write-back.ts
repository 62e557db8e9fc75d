/**
 * `writeBack`: one write-back operation through the fenced protocol of the
 * server (SPEC §3.3–3.4, docs/worker.md): claim or acquire, start the
 * attempt, renew the lease in the background, `markSent()` before the
 * provider request, then finalize or record the outcome; `reconcile` instead
 * of `send` when a request may already have reached the provider. The lease
 * token lives in this module's closures only: it is never logged, never in an
 * event, never in an error message. The operation's every field is read once
 * (claim or acquire); each later step selects only what it changes
 * (client/operations/runtime.graphql) and is folded into it.
 */
import {
  AcquireOperationLeaseDocument,
  ClaimOperationDocument,
  RenewOperationLeaseDocument,
  RuntimeRecordReconcileResultDocument,
  RuntimeReleaseOperationLeaseDocument,
  type ClaimOperationInput,
  type ConnectorOperationFieldsFragment,
  type OperationOutcomeKind,
  type ProjectionWatchFieldsFragment,
} from '../generated/graphql.js';
import { linkedSignal } from './signals.js';
import { singleSteps, type WriteBackSteps } from './steps.js';
import { StoreRequestError, type StoreClient } from './store-client.js';

/** An operation as the runtime hands it to a handler (every field of `ConnectorOperationFields`). */
export type WriteBackOperation = ConnectorOperationFieldsFragment;

/** The write landed at the provider: what finalize records. */
export interface CommittedOutcome {
  kind: 'committed';
  /** The local document the write produced or updated. */
  documentID: string;
  /** The provider's id of the written document (the watch is armed on it). */
  sourceID: string;
  /** The result to record and replay to later claims of the same key (any JSON). */
  resultEntity?: unknown;
  /** The digest of the document's current winner, as you know it (the armed watch's `observedWinnerDigest`). */
  currentWinnerDigest?: string;
  /** The provider's etag (kept by a reconcile that found the write). */
  providerEtag?: string;
}

/** The write did not land, or may have: what `recordOperationAttempt` records. */
export interface FailedOutcome {
  /**
   * `retryable`: a transient failure (5xx, 429, a timeout before anything was sent): backoff.
   * `unknown`: the request may have reached the provider: the operation becomes RECONCILE_ONLY.
   * `fatal`: refused for good: DEAD. `offline` / `auth`: deferred, the attempt given back.
   */
  kind: 'retryable' | 'unknown' | 'fatal' | 'offline' | 'auth';
  /** The provider's HTTP status, if a response came back. */
  httpStatus?: number;
  /** The provider's retry-after in ms (retryable / unknown). */
  retryAfterMs?: number;
  /** What went wrong; becomes the operation's `lastError` (the server redacts token-shaped text). */
  message?: string;
  /** The provider's etag, if it sent one. */
  providerEtag?: string;
}

/** What a reconcile found: the write is there (`committed`), it is not (`not-landed`), or the provider could not tell. */
export type ReconcileOutcome = CommittedOutcome | { kind: 'not-landed'; providerEtag?: string } | FailedOutcome;

/** What a send reports. */
export type SendOutcome = CommittedOutcome | FailedOutcome;

/** What {@link WriteBackHandler.send} gets. */
export interface SendContext {
  operation: WriteBackOperation;
  /** This attempt's number (1 for the first). */
  attempt: number;
  /** Fires when the lease is lost (a renewal refused, or it lapsed) or the runtime is stopping past its deadline: abort the provider request. */
  signal: AbortSignal;
  /**
   * Records that the provider request is about to go out. Await it before
   * sending: it throws (and nothing may be sent) when the lease is gone or
   * the runtime is stopping. A send never marked is never reported committed.
   */
  markSent(): Promise<void>;
}

/** What {@link WriteBackHandler.reconcile} gets. */
export interface ReconcileContext {
  /** A RECONCILE_ONLY operation: a request may have reached the provider. Look it up there (by `deterministicEventID`); never resend. */
  operation: WriteBackOperation;
  signal: AbortSignal;
}

/** The connector's side of a write-back: how to send one operation, and how to look one up. */
export interface WriteBackHandler {
  send(context: SendContext): Promise<SendOutcome>;
  reconcile(context: ReconcileContext): Promise<ReconcileOutcome>;
}

/** How {@link writeBack} ended. The lease is released (or finished with) in every case but `lease-lost`. */
export type WriteBackResult =
  | {
      status: 'committed';
      operation: WriteBackOperation;
      watch: ProjectionWatchFieldsFragment | null;
      /** Committed after a reconcile found the write (no send in this run). */
      reconciled: boolean;
      /** Finalize answered a replay of an earlier identical finalize. */
      replayed: boolean;
    }
  /** The key committed earlier: its recorded result; the handler was not called. */
  | { status: 'replayed'; operation: WriteBackOperation; documentID: string | null; resultEntity: unknown }
  /** An outcome was recorded (`kind`); `operation.state` says what follows (ATTEMPTED: due later, RECONCILE_ONLY, DEAD, or deferred). */
  | { status: 'recorded'; kind: OperationOutcomeKind; operation: WriteBackOperation; reconciled: boolean; reason?: string }
  /** Someone else holds a live lease (or, for an acquire, the operation just finished): nothing done. */
  | { status: 'in-flight'; operation: WriteBackOperation | null }
  /** Given up (claim answered DEAD, or a reconcile found nothing and no attempt is left). */
  | { status: 'dead'; operation: WriteBackOperation }
  /** The lease was taken over or lapsed: nothing more was written (nothing can be). */
  | { status: 'lease-lost'; operation: WriteBackOperation; marked: boolean }
  /** Stopped (`options.signal`) before anything was sent: the lease was released. */
  | { status: 'released'; operation: WriteBackOperation }
  /** The server refused the claim or acquire with a typed error (`IDEMPOTENCY_CONFLICT`, `NOT_FOUND`, `FORBIDDEN`, `INVALID_INPUT`, …). */
  | { status: 'refused'; code: string; message: string; field?: string };

/** One step of a write-back, for logs and metrics (never carries a lease token or send marker). */
export interface WriteBackEvent {
  type: 'claimed' | 'acquired' | 'started' | 'marked' | 'renewed' | 'reconciling' | 'lease-lost' | 'finalized' | 'recorded' | 'released' | 'handler-error';
  id: string;
  operationID: string;
  /** The lease epoch. */
  version?: number;
  kind?: string;
  message?: string;
}

/** An existing operation to take over by its global id (what a worker finds in `dueOperations`). */
export interface AcquireInput {
  id: string;
  /** Lease length in ms (1 s to 1 h). */
  leaseMs: number;
}

/**
 * An operation already leased to this process (what `leaseDueOperations`
 * answers, as `runWorker` takes its work): the write-back starts from its
 * lease, with no acquire. The lease token stays in the runtime's closures.
 */
export interface LeasedInput {
  operation: WriteBackOperation;
  lease: { version: number; token: string };
  /** The length the lease was granted for, in ms: it is renewed every third of it. */
  leaseMs: number;
}

/** Options of {@link writeBack}. */
export interface WriteBackOptions {
  /**
   * Stop: before the send is marked, the lease is released and the result is
   * `released`; after, the handler's signal fires and what it then returns
   * (or throws) is recorded, so the lease is never left for a lapse.
   */
  signal?: AbortSignal;
  /** Renew the lease every this many ms. Default: a third of the lease. */
  renewEveryMs?: number;
  /** This run's send marker. Default: a random UUID. */
  sendMarker?: () => string;
  /** Told about every step. */
  onEvent?: (event: WriteBackEvent) => void;
  /**
   * The longest the handler's `send` (and a `reconcile`) may take, in ms.
   * Sent with the mark (the server holds the operation's send window open
   * that long, plus its margin, so no takeover reconciles while the provider
   * may still apply it); at the deadline, counted from the handler's call,
   * the handler's signal fires with a {@link SendTimeoutError} and, unless it
   * answers within a second, the attempt is recorded UNKNOWN (RETRYABLE
   * before the mark) without it. Default 30 000 (the server's default).
   */
  sendTimeoutMs?: number;
  /**
   * How the fenced steps are sent. Default: one request each. `runWorker`
   * passes `batchedSteps(client)`, which sends the steps its operations reach
   * together as one request of each step's batch form.
   */
  steps?: WriteBackSteps;
}

/** The handler's signal reason when the send (or reconcile) ran past `sendTimeoutMs`. */
export class SendTimeoutError extends Error {
  override readonly name = 'SendTimeoutError';
}

/** How long a handler may take to answer its aborted signal before the runtime records without it. */
const HANDLER_GRACE_MS = 1_000;

/** Why the handler's signal fired. */
export class LeaseLostError extends Error {
  override readonly name = 'LeaseLostError';
}

/** Thrown by `markSent()` when nothing may be sent any more. */
export class SendNotAllowedError extends Error {
  override readonly name = 'SendNotAllowedError';
}

interface Lease {
  version: number;
  token: string;
}

type Typed = { __typename: string; code?: string; message?: string; field?: string };


/** Thrown inside the protocol when a fenced write was refused because the lease is no longer ours. */
class FenceLost extends Error {}

function expectPayload<T extends Typed>(result: T, typename: string): Exclude<T, { code: string }> {
  if (result.__typename === typename) return result as Exclude<T, { code: string }>;
  if (result.__typename === 'StaleLeaseError') throw new FenceLost(result.message);
  throw new StoreRequestError({ code: result.code ?? result.__typename, message: result.message ?? 'refused', retryable: false });
}

const OUTCOME_KIND: Record<FailedOutcome['kind'], OperationOutcomeKind> = {
  retryable: 'RETRYABLE',
  unknown: 'UNKNOWN',
  fatal: 'FATAL',
  offline: 'OFFLINE',
  auth: 'AUTH',
};

/**
 * Runs one write-back operation. `input` is a claim (a new write, or the
 * replay of one, by its idempotency key), `{ id, leaseMs }` for an existing
 * operation a worker found due (acquired, as a takeover if its lease lapsed),
 * or an operation already leased ({@link LeasedInput}, from `leaseDueOperations`).
 * Resolves with a typed {@link WriteBackResult}; rejects only with a
 * {@link StoreRequestError} when the server could not be reached within the
 * client's retries (the lease then lapses and the next holder reconciles a
 * marked send instead of repeating it).
 */
export async function writeBack(client: StoreClient, input: ClaimOperationInput | AcquireInput | LeasedInput, handler: WriteBackHandler, options: WriteBackOptions = {}): Promise<WriteBackResult> {
  const emit = (event: WriteBackEvent) => {
    try {
      options.onEvent?.(event);
    } catch {
      // A listener's bug must not change the protocol.
    }
  };

  // 1. A lease: claim (by key) or acquire (by id).
  let operation: WriteBackOperation;
  let lease: Lease;
  let leaseMs: number;
  if ('operationID' in input) {
    leaseMs = input.leaseMs;
    // A key of this request: resent after a lost answer (the client's retries), the server answers it again with its lease.
    const { claimOperation: claim } = await client.request(ClaimOperationDocument, { input: { ...input, requestKey: input.requestKey ?? newRequestKey() } }, KEYED);
    if (claim.__typename !== 'ClaimOperationPayload') return refused(claim);
    operation = claim.operation;
    switch (claim.outcome) {
      case 'REPLAYED':
        return { status: 'replayed', operation, documentID: claim.replay?.documentID ?? operation.documentID, resultEntity: claim.replay?.resultEntity ?? operation.resultEntity };
      case 'IN_FLIGHT':
        return { status: 'in-flight', operation };
      case 'DEAD':
        return { status: 'dead', operation };
      case 'CLAIMED':
        break;
    }
    if (claim.lease === null) throw new StoreRequestError({ code: 'BAD_RESPONSE', message: 'CLAIMED without a lease', retryable: false });
    lease = { version: claim.lease.version, token: claim.lease.token };
    emit({ type: 'claimed', id: operation.id, operationID: operation.operationID, version: lease.version });
  } else if ('lease' in input) {
    leaseMs = input.leaseMs;
    operation = input.operation;
    lease = { version: input.lease.version, token: input.lease.token };
    emit({ type: 'acquired', id: operation.id, operationID: operation.operationID, version: lease.version });
  } else {
    leaseMs = input.leaseMs;
    const { acquireOperationLease: acquired } = await client.request(AcquireOperationLeaseDocument, { input: { id: input.id, leaseMs, requestKey: newRequestKey() } }, KEYED);
    if (acquired.__typename === 'InvalidStateError') return { status: 'in-flight', operation: null };
    if (acquired.__typename !== 'OperationPayload') return refused(acquired);
    if (acquired.lease === null) return { status: 'in-flight', operation: acquired.operation };
    operation = acquired.operation;
    lease = { version: acquired.lease.version, token: acquired.lease.token };
    emit({ type: 'acquired', id: operation.id, operationID: operation.operationID, version: lease.version });
  }

  const steps = options.steps ?? singleSteps(client);
  /** The fence of every later step, with a new request key (a step's retries resend the same variables, so the same key). */
  const fence = () => ({ id: operation.id, version: lease.version, leaseToken: lease.token, requestKey: newRequestKey() });
  const sendTimeoutMs = options.sendTimeoutMs ?? DEFAULT_SEND_TIMEOUT_MS;
  const event = (type: WriteBackEvent['type'], extra: Partial<WriteBackEvent> = {}) =>
    emit({ type, id: operation.id, operationID: operation.operationID, version: lease.version, ...extra });

  // 2. The lease keeper: renews in the background; the handler's signal fires when the lease is gone.
  const lost = new AbortController();
  const keeper = keepLease(client, fence, leaseMs, options.renewEveryMs ?? Math.max(250, Math.floor(leaseMs / 3)), lost, () => event('renewed'));
  const stop = options.signal;
  // Fires at the handler's deadline (sendTimeoutMs from its call): the send window the server holds open ends then.
  const deadline = new AbortController();
  let deadlineTimer: ReturnType<typeof setTimeout> | undefined;
  const handlerGuard = linkedSignal([lost.signal, stop, deadline.signal]);
  const handlerSignal = handlerGuard.signal;
  /** Runs a handler under the deadline: past it (and a second's grace to answer its signal) the runtime goes on without it. */
  const bounded = <T>(run: () => Promise<T>): Promise<T> => {
    clearTimeout(deadlineTimer);
    return new Promise<T>((resolve, reject) => {
      let grace: ReturnType<typeof setTimeout> | undefined;
      deadlineTimer = setTimeout(() => {
        deadline.abort(new SendTimeoutError(`the handler ran past sendTimeoutMs (${sendTimeoutMs} ms)`));
        grace = setTimeout(() => reject(deadline.signal.reason), HANDLER_GRACE_MS);
      }, sendTimeoutMs);
      run().then(resolve, reject).finally(() => {
        clearTimeout(deadlineTimer);
        clearTimeout(grace);
      });
    });
  };
  let marked = false;

  const release = async () => {
    try {
      const { releaseOperationLease: released } = await client.request(RuntimeReleaseOperationLeaseDocument, { input: fence() }, KEYED);
      if (released.__typename === 'OperationPayload') operation = { ...operation, ...released.operation };
      event('released');
    } catch {
      // Unreachable or taken over: the lease lapses by itself; nothing else is at stake.
    }
  };

  const record = async (outcome: FailedOutcome, reconciled: boolean, reason?: string): Promise<WriteBackResult> => {
    const kind = OUTCOME_KIND[outcome.kind];
    const recorded = await steps.record({
      ...fence(),
      kind,
      ...(outcome.httpStatus !== undefined && { lastHTTPStatus: outcome.httpStatus }),
      ...(outcome.retryAfterMs !== undefined && { retryAfterMs: Math.max(0, Math.round(outcome.retryAfterMs)) }),
      ...(outcome.message !== undefined && { message: outcome.message }),
      ...(outcome.providerEtag !== undefined && { providerEtag: outcome.providerEtag }),
    });
    operation = { ...operation, ...expectPayload(recorded, 'OperationPayload').operation };
    event('recorded', { kind });
    keeper.stop();
    await release();
    return { status: 'recorded', kind, operation, reconciled, ...(reason !== undefined && { reason }) };
  };

  const finalize = async (outcome: CommittedOutcome, reconciled: boolean): Promise<WriteBackResult> => {
    const finalized = await steps.finalize({
      ...fence(),
      documentID: outcome.documentID,
      sourceID: outcome.sourceID,
      ...(outcome.resultEntity !== undefined && { resultEntity: outcome.resultEntity }),
      ...(outcome.currentWinnerDigest !== undefined && { currentWinnerDigest: outcome.currentWinnerDigest }),
    });
    const payload = expectPayload(finalized, 'FinalizeOperationPayload');
    if (!payload.finalized) throw new FenceLost('finalize answered false: the lease was taken over');
    if (payload.operation !== null) operation = { ...operation, ...payload.operation };
    event('finalized');
    return { status: 'committed', operation, watch: payload.watch, reconciled, replayed: payload.replayed };
  };

  /** What the handler's failure means: nothing sent yet → RETRYABLE; a marked send → UNKNOWN (it may have landed). */
  const fromThrown = (error: unknown): FailedOutcome => ({
    kind: marked ? 'unknown' : 'retryable',
    message: `handler threw: ${describeThrown(error)}`,
  });

  try {
    let reconciled = false;
    // 3. Reconcile first when a request may have reached the provider.
    if (operation.state === 'RECONCILE_ONLY') {
      event('reconciling');
      let found: ReconcileOutcome;
      try {
        found = await bounded(() => handler.reconcile({ operation, signal: handlerSignal }));
      } catch (error) {
        if (lost.signal.aborted) return { status: 'lease-lost', operation, marked: true };
        event('handler-error', { message: error instanceof Error ? error.message : String(error) });
        // Could not tell: stays RECONCILE_ONLY, due later.
        return await record({ kind: 'retryable', message: `reconcile threw: ${describeThrown(error)}` }, false);
      }
      if (lost.signal.aborted) return { status: 'lease-lost', operation, marked: true };
      if (found.kind === 'committed' || found.kind === 'not-landed') {
        const { recordReconcileResult: result } = await client.request(RuntimeRecordReconcileResultDocument, {
          input: { ...fence(), landed: found.kind === 'committed', ...(found.providerEtag !== undefined && { providerEtag: found.providerEtag }) },
        }, KEYED);
        operation = { ...operation, ...expectPayload(result, 'OperationPayload').operation };
        if (found.kind === 'committed') return await finalize(found, true);
        if (operation.state === 'DEAD') {
          keeper.stop();
          await release();
          return { status: 'dead', operation };
        }
        reconciled = true;
        // Not there: ATTEMPTED, the marker cleared, due now; send it in this same lease.
      } else {
        return await record(found, false);
      }
    }

    // 4. Send.
    if (stop?.aborted === true || lost.signal.aborted) {
      if (lost.signal.aborted) return { status: 'lease-lost', operation, marked: false };
      keeper.stop();
      await release();
      return { status: 'released', operation };
    }
    const started = await steps.start(fence());
    operation = { ...operation, ...expectPayload(started, 'OperationPayload').operation };
    event('started');
    let marking: Promise<void> | undefined;
    const markSent = () =>
      (marking ??= (async () => {
        if (lost.signal.aborted) throw new SendNotAllowedError('the lease is lost: send nothing');
        if (stop?.aborted === true) throw new SendNotAllowedError('the runtime is stopping: send nothing');
        if (deadline.signal.aborted) throw new SendNotAllowedError('past sendTimeoutMs: send nothing');
        let result;
        try {
          result = await steps.mark({ ...fence(), sendMarker: (options.sendMarker ?? randomMarker)(), sendTimeoutMs });
        } catch (error) {
          throw new SendNotAllowedError(`could not mark the send: ${error instanceof Error ? error.message : String(error)}`);
        }
        if (result.__typename !== 'OperationPayload') {
          if (result.__typename === 'StaleLeaseError') lost.abort(new LeaseLostError(result.message));
          throw new SendNotAllowedError(`mark sent refused: ${result.message}`);
        }
        operation = { ...operation, ...result.operation };
        marked = true;
        event('marked');
      })());

    let outcome: SendOutcome;
    try {
      outcome = await bounded(() => handler.send({ operation, attempt: operation.attempts, signal: handlerSignal, markSent }));
    } catch (error) {
      if (lost.signal.aborted) return { status: 'lease-lost', operation, marked };
      event('handler-error', { message: error instanceof Error ? error.message : String(error) });
      return await record(fromThrown(error), reconciled);
    }
    if (lost.signal.aborted) return { status: 'lease-lost', operation, marked };
    if (outcome.kind === 'committed') {
      if (!marked) {
        // Refused: a committed send must have been marked. What landed is found by the next holder's reconcile.
        return await record({ kind: 'unknown', message: 'handler reported committed without awaiting markSent()' }, reconciled, 'committed without markSent()');
      }
      return await finalize(outcome, reconciled);
    }
    return await record(outcome, reconciled);
  } catch (error) {
    if (error instanceof FenceLost) {
      lost.abort(new LeaseLostError(error.message));
      event('lease-lost', { message: error.message });
      return { status: 'lease-lost', operation, marked };
    }
    throw error;
  } finally {
    keeper.stop();
    clearTimeout(deadlineTimer);
    handlerGuard.dispose();
  }
}

/** The server's default send timeout (src/store/operations/row.ts). */
const DEFAULT_SEND_TIMEOUT_MS = 30_000;

/**
 * Options of every step's request: resent on a lost answer, a reset
 * connection or a 5xx alike, since each carries its own request key and the
 * server answers a resent one again without writing.
 */
const KEYED = { retryServerErrors: true } as const;

function newRequestKey(): string {
  return globalThis.crypto.randomUUID();
}

function refused(error: Typed): WriteBackResult {
  return { status: 'refused', code: error.code ?? error.__typename, message: error.message ?? 'refused', ...(error.field !== undefined && { field: error.field }) };
}

function randomMarker(): string {
  return globalThis.crypto.randomUUID();
}

/**
 * Renews the lease every `everyMs` until stopped. A refused renewal (stale
 * lease, finished operation) or a lease that reaches its expiry, by the local
 * clock, without a successful renewal aborts `lost`.
 */
function keepLease(
  client: StoreClient,
  fence: () => { id: string; version: number; leaseToken: string },
  leaseMs: number,
  everyMs: number,
  lost: AbortController,
  onRenewed: () => void,
): { stop(): void } {
  // Plain timers and a flag, not an AbortController: every operation stops its keeper, and an
  // abort without a reason builds a DOMException with its stack (the largest runtime cost per
  // operation in a queue-peer profile); only a renewal in flight gets a signal to abort.
  let stopped = false;
  let renewing: AbortController | undefined;
  // Conservative: counted from before the request that granted or renewed it.
  let expiresAt = Date.now() + leaseMs;
  let expiryTimer: ReturnType<typeof setTimeout> | undefined;
  let renewTimer: ReturnType<typeof setTimeout> | undefined;
  const armExpiry = () => {
    clearTimeout(expiryTimer);
    expiryTimer = setTimeout(() => lost.abort(new LeaseLostError('the lease lapsed before it could be renewed')), Math.max(0, expiresAt - Date.now()));
  };
  const renew = async () => {
    if (stopped || lost.signal.aborted) return;
    const sentAt = Date.now();
    const aborter = new AbortController();
    renewing = aborter;
    // Retries must not outlive the lease.
    const guard = linkedSignal([aborter.signal], Math.max(1, expiresAt - Date.now()));
    try {
      const { renewOperationLease: renewed } = await client.request(RenewOperationLeaseDocument, { input: { ...fence(), leaseMs } }, { signal: guard.signal, retryServerErrors: true });
      if (stopped) return;
      if (renewed.__typename !== 'OperationPayload') {
        lost.abort(new LeaseLostError(`renewal refused: ${renewed.code}`));
        return;
      }
      expiresAt = sentAt + leaseMs;
      armExpiry();
      onRenewed();
    } catch {
      // Unreachable for now: try again next round; the expiry timer decides when it is lost.
    } finally {
      guard.dispose();
      renewing = undefined;
    }
    if (!stopped && !lost.signal.aborted) renewTimer = setTimeout(renew, everyMs);
  };
  armExpiry();
  renewTimer = setTimeout(renew, everyMs);
  return {
    stop() {
      if (stopped) return;
      stopped = true;
      clearTimeout(renewTimer);
      clearTimeout(expiryTimer);
      renewing?.abort(KEEPER_STOPPED);
    },
  };
}

/** Why a renewal in flight was aborted: its operation is over (one reason for all, built once). */
const KEEPER_STOPPED = new Error('the lease keeper stopped');

/** `Name: message` of what a handler threw, for `lastError` (the server redacts token-shaped text). */
function describeThrown(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}
