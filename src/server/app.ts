/**
 * The yoga application, apart from `listen`: tests call `app.yoga.fetch`
 * directly, `main.ts` mounts it on a node HTTP server.
 */
import { randomUUID } from 'node:crypto';
import { maxAliasesPlugin } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthPlugin } from '@escape.tech/graphql-armor-max-depth';
import { maxTokensPlugin } from '@escape.tech/graphql-armor-max-tokens';
import { useDisableIntrospection } from '@graphql-yoga/plugin-disable-introspection';
import type { TracerProvider } from '@opentelemetry/api';
import { InputValidationError } from '@pothos/plugin-validation';
import { GraphQLError, type ValidationContext } from 'graphql';
import { createYoga, useReadinessCheck, type Plugin, type YogaServerInstance } from 'graphql-yoga';
import { AuthenticationError, bearerChallenge, connectionParamsHeaders, resolveCredentials } from '../auth/index.js';
import type { OpenDatabase } from '../db/connect.js';
import type { ReadRouter } from '../db/read-replicas.js';
import { classifyDatabaseError, type DatabaseFailure } from '../db/errors.js';
import { createStoreContext, type StoreDeps } from '../store/context.js';
import { createGraphQLContext, type ChangeFeed, type GraphQLContext } from '../../resolvers/context.js';
import { BULK_ROWS, COST_ARGUMENTS, schema } from '../../schema/index.js';
import { createInProcessChangeFeed } from './change-feed.js';
import type { ServerConfig } from './config.js';
import type { Logger } from './logger.js';
import { corsPolicy, originAllowed } from './cors.js';
import type { ConsoleBuild } from './console-build.js';
import { useRequestBodyLimit } from './body-limit.js';
import { useCompressedAnswers } from './compression.js';
import { useConsole } from './console.js';
import type { DevelopmentCredentials } from './dev-credentials.js';
import { graphiqlPage, useNoStoreForPages } from './graphiql.js';
import { renderGraphiQLPage, useGraphiQLAssets } from './graphiql-assets.js';
import { useGraphQLSSEProtocol } from './graphql-sse.js';
import { fuseHooks } from './fused-hooks.js';
import { useCompiledExecution } from './jit.js';
import { refusedArgument, useRequestErrorCodes } from './error-codes.js';
import { useNestingLimit } from './nesting-limit.js';
import { createMetrics } from './metrics.js';
import { loadPersistedDocuments, usePersistedDocuments, type PersistedDocuments } from './persisted-documents.js';
import { useRequestLog } from './request-log.js';
import { requestState, shareRequestState } from './request-state.js';
import { useTracing } from './tracing.js';
import { useQueryCostBudget } from './query-cost.js';
import { readAfterOf, useReadRouting } from './read-routing.js';
import { createMemoryRateLimiter, type RequestRateLimiter } from './rate-limit.js';
import { useResponseSizeLimit } from './response-size.js';
import { useViewerRequired } from './viewer-required.js';
import { ownsAnyRow } from '../store/ownership/index.js';
import { createAdmissionPool, createStandingLookup, type AdmissionLimits } from './admission.js';
import { addressKey } from './client-address.js';
import { createSubscriptionLimiter } from './subscription-limiter.js';

/** What {@link createServerApp} needs. */
export interface ServerAppOptions {
  config: ServerConfig;
  database: OpenDatabase;
  logger: Logger;
  /** Clock and id source for the store (tests pin these). */
  storeDeps?: Partial<StoreDeps>;
  /** Where committed changes go and subscriptions listen. Default: an in-process feed. */
  changes?: ChangeFeed;
  /** Request-rate limits. Default: counted in this process with `config.rateLimits`. */
  rateLimiter?: RequestRateLimiter;
  /** Traces each GraphQL operation as a span when given (see tracing.ts). */
  tracerProvider?: TracerProvider;
  /** The local key whose fresh token GraphiQL pages carry; ignored unless NODE_ENV=development (graphiql.ts). Default: none. */
  developmentCredentials?: Pick<DevelopmentCredentials, 'mintToken'> & Partial<Pick<DevelopmentCredentials, 'did' | 'ttlSeconds'>>;
  /** The built operations console, served at /console when `config.console` (console.ts). Default: none (then /console answers 503). */
  consoleBuild?: ConsoleBuild;
  /** Hot standbys for queries (READ_DATABASE_URLS, read-routing.ts). Default: none, every read on `database`. */
  readRouter?: ReadRouter;
}

