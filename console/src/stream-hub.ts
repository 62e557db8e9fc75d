/**
 * The console's event streams, held for every tab of this server at once
 * (issue 22). Tabs talk to the hub over a MessagePort: the hub runs in a
 * SharedWorker (stream-worker.ts), or, where a browser has none, inside the
 * tab itself over a MessageChannel (stream.ts), with the same code.
 *
 * One graphql-sse client in single-connection mode per identity (the
 * tokens' DID): every subscription of every tab signed in as that identity
 * rides one `/graphql/stream`, so twelve tabs hold one HTTP connection, not
 * twelve of the browser's six. Tabs signed in as different identities get
 * one stream each (the server authenticates a stream once, when it is
 * reserved). The stream opens with the first subscription and closes with
 * the last (graphql-sse's lazy mode), so a tab that leaves (it says `bye` on
 * `pagehide`, or stops answering pings) takes its subscriptions with it.
 *
 * The hub reconnects for ever, with backoff capped at a few seconds, and
 * tells the tabs of an identity how their stream is (`live`, `reconnecting`,
 * `offline` after a few failed attempts) and when it came back (`resumed`:
 * events may have been missed, re-read). A refused token (401) is final: the
 * tabs hear `unauthorized` with the server's message and the stream stops.
 */
import { createClient, type Client } from 'graphql-sse';

/** How a stream is: connected, trying again after a break, or failing for a while (still trying). */
export type LiveStatus = 'live' | 'reconnecting' | 'offline';

/** A GraphQL request as the tabs send it. */
export interface StreamRequest {
  query: string;
  variables?: Record<string, unknown>;
  operationName?: string;
}

/** Messages from a tab to the hub. */
export type FromTab =
  | { t: 'hello'; identity: string; token: string }
  | { t: 'subscribe'; id: string; request: StreamRequest }
  | { t: 'unsubscribe'; id: string }
  | { t: 'token'; request: number; token: string }
  | { t: 'pong' }
  | { t: 'bye' };

/** Messages from the hub to a tab. */
export type ToTab =
  | { t: 'next'; id: string; value: unknown }
  | { t: 'error'; id: string; message: string }
  | { t: 'complete'; id: string }
  | { t: 'status'; status: LiveStatus }
  | { t: 'resumed' }
  | { t: 'token?'; request: number }
  | { t: 'unauthorized'; message: string }
  | { t: 'ping' }
  | { t: 'dropped' };

/**
 * How often the hub pings its tabs, and after how long without an answer it
 * drops one (a tab that crashed or was closed without `pagehide` says no
 * `bye`; a browser that supports it also fires `close` on its port). A dropped tab that comes
 * back (it was frozen) hears `dropped` and attaches again.
 */
const PING_EVERY_MS = 4_000;
const DROP_AFTER_MS = 10_000;
/** Failed attempts in a row after which a reconnecting stream is called offline (it keeps trying). */
const OFFLINE_AFTER_FAILURES = 3;
/** How long the hub waits for a tab to hand it a fresh token before it uses the last one it has. */
const TOKEN_WAIT_MS = 3_000;

/** Backoff before the `retries`-th attempt: 0.5 s doubling, capped at 3 s, with jitter (so restarted servers are not hit by every console at once). */
export function retryDelayMs(retries: number): number {
  return Math.min(3_000, 500 * 2 ** retries) * (0.5 + Math.random() / 2);
}

interface Tab {
  port: MessagePort;
  identity: string | null;
  lastSeen: number;
  /** Subscription id → graphql-sse's dispose. */
  subscriptions: Map<string, () => void>;
}

interface Stream {
  client: Client<true>;
  tabs: Set<Tab>;
  token: string;
  status: LiveStatus;
  failures: number;
  /** Set once the stream has been connected: a later connection is a resume. */
  everConnected: boolean;
  refused: boolean;
}

