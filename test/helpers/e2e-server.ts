/**
 * The start-up every end-to-end file shares: principals with real bearer
 * tokens, one or more server processes (server-process.ts) over one fresh
 * database (a temporary SQLite file or a scratch Postgres database, which the
 * first server migrates), teardown of both, and GraphQL over HTTP: a POST,
 * and a client of principals that also subscribes over SSE (sse.ts).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateLocalKey, LOCAL_KEY_PATH, loadOrCreateLocalKey, mintToken, type LocalKey } from '../../src/auth/index.js';
import type { DialectName } from '../../src/db/connect.js';
import { createScratchPostgresDatabase } from './postgres.js';
import { startServerProcess, type ServerProcess } from './server-process.js';
import { subscribeSSE, type SSESubscription } from './sse.js';

/** The keys of an e2e file's principals and, once {@link E2EPrincipals.mint} ran, their tokens. */
export interface E2EPrincipals<Name extends string> {
  keys: Record<Name, LocalKey>;
  /** Bearer tokens for the audience (empty until `mint()`). */
  tokens: Record<Name, string>;
  /** Mints a one-hour token of every principal (in a `beforeAll`: the keys exist at import already). */
  mint(): Promise<void>;
}

/** Generates a key for each of `names`, for servers that expect `audience`. */
export function e2ePrincipals<const Name extends string>(audience: string, names: readonly Name[]): E2EPrincipals<Name> {
  const keys = Object.fromEntries(names.map((name) => [name, generateLocalKey()])) as Record<Name, LocalKey>;
  const tokens = {} as Record<Name, string>;
  return {
    keys,
    tokens,
    mint: async () => {
      for (const name of names) tokens[name] = await mintToken({ privateKey: keys[name].privateKey, audience, ttlSeconds: 3600 });
    },
  };
}

/** What {@link startE2EServers} needs. */
export interface E2EServerOptions {
  /** `AUTH_AUDIENCE` of the servers. */
  audience: string;
  /** The one `SERVICE_DIDS` entry. */
  serviceDID: string;
  /** Names the temporary directory (`cs-NAME-…`) or scratch database (`cs_NAME_…`). */
  name: string;
  /** Added to (and overriding) the shared production-like environment. */
  env?: Record<string, string>;
  /** Servers to start over the one database (default 1). */
  replicas?: number;
  /** The servers' working directory (development reads `data/local-key.json` there). Default: the repository. */
  cwd?: string;
  /** Arguments of every server (`--demo`). Default: none. */
  args?: readonly string[];
  /** Each server's limit of open files (`ulimit -n`). Default: inherited. */
  maxOpenFiles?: number;
  /**
   * Postgres: something between the servers and the scratch database (a
   * PgBouncer, or a standby they read), given the database's direct URL; its
   * `env` goes on top of the servers' (DATABASE_URL through it,
   * READ_DATABASE_URLS, …); it is stopped after the servers and before the
   * database is dropped.
   */
  pooler?: (databaseURL: string) => Promise<{ env: Record<string, string>; stop(): Promise<void> }>;
}

/** Servers started by {@link startE2EServers}. */
export interface E2EServers {
  /** The first server (the only one unless `replicas` > 1). */
  server: ServerProcess;
  /** Every server, in start order. */
  servers: ServerProcess[];
  /** The database the servers run on (`sqlite:PATH` or a scratch Postgres URL: the direct one, even behind a `pooler`). */
  databaseURL: string;
  /**
   * Starts `previous` (default: the first server) again once it has exited
   * (SIGTERM it and await its `exited`): the same database, environment,
   * working directory and arguments, on the same port, so pages that were
   * open on it find it at the same origin. The new process takes its place in
   * `servers` (and `server`) and is killed by `dispose`. Retries for up to
   * 5 s while the port is still taken.
   */
  restart(previous?: ServerProcess, options?: { timeoutMs?: number }): Promise<ServerProcess>;
  /** Kills the servers, then removes the database; idempotent. */
  dispose(): Promise<void>;
}

