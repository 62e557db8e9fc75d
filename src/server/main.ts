/**
 * `npm start`: validate configuration, open and migrate the database, serve
 * GraphQL on HOST:PORT, and shut down gracefully on SIGTERM/SIGINT.
 * `npm start -- --demo` first fills the database with the demo set.
 */
import { createServer, type RequestListener, type Server } from 'node:http';
import { checkConnection, openDatabase, type OpenDatabase } from '../db/connect.js';
import { createReadRouter } from '../db/read-replicas.js';
import { acquireSQLiteServerLock } from '../db/sqlite-lock.js';
import { migrateOverOwnConnection, migrateToLatest } from '../db/migrator.js';
import { nameStatement } from '../db/named-statements.js';
import { createStoreContext } from '../store/context.js';
import { CompiledQuery } from 'kysely';
import { createServerApp } from './app.js';
import { loadConsoleBuild, type ConsoleBuild } from './console-build.js';
import { createPostgresRateLimiter } from './rate-limit.js';
import { migrationEvents } from '../store/store-changes.js';
import { createPostgresChangeFeed, createSQLiteChangeFeed } from './change-feed.js';
import { loadConfig } from './config.js';
import { assertDemoAllowed, seedLocalDemo } from '../demo/seed.js';
import { bannerReminder, createBannerReminder, developmentBanner, shouldPrintDevelopmentBanner } from './dev-banner.js';
import { developmentCredentialsAllowed, loadDevelopmentCredentials, type DevelopmentCredentials } from './dev-credentials.js';
import { backlogSamplerJob, backlogSamplerTickMs, serverJobs, startBackgroundJobs } from './jobs.js';
import { createLogger } from './logger.js';
import { sqlSpans, startTracing } from './tracing.js';
import { countWaitingHTTPSockets, createWaitingSocketBudget } from './waiting-sockets.js';
import { attachGraphQLWebSocket } from './websocket.js';

/** The change feed's publish, once per committed write: named on direct connections (src/db/named-statements.ts). */
const NOTIFY = 'select pg_notify($1, $2)';
nameStatement(NOTIFY);

