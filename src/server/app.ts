/**
 * The yoga application, apart from `listen`: tests call `app.yoga.fetch`
 * directly, `main.ts` mounts it on a node HTTP server.
 */
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { createYoga, useReadinessCheck, type YogaServerInstance } from 'graphql-yoga';
import type { OpenDatabase } from '../db/connect.js';
import { createStoreContext, type StoreDeps } from '../store/context.js';
import { schema } from '../../schema/index.js';
import type { GraphQLContext } from '../../schema/context.js';
import type { ServerConfig } from './config.js';
import type { Logger } from './logger.js';

/** What {@link createServerApp} needs. */
export interface ServerAppOptions {
  config: ServerConfig;
  database: OpenDatabase;
  logger: Logger;
  /** Clock and id source for the store (tests pin these). */
  storeDeps?: Partial<StoreDeps>;
}

/** The application: its yoga instance and the readiness switch shutdown flips. */
export interface ServerApp {
  yoga: YogaServerInstance<Record<string, unknown>, GraphQLContext>;
  /** Makes `/readyz` fail (shutdown begins by this, so load balancers drain first). */
  markNotReady(): void;
}

/** Builds the yoga app over an open, migrated database. */
export function createServerApp({ config, database, logger, storeDeps }: ServerAppOptions): ServerApp {
  const store = createStoreContext(database.db, database.dialect, storeDeps);
  let ready = true;
  const yoga = createYoga<Record<string, unknown>, GraphQLContext>({
    schema,
    graphqlEndpoint: '/graphql',
    landingPage: false,
    graphiql: config.graphiql ? { title: 'Connector store' } : false,
    healthCheckEndpoint: '/healthz',
    logging: logger.child({ component: 'yoga' }),
    context: ({ request }) => ({
      store,
      requestID: request.headers.get('x-request-id') ?? randomUUID(),
    }),
    plugins: [
      useReadinessCheck({
        endpoint: '/readyz',
        check: async () => {
          if (!ready) return false;
          await sql`select 1`.execute(database.db);
          return true;
        },
      }),
    ],
  });
  return {
    yoga,
    markNotReady: () => {
      ready = false;
    },
  };
}