/**
 * Makes a fresh database for `dialect` and starts `replicas` servers on it,
 * one after the other: the first migrates, the others find nothing to do.
 * If any step fails, whatever was made is removed before the error is rethrown.
 */
export async function startE2EServers(dialect: DialectName, options: E2EServerOptions): Promise<E2EServers> {
  const cleanups: (() => Promise<void> | void)[] = [];
  let disposed: Promise<void> | undefined;
  const dispose = () =>
    (disposed ??= (async () => {
      for (const cleanup of cleanups.reverse()) await Promise.resolve(cleanup()).catch(() => {});
    })());
  const env: Record<string, string> = {
    NODE_ENV: 'production',
    AUTH_AUDIENCE: options.audience,
    SERVICE_DIDS: options.serviceDID,
    // `info`, not quieter: the bound port and the shutdown steps are info lines.
    LOG_LEVEL: 'info',
    RETENTION_INTERVAL_MS: '0',
    ...options.env,
  };
  let databaseURL = '';
  try {
    if (dialect === 'sqlite') {
      const dir = mkdtempSync(join(tmpdir(), `cs-${options.name}-`));
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
      env.DATABASE_URL = `sqlite:${join(dir, 'store.sqlite')}`;
      databaseURL = env.DATABASE_URL;
    } else {
      const database = await createScratchPostgresDatabase(`cs_${options.name}`);
      cleanups.push(() => database.drop());
      env.DATABASE_URL = database.url;
      databaseURL = database.url;
      if (options.pooler !== undefined) {
        const pooler = await options.pooler(database.url);
        cleanups.push(() => pooler.stop());
        Object.assign(env, pooler.env);
      }
    }
    const processOptions = {
      ...(options.cwd !== undefined && { cwd: options.cwd }),
      ...(options.args !== undefined && { args: options.args }),
      ...(options.maxOpenFiles !== undefined && { maxOpenFiles: options.maxOpenFiles }),
    };
    const servers: ServerProcess[] = [];
    for (let i = 0; i < (options.replicas ?? 1); i++) {
      const server = await startServerProcess(env, processOptions);
      // Killed before the database goes away (cleanups run in reverse).
      cleanups.push(() => server.kill());
      servers.push(server);
    }
    const started: E2EServers = {
      server: servers[0]!,
      servers,
      databaseURL,
      dispose,
      restart: async (previous = started.server, { timeoutMs }: { timeoutMs?: number } = {}) => {
        const index = servers.indexOf(previous);
        if (index < 0) throw new Error('restart: not one of these servers');
        if (previous.child.exitCode === null && previous.child.signalCode === null) throw new Error('restart: the server still runs (SIGTERM it and await `exited` first)');
        const port = new URL(previous.origin).port;
        const deadline = Date.now() + 5_000;
        for (;;) {
          try {
            const next = await startServerProcess({ ...env, PORT: port }, { ...processOptions, ...(timeoutMs !== undefined && { timeoutMs }) });
            cleanups.push(() => next.kill());
            servers[index] = next;
            if (index === 0) started.server = next;
            return next;
          } catch (error) {
            // The old listener's port can take a moment to be free again.
            if (Date.now() > deadline || !/already in use/.test(String(error))) throw error;
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        }
      },
    };
    return started;
  } catch (error) {
    await dispose();
    throw error;
  }
}

/** A GraphQL response as JSON. */
export interface GraphQLBody<T = any> {
  data?: T | null;
  errors?: { message: string; extensions?: Record<string, unknown> }[];
  /** The answer's own extensions (a mutation's `consistencyToken` with read standbys). */
  extensions?: Record<string, unknown>;
}

/**
 * POSTs one GraphQL request to `server` with `token` as bearer (`null`: no
 * Authorization header) and any further `headers`; returns the HTTP status,
 * the response headers and the parsed body.
 */
export async function postGraphQL<T = any>(
  server: Pick<ServerProcess, 'origin'>,
  token: string | null,
  query: string,
  variables: unknown = {},
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: Headers; body: GraphQLBody<T> }> {
  const response = await fetch(`${server.origin}/graphql`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(token !== null && { authorization: `Bearer ${token}` }), ...headers },
    body: JSON.stringify({ query, variables }),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as GraphQLBody<T> };
}

