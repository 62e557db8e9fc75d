/**
 * The console's event streams, held for every tab of this server at once
 * (issues 22 and 38). Tabs talk to the hub over a MessagePort: the hub runs in
 * a SharedWorker (stream-worker.ts), or, where a browser has none, inside the
 * tab itself over a MessageChannel (stream.ts), with the same code.
 *
 * One stream per identity (the tokens' DID): a graphql-sse client in
 * single-connection mode over `/graphql/stream`, so twelve tabs hold one HTTP
 * connection, not twelve of the browser's six. Tabs signed in as different
 * identities get one stream each (the server authenticates a stream once,
 * when it is reserved). Identical subscriptions of several tabs (the same
 * document and variables) are **one** subscription on the server, its events
 * fanned out here; it ends when its last tab leaves. The stream opens with
 * the first subscription and closes with the last (graphql-sse's lazy mode).
 *
 * **The hub owns the reconnect loop**, not graphql-sse (its clients here never
 * retry): when any subscription of a stream fails on the network (the server
 * restarted and forgot the stream, a dropped connection, a 5xx or 429), the
 * whole client is disposed, which ends its connection and every request it
 * has in flight, and after a backoff with jitter (or the server's
 * `Retry-After`) a new client re-subscribes every subscription of every tab
 * over one new stream. graphql-sse's own retries in lazy single-connection
 * mode let each failing subscription drop the shared connection, so N
 * retrying subscriptions opened N streams and orphaned the old ones, until a
 * restarted server left a browser holding all six of its connections.
 *
 * Each subscription is acknowledged to its tabs (`ack`) once the server
 * accepted it (its POST answered 202); one the server refuses (a cap reached,
 * a document that is not persisted: a GraphQL error) is reported (`failed`,
 * with the server's message) and asked again every {@link RETRY_REFUSED_MS},
 * while its tabs refresh by polling. Stream states go to the tabs of its
 * identity (`live`, `reconnecting`, `offline` after a few failed attempts),
 * and `resumed` when it came back (events may have been missed: re-read). A
 * refused token (401) is final: the tabs hear `unauthorized` with the
 * server's message and the stream stops.
 */
import { createClient, NetworkError, type Client } from 'graphql-sse';
import { tokenClaims } from './jwt';

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
  | { t: 'ack'; id: string }
  | { t: 'pending'; id: string }
  | { t: 'failed'; id: string; message: string }
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
/** How long a subscription the server refused waits before it is asked again (its tabs poll meanwhile). */
export const RETRY_REFUSED_MS = 30_000;
/** The longest wait before a reconnect, whatever `Retry-After` says. */
const MAX_RETRY_AFTER_MS = 60_000;
/**
 * An open stream that brought no byte for this long is taken for dead (a
 * laptop that slept, a connection dropped without a close): the server
 * pings every 12 s, so two pings were missed.
 */
export const SILENT_STREAM_MS = 30_000;

/** Backoff before the `retries`-th attempt: 0.5 s doubling, capped at 3 s, with jitter (so restarted servers are not hit by every console at once). */
export function retryDelayMs(retries: number): number {
  return Math.min(3_000, 500 * 2 ** retries) * (0.5 + Math.random() / 2);
}

interface Tab {
  port: MessagePort;
  identity: string | null;
  lastSeen: number;
  /** The tab's subscription ids → the shared subscription each is one of. */
  subscriptions: Map<string, Shared>;
}

/** One subscription on the server, shared by every tab that asked for the same request. */
interface Shared {
  key: string;
  request: StreamRequest;
  /** The tabs that hold it, each under its own ids. */
  holders: Map<Tab, Set<string>>;
  state: 'pending' | 'acknowledged' | 'refused';
  /** Why the server refused it, while it is refused. */
  refusal: string | null;
  /** graphql-sse's id of its current POST. */
  operationId: string | undefined;
  /** Stops it on the server (graphql-sse's dispose, once its POST settled). */
  stop: (() => void) | null;
  retryTimer: ReturnType<typeof setTimeout> | null;
}