/** Connections of the rate-limit store's own pool on the direct URL (behind a transaction pooler): one short upsert per request and limit. */
const RATE_LIMIT_DIRECT_POOL_MAX = 4;
const USAGE = `usage: npm start [-- --demo]

Serves GraphQL on HOST:PORT (default 127.0.0.1:4000) over the database named by
DATABASE_URL (default: the embedded SQLite file ./data/connector-store.sqlite),
migrated at start-up. --demo first fills it with demo data (not in production).
Every setting is an environment variable: see docs/configuration.md.
`;

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  if (args.includes('--help') || args.includes('-h')) {
    process.stdout.write(USAGE);
    return;
  }
  const unknown = args.find((arg) => arg !== '--demo');
  if (unknown !== undefined) {
    process.stderr.write(`unknown argument ${JSON.stringify(unknown)}\n${USAGE}`);
    process.exit(2);
  }
  const config = loadConfig();
  if (args.includes('--demo')) assertDemoAllowed(config.env);
  // Development: the banner's essential lines come back once the first burst of request lines has scrolled it away.
  const reminder = shouldPrintDevelopmentBanner(config) ? createBannerReminder({ print: (text) => process.stderr.write(text) }) : undefined;
  const logger = createLogger(
    config.logLevel,
    undefined,
    config.logFormat,
    reminder === undefined ? undefined : (entry) => (entry.component === 'http' ? reminder.noteRequest() : undefined),
  );
  // The port first: a port already taken stops the start before any database file is created or migrated.
  // Until the app is built, requests get 503 (readiness fails the same way).
  let handleRequest: RequestListener | undefined;
  const server = createServer(
    {
      headersTimeout: config.http.headersTimeoutMs,
      requestTimeout: config.http.requestTimeoutMs,
      keepAliveTimeout: config.http.keepAliveTimeoutMs,
      // How often the server checks the two timeouts above (Node's default is 30 s).
      connectionsCheckingInterval: Math.min(1_000, config.http.headersTimeoutMs),
    },
    (req, res) => {
      if (handleRequest !== undefined) return handleRequest(req, res);
      res.writeHead(503, { 'content-type': 'application/json', 'retry-after': '1', connection: 'close' });
      res.end(JSON.stringify({ errors: [{ message: 'the server is starting', extensions: { code: 'STARTING' } }] }));
    },
  );
  await listen(server, config.port, config.host);
  // Off unless the OTEL_* variables ask for it; started before anything it traces.
  const tracing = await startTracing(logger.child({ component: 'tracing' }));
  // One server per embedded database file (its change feed lives in this process).
  const sqliteLock = config.database.dialect === 'sqlite' && config.database.path !== ':memory:' ? acquireSQLiteServerLock(config.database.path) : undefined;
  process.on('exit', () => sqliteLock?.release());
  const onPoolError = (error: Error) => logger.error({ err: error }, 'a pooled database connection failed');
  const pooled = config.db.poolMode === 'transaction';
  const database = openDatabase(config.database, {
    statementTimeoutMs: config.db.statementTimeoutMs,
    poolMax: config.db.poolMax,
    poolMode: config.db.poolMode,
    namedStatements: config.db.namedStatements,
    onPoolError,
    ...(tracing !== undefined && { log: sqlSpans(tracing.provider, config.database.dialect) }),
  });
  await checkConnection(database);
  // Behind a transaction pooler, migrations take the direct URL (Kysely's migration lock is session-scoped).
  const applied = pooled
    ? await migrateOverOwnConnection(config.directDatabase, { statementTimeoutMs: config.db.statementTimeoutMs })
    : await migrateToLatest(database.db, database.dialect);
  for (const m of applied) logger.info({ migration: m.migrationName }, 'migration applied');
  if (args.includes('--demo')) {
    const demo = await seedLocalDemo(database, process.cwd());
    logger.info({ ownerDID: demo.ownerDID, created: demo.created, existing: demo.existing }, 'demo data ready');
  }

  // Postgres: LISTEN/NOTIFY carries changes to every replica; SQLite: one process.
  // LISTEN holds a session, so it takes the direct URL; NOTIFY is an ordinary statement and may go through the pooler.
  const listenTarget = config.directDatabase;
  const changes =
    listenTarget.dialect === 'postgres'
      ? await createPostgresChangeFeed({
          connectionString: listenTarget.connectionString,
          publish: async (channel, payload) => {
            // Written out, not built with Kysely: one per committed write.
            await database.db.executeQuery(CompiledQuery.raw(NOTIFY, [channel, payload]));
          },
          logger,
        })
      : // SQLite: in process, plus what other processes (the operator CLI) record in the change outbox.
        await createSQLiteChangeFeed({ store: createStoreContext(database.db, database.dialect), logger });
  // Rows a migration rewrote: other replicas' open pages re-read (this one has no subscriber yet).
  if (applied.length > 0) await changes.publish(migrationEvents());
  // RATE_LIMIT_STORE=postgres: every replica counts against one budget, at one upsert per request and limit.
  // The library names its prepared statements, which a transaction pooler cannot keep: behind one,
  // the counters get a small pool of their own on the direct URL.
  const rateLimitDatabase: OpenDatabase | undefined =
    config.rateLimits.store === 'postgres' && pooled
      ? openDatabase(config.directDatabase, { statementTimeoutMs: config.db.statementTimeoutMs, poolMax: Math.min(config.db.poolMax, RATE_LIMIT_DIRECT_POOL_MAX), onPoolError })
      : undefined;
  const rateLimitPool = rateLimitDatabase?.pgPool ?? database.pgPool;
  const rateLimiter =
    config.rateLimits.store === 'postgres' && rateLimitPool !== undefined ? await createPostgresRateLimiter(rateLimitPool, config.rateLimits) : undefined;
  // Development only: the local key whose tokens the banner prints and GraphiQL pages carry.
  let developmentCredentials: DevelopmentCredentials | undefined;
  if (developmentCredentialsAllowed(config)) {
    developmentCredentials = await loadDevelopmentCredentials(config, process.cwd()).catch((error: unknown) => {
      logger.warn({ err: error }, 'could not load the local development key: GraphiQL opens without a token');
      return undefined;
    });
  }
  // The console's build: read into memory, built first when missing or older than its sources (console-build.ts).
  let consoleBuild: ConsoleBuild | undefined;
  if (config.console) {
    consoleBuild = await loadConsoleBuild({ onBuild: () => logger.info('building the console (console/ changed or was never built)') }).catch((error: unknown) => {
      logger.error({ err: error }, 'could not build the console: /console answers 503 (npm run console:build shows why)');
      return undefined;
    });
    if (consoleBuild?.built) logger.info({ buildMs: consoleBuild.buildMs }, 'console built');
  }
  const readRouter =
    config.readReplicas.standbys.length > 0
      ? await createReadRouter({
          primary: database,
          standbys: config.readReplicas.standbys,
          maxLagMs: config.readReplicas.maxLagMs,
          checkIntervalMs: config.readReplicas.checkIntervalMs,
          readYourWritesWaitMs: config.readReplicas.readYourWritesWaitMs,
          timeoutMs: config.readReplicas.timeoutMs,
          // The lag check's own connection: direct, never through a transaction pooler whose server connections requests may hold.
          ...(config.directDatabase.dialect === 'postgres' && { primaryCheck: config.directDatabase }),
          poolOptions: { statementTimeoutMs: config.db.statementTimeoutMs, poolMax: config.db.poolMax, namedStatements: config.db.namedStatements, onPoolError },
          ...(tracing !== undefined && { log: sqlSpans(tracing.provider, 'postgres') }),
          logger: logger.child({ component: 'read-standbys' }),
        })
      : undefined;
  const app = createServerApp({
    config,
    database,
    logger,
    changes,
    ...(readRouter !== undefined && { readRouter }),
    ...(rateLimiter !== undefined && { rateLimiter }),
    ...(tracing !== undefined && { tracerProvider: tracing.provider }),
    ...(developmentCredentials !== undefined && { developmentCredentials }),
    ...(consoleBuild !== undefined && { consoleBuild }),
  });
  handleRequest = app.yoga;
  // Sockets still sending headers or before connection_init: a budget per address of their own (issue 41).
  const waitingSockets = createWaitingSocketBudget({ perAddress: config.limits.maxPendingSocketsPerIP, total: config.limits.maxPendingSockets });
  countWaitingHTTPSockets(server, waitingSockets, app.clientAddress);
  // graphql-ws subscriptions on the same port and path as SSE. Attached once listening:
  // ws re-emits the HTTP server's errors, and graphql-ws prints them with a stack trace.
  const websocket = attachGraphQLWebSocket(server, app, {
    logger,
    maxPayloadBytes: config.limits.maxBodyBytes,
    maxConnections: config.limits.maxWebSocketConnections,
    connectionInitTimeoutMs: config.limits.webSocketInitTimeoutMs,
    waitingSockets,
    closeTimeoutMs: config.shutdownGraceMs,
    corsOrigins: config.corsOrigins,
    insecureHeaderAuth: config.auth.insecureHeaderAuth,
  });
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : config.port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  logger.info({ database: database.target.display, url: `${url}/graphql` }, 'connector store listening');
  const jobs = startBackgroundJobs({
    store: createStoreContext(database.db, database.dialect),
    logger: logger.child({ component: 'jobs' }),
    intervalMs: config.jobs.retentionIntervalMs,
    jobs: serverJobs(config.jobs, (events) => changes.publish(events)),
  });
  const sampler = startBackgroundJobs({
    store: createStoreContext(database.db, database.dialect),
    logger: logger.child({ component: 'jobs' }),
    intervalMs: backlogSamplerTickMs(config.jobs.backlogSampleIntervalMs),
    jobs: [backlogSamplerJob(config.jobs.backlogSampleIntervalMs, (events) => changes.publish(events))],
  });
  if (shouldPrintDevelopmentBanner(config)) {
    // Human-readable and carrying a token: stderr, never the JSON log.
    await developmentBanner({ config, port, cwd: process.cwd(), ...(developmentCredentials !== undefined && { credentials: developmentCredentials }) }).then(
      (banner) => {
        process.stderr.write(banner);
        reminder?.arm(bannerReminder(config, port));
      },
      (error: unknown) => logger.warn({ err: error }, 'could not print the development banner (npm run -s token still works)'),
    );
  }

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    reminder?.stop();
    logger.info({ signal, drainMs: config.shutdownDrainMs }, 'shutting down: readiness off, draining');
    app.markNotReady();
    // Open subscription streams end now, so their connections do not hold the close.
    app.closeSubscriptions();
    // WebSocket clients are told to go away (they reconnect elsewhere); upgrades stop.
    const websocketClosed = websocket.close().catch((error: unknown) => logger.warn({ err: error }, 'closing WebSocket clients failed'));
    // Jobs stop with readiness: a run in progress finishes before the pool closes.
    const jobsStopped = Promise.all([jobs.stop(), sampler.stop()]);
    // Keep accepting for the drain period, so load balancers see /readyz fail
    // and stop sending before the listener closes.
    setTimeout(() => {
      logger.info('drained: closing the listener, finishing in-flight requests');
      const force = setTimeout(() => {
        logger.warn('grace period over, closing remaining connections');
        server.closeAllConnections();
      }, config.shutdownGraceMs);
      force.unref();
      // Keep-alive sockets whose last request just finished would hold the close for their idle timeout.
      const idleSweep = setInterval(() => server.closeIdleConnections(), 100);
      idleSweep.unref();
      server.close(async () => {
        clearInterval(idleSweep);
        await jobsStopped;
        await websocketClosed;
        await changes.close();
        // Yoga's own disposables (plugins' onDispose hooks, pending waitUntil work).
        await Promise.resolve(app.yoga.dispose()).catch((error: unknown) => logger.warn({ err: error }, 'disposing the GraphQL server failed'));
        await readRouter?.close();
        await database.close();
        await rateLimitDatabase?.close();
        // Buffered spans are exported before the process ends.
        await tracing?.shutdown().catch((error: unknown) => logger.warn({ err: error }, 'flushing traces failed'));
        logger.info('stopped');
        process.exit(0);
      });
      server.closeIdleConnections();
    }, config.shutdownDrainMs);
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const failed = (error: NodeJS.ErrnoException) => reject(new Error(listenFailure(error, port, host)));
    server.once('error', failed);
    server.listen(port, host, () => {
      server.off('error', failed);
      resolve();
    });
  });
}

/** A failed `listen` in words that say what to change. */
function listenFailure(error: NodeJS.ErrnoException, port: number, host: string): string {
  if (error.code === 'EADDRINUSE') {
    return `port ${port} on ${host} is already in use by another process; stop it or choose another port, e.g. PORT=${port === 65_535 ? 4000 : port + 1} npm start`;
  }
  if (error.code === 'EACCES') return `port ${port} on ${host} needs privileges this process lacks; choose a port above 1023, e.g. PORT=4000 npm start`;
  if (error.code === 'EADDRNOTAVAIL') return `HOST ${host} is not an address of this machine; use e.g. HOST=127.0.0.1 (this machine only) or HOST=0.0.0.0 (every interface)`;
  return `cannot listen on ${host}:${port}: ${error.message}`;
}

main().catch((error: unknown) => {
  // Start-up failures are one clear line, not a stack trace.
  const message = error instanceof Error ? error.message : String(error);
  console.error(`connector store failed to start: ${message}`);
  process.exit(1);
});