/** The application: its yoga instance and the readiness switch shutdown flips. */
export interface ServerApp {
  yoga: YogaServerInstance<Record<string, unknown>, GraphQLContext>;
  /** Makes `/readyz` fail (shutdown begins by this, so load balancers drain first). */
  markNotReady(): void;
  /** Ends every open subscription stream (shutdown). */
  closeSubscriptions(): void;
  /** The change feed mutations publish to and subscriptions listen on. */
  changes: ChangeFeed;
  /** The persisted documents this server accepts by id (PERSISTED_DOCUMENTS), if any; WebSocket applies the same rule. */
  persistedDocuments: PersistedDocuments | undefined;
  /**
   * Admits one initialised WebSocket connection of `viewerDID` from `ip` (a key of
   * {@link ServerApp.clientAddress}) under the subscriptions' admission rule (admission.ts)
   * with MAX_WEBSOCKET_CONNECTIONS as its total and MAX_WEBSOCKET_CONNECTIONS_PER_VIEWER
   * per viewer; rejects with an `AdmissionRefusedError`. Resolves to its release.
   */
  admitWebSocketConnection(viewerDID: string, ip: string | null): Promise<() => void>;
  /** The key per-address limits count a socket's remote address under (client-address.ts: IPv6 per IPV6_PREFIX_BITS); null when there is none. */
  clientAddress(remoteAddress: string | null | undefined): string | null;
}

const REQUEST_ID = /^[A-Za-z0-9._-]{1,100}$/;
/** Deepest bracket nesting a document may have: far past any real query (selection depth is capped at MAX_QUERY_DEPTH) or JSON literal (64). */
const MAX_DOCUMENT_NESTING = 128;