interface Stream {
  identity: string;
  client: Client<true> | null;
  /** Bumped whenever the client is replaced: callbacks of an older client are ignored. */
  generation: number;
  tabs: Set<Tab>;
  shared: Map<string, Shared>;
  token: string;
  status: LiveStatus;
  failures: number;
  reconnectTimer: ReturnType<typeof setTimeout> | null;
  /** Whether the current client's event stream is open, and when it last brought a byte (a result or a ping). */
  open: boolean;
  lastByteAt: number;
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
  /** The subscription whose POST carries each operation id (for its acknowledgement). */
  const byOperationId = new Map<string, Shared>();
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
  /** Tells every holder of `shared`, under each of its ids. */
  const tellHolders = (shared: Shared, message: (id: string) => ToTab) => {
    for (const [tab, ids] of shared.holders) for (const id of ids) send(tab, message(id));
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

  /** Final: nothing retries a refused token. The tabs hear why and sign out; their subscriptions end with the client. */
  const refuseToken = (stream: Stream, message: string) => {
    if (stream.refused) return;
    stream.refused = true;
    tell(stream, { t: 'unauthorized', message });
    queueMicrotask(() => {
      if (stream.reconnectTimer !== null) clearTimeout(stream.reconnectTimer);
      stream.reconnectTimer = null;
      stream.generation++;
      stream.client?.dispose();
      stream.client = null;
      if (streams.get(stream.identity) === stream) streams.delete(stream.identity);
    });
  };

  /**
   * A subscription ended at its token's `exp` (TOKEN_EXPIRED): a new stream
   * serves it when the tab has a fresher token (a session that mints its
   * own); when the newest token has expired too (a pasted one), that is
   * final. The server would still take it for its clock tolerance (30 s),
   * only to end every subscription at once again: the page says so now.
   */
  const renewAfterExpiry = async (stream: Stream) => {
    const token = await freshToken(stream);
    const exp = tokenClaims(token)?.exp;
    if (typeof exp === 'number' && exp * 1000 <= Date.now()) {
      return refuseToken(stream, `the token expired at ${new Date(exp * 1000).toLocaleTimeString()}: sign in again (with a private key the console mints its own)`);
    }
    reconnect(stream, retryDelayMs(stream.failures));
  };

  /** A graphql-sse client for `stream`: one lazy connection, no retries of its own (the hub reconnects). */
  const newClient = (stream: Stream): Client<true> => {
    const generation = stream.generation;
    return createClient({
      url: `${origin}/graphql/stream`,
      generateID: () => {
        // Not crypto.randomUUID: it exists only in secure contexts, and a console may be served over plain HTTP.
        const id = Array.from(crypto.getRandomValues(new Uint8Array(16)), (byte) => byte.toString(16).padStart(2, '0')).join('');
        naming?.(id);
        return id;
      },
      singleConnection: true,
      lazy: true,
      retryAttempts: 0,
      headers: async () => ({ authorization: `Bearer ${await freshToken(stream)}` }),
      on: {
        connected: () => {
          if (generation !== stream.generation) return;
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
        // The event stream itself (graphql-sse's GET): every byte it brings, pings included, says it is alive.
        if (init?.method === 'GET' && response.ok && response.body !== null) {
          stream.open = true;
          stream.lastByteAt = Date.now();
          const watched = response.body.pipeThrough(
            new TransformStream<Uint8Array, Uint8Array>({
              transform(chunk, controller) {
                if (generation === stream.generation) stream.lastByteAt = Date.now();
                controller.enqueue(chunk);
              },
              flush() {
                if (generation === stream.generation) stream.open = false;
              },
            }),
          );
          return new Response(watched, { status: response.status, statusText: response.statusText, headers: response.headers });
        }
        if (operationId !== undefined && response.status === 202) {
          const shared = byOperationId.get(operationId);
          if (shared !== undefined && shared.operationId === operationId && shared.state === 'pending' && generation === stream.generation) {
            shared.state = 'acknowledged';
            tellHolders(shared, (id) => ({ t: 'ack', id }));
          }
        }
        if (response.status === 401 && !stream.refused) refuseToken(stream, await refusalMessage(response));
        return response;
      },
    });
  };

  /** Starts `shared` on the stream's current client (making one if needed). */
  const start = (stream: Stream, shared: Shared) => {
    if (stream.refused || stream.reconnectTimer !== null) return;
    stream.client ??= newClient(stream);
    const generation = stream.generation;
    shared.state = 'pending';
    shared.operationId = undefined;
    naming = (id) => {
      shared.operationId = id;
      byOperationId.set(id, shared);
    };
    const stop = stream.client.subscribe(shared.request, {
      next: (value) => {
        if (generation !== stream.generation || stream.shared.get(shared.key) !== shared) return;
        const refusal = refusalOf(value);
        // Ended for the stream's sake (its token expired, it fell behind, the database failed): a new stream, for everyone.
        // (With a backoff: a token that is expired again at once must not make a busy loop.)
        if (refusal !== null && refusal.code === 'TOKEN_EXPIRED') return void renewAfterExpiry(stream);
        if (refusal !== null && refusal.renew) return reconnect(stream, retryDelayMs(stream.failures));
        if (refusal !== null) return refuse(stream, shared, refusal.message);
        tellHolders(shared, (id) => ({ t: 'next', id, value }));
      },
      error: (error) => {
        if (generation !== stream.generation || stream.shared.get(shared.key) !== shared) return;
        const response = error instanceof NetworkError ? error.response : undefined;
        const status = response?.status;
        // Refused on its own (its POST answered 4xx, not for the stream's sake): the others go on, over a new client
        // (graphql-sse dropped the connection it had on this error).
        if (status !== undefined && status >= 400 && status < 500 && status !== 401 && status !== 404 && status !== 408 && status !== 429) {
          shared.state = 'refused';
          reconnect(stream, 0);
          void refusalMessage(response!).then((message) => refuse(stream, shared, message));
          return;
        }
        reconnect(stream, retryAfterOf(error) ?? retryDelayMs(stream.failures));
      },
      complete: () => {
        if (generation !== stream.generation || stream.shared.get(shared.key) !== shared || shared.state === 'refused') return;
        // Ended by the server: its tabs hear it, and it is forgotten.
        end(stream, shared);
        tellHolders(shared, (id) => ({ t: 'complete', id }));
        for (const [tab, ids] of shared.holders) for (const id of ids) tab.subscriptions.delete(id);
      },
    });
    naming = null;
    shared.stop = () => {
      const posting = shared.operationId === undefined ? undefined : postsInFlight.get(shared.operationId);
      if (posting === undefined) stop();
      // A task later, so graphql-sse has taken the answer in and knows to send the DELETE.
      else void posting.then(() => setTimeout(stop, 0));
    };
  };

  /** The server refused `shared`: its tabs hear why and poll; it is asked again later. */
  const refuse = (stream: Stream, shared: Shared, message: string) => {
    if (stream.shared.get(shared.key) !== shared || shared.retryTimer !== null) return;
    shared.stop?.();
    shared.stop = null;
    shared.state = 'refused';
    shared.refusal = message;
    tellHolders(shared, (id) => ({ t: 'failed', id, message }));
    shared.retryTimer = setTimeout(() => {
      shared.retryTimer = null;
      if (stream.shared.get(shared.key) === shared && shared.state === 'refused') start(stream, shared);
    }, RETRY_REFUSED_MS);
  };

  /** Forgets `shared` and stops it on the server. */
  const end = (stream: Stream, shared: Shared) => {
    if (stream.shared.get(shared.key) === shared) stream.shared.delete(shared.key);
    if (shared.retryTimer !== null) clearTimeout(shared.retryTimer);
    if (shared.operationId !== undefined) byOperationId.delete(shared.operationId);
    shared.stop?.();
    shared.stop = null;
  };

  /**
   * The stream broke (or must be rebuilt): its client is disposed at once,
   * which ends its connection and requests, and after `delayMs` a new one
   * re-subscribes everything. One loop per stream: a break while one is
   * waiting changes nothing.
   */
  const reconnect = (stream: Stream, delayMs: number) => {
    if (stream.refused || stream.reconnectTimer !== null) return;
    stream.generation++;
    stream.open = false;
    stream.client?.dispose();
    stream.client = null;
    for (const shared of stream.shared.values()) {
      if (shared.operationId !== undefined) byOperationId.delete(shared.operationId);
      shared.stop = null;
      if (shared.state === 'acknowledged') {
        // Not live again until the new stream's server acknowledges it.
        shared.state = 'pending';
        tellHolders(shared, (id) => ({ t: 'pending', id }));
      }
    }
    if (delayMs > 0) {
      stream.failures++;
      setStatus(stream, stream.failures >= OFFLINE_AFTER_FAILURES ? 'offline' : 'reconnecting');
    }
    stream.reconnectTimer = setTimeout(() => {
      stream.reconnectTimer = null;
      for (const shared of stream.shared.values()) if (shared.state !== 'refused') start(stream, shared);
    }, delayMs);
  };

  const openStream = (identity: string, token: string): Stream => {
    const stream: Stream = {
      identity,
      client: null,
      generation: 0,
      tabs: new Set(),
      shared: new Map(),
      token,
      status: 'live',
      failures: 0,
      reconnectTimer: null,
      open: false,
      lastByteAt: 0,
      everConnected: false,
      refused: false,
    };
    streams.set(identity, stream);
    return stream;
  };

  /** Adds `id` of `tab` as a holder of the stream's subscription to `request`, starting that on first use. */
  const subscribe = (stream: Stream, tab: Tab, id: string, request: StreamRequest) => {
    const key = JSON.stringify([request.query, request.variables ?? null, request.operationName ?? null]);
    let shared = stream.shared.get(key);
    const fresh = shared === undefined;
    shared ??= { key, request, holders: new Map(), state: 'pending', refusal: null, operationId: undefined, stop: null, retryTimer: null };
    const ids = shared.holders.get(tab) ?? new Set<string>();
    ids.add(id);
    shared.holders.set(tab, ids);
    tab.subscriptions.set(id, shared);
    if (fresh) {
      // The first after none: graphql-sse (lazy) closed the connection meanwhile, and opens a new one now.
      if (stream.shared.size === 0) stream.lastByteAt = Date.now();
      stream.shared.set(key, shared);
      start(stream, shared);
    } else if (shared.state === 'acknowledged') send(tab, { t: 'ack', id });
    else if (shared.state === 'refused') send(tab, { t: 'failed', id, message: shared.refusal ?? 'refused' });
  };

  /** Removes `id` of `tab` from its subscription; the last holder's leaving ends it on the server. */
  const unsubscribe = (tab: Tab, id: string) => {
    const shared = tab.subscriptions.get(id);
    if (shared === undefined) return;
    tab.subscriptions.delete(id);
    const ids = shared.holders.get(tab);
    ids?.delete(id);
    if (ids?.size === 0) shared.holders.delete(tab);
    const stream = tab.identity === null ? undefined : streams.get(tab.identity);
    if (shared.holders.size === 0 && stream !== undefined) end(stream, shared);
  };

  const leave = (tab: Tab) => {
    if (!tabs.delete(tab)) return;
    for (const id of [...tab.subscriptions.keys()]) unsubscribe(tab, id);
    if (tab.identity !== null) streams.get(tab.identity)?.tabs.delete(tab);
    try {
      tab.port.close();
    } catch {
      // Already closed.
    }
  };

  // Tabs that stopped answering (crashed, or frozen without a `bye`) are dropped with their subscriptions;
  // an open stream that went silent is replaced.
  setInterval(() => {
    const now = Date.now();
    for (const stream of streams.values()) {
      if (stream.open && stream.shared.size > 0 && now - stream.lastByteAt > SILENT_STREAM_MS) reconnect(stream, retryDelayMs(stream.failures));
    }
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
            unsubscribe(tab, message.id);
            subscribe(stream, tab, message.id, message.request);
            return;
          }
          case 'unsubscribe':
            unsubscribe(tab, message.id);
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

/**
 * Codes with which the server ends a subscription for its stream's sake, not
 * the subscription's: a new stream (a fresh token, an empty queue) serves it
 * again. Any other error is a refusal of the subscription itself (a cap
 * reached, a document not allowed).
 */
const RENEW_STREAM = new Set(['TOKEN_EXPIRED', 'SUBSCRIBER_TOO_SLOW', 'DATABASE_UNAVAILABLE', 'DATABASE_TIMEOUT', 'OVERLOADED']);

/** A result that ends its subscription (errors and no data): the server's message, its first code, and whether a new stream serves it. */
function refusalOf(value: unknown): { message: string; code: string | undefined; renew: boolean } | null {
  const result = value as { data?: unknown; errors?: { message?: string; extensions?: { code?: unknown } }[] } | null;
  if (result === null || typeof result !== 'object' || result.data != null || !Array.isArray(result.errors) || result.errors.length === 0) return null;
  const codes = result.errors.map((error) => (typeof error.extensions?.code === 'string' ? error.extensions.code : undefined));
  return {
    message: result.errors.map((error) => error.message ?? 'refused').join('; '),
    code: codes[0],
    renew: codes.some((code) => code !== undefined && RENEW_STREAM.has(code)),
  };
}

/** The server's `Retry-After` on a refused stream or request (seconds or an HTTP date), in ms. */
function retryAfterOf(error: unknown): number | undefined {
  const value = error instanceof NetworkError ? error.response?.headers.get('retry-after') : null;
  if (value === null || value === undefined || value.trim() === '') return undefined;
  const seconds = Number(value);
  const ms = Number.isFinite(seconds) ? seconds * 1000 : Date.parse(value) - Date.now();
  return Number.isNaN(ms) ? undefined : Math.min(MAX_RETRY_AFTER_MS, Math.max(0, ms) * (1 + Math.random() / 4));
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
