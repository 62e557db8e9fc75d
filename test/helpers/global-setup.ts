/**
 * Builds the console if its build is stale (once, before any server starts).
 * Probes the test Postgres once per run. Locally an unreachable server skips
 * the Postgres half with a loud notice; under CI=true it fails the run with
 * one line and exit code 1.
 */
import pg from 'pg';
import type { TestProject } from 'vitest/node';
import { maskDatabaseURL } from '../../src/db/connect.js';
import { loadConsoleBuild } from '../../src/server/console-build.js';
import { adminPostgresURL } from './postgres.js';

declare module 'vitest' {
  export interface ProvidedContext {
    postgresAvailable: boolean;
  }
}

export default async function setup(project: TestProject): Promise<void> {
  const wanted = (process.env.TEST_DIALECTS ?? 'sqlite,postgres').split(',').includes('postgres');
  let available = false;
  if (wanted) {
    const client = new pg.Client({ connectionString: adminPostgresURL(), connectionTimeoutMillis: 3_000 });
    try {
      await client.connect();
      await client.query('select 1');
      available = true;
    } catch (error) {
      const reason = error instanceof Error ? error.message : String(error);
      if (process.env.CI === 'true') {
        // Thrown from here, the failure would come wrapped in "No test files found" and a
        // stack trace of vitest's internals; nothing has started yet, so exiting is clean.
        process.stderr.write(
          `\nCI=true, but PostgreSQL is unreachable at ${maskDatabaseURL(adminPostgresURL())} (${reason}): start it, point PG_TEST_URL at one, or run TEST_DIALECTS=sqlite.\n`,
        );
        process.exit(1);
      }
      const bar = '!'.repeat(78);
      console.warn(`\n${bar}\n!! PostgreSQL unreachable (${reason}).\n!! SKIPPING every Postgres test. Set PG_TEST_URL or start the server;\n!! under CI=true this is a failure.\n${bar}\n`);
    } finally {
      await client.end().catch(() => {});
    }
  }
  project.provide('postgresAvailable', available);
  // Once per run, so the server processes the tests start find the console fresh instead of each building it.
  await loadConsoleBuild();
}