/** Builds the yoga app over an open, migrated database. */
export function createServerApp({
  config,
  database,
  logger,
  storeDeps,
  changes = createInProcessChangeFeed(),
  rateLimiter = createMemoryRateLimiter(config.rateLimits),
  tracerProvider,
  developmentCredentials,
  consoleBuild,
  readRouter,
}: ServerAppOptions): ServerApp {
  const store = createStoreContext(database.db, database.dialect, storeDeps);
  // One admission rule for every long-lived stream (admission.ts): known viewers keep room a crowd of fresh keys cannot take.
  // Known costs a row older than KNOWN_VIEWER_ROW_AGE_MS, not a claim made a moment ago (issue 41).
  const knownAfterMs = config.limits.knownViewerRowAgeMs;
  const standingOf = createStandingLookup({
    serviceDIDs: config.auth.serviceDIDs,
    ownsRows: (did) => ownsAnyRow(store, did, knownAfterMs === 0 ? {} : { createdBefore: store.now() - knownAfterMs }),
  });
  const clientAddress = (remoteAddress: string | null | undefined): string | null =>
    remoteAddress == null || remoteAddress === '' ? null : addressKey(remoteAddress, config.limits.ipv6PrefixBits);
  const admissionLimits = (total: number): AdmissionLimits => ({
    perViewer: config.limits.maxSubscriptionsPerViewer,
    perIP: config.limits.maxSubscriptionsPerIP,
    total,
    unknownPercent: config.limits.unknownViewerPercent,
  });
  const subscriptions = createSubscriptionLimiter(admissionLimits(config.limits.maxSubscriptions), standingOf);
  const eventStreams = createAdmissionPool(admissionLimits(config.limits.maxSubscriptions), 'event streams');
  // Known viewers too have a cap on sockets: one key must not open every connection of the replica (issue 41).
  const webSocketConnections = createAdmissionPool(
    { ...admissionLimits(config.limits.maxWebSocketConnections), perViewer: config.limits.maxWebSocketConnectionsPerViewer },
    'WebSocket connections',
  );
  const requestIDOf = (request: Request): string => {
    const state = requestState(request);
    if (state.id === undefined) {
      const sent = request.headers.get('x-request-id');
      state.id = sent !== null && REQUEST_ID.test(sent) ? sent : randomUUID();
    }
    return state.id;
  };
  let ready = true;
  const requestLog = useRequestLog(logger, config.slowRequestMs, requestIDOf);

  const metrics = config.metrics.enabled
    ? createMetrics({
        token: config.metrics.token,
        cacheMs: config.metrics.cacheMs,
        store,
        changes,
        subscriptionsByTransport: () => subscriptions.byTransport(),
        eventStreams: () => eventStreams.total(),
        pool: database.pgPool,
        ...(readRouter !== undefined && { readRouter }),
        logger: logger.child({ component: 'metrics' }),
      })
    : undefined;
  // Read and checked now: a bad manifest stops the start, not the first request.
  const persistedDocuments =
    config.persistedDocuments.mode === 'off' ? undefined : loadPersistedDocuments(config.persistedDocuments.mode, config.persistedDocuments.file);

  // Plugins of several context types mix here; yoga checks the shape at run time.
  const plugins: Plugin<any>[] = [
    // First: its onResponse runs before the request log's, so a request's logged time includes compressing its answer.
    useCompressedAnswers(),
    requestLog,
    // Before the origin and content-type checks: a scrape is a plain GET from anywhere the token (if any) allows.
    ...(metrics?.plugins ?? []),
    refuseForeignOrigins(config.corsOrigins, config.auth.insecureHeaderAuth),
    // Static pages and the development sign-in, before the JSON-only rule for POSTs.
    ...(config.console
      ? [
          useConsole({
            build: consoleBuild,
            developmentCredentials:
              config.env === 'development' && developmentCredentials?.did !== undefined && developmentCredentials.ttlSeconds !== undefined
                ? { mintToken: developmentCredentials.mintToken, did: developmentCredentials.did, ttlSeconds: developmentCredentials.ttlSeconds }
                : undefined,
            logger: logger.child({ component: 'console' }),
          }),
        ]
      : []),
    ...(config.graphiql ? [useGraphiQLAssets()] : []),
    jsonPostsOnly(),
    useNoStoreForPages(),
    {
      // Every response names its request id, so a masked error can be found in the logs.
      onResponse: ({ request, response }) => {
        response.headers.set('x-request-id', requestIDOf(request));
        // The rest of a refused body is never read: the connection cannot carry another request.
        if (response.status === 413) response.headers.set('connection', 'close');
      },
    },
    ...(persistedDocuments !== undefined ? [usePersistedDocuments(persistedDocuments)] : []),
    // The graphql-sse protocol at /graphql/stream (single-connection and distinct modes), with the limits of /graphql.
    useGraphQLSSEProtocol({
      auth: config.auth,
      admission: {
        maxBodyBytes: config.limits.maxBodyBytes,
        persistedDocuments,
        noteOperation: (request, operationName) => requestLog.noteOperation(request, operationName),
        noteDerived: (original, derived) => shareRequestState(original, derived),
      },
      now: () => store.now(),
      admit: async ({ viewerDID, ip }) => eventStreams.admit({ viewerDID, ip: clientAddress(ip), standing: await standingOf(viewerDID) }),
      register: (end) => subscriptions.register(end),
    }),
    readinessCheck({
      endpoint: '/readyz',
      check: async () => {
        if (!ready) return false;
        // Its own connection budget: an exhausted request pool must not make a healthy replica look dead.
        try {
          await database.ping();
        } catch (error) {
          // Anyone may ask: a fixed word, never the driver's text (which goes to the log).
          logger.warn({ err: error }, 'readiness: the database did not answer');
          return notReady({ ready: false, database: 'unavailable' });
        }
        const feed = changes.status();
        // Live updates are part of the service: a replica whose feed is down
        // drains until it reconnects, and says why.
        if (feed !== 'connected') return notReady({ ready: false, changeFeed: feed });
        return true;
      },
    }),
    // Before the parser, which recurses on nested literals.
    useNestingLimit(MAX_DOCUMENT_NESTING),
    maxTokensPlugin({ n: config.limits.maxTokens }),
    // Reported as validation errors (400 GRAPHQL_VALIDATION_FAILED on every transport), not thrown out of validate().
    maxDepthPlugin({ n: config.limits.maxDepth, flattenFragments: true, ...reportedAsValidationErrors }),
    maxAliasesPlugin({ n: config.limits.maxAliases, ...reportedAsValidationErrors }),
    // No credentials and a field that needs a viewer: 401 before anything runs (viewer-required.ts has the rule).
    useViewerRequired(schema),
    useQueryCostBudget({ maxCost: config.limits.maxCost, maxBulkRows: config.limits.maxBulkRows }, { costArguments: COST_ARGUMENTS, bulkRowsExtension: BULK_ROWS }),
    useResponseSizeLimit(config.limits.maxResponseBytes),
    logUnexpectedErrors(),
    // A client that goes away (socket closed, request aborted) ends its execution.
    cancelExecutionWithItsRequest(),
    ...(readRouter !== undefined ? [useReadRouting(readRouter)] : []),
    useCompiledExecution(),
    useRequestErrorCodes(),
    // Last: it wraps whichever execute function the plugins above chose, so SQL spans nest under it.
    ...(tracerProvider !== undefined ? [useTracing(tracerProvider)] : []),
  ];
  if (!config.introspection) plugins.push(useDisableIntrospection());
  // After every plugin: it wraps whichever request parser was chosen.
  plugins.push(useRequestBodyLimit(config.limits.maxBodyBytes));

  const yoga = createYoga<Record<string, unknown>, GraphQLContext>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    graphiql: graphiqlPage({ config, developmentCredentials, logger }),
    // From the installed package: GraphiQL works on a machine without internet (no CDN). A small page
    // linking hashed, gzipped, immutable assets (graphiql-assets.ts), loaded on the first GraphiQL request.
    renderGraphiQL: renderGraphiQLPage,
    healthCheckEndpoint: '/healthz',
    // No cross-origin access unless CORS_ORIGINS lists the origin; never in the header mode.
    cors: corsPolicy(config.corsOrigins, config.auth.insecureHeaderAuth),
    // MAX_BODY_BYTES is useRequestBodyLimit's (body-limit.ts): yoga's pipes every body through a counting stream.
    maxRequestBodySize: false,
    // `documentId` names a persisted document (GraphQL over HTTP); refused as unexpected unless they are on.
    ...(persistedDocuments !== undefined && { extraParamNames: ['documentId'] }),
    logging: logger.child({ component: 'yoga' }),
    // Unexpected errors (driver text, bugs) never reach clients: only this message and the request id.
    maskedErrors: {
      maskError: (error) => {
        // A query's argument refused by its input rules: BAD_USER_INPUT with its issues (mutations answer it in their union).
        if (error instanceof GraphQLError && error.originalError instanceof InputValidationError) return refusedArgument(error, error.originalError);
        if (error instanceof GraphQLError && error.originalError === undefined) return error;
        if (error instanceof GraphQLError && error.originalError instanceof GraphQLError) return error;
        // Overload and lost connections are typed and retryable (503 + Retry-After), never a defect's mask.
        const failure = classifyDatabaseError(error instanceof GraphQLError ? error.originalError : error);
        if (failure !== null) return retryableError(failure, error instanceof GraphQLError ? error.path : undefined);
        return new GraphQLError('Unexpected error.', { extensions: { code: 'INTERNAL_SERVER_ERROR' } });
      },
    },
    context: async (initial) => {
      // A graphql-ws subscription (websocket.ts) has no fetch Request: its credentials are its connectionParams.
      const { request, connectionParams, req } = initial as {
        request?: Request;
        connectionParams?: Readonly<Record<string, unknown>>;
        req?: { socket?: { remoteAddress?: string } };
      };
      const requestID = request === undefined ? randomUUID() : requestIDOf(request);
      const headers = request === undefined ? connectionParamsHeaders(connectionParams) : request.headers;
      let credentials;
      try {
        credentials = await resolveCredentials(headers, config.auth, { now: store.now() });
      } catch (error) {
        if (error instanceof AuthenticationError) {
          throw new GraphQLError(error.message, {
            extensions: {
              code: error.code,
              http: { status: 401, headers: { 'WWW-Authenticate': bearerChallenge(error) } },
            },
          });
        }
        throw error;
      }
      const { viewer, expiresAt: credentialsExpireAt } = credentials;
      const readAfter = readAfterOf(headers);
      if (request !== undefined) requestLog.noteViewer(request, viewer.kind);
      // Before anything is read or written; no proxy header is trusted for the address.
      const ip = clientAddress(req?.socket?.remoteAddress);
      await rateLimiter.consume({ viewerDID: viewer.kind === 'anonymous' ? null : viewer.did, ip });
      const log = () => logger.child({ requestID, viewer: viewer.kind === 'anonymous' ? 'anonymous' : viewer.did });
      return createGraphQLContext({
        store,
        readAfter,
        changes,
        subscriptions: subscriptions.over(request === undefined ? 'websocket' : 'sse', ip),
        requestID,
        viewer,
        audience: config.auth.audience,
        credentialsExpireAt,
        log,
      });
    },
    // One onRequest, onResponse and onExecute per run of them (fused-hooks.ts): same order, less per request.
    plugins: fuseHooks(plugins),
  });
  return {
    yoga,
    markNotReady: () => {
      ready = false;
    },
    closeSubscriptions: () => subscriptions.closeAll(),
    changes,
    persistedDocuments,
    admitWebSocketConnection: async (viewerDID, ip) => webSocketConnections.admit({ viewerDID, ip, standing: await standingOf(viewerDID) }),
    clientAddress,
  };
}

