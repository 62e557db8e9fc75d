/**
 * `runWorker`: a connector's write-back worker. Leases its connector's due
 * operations a batch at a time (`leaseDueOperations`: as many as it has free
 * slots, in one statement, so workers side by side get disjoint batches and
 * never race for the same operation), woken by the `operationsChanged`
 * subscription so new work starts without a polling delay (polling as the
 * fallback); a lapsed lease whose send was marked comes back RECONCILE_ONLY:
 * the reconcile path. Runs {@link writeBack} on each within the concurrency
 * limit, backs off when the server is overloaded, and drains on SIGTERM.
 * Every invariant is the server's (fenced leases): any number of workers, in
 * any number of processes, may run side by side.
 */
import { LeaseDueOperationsDocument, WorkerOperationsChangedDocument } from '../generated/graphql.js';
import { StoreRequestError, sleep, type StoreClient } from './store-client.js';
import { batchedSteps } from './steps.js';
import { writeBack, type LeasedInput, type WriteBackEvent, type WriteBackHandler, type WriteBackResult } from './write-back.js';

/** What a worker has done so far, for the caller's metrics. Monotonic counts. */
export interface WorkerCounters {
  /** Operations this worker took a lease on. */
  started: number;
  /** Finalized: the write is recorded as landed. */
  committed: number;
  /** Of those committed or sent again, how many began with a reconcile (a request that may have reached the provider). */
  reconciled: number;
  /** A RETRYABLE or UNKNOWN outcome recorded: due again later (or reconciled). */
  retried: number;
  /** An OFFLINE or AUTH outcome recorded: deferred. */
  deferred: number;
  /** Now DEAD: a FATAL outcome, attempts spent, or nothing found by a reconcile with no attempt left. */
  failed: number;
  /** The lease was lost mid-operation (taken over or lapsed): nothing more written. */
  leaseLost: number;
  /** Leases given back unused when stopping. */
  released: number;
  /** Refused acquires: another worker took the operation first. Leasing in batches, the worker never acquires one by one, so this stays 0 (kept for callers' dashboards). */
  contended: number;
  /** `leaseDueOperations` calls (each a read of the due work that leases what it finds). */
  polls: number;
  /** Operations leased by those calls. */
  leased: number;
  /** Requests that failed past the client's retries, and refusals. */
  errors: number;
}

/** What a worker tells `onEvent`: every write-back step, each operation's end, and its own troubles. */
export type WorkerEvent =
  | WriteBackEvent
  | { type: 'finished'; id: string; /** Its idempotency key, as the console shows it (`id` is the global id). */ operationID: string; status: WriteBackResult['status']; kind?: string }
  | { type: 'error'; where: 'poll' | 'subscription' | 'write-back'; code: string; message: string; retryInMs?: number }
  | { type: 'subscribed' | 'unsubscribed' | 'draining' | 'stopped' };

/** Options of {@link runWorker}. */
export interface RunWorkerOptions {
  /** The server. */
  client: StoreClient;
  /** The connector whose operations this worker runs (`connectorName`). */
  connector: string;
  /** How to send and reconcile one operation. */
  handler: WriteBackHandler;
  /** Operations in hand at once. Default: 4. */
  concurrency?: number;
  /** Lease length in ms (1 s to 1 h); renewed every third. Default: 30 000. */
  leaseMs?: number;
  /**
   * The longest one send (or reconcile) of this connector may take, in ms: the
   * per-operation deadline. Sent with each mark, so the server keeps a
   * takeover out of the send window; at the deadline the handler's signal
   * fires and the attempt is recorded (UNKNOWN after the mark), so a hung
   * provider never holds a slot. Default: 30 000.
   */
  sendTimeoutMs?: number;
  /** Fallback poll when nothing woke the worker. Default: 5 000 ms. */
  pollIntervalMs?: number;
  /** Be woken by `operationsChanged` (graphql-sse) while there is no due work left (not held through a backlog). Default: true. */
  subscribe?: boolean;
  /** A backlog (every due read full) this long closes the subscription until the due list runs out again. Default: 5 000 ms. */
  busyUnsubscribeMs?: number;
  /** On stop, how long operations in hand may run on before their handlers are aborted (then each is recorded or released). Default: 10 000 ms. */
  drainTimeoutMs?: number;
  /** Process signals that drain the worker (a second one aborts the handlers at once). Default: SIGTERM and SIGINT in Node; none elsewhere. `false`: none. */
  signals?: readonly string[] | false;
  /** Stops the worker like {@link Worker.stop}. */
  signal?: AbortSignal;
  /** Told about every step (never a lease token). */
  onEvent?: (event: WorkerEvent) => void;
}

