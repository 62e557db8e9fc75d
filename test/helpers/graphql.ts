/**
 * GraphQL suites: `describeGraphQL(name, suite => …)` runs once per dialect
 * (like `describeEachDialect`) with a yoga app over the suite's database, the
 * test clock, and four principals with real did:key tokens:
 * `alice` and `bob` (users), `mallory` (a stranger), `worker` (a service).
 */
import { beforeAll } from 'vitest';
import { generateLocalKey, mintToken, type LocalKey } from '../../src/auth/index.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger, type Logger } from '../../src/server/logger.js';
import { describeEachDialect, type DialectSuite } from './databases.js';

/** Who sends a request: a named principal, or nobody. */
export type Principal = 'alice' | 'bob' | 'mallory' | 'worker' | 'anonymous';

/** A GraphQL response as JSON. */
export interface GraphQLResponse<T = any> {
  data?: T;
  errors?: { message: string; path?: (string | number)[]; extensions?: Record<string, unknown> }[];
}

/** What a suite made by {@link describeGraphQL} gets, beyond the dialect suite. */
export interface GraphQLSuite extends DialectSuite {
  /** The app over this suite's database (valid inside tests and hooks). */
  readonly app: ServerApp;
  /** Each principal's key; `keys.alice.did` etc. */
  keys: Record<Exclude<Principal, 'anonymous'>, LocalKey>;
  /** Sends a query as `as` (default alice) and returns the parsed body; throws on a non-JSON answer. */
  gql<T = any>(query: string, variables?: Record<string, unknown>, options?: { as?: Principal; headers?: Record<string, string> }): Promise<GraphQLResponse<T>>;
  /** Like `gql` but returns the raw Response. */
  request(query: string, variables?: Record<string, unknown>, options?: { as?: Principal; headers?: Record<string, string> }): Promise<Response>;
  /** A bearer token for `who`, valid at the test clock's now. */
  token(who: Exclude<Principal, 'anonymous'>): Promise<string>;
}

/** Audience the test apps expect. */
export const TEST_AUDIENCE = 'connector-store-test';

/**
 * Declares `name` once per dialect with a migrated database, a yoga app over
 * it and the four principals. The app is rebuilt for each suite, not each test.
 */
export function describeGraphQL(
  name: string,
  body: (suite: GraphQLSuite) => void,
  options: { env?: Record<string, string>; logger?: Logger } = {},
): void {
  describeEachDialect(name, (dialectSuite) => {
    const keys = {
      alice: generateLocalKey(),
      bob: generateLocalKey(),
      mallory: generateLocalKey(),
      worker: generateLocalKey(),
    };
    let app: ServerApp | undefined;
    const token = (who: Exclude<Principal, 'anonymous'>) =>
      mintToken({ privateKey: keys[who].privateKey, did: keys[who].did, audience: TEST_AUDIENCE, now: dialectSuite.clock.now(), ttlSeconds: 3600 });
    const request: GraphQLSuite['request'] = async (query, variables = {}, opts = {}) => {
      if (app === undefined) throw new Error('app is only available inside tests and hooks');
      const who = opts.as ?? 'alice';
      const headers: Record<string, string> = { 'content-type': 'application/json', ...opts.headers };
      if (who !== 'anonymous') headers.authorization = `Bearer ${await token(who)}`;
      return app.yoga.fetch('http://localhost/graphql', { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
    };
    const suite: GraphQLSuite = Object.assign(Object.create(dialectSuite) as DialectSuite, {
      keys,
      token,
      request,
      gql: async (query: string, variables?: Record<string, unknown>, opts?: { as?: Principal; headers?: Record<string, string> }) => {
        const response = await request(query, variables, opts);
        return (await response.json()) as GraphQLResponse;
      },
    }) as GraphQLSuite;
    Object.defineProperty(suite, 'app', {
      get() {
        if (app === undefined) throw new Error('app is only available inside tests and hooks');
        return app;
      },
    });
    beforeAll(() => {
      const config = loadConfig({
        NODE_ENV: 'test',
        AUTH_AUDIENCE: TEST_AUDIENCE,
        SERVICE_DIDS: keys.worker.did,
        LOG_LEVEL: 'silent',
        RETENTION_INTERVAL_MS: '0',
        // Suites send hundreds of requests as one viewer; the limiter has tests of its own.
        RATE_LIMIT_PER_VIEWER: '0',
        ...options.env,
      });
      app = createServerApp({
        config,
        database: dialectSuite.database.open,
        logger: options.logger ?? createLogger('silent'),
        storeDeps: { now: dialectSuite.clock.now },
      });
    });
    body(suite);
  });
}
