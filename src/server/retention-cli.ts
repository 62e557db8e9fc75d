/**
 * `npm run retention`: runs the background jobs (pending-authorization expiry,
 * retention) once, on demand, against DATABASE_URL with the server's
 * configuration (IDEMPOTENCY_WINDOW_MS). Prints one line per job; exits 1 if
 * any failed.
 */
import { checkConnection, openDatabase } from '../db/connect.js';
import { migrateToLatest } from '../db/migrator.js';
import { createStoreContext } from '../store/context.js';
import { loadConfig } from './config.js';
import { runJobsOnce, serverJobs } from './jobs.js';
import { createLogger } from './logger.js';

async function main(): Promise<number> {
  const config = loadConfig();
  const database = openDatabase(config.database, { statementTimeoutMs: config.db.statementTimeoutMs });
  try {
    await checkConnection(database);
    await migrateToLatest(database.db, database.dialect);
    const store = createStoreContext(database.db, database.dialect);
    const results = await runJobsOnce(store, createLogger('silent'), serverJobs(config.jobs));
    for (const result of results) {
      const detail = result.ok ? JSON.stringify(result.summary) : `failed: ${result.error instanceof Error ? result.error.message : String(result.error)}`;
      console.log(`${result.name} (${result.durationMs} ms): ${detail}`);
    }
    return results.every((r) => r.ok) ? 0 : 1;
  } finally {
    await database.close();
  }
}

process.exitCode = await main().catch((error: unknown) => {
  console.error(`retention: ${error instanceof Error ? error.message : String(error)}`);
  return 1;
});