/** A running worker. */
export interface Worker {
  /** Live counts (read them for metrics). */
  readonly counters: Readonly<WorkerCounters>;
  /** How many operations are in hand now. */
  readonly inFlight: number;
  /** Stops taking work and drains (see {@link RunWorkerOptions.drainTimeoutMs}); resolves when every lease is finished with. */
  stop(): Promise<void>;
  /** Settles when the worker has stopped. */
  readonly done: Promise<void>;
}

const MAX_IDLE_BACKOFF_MS = 30_000;
/** The most operations one `leaseDueOperations` call leases (the server's cap). */
const MAX_LEASE_BATCH = 100;
/** After subscribing, the due list is read once more this much later (what became due meanwhile). */
const SUBSCRIBE_SETTLE_MS = 300;

/** Starts a worker; it runs until stopped (`stop()`, `signal`, or a process signal). */
export function runWorker(options: RunWorkerOptions): Worker {
  const { client, connector, handler } = options;
  const concurrency = options.concurrency ?? 4;
  const leaseMs = options.leaseMs ?? 30_000;
  const pollIntervalMs = options.pollIntervalMs ?? 5_000;
  const drainTimeoutMs = options.drainTimeoutMs ?? 10_000;
  const busyUnsubscribeMs = options.busyUnsubscribeMs ?? 5_000;
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new TypeError('concurrency must be a positive integer');
  if (typeof connector !== 'string' || connector === '') throw new TypeError('connector must be a non-empty string');

  const counters: WorkerCounters = { started: 0, committed: 0, reconciled: 0, retried: 0, deferred: 0, failed: 0, leaseLost: 0, released: 0, contended: 0, polls: 0, leased: 0, errors: 0 };
  const emit = (event: WorkerEvent) => {
    try {
      options.onEvent?.(event);
    } catch {
      // A listener's bug must not stop the worker.
    }
  };
  const inFlight = new Map<string, Promise<void>>();
  // The steps its operations reach together go as one request (startOperationAttempts, …).
  const steps = batchedSteps(client);
  const stopping = new AbortController();
  const hardStop = new AbortController();

  // Wake-ups: a subscription event, a finished operation, a timer at the next due time.
  let wakePending = true;
  let wakeWaiter: (() => void) | undefined;
  const wake = () => {
    wakePending = true;
    wakeWaiter?.();
  };
  let timerAt: number | undefined;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const wakeAt = (at: number) => {
    const now = Date.now();
    if (at <= now) return wake();
    // The fallback poll comes sooner (and a delay past 2^31 ms would fire at once).
    if (at - now >= pollIntervalMs) return;
    if (timerAt !== undefined && timerAt <= at && timerAt > now) return;
    clearTimeout(timer);
    timerAt = at;
    timer = setTimeout(() => {
      timerAt = undefined;
      wake();
    }, at - now);
  };
  const waitForWake = (ms: number) =>
    new Promise<void>((resolve) => {
      if (wakePending || stopping.signal.aborted) {
        wakePending = false;
        resolve();
        return;
      }
      const done = () => {
        clearTimeout(fallback);
        stopping.signal.removeEventListener('abort', done);
        wakeWaiter = undefined;
        wakePending = false;
        resolve();
      };
      const fallback = setTimeout(done, ms);
      wakeWaiter = done;
      stopping.signal.addEventListener('abort', done, { once: true });
    });

  const count = (result: WriteBackResult) => {
    switch (result.status) {
      case 'committed':
        counters.committed++;
        if (result.reconciled) counters.reconciled++;
        break;
      case 'recorded':
        if (result.reconciled) counters.reconciled++;
        if (result.operation.state === 'DEAD') counters.failed++;
        else if (result.kind === 'OFFLINE' || result.kind === 'AUTH') counters.deferred++;
        else counters.retried++;
        if (result.operation.nextAttemptAt !== null && result.operation.deferReason === null) wakeAt(Date.parse(result.operation.nextAttemptAt));
        break;
      case 'dead':
        counters.failed++;
        break;
      case 'lease-lost':
        counters.leaseLost++;
        break;
      case 'released':
        counters.released++;
        break;
      case 'in-flight':
        counters.contended++;
        break;
      case 'refused':
        counters.errors++;
        break;
      case 'replayed':
        break;
    }
  };

  const launch = (leased: Omit<LeasedInput, 'leaseMs'>) => {
    const id = leased.operation.id;
    const task = (async () => {
      try {
        const result = await writeBack(client, { ...leased, leaseMs }, handler, {
          signal: hardStop.signal,
          steps,
          ...(options.sendTimeoutMs !== undefined && { sendTimeoutMs: options.sendTimeoutMs }),
          onEvent: (event) => {
            if (event.type === 'acquired') counters.started++;
            emit(event);
          },
        });
        count(result);
        emit({ type: 'finished', id, operationID: leased.operation.operationID, status: result.status, ...(result.status === 'recorded' && { kind: result.kind }) });
      } catch (error) {
        counters.errors++;
        emit({ type: 'error', where: 'write-back', ...describe(error) });
      } finally {
        inFlight.delete(id);
        wake();
      }
    })();
    inFlight.set(id, task);
  };

  // The subscription: wakes the loop when an operation of this connector is (or will be) due.
  // Held only while the worker has run out of due work: with a backlog every finished
  // operation wakes it anyway, and each change event costs the server a read of the row
  // (npm run bench: a quarter of the throughput). Dropped after `busyUnsubscribeMs` of backlog.
  let subscribed = false;
  let busySince: number | undefined;
  let unsubscribe: (() => void) | undefined;
  let resubscribeTimer: ReturnType<typeof setTimeout> | undefined;
  let subscriptionFailures = 0;
  const subscribe = () => {
    if (!subscribed || stopping.signal.aborted) return;
    let first = true;
    unsubscribe = client.subscribe(
      WorkerOperationsChangedDocument,
      { filter: { connectorName: connector, states: ['ATTEMPTED', 'RECONCILE_ONLY'] } },
      {
        next: ({ operationsChanged: change }) => {
          if (first) {
            first = false;
            subscriptionFailures = 0;
          }
          if (change.deferReason !== null || change.nextAttemptAt === null) return;
          const leaseEnd = change.leaseExpiresAt === null ? 0 : Date.parse(change.leaseExpiresAt);
          wakeAt(Math.max(Date.parse(change.nextAttemptAt), leaseEnd));
        },
        error: (error) => resubscribe(error),
        complete: () => resubscribe(undefined),
      },
    );
    // What became due between the last read and the stream's start is read once more shortly.
    wakeAt(Date.now() + SUBSCRIBE_SETTLE_MS);
    emit({ type: 'subscribed' });
  };
  const resubscribe = (error: StoreRequestError | undefined) => {
    unsubscribe = undefined;
    if (!subscribed || stopping.signal.aborted) return;
    subscriptionFailures++;
    const delay = Math.min(MAX_IDLE_BACKOFF_MS, error?.retryAfterMs ?? 500 * 2 ** Math.min(subscriptionFailures - 1, 6));
    if (error !== undefined) emit({ type: 'error', where: 'subscription', code: error.code, message: error.message, retryInMs: delay });
    // Changes published while it was down are not replayed: read the due list again.
    wake();
    resubscribeTimer = setTimeout(subscribe, delay);
  };
  const ensureSubscribed = () => {
    busySince = undefined;
    if (subscribed || options.subscribe === false || stopping.signal.aborted) return;
    subscribed = true;
    subscribe();
  };
  const dropSubscription = () => {
    if (!subscribed) return;
    subscribed = false;
    clearTimeout(resubscribeTimer);
    const stop = unsubscribe;
    unsubscribe = undefined;
    stop?.();
    emit({ type: 'unsubscribed' });
  };
  const noteBacklog = () => {
    busySince ??= Date.now();
    if (Date.now() - busySince >= busyUnsubscribeMs) dropSubscription();
  };

  // Each round leases as many due operations as there are free slots: the server hands
  // concurrent workers disjoint batches (FOR UPDATE SKIP LOCKED), so nothing is raced for.
  const loop = async () => {
    let failures = 0;
    while (!stopping.signal.aborted) {
      const free = concurrency - inFlight.size;
      if (free <= 0) {
        await waitForWake(pollIntervalMs);
        continue;
      }
      const limit = Math.min(MAX_LEASE_BATCH, free);
      let leased;
      try {
        // Not aborted by a stop (only past the drain deadline): what the server leased is run, not left to lapse.
        const { leaseDueOperations: answer } = await client.request(LeaseDueOperationsDocument, { input: { connectorName: connector, limit, leaseMs } }, { signal: hardStop.signal });
        if (answer.__typename !== 'LeaseDueOperationsPayload') throw new StoreRequestError({ code: answer.code, message: answer.message, retryable: false });
        leased = answer.operations;
        counters.polls++;
        failures = 0;
      } catch (error) {
        if (stopping.signal.aborted) break;
        failures++;
        counters.errors++;
        const backoff = Math.min(MAX_IDLE_BACKOFF_MS, 500 * 2 ** Math.min(failures - 1, 6));
        const delay = Math.max(error instanceof StoreRequestError ? (error.retryAfterMs ?? 0) : 0, Math.floor(backoff / 2 + (Math.random() * backoff) / 2));
        emit({ type: 'error', where: 'poll', ...describe(error), retryInMs: delay });
        await sleep(delay, stopping.signal).catch(() => {});
        continue;
      }
      counters.leased += leased.length;
      for (const item of leased) launch(item);
      if (leased.length < limit) {
        // Nothing more due (or the rest is being leased by other workers this instant): an event, a
        // finished operation, a timer or the fallback poll wakes the loop.
        ensureSubscribed();
        await waitForWake(pollIntervalMs);
      } else {
        noteBacklog();
        // Full: a finished operation wakes it.
        if (inFlight.size >= concurrency) await waitForWake(pollIntervalMs);
      }
    }
  };

  let stopPromise: Promise<void> | undefined;
  const onSignal = () => {
    if (stopPromise === undefined) void stop();
    else hardStop.abort(new Error('stopped by a second signal'));
  };
  const signals = options.signals === false ? [] : (options.signals ?? (typeof globalThis.process?.on === 'function' ? ['SIGTERM', 'SIGINT'] : []));
  for (const name of signals) process.on(name, onSignal);
  const onAbort = () => void stop();
  options.signal?.addEventListener('abort', onAbort, { once: true });

  let resolveDone!: () => void;
  const done = new Promise<void>((resolve) => (resolveDone = resolve));
  const looping = loop();

  function stop(): Promise<void> {
    return (stopPromise ??= (async () => {
      emit({ type: 'draining' });
      stopping.abort();
      dropSubscription();
      clearTimeout(timer);
      const deadline = setTimeout(() => hardStop.abort(new Error('drain deadline passed')), drainTimeoutMs);
      await looping;
      while (inFlight.size > 0) await Promise.allSettled([...inFlight.values()]);
      clearTimeout(deadline);
      for (const name of signals) process.off(name, onSignal);
      options.signal?.removeEventListener('abort', onAbort);
      emit({ type: 'stopped' });
      resolveDone();
    })());
  }

  if (options.signal?.aborted === true) void stop();

  return {
    counters,
    get inFlight() {
      return inFlight.size;
    },
    stop,
    done,
  };
}

function describe(error: unknown): { code: string; message: string } {
  if (error instanceof StoreRequestError) return { code: error.code, message: error.message };
  return { code: 'ERROR', message: error instanceof Error ? error.message : String(error) };
}
