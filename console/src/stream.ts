/**
 * A tab's side of the shared event stream (stream-hub.ts): its
 * subscriptions go to the hub in the console's SharedWorker, or to a hub in
 * this tab where the browser has no SharedWorker (Chrome on Android), and
 * come back as results.
 *
 * Why a SharedWorker rather than a leader tab relaying over
 * BroadcastChannel: the stream's owner then lives exactly as long as any
 * console tab does, so navigating or closing a tab never hands the stream
 * over (a leader tab that navigates would drop every tab's subscriptions and
 * another would re-elect and resubscribe, on every one of its page loads);
 * and holding a Web Lock, as leader election does, keeps a page out of the
 * back/forward cache.
 *
 * The back/forward cache: on `pagehide` the tab says `bye` and closes its
 * port, so a page kept in the cache holds no subscription (the stream closes
 * with the last one); on `pageshow` from the cache it connects again,
 * resubscribes, and asks the page to re-read what it shows, since events
 * went by while it slept. A frozen page (`freeze` / `resume`) does the same.
 *
 * The page's live status combines the stream's (live / reconnecting /
 * offline, from the hub) with its queries' and its own subscriptions': a
 * query that cannot reach the server marks the page offline until `/readyz`
 * answers again (probed every second), then the page re-reads. The page is
 * `live` only once the server acknowledged every subscription of the tab
 * (`connecting` until then); a subscription the server refused (a cap
 * reached, a token expired, a document not allowed) makes it `limited`: the
 * page shows the server's reason and re-reads every {@link POLL_REFUSED_MS}
 * so it is never silently stale, until the hub's next try is accepted.
 */
import { createStreamHub, type FromTab, type LiveStatus, type StreamRequest, type ToTab } from './stream-hub';
import type { Session } from './session';

export type { StreamRequest } from './stream-hub';

/** How the page is: the stream's status, `connecting` until every subscription is acknowledged, `limited` while one is refused. */
export type PageStatus = LiveStatus | 'connecting' | 'limited';

/** Where a subscription's results go. */
export interface StreamSink {
  next(value: unknown): void;
  error(error: Error): void;
  complete(): void;
}

/** A tab's live connection to the server. */
export interface LiveStream {
  subscribe(request: StreamRequest, sink: StreamSink): () => void;
  /** How the page is: live, connecting, limited (a subscription refused), reconnecting, or offline (still trying). */
  status(): PageStatus;
  onStatus(listener: () => void): () => void;
  /** Why the server refused a subscription of this tab, one message per reason (empty while none is refused). */
  refusals(): readonly string[];
  /** Called when the page should re-read what it shows (after a reconnect, or back from the back/forward cache). */
  onResume(listener: () => void): () => void;
  /** A query could not reach the server (a network error, not an HTTP answer). */
  queryFailed(): void;
  dispose(): void;
}

/** How often an offline page asks `/readyz` whether the server is back. */
const PROBE_EVERY_MS = 1_000;
/** Resumes within this long of each other make one re-read. */
const RESUME_SETTLE_MS = 150;
/** How often a page with a refused subscription re-reads what it shows. */
export const POLL_REFUSED_MS = 5_000;

let localHub: ReturnType<typeof createStreamHub> | undefined;

/** A port to the hub: the SharedWorker's, or one of a hub in this tab. */
function hubPort(): MessagePort {
  if (typeof SharedWorker !== 'undefined') {
    try {
      const worker = new SharedWorker(new URL('./stream-worker.ts', import.meta.url), { type: 'module', name: 'connector-store-console-stream' });
      return worker.port;
    } catch {
      // Refused (a sandboxed page, a policy): hold the stream in this tab.
    }
  }
  localHub ??= createStreamHub(location.origin);
  const channel = new MessageChannel();
  localHub.connect(channel.port1);
  return channel.port2;
}