/** GraphQL over HTTP as an e2e file's principals: see {@link e2eGraphQLClient}. */
export interface E2EGraphQLClient<Name extends string> {
  /** POSTs `query` to `server` as `who` (default: the client's); the parsed body, whatever the status. */
  gql<T = any>(server: ServerProcess, query: string, variables?: Record<string, unknown>, who?: Name): Promise<GraphQLBody<T>>;
  /**
   * Subscribes to `query` on `server` over yoga's SSE as `who` (default: the
   * client's); resolves 100 ms after the stream answered, once the server
   * had a moment to start listening for it.
   */
  subscribe<T = any>(server: ServerProcess, query: string, variables?: Record<string, unknown>, who?: Name): Promise<SSESubscription<T>>;
  /** Closes every subscription `subscribe` opened (for an `afterAll`, before the servers stop). */
  closeSubscriptions(): Promise<void>;
}

/** A client that sends as `defaultWho` unless told otherwise, with the bearer tokens of `tokens` (read at each call, so `mint()` may come later). */
export function e2eGraphQLClient<Name extends string>(tokens: Record<Name, string>, defaultWho: NoInfer<Name>): E2EGraphQLClient<Name> {
  const subscriptions: SSESubscription[] = [];
  return {
    gql: async (server, query, variables = {}, who = defaultWho) => (await postGraphQL(server, tokens[who], query, variables)).body,
    subscribe: async (server, query, variables = {}, who = defaultWho) => {
      const subscription = await subscribeSSE(fetch, `${server.origin}/graphql`, query, variables, { authorization: `Bearer ${tokens[who]}` });
      subscriptions.push(subscription);
      await new Promise((resolve) => setTimeout(resolve, 100));
      return subscription;
    },
    closeSubscriptions: async () => {
      await Promise.all(subscriptions.splice(0).map((subscription) => subscription.close()));
    },
  };
}

/** A development server with the demo data, as a browser test uses it: see {@link startDemoServer}. */
export interface DemoServer {
  /** The server's working directory (where its local key lives). */
  cwd: string;
  /** The server's local key: it owns the demo rows, and a loopback page signs in as it. */
  localKey: LocalKey;
  /** A bearer token of the local key for `audience` (1 h). */
  localToken: string;
  /** The key whose DID is the server's one SERVICE_DIDS entry. */
  serviceKey: LocalKey;
  servers: E2EServers;
  origin: string;
  /** Stops the server and removes its working directory. */
  dispose(): Promise<void>;
}

/** `npm start -- --demo` in development, in a fresh working directory whose local key the test knows. */
export async function startDemoServer(dialect: DialectName, { audience, name, env = {} }: { audience: string; name: string; env?: Record<string, string> }): Promise<DemoServer> {
  const cwd = await mkdtemp(join(tmpdir(), `cs-${name}-`));
  const localKey = await loadOrCreateLocalKey(join(cwd, LOCAL_KEY_PATH));
  const serviceKey = generateLocalKey();
  const servers = await startE2EServers(dialect, { audience, serviceDID: serviceKey.did, name, env: { NODE_ENV: 'development', ...env }, cwd, args: ['--demo'] });
  const localToken = await mintToken({ privateKey: localKey.privateKey, audience, ttlSeconds: 3600 });
  return {
    cwd,
    localKey,
    localToken,
    serviceKey,
    servers,
    origin: servers.server.origin,
    dispose: async () => {
      await servers.dispose();
      await rm(cwd, { recursive: true, force: true });
    },
  };
}
