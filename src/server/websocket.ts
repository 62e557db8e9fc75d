/**
 * Subscriptions over WebSocket (the graphql-ws protocol), next to yoga's SSE
 * on the same `/graphql` path. Every operation runs through the yoga app's
 * own parse, validate (graphql-armor limits), context (the same viewer
 * resolution), subscribe and error masking, so authorization and limits are
 * exactly those of SSE. Credentials travel in `connectionParams`.
 */
import type { Server } from 'node:http';
import { GraphQLError, type DocumentNode, type ExecutionArgs } from 'graphql';
import { CloseCode } from 'graphql-ws';
import { useServer } from 'graphql-ws/use/ws';
import { WebSocketServer } from 'ws';
import { AdmissionRefusedError } from './admission.js';
import { originAllowed, ownOriginOf } from './cors.js';
import type { ServerApp } from './app.js';
import type { Logger } from './logger.js';
import { prepareOperation } from './operation-admission.js';
import type { WaitingSocketBudget } from './waiting-sockets.js';

/** Options of {@link attachGraphQLWebSocket}. */
export interface GraphQLWebSocketOptions {
  logger: Logger;
  /** Largest message accepted; a bigger one closes the socket (1009). */
  maxPayloadBytes: number;
  /**
   * Initialised connections at most: an upgrade while this many are open is refused with
   * HTTP 503 (admission then holds the same total at `connection_init`). Sockets that have
   * not sent `connection_init` do not count: `waitingSockets` does. Default: no cap.
   */
  maxConnections?: number;
  /**
   * The budget a socket counts against from its upgrade until its `connection_init`
   * (waiting-sockets.ts: per address, in all; past it the oldest such socket is closed,
   * cut off). Default: none (only WS_CONNECTION_INIT_TIMEOUT_MS bounds them).
   */
  waitingSockets?: WaitingSocketBudget;
  /** How long a client has to send `connection_init` before the socket is closed (4408). Default: 3 000 ms. */
  connectionInitTimeoutMs?: number;
  /** Origins whose pages may open a socket besides the server's own (CORS_ORIGINS); none in the header mode. */
  corsOrigins?: readonly string[];
  /** The development header mode: then only the server's own pages (or non-browser clients) may connect. */
  insecureHeaderAuth?: boolean;
  /** How long `close()` waits for clients to finish the closing handshake before cutting them off. Default: 5 000 ms. */
  closeTimeoutMs?: number;
}

/** A WebSocket endpoint attached to an HTTP server. */
export interface GraphQLWebSocket {
  /** Closes every client (1001 Going Away, so clients reconnect elsewhere) and stops accepting upgrades. */
  close(): Promise<void>;
}

/** The yoga functions one operation runs with; carried to `execute`/`subscribe` as its root value. */
interface EnvelopedRoot {
  execute: (args: ExecutionArgs) => unknown;
  subscribe: (args: ExecutionArgs) => unknown;
}

