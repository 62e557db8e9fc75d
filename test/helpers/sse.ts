/**
 * A GraphQL subscription over yoga's SSE transport, for tests: collects
 * every `next` event's payload and lets a test wait for a count.
 */

/** Anything that answers a fetch: `app.yoga.fetch` or the global fetch against a real server. */
export type Fetcher = (url: string, init: RequestInit) => Promise<Response>;

/** An open subscription. */
export interface SSESubscription<T = any> {
  /** HTTP status of the subscribe request. */
  status: number;
  /** Every `next` payload so far (`{ data, errors }`). */
  events: { data?: T; errors?: { message: string; extensions?: Record<string, unknown> }[] }[];
  /** Resolves once `count` events arrived; rejects after `timeoutMs`. */
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
  const events: SSESubscription<T>['events'] = [];
  const waiters = new Set<() => void>();
  let ended = false;
  const notify = () => waiters.forEach((w) => w());
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
          const block = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          const lines = block.split('\n');
          const event = lines.find((l) => l.startsWith('event:'))?.slice(6).trim();
          const data = lines.filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
          if (event === 'next' && data !== '') {
            events.push(JSON.parse(data));
            notify();
          }
          if (event === 'complete') ended = true;
        }
      }
    } catch {
      // aborted by close()
    } finally {
      ended = true;
      notify();
    }
  })();
  return {
    status: response.status,
    events,
    get ended() {
      return ended;
    },
    waitFor(count, timeoutMs = 5_000) {
      return new Promise<void>((resolve, reject) => {
        const check = () => {
          if (events.length >= count) {
            waiters.delete(check);
            clearTimeout(timer);
            resolve();
          } else if (ended) {
            waiters.delete(check);
            clearTimeout(timer);
            reject(new Error(`stream ended after ${events.length} of ${count} events`));
          }
        };
        const timer = setTimeout(() => {
          waiters.delete(check);
          reject(new Error(`timed out with ${events.length} of ${count} events`));
        }, timeoutMs);
        waiters.add(check);
        check();
      });
    },
    async close() {
      // Cancelling the body is what tells the server (in process or over
      // HTTP) that the subscriber left; the abort covers a real socket.
      abort.abort();
      await reader?.cancel().catch(() => {});
      await reading;
    },
  };
}
