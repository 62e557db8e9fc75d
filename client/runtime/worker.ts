/**
 * `runWorker`: a connector's write-back worker. Takes its connector's due
 * operations (`dueOperations`), woken by the `operationsChanged` subscription
 * so new work starts without a polling delay (polling as the fallback), takes
 * them over with `acquireOperationLease` (a lapsed lease whose send was marked
 * comes back RECONCILE_ONLY: the reconcile path), runs {@link writeBack} on
 * each within the concurrency limit, backs off when the server is overloaded,
 * and drains on SIGTERM. Every invariant is the server's (fenced leases): any
 * number of workers, in any number of processes, may run side by side.
 */
import { DueOperationsDocument, WorkerOperationsChangedDocument } from '../generated/graphql.js';
import { StoreRequestError, sleep, type StoreClient } from './store-client.js';
import { writeBack, type WriteBackEvent, type WriteBackHandler, type WriteBackResult } from './write-back.js';

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
  /** Another worker took the operation first. */
  contended: number;
  /** `dueOperations` reads. */
  polls: number;
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
/** How long ids of one due read are launched from before the list is read again. */
const QUEUE_TTL_MS = 1_000;
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

  const counters: WorkerCounters = { started: 0, committed: 0, reconciled: 0, retried: 0, deferred: 0, failed: 0, leaseLost: 0, released: 0, contended: 0, polls: 0, errors: 0 };
  const emit = (event: WorkerEvent) => {
    try {
      options.onEvent?.(event);
    } catch {
      // A listener's bug must not stop the worker.
    }
  };
  const inFlight = new Map<string, Promise<void>>();
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

  /** Each queued operation's idempotency key, for the events (the queue holds global ids); forgotten when it finishes. */
  const operationIDs = new Map<string, string>();
  const launch = (id: string) => {
    const task = (async () => {
      try {
        const result = await writeBack(client, { id, leaseMs }, handler, {
          signal: hardStop.signal,
          ...(options.sendTimeoutMs !== undefined && { sendTimeoutMs: options.sendTimeoutMs }),
          onEvent: (event) => {
            if (event.type === 'acquired') counters.started++;
            emit(event);
          },
        });
        count(result);
        emit({ type: 'finished', id, operationID: operationIDs.get(id) ?? ('operation' in result && result.operation !== null ? result.operation.operationID : id), status: result.status, ...(result.status === 'recorded' && { kind: result.kind }) });
      } catch (error) {
        counters.errors++;
        emit({ type: 'error', where: 'write-back', ...describe(error) });
      } finally {
        inFlight.delete(id);
        operationIDs.delete(id);
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

  // Due ids read by the last poll, not yet launched: a finished operation's slot is refilled
  // from here without another read. Kept briefly: other workers take from the same list.
  let queue: string[] = [];
  let queuedAt = 0;
  let exhausted = false;
  const loop = async () => {
    let failures = 0;
    while (!stopping.signal.aborted) {
      if (concurrency - inFlight.size <= 0) {
        await waitForWake(pollIntervalMs);
        continue;
      }
      if (queue.length === 0 || Date.now() - queuedAt > QUEUE_TTL_MS) {
        const first = Math.min(100, Math.max(10, 4 * concurrency));
        let due;
        try {
          due = (await client.request(DueOperationsDocument, { first, connectorName: connector }, { signal: stopping.signal })).dueOperations;
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
        // Workers reading the same oldest-first list take different rows first.
        for (const operation of due) operationIDs.set(operation.id, operation.operationID);
        queue = shuffle(due.map((operation) => operation.id).filter((id) => !inFlight.has(id)));
        queuedAt = Date.now();
        exhausted = due.length < first;
        if (exhausted) ensureSubscribed();
        else noteBacklog();
      }
      while (inFlight.size < concurrency && queue.length > 0) {
        const id = queue.shift()!;
        if (!inFlight.has(id)) launch(id);
      }
      // Full: a finished operation wakes it. Nothing more due: an event, a timer or the fallback poll does.
      if (inFlight.size >= concurrency || (queue.length === 0 && exhausted)) await waitForWake(pollIntervalMs);
      // A full list of nothing but our own acquires in progress: read again shortly, not at once.
      else if (queue.length === 0) await waitForWake(50);
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

function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j]!, items[i]!];
  }
  return items;
}