/** Serves graphql-ws on `path` of `server`, through `app`'s yoga instance. Subscriptions only. */
export function attachGraphQLWebSocket(server: Server, app: ServerApp, options: GraphQLWebSocketOptions, path = '/graphql'): GraphQLWebSocket {
  const log = options.logger.child({ component: 'websocket' });
  const maxConnections = options.maxConnections ?? Number.POSITIVE_INFINITY;
  // Sockets past `connection_init`: an un-initialised one counts against its address's waiting budget instead (issue 41).
  let initialised = 0;
  const wss: WebSocketServer = new WebSocketServer({
    server,
    path,
    maxPayload: options.maxPayloadBytes,
    // Refused before the upgrade when every connection is taken by identified clients.
    verifyClient: (info, done) => {
      if (initialised >= maxConnections) return done(false, 503, 'too many WebSocket connections; retry later');
      // A page on another origin may not open a socket unless listed (cross-site WebSocket hijacking).
      if (!originAllowed(info.origin || null, ownOriginOf({ headers: info.req.headers, encrypted: info.secure }), options.corsOrigins ?? [], options.insecureHeaderAuth ?? false)) {
        return done(false, 403, 'this origin may not open a WebSocket here');
      }
      return done(true);
    },
  });
  // Only what the context factory reads: spreading graphql-ws's own context
  // would put its `subscriptions` map where the per-viewer limiter belongs.
  const enveloped = (connectionParams: Readonly<Record<string, unknown>> | undefined, extra: object) =>
    app.yoga.getEnveloped({ connectionParams, ...extra } as Parameters<typeof app.yoga.getEnveloped>[0]);
  const waitingUntilInit = new WeakMap<object, () => void>();
  wss.on('connection', (socket, request) => {
    const budget = options.waitingSockets;
    if (budget === undefined) return;
    // Until its connection_init arrives; a flood of silent sockets evicts its own oldest first.
    // Cut off, not closed: a closing handshake would let a client that never answers keep the socket 30 s more.
    const stop = budget.wait(app.clientAddress(request.socket.remoteAddress), () => socket.terminate());
    waitingUntilInit.set(socket, stop);
    socket.once('close', stop);
  });
  const envelopedFor = (ctx: { connectionParams?: Readonly<Record<string, unknown>>; extra: { request: unknown; socket: unknown } }, params: unknown) =>
    enveloped(ctx.connectionParams, { req: ctx.extra.request, socket: ctx.extra.socket, params });

  const disposable = useServer<Record<string, unknown> | undefined>(
    {
      connectionInitWaitTimeout: options.connectionInitTimeoutMs ?? 3_000,
      execute: (args) => (args.rootValue as EnvelopedRoot).execute(args) as never,
      subscribe: (args) => (args.rootValue as EnvelopedRoot).subscribe(args) as never,
      onConnect: async (ctx) => {
        // It has said who it is (or is refused below): no longer waiting.
        waitingUntilInit.get(ctx.extra.socket)?.();
        // The token is checked once here, so a bad one fails the connection
        // (4401, which graphql-ws clients do not retry); each subscription
        // resolves its viewer again, as every SSE request does.
        try {
          const context = (await enveloped(ctx.connectionParams, { req: ctx.extra.request }).contextFactory()) as { viewer?: { kind: string; did?: string } };
          // Every subscription needs a viewer: an anonymous socket would only hold a slot.
          if (context.viewer?.kind === 'anonymous' || context.viewer?.did === undefined) {
            ctx.extra.socket.close(CloseCode.Unauthorized, 'Unauthorized: a bearer token is required (connectionParams.authorization)');
            return false;
          }
          // The subscriptions' admission rule for the connection itself (admission.ts): fresh keys cannot take every socket.
          try {
            const admitted = await app.admitWebSocketConnection(context.viewer.did, app.clientAddress(ctx.extra.request.socket.remoteAddress));
            initialised++;
            let released = false;
            const release = () => {
              if (released) return;
              released = true;
              initialised--;
              admitted();
            };
            ctx.extra.socket.once('close', release);
            if (ctx.extra.socket.readyState >= ctx.extra.socket.CLOSING) release();
          } catch (error) {
            if (!(error instanceof AdmissionRefusedError)) throw error;
            log.debug({ code: error.code }, 'websocket connection refused');
            // 1013 (try again later) is retried by graphql-ws clients; 4429 is not.
            ctx.extra.socket.close(error.retryable ? 1013 : CloseCode.TooManyInitialisationRequests, `${error.code}: ${error.retryable ? 'retry later' : 'too many connections'}`);
            return false;
          }
          return true;
        } catch (error) {
          const code = authenticationCode(error);
          if (code !== undefined) {
            log.debug({ code }, 'websocket connection refused');
            ctx.extra.socket.close(CloseCode.Unauthorized, `Unauthorized: ${code}`);
            return false;
          }
          // Refused by the rate limit: typed, and the reason says when to come back.
          if (error instanceof GraphQLError && error.extensions.code === 'RATE_LIMITED') {
            ctx.extra.socket.close(CloseCode.TooManyInitialisationRequests, `RATE_LIMITED: ${error.message}`.slice(0, 120));
            return false;
          }
          throw error;
        }
      },
      onSubscribe: async (ctx, _id, params) => {
        const enveloped = envelopedFor(ctx, params);
        let query: string;
        try {
          // PERSISTED_DOCUMENTS: the same rule as over HTTP (an id in `extensions.persistedQuery` or `documentId`, with `query: ""`).
          query = app.persistedDocuments === undefined ? params.query : app.persistedDocuments.resolve(params as Parameters<typeof app.persistedDocuments.resolve>[0]);
        } catch (error) {
          if (error instanceof GraphQLError) return [withoutHTTP(error)];
          throw error;
        }
        // The yoga app's parse, validate and context, with the refusals and codes of /graphql (operation-admission.ts).
        const prepared = await prepareOperation(enveloped, { query, variables: params.variables, operationName: params.operationName }, 'POST');
        if ('errors' in prepared) return prepared.errors.map(withoutHTTP);
        if (prepared.operation !== 'subscription') {
          return [
            new GraphQLError('only subscriptions are served over WebSocket; send queries and mutations over HTTP', {
              extensions: { code: 'SUBSCRIPTIONS_ONLY' },
            }),
          ];
        }
        const root: EnvelopedRoot = { execute: enveloped.execute, subscribe: enveloped.subscribe };
        log.info({ operationName: params.operationName ?? operationNameOf(prepared.args.document) ?? null, requestID: (prepared.args.contextValue as { requestID?: string }).requestID }, 'subscription');
        return { ...prepared.args, rootValue: root };
      },
    },
    wss,
  );

  return {
    close: async () => {
      const timer = setTimeout(() => {
        for (const client of wss.clients) client.terminate();
      }, options.closeTimeoutMs ?? 5_000);
      timer.unref();
      try {
        await disposable.dispose();
      } finally {
        clearTimeout(timer);
      }
    },
  };
}

/** An error as graphql-ws sends it: no HTTP hints in its extensions. */
function withoutHTTP(error: GraphQLError): GraphQLError {
  if (error.extensions.http === undefined) return error;
  const { http: _http, ...extensions } = error.extensions;
  return new GraphQLError(error.message, { nodes: error.nodes, source: error.source, positions: error.positions, extensions });
}

/** The name of a document's only operation, if it has one and it is named. */
function operationNameOf(document: DocumentNode): string | undefined {
  const operations = document.definitions.filter((definition) => definition.kind === 'OperationDefinition');
  return operations.length === 1 ? operations[0]!.name?.value : undefined;
}

/** The authentication error code of a context-factory failure (bad credentials), else undefined. */
function authenticationCode(error: unknown): string | undefined {
  if (!(error instanceof GraphQLError)) return undefined;
  const http = error.extensions.http as { status?: number } | undefined;
  return http?.status === 401 ? String(error.extensions.code) : undefined;
}