/** The hub of one SharedWorker (or one tab): `connect` each tab's port. */
export function createStreamHub(origin: string): { connect(port: MessagePort): void } {
  const streams = new Map<string, Stream>();
  const tabs = new Set<Tab>();
  let tokenRequests = 0;
  /**
   * Operations whose POST is on its way, by id. graphql-sse, told to stop one
   * before the server answered its POST (a tab that leaves right after
   * subscribing, as navigating does), aborts the POST and tells the server
   * nothing; but the server may have started it, and on a stream other tabs
   * keep open it would run until the stream ends. So a subscription is
   * stopped only once its POST has settled: then graphql-sse sends its DELETE.
   */
  const postsInFlight = new Map<string, Promise<void>>();
  /** Told the id graphql-sse gives the operation being subscribed (it names it synchronously, in `subscribe`). */
  let naming: ((id: string) => void) | null = null;
  const tokenWaiters = new Map<number, (token: string) => void>();

  const send = (tab: Tab, message: ToTab) => {
    try {
      tab.port.postMessage(message);
    } catch {
      // A closed port: the tab is gone; the ping sweep forgets it.
    }
  };
  const tell = (stream: Stream, message: ToTab) => {
    for (const tab of stream.tabs) send(tab, message);
  };
  const setStatus = (stream: Stream, status: LiveStatus) => {
    if (stream.status === status) return;
    stream.status = status;
    tell(stream, { t: 'status', status });
  };

  /** A current token of `stream`'s identity: asked of its most recently seen tab (which renews it if due), else the last one known. */
  const freshToken = async (stream: Stream): Promise<string> => {
    const tab = [...stream.tabs].sort((a, b) => b.lastSeen - a.lastSeen)[0];
    if (tab === undefined) return stream.token;
    const request = ++tokenRequests;
    const token = await new Promise<string>((resolve) => {
      const timer = setTimeout(() => {
        tokenWaiters.delete(request);
        resolve(stream.token);
      }, TOKEN_WAIT_MS);
      tokenWaiters.set(request, (value) => {
        clearTimeout(timer);
        resolve(value);
      });
      send(tab, { t: 'token?', request });
    });
    stream.token = token;
    return token;
  };

  const openStream = (identity: string, token: string): Stream => {
    const stream: Stream = { tabs: new Set(), token, status: 'live', failures: 0, everConnected: false, refused: false } as Stream;
    stream.client = createClient({
      url: `${origin}/graphql/stream`,
      generateID: () => {
        // Not crypto.randomUUID: it exists only in secure contexts, and a console may be served over plain HTTP.
        const id = Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => byte.toString(16).padStart(2, '0')).join('');
        naming?.(id);
        return id;
      },
      singleConnection: true,
      lazy: true,
      headers: async () => ({ authorization: `Bearer ${await freshToken(stream)}` }),
      retryAttempts: Number.MAX_SAFE_INTEGER,
      retry: async (retries) => {
        stream.failures = retries + 1;
        setStatus(stream, stream.failures >= OFFLINE_AFTER_FAILURES ? 'offline' : 'reconnecting');
        await new Promise((resolve) => setTimeout(resolve, retryDelayMs(retries)));
      },
      on: {
        connected: () => {
          const resumed = stream.everConnected || stream.failures > 0;
          stream.everConnected = true;
          stream.failures = 0;
          setStatus(stream, 'live');
          if (resumed) tell(stream, { t: 'resumed' });
        },
      },
      fetchFn: async (input: RequestInfo | URL, init?: RequestInit) => {
        const operationId = init?.method === 'POST' ? operationIdOf(init) : undefined;
        let settled = () => {};
        if (operationId !== undefined) postsInFlight.set(operationId, new Promise<void>((resolve) => (settled = resolve)));
        let response: Response;
        try {
          response = await fetch(input, { ...init, credentials: 'omit' });
        } finally {
          if (operationId !== undefined) {
            postsInFlight.delete(operationId);
            settled();
          }
        }
        if (response.status === 401 && !stream.refused) {
          stream.refused = true;
          tell(stream, { t: 'unauthorized', message: await refusalMessage(response) });
          // Final: nothing retries a refused token. The tabs sign out; their subscriptions end with the client.
          queueMicrotask(() => {
            stream.client.dispose();
            streams.delete(identity);
          });
        }
        return response;
      },
    });
    streams.set(identity, stream);
    return stream;
  };

  const leave = (tab: Tab) => {
    if (!tabs.delete(tab)) return;
    for (const dispose of tab.subscriptions.values()) dispose();
    tab.subscriptions.clear();
    if (tab.identity !== null) streams.get(tab.identity)?.tabs.delete(tab);
    try {
      tab.port.close();
    } catch {
      // Already closed.
    }
  };

  // Tabs that stopped answering (crashed, or frozen without a `bye`) are dropped with their subscriptions.
  setInterval(() => {
    const now = Date.now();
    for (const tab of [...tabs]) {
      if (now - tab.lastSeen > DROP_AFTER_MS) {
        send(tab, { t: 'dropped' });
        leave(tab);
      } else send(tab, { t: 'ping' });
    }
  }, PING_EVERY_MS);

  return {
    connect(port) {
      const tab: Tab = { port, identity: null, lastSeen: Date.now(), subscriptions: new Map() };
      tabs.add(tab);
      port.onmessage = (event: MessageEvent<FromTab>) => {
        const message = event.data;
        tab.lastSeen = Date.now();
        switch (message.t) {
          case 'hello': {
            let stream = streams.get(message.identity);
            if (stream === undefined || stream.refused) stream = openStream(message.identity, message.token);
            else stream.token = message.token;
            tab.identity = message.identity;
            stream.tabs.add(tab);
            send(tab, { t: 'status', status: stream.status });
            return;
          }
          case 'subscribe': {
            const stream = tab.identity === null ? undefined : streams.get(tab.identity);
            if (stream === undefined) {
              send(tab, { t: 'error', id: message.id, message: 'say hello first' });
              return;
            }
            tab.subscriptions.get(message.id)?.();
            let operationId: string | undefined;
            naming = (id) => (operationId = id);
            const stop = stream.client.subscribe(message.request, {
              next: (value) => send(tab, { t: 'next', id: message.id, value }),
              error: (error) => {
                tab.subscriptions.delete(message.id);
                send(tab, { t: 'error', id: message.id, message: error instanceof Error ? error.message : String(error) });
              },
              complete: () => {
                tab.subscriptions.delete(message.id);
                send(tab, { t: 'complete', id: message.id });
              },
            });
            naming = null;
            const dispose = () => {
              const posting = operationId === undefined ? undefined : postsInFlight.get(operationId);
              if (posting === undefined) stop();
              // A task later, so graphql-sse has taken the answer in and knows to send the DELETE.
              else void posting.then(() => setTimeout(stop, 0));
            };
            tab.subscriptions.set(message.id, dispose);
            return;
          }
          case 'unsubscribe':
            tab.subscriptions.get(message.id)?.();
            tab.subscriptions.delete(message.id);
            return;
          case 'token':
            tokenWaiters.get(message.request)?.(message.token);
            tokenWaiters.delete(message.request);
            return;
          case 'pong':
            return;
          case 'bye':
            leave(tab);
            return;
        }
      };
      // The other side's document is gone, where the browser says so (MessagePort `close`): no `bye` will come.
      port.addEventListener('close', () => leave(tab));
      port.start();
    },
  };
}

/** The operation id graphql-sse put in an operation's POST body. */
function operationIdOf(init: RequestInit): string | undefined {
  try {
    const id = (JSON.parse(String(init.body)) as { extensions?: { operationId?: unknown } }).extensions?.operationId;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

/** The server's message in a 401 answer's body (`{ errors: [{ message }] }`), or a plain one. */
export async function refusalMessage(response: Response): Promise<string> {
  try {
    const body = (await response.clone().json()) as { errors?: { message?: string }[] };
    const message = body.errors?.[0]?.message;
    if (typeof message === 'string' && message !== '') return message;
  } catch {
    // Not JSON.
  }
  return `the server refused the token (HTTP ${response.status})`;
}
