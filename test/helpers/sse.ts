/**
 * Subscription results for tests. {@link collectResults} gathers one
 * subscription's results, whatever carries them (yoga's SSE here, a graphql-ws
 * or graphql-sse client's sink), and lets a test wait for a count;
 * {@link subscribeSSE} is a GraphQL subscription over yoga's SSE transport
 * built on it; {@link parseServerSentEvent} reads one event of an event
 * stream, for readers of raw sockets too.
 */

/** Anything that answers a fetch: `app.yoga.fetch` or the global fetch against a real server. */
export type Fetcher = (url: string, init: RequestInit) => Promise<Response>;

/** One result of a subscription, as a test reads it. */
export interface SubscriptionResult<T = any> {
  data?: T;
  errors?: { message: string; extensions?: Record<string, unknown> }[];
}

/** One subscription's results as they arrive: see {@link collectResults}. */
export interface ResultCollector<R> {
  /** Every result so far, in order. */
  results: R[];
  /**
   * The sink a graphql-ws or graphql-sse client takes: `next` adds a result
   * (taken to be an `R`), `error` and `complete` end the subscription (the
   * first ending counts).
   */
  sink: { next(result: unknown): void; error(error: unknown): void; complete(): void };
  /** Whether the subscription ended. */
  readonly hasEnded: boolean;
  /** Settles once the subscription ended: with the error, or `'complete'`. */
  ended: Promise<unknown>;
  /** Resolves once `count` results arrived; rejects if the subscription ends short, or after `timeoutMs` (default: the collector's). */
  waitFor(count: number, timeoutMs?: number): Promise<void>;
}

/** An empty collector whose `waitFor` gives up after `defaultTimeoutMs` unless told otherwise. */
export function collectResults<R>(defaultTimeoutMs: number): ResultCollector<R> {
  const results: R[] = [];
  const waiters = new Set<() => void>();
  let hasEnded = false;
  let settle: (how: unknown) => void = () => {};
  const ended = new Promise<unknown>((resolve) => {
    settle = resolve;
  });
  const notify = () => waiters.forEach((w) => w());
  const end = (how: unknown) => {
    if (hasEnded) return;
    hasEnded = true;
    settle(how);
    notify();
  };
  return {
    results,
    sink: {
      next: (result) => {
        results.push(result as R);
        notify();
      },
      error: end,
      complete: () => end('complete'),
    },
    get hasEnded() {
      return hasEnded;
    },
    ended,
    waitFor: (count, timeoutMs = defaultTimeoutMs) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (results.length >= count) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve();
          } else if (hasEnded) {
            waiters.delete(check);
            clearTimeout(timer);
            reject(new Error(`ended after ${results.length} of ${count} results: ${JSON.stringify(results)}`));
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out with ${results.length} of ${count} results: ${JSON.stringify(results)}`));
        }, timeoutMs);
        waiters.add(check);
        check();
      }),
  };
}

/** One event of a `text/event-stream` body: its `event:` field (undefined without one) and its `data:` lines, joined. */
export interface ServerSentEvent {
  event: string | undefined;
  data: string;
}

/** Reads one event: the text between two blank lines of an event stream. */
export function parseServerSentEvent(block: string): ServerSentEvent {
  const lines = block.split('\n');
  return {
    event: lines.find((l) => l.startsWith('event:'))?.slice(6).trim(),
    data: lines
      .filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trim())
      .join('\n'),
  };
}

/** An open subscription. */
export interface SSESubscription<T = any> {
  /** HTTP status of the subscribe request. */
  status: number;
  /** Every `next` payload so far (`{ data, errors }`). */
  events: SubscriptionResult<T>[];
  /** Resolves once `count` events arrived; rejects if the stream ends short, or after `timeoutMs` (default 5 s). */
  waitFor(count: number, timeoutMs?: number): Promise<void>;
  /** Whether the server ended the stream. */
  readonly ended: boolean;
  close(): Promise<void>;
}

/** Opens a subscription and starts reading it in the background. */
export async function subscribeSSE<T = any>(
  fetcher: Fetcher,
  url: string,
  query: string,
  variables: Record<string, unknown>,
  headers: Record<string, string>,
): Promise<SSESubscription<T>> {
  const abort = new AbortController();
  const response = await fetcher(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers },
    body: JSON.stringify({ query, variables }),
    signal: abort.signal,
  });
  const collected = collectResults<SubscriptionResult<T>>(5_000);
  const reader = response.body?.getReader();
  const reading = (async () => {
    if (reader === undefined) return;
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for (;;) {
        const { done, value: chunk } = await reader.read();
        if (done) break;
        buffer += decoder.decode(chunk, { stream: true });
        let at: number;
        while ((at = buffer.indexOf('\n\n')) >= 0) {
          const { event, data } = parseServerSentEvent(buffer.slice(0, at));
          buffer = buffer.slice(at + 2);
          if (event === 'next' && data !== '') collected.sink.next(JSON.parse(data));
          if (event === 'complete') collected.sink.complete();
        }
      }
    } catch {
      // aborted by close()
    } finally {
      collected.sink.complete();
    }
  })();
  return {
    status: response.status,
    events: collected.results,
    get ended() {
      return collected.hasEnded;
    },
    waitFor: collected.waitFor,
    async close() {
      // Cancelling the body is what tells the server (in process or over
      // HTTP) that the subscriber left; the abort covers a real socket.
      abort.abort();
      await reader?.cancel().catch(() => {});
      await reading;
    },
  };
}
