/**
 * `npm run retention`: runs the background jobs (pending-authorization expiry,
 * retention) once, on demand, against DATABASE_URL with the server's
 * configuration (IDEMPOTENCY_WINDOW_MS). Prints one line per job; exits 1 if
 * any failed.
 */
import { publishFromOutside } from '../server/change-feed.js';
import { runJobsOnce, serverJobs } from '../server/jobs.js';
import { createLogger } from '../server/logger.js';
import { createStoreContext } from '../store/context.js';
import { failureLine, usageError, wantsHelp, type Command } from './command.js';
import { withConfiguredDatabase } from './database.js';

export const retentionCommand: Command = {
  summary: 'run retention and the pending-auth expiry once, now',
  usage: `usage: npm run retention

Runs the server's background jobs once against DATABASE_URL (default: the
embedded SQLite file): expired pending authorizations, then retention of
finished operations past IDEMPOTENCY_WINDOW_MS and of applied sweep candidates.
`,

  async run(io) {
    if (wantsHelp(io.argv)) {
      io.stdout(retentionCommand.usage);
      return 0;
    }
    if (io.argv.length > 0) return usageError(io, retentionCommand, `unknown argument ${JSON.stringify(io.argv[0])}`);
    try {
      return await withConfiguredDatabase(io.env, async (database, config) => {
        const store = createStoreContext(database.db, database.dialect);
        // What it deleted reaches the subscribers of every server on the database.
        const results = await runJobsOnce(store, createLogger('silent'), serverJobs(config.jobs, (events) => publishFromOutside(store, events)));
        for (const result of results) {
          const detail = result.ok ? JSON.stringify(result.summary) : `failed: ${result.error instanceof Error ? result.error.message : String(result.error)}`;
          io.stdout(`${result.name} (${result.durationMs} ms): ${detail}\n`);
        }
        return results.every((r) => r.ok) ? 0 : 1;
      });
    } catch (error) {
      io.stderr(failureLine('retention', error));
      return 1;
    }
  },
};