/**
 * Yoga's `useExecutionCancellation`, for queries and mutations only. Given to
 * a subscription, the request's signal made @graphql-tools/executor race every
 * event's fields against one promise that lives as long as the stream, adding
 * a reaction to it each time: about 700 bytes held per delivered event, for
 * good (graphql-tools issue 7563; issue 19 item 4, `bench/stalled-subscribers.ts`).
 * A subscription gets one abort listener instead, which returns its iterator
 * (freeing everything the stream held) when the request is aborted.
 */
function cancelExecutionWithItsRequest(): Plugin<GraphQLContext> {
  const signalOf = (contextValue: unknown) => (contextValue as { request?: Request } | undefined)?.request?.signal;
  return {
    onExecute({ args }) {
      (args as { signal?: AbortSignal }).signal = signalOf(args.contextValue) ?? undefined;
    },
    // One listener per subscription (not one reaction per event): an aborted request returns the stream's iterator.
    onSubscribe({ args }) {
      const signal = signalOf(args.contextValue);
      if (signal === undefined) return;
      return {
        onSubscribeResult({ result }) {
          if (!(Symbol.asyncIterator in result)) return;
          const stop = () => void (result as AsyncGenerator).return?.(undefined);
          if (signal.aborted) return stop();
          signal.addEventListener('abort', stop, { once: true });
          return { onEnd: () => signal.removeEventListener('abort', stop) };
        },
      };
    },
  };
}