/** Opens this tab's connection; `onUnauthorized` hears once when the server refuses the session's token. */
export function openLiveStream(session: Session, onUnauthorized: (message: string) => void): LiveStream {
  /** This tab's subscriptions: acknowledged by the server, or refused with its message, or neither yet. */
  const subscriptions = new Map<string, { request: StreamRequest; sink: StreamSink; state: 'pending' | 'acknowledged' | 'refused'; refusal: string | null }>();
  let poll: ReturnType<typeof setInterval> | null = null;
  let refusalList: readonly string[] = [];
  const statusListeners = new Set<() => void>();
  const resumeListeners = new Set<() => void>();
  let nextID = 0;
  let port: MessagePort | null = null;
  let streamStatus: LiveStatus = 'live';
  let queriesOffline = false;
  let probe: ReturnType<typeof setTimeout> | null = null;
  let resumeTimer: ReturnType<typeof setTimeout> | null = null;
  let refused = false;
  let disposed = false;
  /** Messages waiting for the hello (the token is fetched first). */
  let queue: FromTab[] | null = null;

  const current = (): PageStatus => {
    if (streamStatus !== 'live') return streamStatus;
    if (queriesOffline) return 'offline';
    const states = [...subscriptions.values()].map((entry) => entry.state);
    if (states.includes('refused')) return 'limited';
    return states.includes('pending') ? 'connecting' : 'live';
  };
  let shown = current();
  const changed = () => {
    // While a subscription is refused the page polls instead.
    const refused = [...subscriptions.values()].filter((entry) => entry.state === 'refused');
    const reasons = [...new Set(refused.map((entry) => entry.refusal ?? 'refused'))];
    const refusalsChanged = reasons.join('\n') !== refusalList.join('\n');
    if (refusalsChanged) refusalList = reasons;
    if (refused.length > 0 && poll === null && !disposed) poll = setInterval(resume, POLL_REFUSED_MS);
    if (refused.length === 0 && poll !== null) {
      clearInterval(poll);
      poll = null;
    }
    const next = current();
    if (next === shown && !refusalsChanged) return;
    shown = next;
    for (const listener of statusListeners) listener();
  };
  const setState = (id: string, state: 'pending' | 'acknowledged' | 'refused', refusal: string | null = null) => {
    const entry = subscriptions.get(id);
    if (entry === undefined) return;
    entry.state = state;
    entry.refusal = refusal;
    changed();
  };
  const resume = () => {
    if (resumeTimer !== null) return;
    resumeTimer = setTimeout(() => {
      resumeTimer = null;
      for (const listener of resumeListeners) listener();
    }, RESUME_SETTLE_MS);
  };
  const post = (message: FromTab) => {
    if (port === null) return;
    if (queue !== null) queue.push(message);
    else port.postMessage(message);
  };

  const attach = () => {
    // Once: a page back from the back/forward cache hears both `resume` and `pageshow`.
    if (port !== null || disposed) return;
    const opened = hubPort();
    port = opened;
    queue = [];
    opened.onmessage = (event: MessageEvent<ToTab>) => {
      const message = event.data;
      switch (message.t) {
        case 'next':
          subscriptions.get(message.id)?.sink.next(message.value);
          return;
        case 'ack':
          setState(message.id, 'acknowledged');
          return;
        case 'pending':
          setState(message.id, 'pending');
          return;
        case 'failed':
          setState(message.id, 'refused', message.message);
          return;
        case 'error': {
          const entry = subscriptions.get(message.id);
          subscriptions.delete(message.id);
          entry?.sink.error(new Error(message.message));
          changed();
          return;
        }
        case 'complete': {
          const entry = subscriptions.get(message.id);
          subscriptions.delete(message.id);
          entry?.sink.complete();
          changed();
          return;
        }
        case 'status':
          streamStatus = message.status;
          changed();
          return;
        case 'resumed':
          resume();
          return;
        case 'token?':
          void session.getToken().then((token) => opened.postMessage({ t: 'token', request: message.request, token } satisfies FromTab));
          return;
        case 'unauthorized':
          if (!refused) {
            refused = true;
            onUnauthorized(message.message);
          }
          return;
        case 'ping':
          opened.postMessage({ t: 'pong' } satisfies FromTab);
          return;
        case 'dropped':
          // The hub gave up on this tab (it was frozen or too slow to answer): attach again and re-read.
          if (port === opened && !disposed) {
            port = null;
            attach();
            resume();
          }
          return;
      }
    };
    opened.start();
    void session.getToken().then((token) => {
      if (port !== opened) return;
      opened.postMessage({ t: 'hello', identity: session.did ?? `token:${token}`, token } satisfies FromTab);
      const waiting = queue ?? [];
      queue = null;
      for (const message of waiting) opened.postMessage(message);
    });
    for (const [id, entry] of subscriptions) {
      entry.state = 'pending';
      post({ t: 'subscribe', id, request: entry.request });
    }
    changed();
  };

  const detach = () => {
    if (port === null) return;
    try {
      port.postMessage({ t: 'bye' } satisfies FromTab);
      port.close();
    } catch {
      // Already closed.
    }
    port = null;
    queue = null;
  };

  const onPageHide = () => detach();
  const onPageShow = (event: PageTransitionEvent) => {
    if (!event.persisted || disposed) return;
    attach();
    resume();
  };
  // A frozen page (Page Lifecycle: a background tab the browser suspends) answers nothing: leave, and come back on resume.
  const onFreeze = () => detach();
  const onResume = () => {
    if (disposed || port !== null) return;
    attach();
    resume();
  };
  addEventListener('pagehide', onPageHide);
  addEventListener('pageshow', onPageShow);
  document.addEventListener('freeze', onFreeze);
  document.addEventListener('resume', onResume);
  attach();

  const probeServer = () => {
    probe = setTimeout(async () => {
      try {
        const response = await fetch('/readyz', { cache: 'no-store', credentials: 'omit' });
        if (response.ok) {
          probe = null;
          queriesOffline = false;
          changed();
          resume();
          return;
        }
      } catch {
        // Still down.
      }
      if (!disposed) probeServer();
    }, PROBE_EVERY_MS);
  };

  return {
    subscribe(request, sink) {
      const id = String(++nextID);
      subscriptions.set(id, { request, sink, state: 'pending', refusal: null });
      post({ t: 'subscribe', id, request });
      changed();
      return () => {
        if (!subscriptions.delete(id)) return;
        post({ t: 'unsubscribe', id });
        changed();
      };
    },
    status: () => shown,
    refusals: () => refusalList,
    onStatus(listener) {
      statusListeners.add(listener);
      return () => statusListeners.delete(listener);
    },
    onResume(listener) {
      resumeListeners.add(listener);
      return () => resumeListeners.delete(listener);
    },
    queryFailed() {
      if (queriesOffline || disposed) return;
      queriesOffline = true;
      changed();
      probeServer();
    },
    dispose() {
      disposed = true;
      removeEventListener('pagehide', onPageHide);
      removeEventListener('pageshow', onPageShow);
      document.removeEventListener('freeze', onFreeze);
      document.removeEventListener('resume', onResume);
      if (probe !== null) clearTimeout(probe);
      if (resumeTimer !== null) clearTimeout(resumeTimer);
      if (poll !== null) clearInterval(poll);
      subscriptions.clear();
      detach();
    },
  };
}
