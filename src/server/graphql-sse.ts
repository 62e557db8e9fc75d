/**
 * The graphql-sse protocol (https://github.com/enisdenjo/graphql-sse, its
 * PROTOCOL.md) at `/graphql/stream`, beside yoga's own SSE at `/graphql`
 * (issue 13 item 1). Yoga's `/graphql` speaks only the protocol's "distinct
 * connections" mode: one HTTP connection per subscription, which a browser
 * runs out of (six per origin over HTTP/1.1). `/graphql/stream` also speaks
 * "single connection" mode: the client reserves one stream (PUT), opens it
 * (GET, `text/event-stream`) and POSTs any number of operations onto it.
 *
 * graphql-sse's own fetch handler serves the protocol; every operation it
 * runs first passes the request-level rules of `/graphql` (body limit,
 * persisted documents: operation-admission.ts) and then the yoga app's own
 * parse, validate (graphql-armor limits), context (credentials, rate limits,
 * the subscription limiter of transport `sse`), execute and error masking
 * (`prepareOperation`), with the codes and statuses `/graphql` answers.
 * (`@graphql-yoga/plugin-graphql-sse` did the latter only, and let a plain
 * document through `PERSISTED_DOCUMENTS=only`: issue 19 item 1.) Around it:
 * - every request to the endpoint (reserve, open, operate, stop) needs valid
 *   credentials: a bad or missing token is 401 before the handler runs, so
 *   nobody holds a stream for nobody;
 * - a stream token is bound to the viewer that reserved it (an HMAC of the
 *   viewer's DID under a per-process key), so another viewer's requests
 *   naming it find no stream, exactly as for an unknown token;
 * - reserved streams are admitted by the subscriptions' rule (`admit`,
 *   admission.ts: per viewer, per address for fresh keys, per process, and
 *   room kept for known viewers), and a reservation nobody opens within
 *   {@link RESERVATION_TIMEOUT_MS} is removed;
 * - shutdown ends open streams (they would otherwise hold the listener's
 *   close open with their pings);
 * - a stream whose client stops reading is ended once {@link MAX_BACKLOG}
 *   results wait for it and it has read nothing for {@link STALL_MS} (or ten
 *   times as many wait): the handler would queue them without bound.
 * A single-connection stream lives in one process: behind a load balancer,
 * its requests must reach the replica that reserved it (distinct mode has no
 * such need).
 */
import { createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { GraphQLError } from 'graphql';
import { createHandler } from 'graphql-sse/lib/use/fetch';
import type { Plugin, YogaServerInstance } from 'graphql-yoga';
import { AuthenticationError, bearerChallenge, resolveCredentials, type AuthConfig } from '../auth/index.js';
import { AdmissionRefusedError, createAdmissionPool } from './admission.js';
import { admitOperationRequest, carriesOperation, prepareOperation, refusalBody, type OperationAdmission } from './operation-admission.js';

/** What yoga hands an `onRequest` hook. */
type OnRequestPayload = Parameters<NonNullable<Plugin['onRequest']>>[0];

/** Where the graphql-sse protocol is served. */
export const GRAPHQL_SSE_ENDPOINT = '/graphql/stream';
/** How long a reserved stream waits to be opened before it is removed. */
export const RESERVATION_TIMEOUT_MS = 30_000;
/** Results that may wait unread for a stream whose client stopped reading before it is ended (the subscriptions' own slow-subscriber bound). */
export const MAX_BACKLOG = 1_000;
/** How long a client that far behind may go without reading. */
export const STALL_MS = 5_000;
const TOKEN_HEADER = 'x-graphql-event-stream-token';
/** `e`: the first byte of an `event: …` message (a result), as against `:` (a keep-alive comment). */
const EVENT_MESSAGE_START = 0x65;

/** What {@link useGraphQLSSEProtocol} needs. */
export interface GraphQLSSEOptions {
  auth: AuthConfig;
  /** The request-level rules of /graphql (body limit, persisted documents, request log) for each operation request. */
  admission: OperationAdmission;
  /** The store's clock (ms), for token expiry. */
  now: () => number;
  /**
   * Admits one reserved (then open) single-connection stream of a viewer from an address, or
   * throws {@link AdmissionRefusedError}; resolves to its release. Default: `maxStreamsPerViewer`
   * per viewer and `maxStreams` in all, every viewer alike.
   */
  admit?: (applicant: { viewerDID: string; ip: string | null }) => Promise<() => void>;
  /** Reserved or open single-connection streams one viewer may hold, without `admit`. Default 20. */
  maxStreamsPerViewer?: number;
  /** Reserved or open single-connection streams of all viewers together, without `admit`. Default 1 000. */
  maxStreams?: number;
  /** Remembers how to end a stream at shutdown (the subscription limiter's `register`). */
  register(end: () => void): () => void;
  /** How long a reservation may wait to be opened. Default {@link RESERVATION_TIMEOUT_MS}. */
  reservationTimeoutMs?: number;
  /** Results that may wait unread for one stream's client, once it has read nothing for `stallMs`, before the stream is ended (ten times as many in any case). Default {@link MAX_BACKLOG}. */
  maxBacklog?: number;
  /** How long a client behind by `maxBacklog` may go without reading. Default {@link STALL_MS}. */
  stallMs?: number;
}

interface OpenStream {
  /** Results queued for the client, and read by it. */
  sent: number;
  read: number;
  /** When the client last read a result (ms). */
  readAt: number;
  ended: boolean;
  /** Ends the stream (shutdown, or a client too far behind). */
  end(): void;
}

interface Reservation {
  viewerDID: string;
  /** Gives its place back to admission. */
  release: () => void;
  opened: boolean;
  /** Removes the reservation if nobody opens it in time. */
  timer: ReturnType<typeof setTimeout>;
}

/** What the graphql-sse endpoint notes about one request it handles. */
interface RequestNotes {
  /** The authenticated viewer's DID. */
  viewer?: string;
  /** The socket's remote address (no proxy header is trusted), for admission. */
  address?: string;
  /** The server context (the socket, for the per-IP rate limit) the handler runs the request with. */
  serverContext?: Record<string, unknown>;
  /** A request this file makes itself to dispose of an unopened reservation. */
  internal?: boolean;
}

/** The graphql-sse endpoint with authentication, owner-bound stream tokens and caps (see the file comment). */
export function useGraphQLSSEProtocol(options: GraphQLSSEOptions): Plugin {
  const { auth, admission, now, maxStreamsPerViewer = 20, maxStreams = 1_000, register, reservationTimeoutMs = RESERVATION_TIMEOUT_MS, maxBacklog = MAX_BACKLOG, stallMs = STALL_MS } = options;
  const key = randomBytes(32);
  /**
   * What this endpoint notes about each request it handles (the viewer, the socket's remote
   * address, the server context), kept on the request under a symbol of this plugin: a
   * process-wide WeakMap keyed per request is kept through every young-generation collection
   * (docs/architecture.md, "Per-request objects must die young").
   */
  const NOTES = Symbol('connector-store.graphql-sse');
  type Noted = Request & { [NOTES]?: RequestNotes };
  const notesOf = (request: Request): RequestNotes => ((request as Noted)[NOTES] ??= {});
  const noted = (request: Request): RequestNotes | undefined => (request as Noted)[NOTES];
  const admit = options.admit ?? defaultAdmission(maxStreamsPerViewer, maxStreams);
  const reservations = new Map<string, Reservation>();
  /** Open event streams: single-connection ones by token, distinct-mode ones by request. */
  const streams = new Map<string | Request, OpenStream>();

  const sign = (nonce: string, did: string) => createHmac('sha256', key).update(`${nonce}|${did}`).digest('base64url');
  const mintStreamToken = (did: string) => {
    const nonce = randomUUID();
    return `${nonce}.${sign(nonce, did)}`;
  };
  const boundTo = (token: string, did: string) => {
    const [nonce, mac] = token.split('.');
    if (nonce === undefined || mac === undefined) return false;
    const expected = Buffer.from(sign(nonce, did));
    const given = Buffer.from(mac);
    return expected.length === given.length && timingSafeEqual(expected, given);
  };
  const release = (token: string) => {
    const reservation = reservations.get(token);
    if (reservation === undefined) return;
    reservations.delete(token);
    clearTimeout(reservation.timer);
    reservation.release();
  };

  let yoga: YogaServerInstance<Record<string, unknown>, Record<string, unknown>> | undefined;
  const handler = createHandler(
    {
      // Every operation through the yoga app's own parse, validate, context, execute and
      // subscribe (prepareOperation): the refusals and codes of /graphql.
      onSubscribe: async (req, params) => {
        const request = req.raw;
        const enveloped = yoga!.getEnveloped({ ...noted(request)?.serverContext, request, params });
        const prepared = await prepareOperation(enveloped, params, request.method);
        if ('errors' in prepared) {
          // Refused before anything ran: as on /graphql, an HTTP answer (in single-connection mode, to the operation's POST).
          return [refusalBody(prepared.errors), { status: prepared.status, statusText: STATUS_TEXT[prepared.status] ?? 'Bad Request', headers: { 'content-type': 'application/json; charset=utf-8', ...prepared.headers } }];
        }
        const result = await (prepared.operation === 'subscription' ? enveloped.subscribe(prepared.args) : enveloped.execute(prepared.args));
        if (typeof result === 'object' && result !== null && Symbol.asyncIterator in result) return endingWithErrors(result as AsyncIterable<unknown>) as never;
        // The handler takes a result without `data` for execution arguments ("Unable to detect operation AST").
        if (typeof result === 'object' && result !== null && !('data' in result)) return { data: null, ...result } as never;
        return result as never;
      },
      // Counts each result queued for a stream; a stream whose client has not read `maxBacklog` of them is ended.
      onNext: (_ctx, req) => {
        const request = req.raw;
        const token = request.headers.get(TOKEN_HEADER) ?? new URL(request.url).searchParams.get('token');
        const stream = streams.get(token !== null && streams.has(token) ? token : request);
        if (stream === undefined) return;
        stream.sent++;
        const waiting = stream.sent - stream.read;
        // Behind and not reading (a burst alone is no reason), or ever so far behind.
        if ((waiting > maxBacklog && Date.now() - stream.readAt > stallMs) || waiting > 10 * maxBacklog) stream.end();
      },
      // Which stream a request names: its token if bound to this viewer, else a fresh one
      // (for a PUT: the reservation's; otherwise one no stream has, i.e. distinct mode or "not found").
      authenticate: async (req) => {
        const request = req.raw;
        const did = noted(request)?.viewer;
        const sent = request.headers.get(TOKEN_HEADER) ?? new URL(request.url).searchParams.get('token');
        if (noted(request)?.internal === true && sent !== null) return sent;
        if (did === undefined) return refused(401, 'a bearer token is required', 'UNAUTHENTICATED');
        if (request.method === 'PUT') {
          let releaseStream: () => void;
          try {
            releaseStream = await admit({ viewerDID: did, ip: noted(request)?.address ?? null });
          } catch (error) {
            if (error instanceof AdmissionRefusedError) return refused(error.status, error.message, error.code);
            throw error;
          }
          const token = mintStreamToken(did);
          const timer = setTimeout(() => disposeUnopened(token), reservationTimeoutMs);
          timer.unref();
          reservations.set(token, { viewerDID: did, release: releaseStream, opened: false, timer });
          return token;
        }
        if (sent !== null && boundTo(sent, did)) return sent;
        return randomUUID();
      },
    },
    { Response, ReadableStream, TextEncoder },
  );

  return {
    onYogaInit: ({ yoga: app }) => {
      yoga = app as never;
    },
    // Synchronous until the path is the stream's: every other request (each /graphql one) passes without a promise.
    onRequest: (payload) => {
      if (payload.url.pathname !== GRAPHQL_SSE_ENDPOINT) return;
      return serveStream(payload);
    },
  };

  async function serveStream(payload: OnRequestPayload): Promise<void> {
    const { request, endResponse, fetchAPI } = payload;
    // OPTIONS (a preflight) is yoga's CORS plugin's, which already answered it.
    let did: string | undefined;
    try {
      const { viewer } = await resolveCredentials(request.headers, auth, { now: now() });
      if (viewer.kind !== 'anonymous') did = viewer.did;
    } catch (error) {
      if (!(error instanceof AuthenticationError)) throw error;
      endResponse(
        new fetchAPI.Response(JSON.stringify({ errors: [{ message: error.message, extensions: { code: error.code } }] }), {
          status: 401,
          headers: { 'content-type': 'application/json; charset=utf-8', 'www-authenticate': bearerChallenge(error) },
        }),
      );
      return;
    }
    if (did === undefined) {
      endResponse(
        new fetchAPI.Response(JSON.stringify({ errors: [{ message: 'a bearer token is required (Authorization: Bearer <token>)', extensions: { code: 'UNAUTHENTICATED' } }] }), {
          status: 401,
          headers: { 'content-type': 'application/json; charset=utf-8', 'www-authenticate': 'Bearer realm="connector-store"' },
        }),
      );
      return;
    }
    // The body limit and the persisted-documents rule, as yoga applies them on /graphql.
    let target = request;
    if (carriesOperation(request)) {
      const admitted = await admitOperationRequest(request, admission);
      if ('refusal' in admitted) {
        endResponse(admitted.refusal);
        return;
      }
      target = admitted.request;
      admission.noteDerived(request, target);
    }
    const notes = notesOf(target);
    notes.viewer = did;
    const address = (payload.serverContext as { req?: { socket?: { remoteAddress?: string } } } | undefined)?.req?.socket?.remoteAddress;
    if (address !== undefined) notes.address = address;
    notes.serverContext = payload.serverContext as Record<string, unknown>;
    endResponse(track(target, await handler(target)));
  }

  /**
   * Follows every event stream the handler answers with (a single-connection stream by its
   * token, a distinct-mode one by its request): the reservation's place is freed when it ends,
   * shutdown ends it, and a client that stops reading is cut off once {@link
   * GraphQLSSEOptions.maxBacklog} results wait for it (see `onNext`). The handler reads each operation's results
   * as fast as they come and queues them for the client without bound, so the subscription's own
   * slow-subscriber limit never sees a stalled client; this does.
   */
  function track(request: Request, response: Response): Response {
    if (!(response.headers.get('content-type') ?? '').startsWith('text/event-stream') || response.body === null) return response;
    const token = request.headers.get(TOKEN_HEADER) ?? new URL(request.url).searchParams.get('token');
    const reservation = token === null ? undefined : reservations.get(token);
    if (reservation?.opened === true) return response;
    const key: string | Request = reservation !== undefined ? token! : request;
    if (reservation !== undefined) {
      reservation.opened = true;
      clearTimeout(reservation.timer);
    }
    const reader = response.body.getReader();
    let unregister = () => {};
    let controller: ReadableStreamDefaultController<Uint8Array> | undefined;
    const stream: OpenStream = { sent: 0, read: 0, readAt: Date.now(), ended: false, end: () => {} };
    const finish = () => {
      stream.ended = true;
      unregister();
      streams.delete(key);
      if (reservation !== undefined) release(token!);
    };
    stream.end = () => {
      if (stream.ended) return;
      finish();
      controller?.close();
      void reader.cancel();
    };
    streams.set(key, stream);
    const body = new ReadableStream<Uint8Array>({
      start(c) {
        controller = c;
      },
      async pull(c) {
        const { done, value } = await reader.read();
        if (stream.ended) return;
        if (value !== undefined) {
          // One message per read; results are `event: …` messages, keep-alive pings are comments (`:`).
          if (value[0] === EVENT_MESSAGE_START) {
            stream.read++;
            stream.readAt = Date.now();
          }
          c.enqueue(value);
        }
        if (done) {
          finish();
          c.close();
        }
      },
      async cancel(reason) {
        finish();
        await reader.cancel(reason);
      },
    });
    // Shutdown: the client's stream ends now (whatever its operations are waiting for), then the handler's.
    unregister = register(stream.end);
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  }

  /** A reservation never opened: open it from here and close it at once, so the handler forgets it too. */
  function disposeUnopened(token: string) {
    const reservation = reservations.get(token);
    if (reservation === undefined || reservation.opened) return;
    release(token);
    const request = new Request(`http://internal${GRAPHQL_SSE_ENDPOINT}?token=${encodeURIComponent(token)}`, { headers: { accept: 'text/event-stream' } });
    notesOf(request).internal = true;
    void handler(request).then(
      (response) => response.body?.cancel(),
      () => {},
    );
  }
}

const STATUS_TEXT: Record<number, string> = { 400: 'Bad Request', 401: 'Unauthorized', 405: 'Method Not Allowed', 429: 'Too Many Requests', 503: 'Service Unavailable' };

/** Admission without standing or addresses: a cap per viewer and one in all (what a bare `useGraphQLSSEProtocol` gets). */
function defaultAdmission(perViewer: number, total: number): NonNullable<GraphQLSSEOptions['admit']> {
  const pool = createAdmissionPool({ perViewer, perIP: 0, total, unknownPercent: 100 }, 'event streams');
  return async ({ viewerDID, ip }) => pool.admit({ viewerDID, ip, standing: 'known' });
}

/**
 * A subscription's results, a thrown error turned into a last result with
 * `errors` (then the end): thrown, it would reach graphql-sse's response
 * stream, whose failed pull is an unhandled rejection that ends the process.
 * The subscriptions end themselves with a result (resolvers/subscriptions.ts);
 * this keeps any other throw from taking the server down. Written by hand, not
 * as an async generator: a generator waiting for the next result would queue
 * the handler's `return()` behind it, and a stopped subscription would hold its
 * slot until its next event.
 */
function endingWithErrors(results: AsyncIterable<unknown>): AsyncIterableIterator<unknown> {
  const inner = results[Symbol.asyncIterator]();
  let failed = false;
  return {
    next: async () => {
      if (failed) return { done: true, value: undefined };
      try {
        return await inner.next();
      } catch (error) {
        failed = true;
        // Typed errors (no original) pass as they are; anything else gets the mask's words.
        const typed = error instanceof GraphQLError && error.originalError === undefined;
        return { done: false, value: { data: null, errors: [typed ? error : new GraphQLError('Unexpected error.', { extensions: { code: 'INTERNAL_SERVER_ERROR' } })] } };
      }
    },
    return: async (value?: unknown) => (await inner.return?.(value)) ?? { done: true, value },
    throw: async (error?: unknown) => {
      if (inner.throw !== undefined) return inner.throw(error);
      throw error;
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}

/** A graphql-sse "response" tuple (what `authenticate` may return instead of a token). */
type HandlerResponse = [string, { status: number; statusText: string; headers: Record<string, string> }];

function refused(status: 401 | 429 | 503, message: string, code: string): HandlerResponse {
  return [
    JSON.stringify({ errors: [{ message, extensions: { code, ...(status === 503 && { retryable: true }) } }] }),
    { status, statusText: STATUS_TEXT[status]!, headers: { 'content-type': 'application/json; charset=utf-8' } },
  ];
}