/**
 * graphql-armor's validation rules throw their refusal out of `validate()` by
 * default, which yoga answered with HTTP 200 and no `extensions.code`, and
 * graphql-ws as an internal error; reported to the validation context instead,
 * they are ordinary validation errors everywhere.
 */
const reportedAsValidationErrors = {
  propagateOnRejection: false,
  onReject: [(context: ValidationContext | null, error: GraphQLError) => context?.reportError(new GraphQLError(error.message.replace(/^Syntax Error: /, '')))],
};

/**
 * Refuses a POST whose body is not JSON (`application/graphql`, forms,
 * multipart) with 415: those are the bodies a browser sends cross-site
 * without a preflight, so accepting them would let any web page make
 * requests the day credentials travel in cookies. GET never runs mutations.
 * A compressed body (`Content-Encoding` other than `identity`) is refused
 * with 415 too: bodies are never inflated, so MAX_BODY_BYTES counts what is parsed.
 */
function jsonPostsOnly(): Plugin {
  const refuse = (fetchAPI: { Response: typeof Response }, message: string) =>
    new fetchAPI.Response(JSON.stringify({ errors: [{ message, extensions: { code: 'UNSUPPORTED_MEDIA_TYPE' } }] }), {
      status: 415,
      headers: { 'content-type': 'application/json' },
    });
  return {
    onRequest: ({ request, fetchAPI, endResponse }) => {
      if (request.method !== 'POST') return;
      const encoding = request.headers.get('content-encoding');
      if (encoding !== null && encoding.trim().toLowerCase() !== 'identity') {
        endResponse(refuse(fetchAPI, `request bodies are not decompressed: send the JSON without Content-Encoding (got ${JSON.stringify(encoding.slice(0, 40))})`));
        return;
      }
      const sent = request.headers.get('content-type') ?? '';
      const [media = '', ...parameters] = sent.split(';');
      const type = media.trim().toLowerCase();
      if (type === 'application/json' || type === 'application/graphql-response+json') {
        // Media types are case-insensitive (RFC 9110 §8.3.1); yoga's and graphql-sse's parsers match them exactly.
        const normalized = [type, ...parameters.map((parameter) => parameter.trim().toLowerCase())].join('; ');
        if (normalized !== sent) request.headers.set('content-type', normalized);
        return;
      }
      endResponse(refuse(fetchAPI, 'POST bodies must be application/json'));
    },
  };
}


/** A 503 `/readyz` answer with a fixed JSON body. */
function notReady(body: Record<string, unknown>): Response {
  return new Response(JSON.stringify(body), { status: 503, headers: { 'content-type': 'application/json' } });
}

/** A retryable database failure as the client sees it: typed code, `retryable: true`, HTTP 503 with `Retry-After`. */
function retryableError(failure: DatabaseFailure, path: readonly (string | number)[] | undefined): GraphQLError {
  return new GraphQLError(failure.message, {
    ...(path !== undefined && { path }),
    extensions: {
      code: failure.code,
      retryable: true,
      http: { status: 503, headers: { 'Retry-After': String(failure.retryAfterSeconds) } },
    },
  });
}

/** Logs every error that will be masked, with the request id, before yoga masks it. */
function logUnexpectedErrors(): Plugin<GraphQLContext> {
  return {
    onExecute: ({ args }) => ({
      onExecuteDone: ({ result }) => {
        const results = 'errors' in result ? [result] : [];
        for (const r of results) {
          for (const error of r.errors ?? []) {
            const original = error.originalError;
            if (original === undefined || original instanceof GraphQLError) continue;
            const failure = classifyDatabaseError(original);
            if (failure !== null) args.contextValue.log().warn({ err: original, code: failure.code, path: error.path }, 'retryable database failure');
            else args.contextValue.log().error({ err: original, path: error.path }, 'unexpected resolver error');
          }
        }
      },
    }),
  };
}

/**
 * In the development header mode, a request from another origin's page is
 * refused before anything runs (403): the header is the identity there.
 * Otherwise the CORS policy alone keeps foreign pages out.
 */
function refuseForeignOrigins(origins: readonly string[], insecureHeaderAuth: boolean): Plugin {
  return {
    onRequest: ({ request, endResponse, fetchAPI }) => {
      if (!insecureHeaderAuth) return;
      const origin = request.headers.get('origin');
      if (originAllowed(origin, new URL(request.url).origin, origins, insecureHeaderAuth)) return;
      endResponse(
        new fetchAPI.Response(JSON.stringify({ errors: [{ message: 'cross-origin requests are refused in the development header mode', extensions: { code: 'FORBIDDEN_ORIGIN' } }] }), {
          status: 403,
          headers: { 'content-type': 'application/json' },
        }),
      );
    },
  };
}

/**
 * yoga's readiness check, asked only about requests for its own path. Its
 * `onRequest` tests every other request's URL against a URLPattern (a
 * polyfill on Node 20) before letting it pass: about 1 % of a GraphQL
 * request's CPU in the benchmark's profiles (issue 21). A URLPattern of a
 * bare pathname matches only that pathname, so the answer is the same.
 */
function readinessCheck(options: Parameters<typeof useReadinessCheck>[0] & { endpoint: string }): Plugin {
  const plugin = useReadinessCheck(options);
  const onRequest = plugin.onRequest!;
  return {
    ...plugin,
    onRequest: (payload) => {
      if (payload.url.pathname !== options.endpoint && !payload.request.url.endsWith(options.endpoint)) return;
      return onRequest(payload);
    },
  };
}
