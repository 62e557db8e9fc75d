/**
 * `npm run migrate -- <latest|up|down|status>` against DATABASE_URL
 * (default: the embedded SQLite file).
 */
import { checkConnection, openDatabase, parseDatabaseURL } from '../db/connect.js';
import { createMigrator, unwrapMigrationResult } from '../db/migrator.js';
import { failureLine, usageError, wantsHelp, type Command } from './command.js';

const ACTIONS = ['latest', 'up', 'down', 'status'] as const;

export const migrateCommand: Command = {
  summary: 'apply, revert or list migrations',
  usage: `usage: npm run migrate -- <latest|up|down|status>

Migrates the database named by DATABASE_URL (default: the embedded SQLite file
./data/connector-store.sqlite): to the latest version, one step up or down, or
lists each migration and whether it is applied.
`,

  async run(io) {
    if (wantsHelp(io.argv)) {
      io.stdout(migrateCommand.usage);
      return 0;
    }
    const [action, ...rest] = io.argv;
    if (action === undefined || !(ACTIONS as readonly string[]).includes(action) || rest.length > 0) {
      return usageError(io, migrateCommand, action === undefined ? 'name an action' : `unknown argument ${JSON.stringify(rest[0] ?? action)}`);
    }
    try {
      const target = parseDatabaseURL(io.env.DATABASE_URL);
      const open = openDatabase(target);
      try {
        await checkConnection(open);
        const migrator = createMigrator(open.db, open.dialect);
        if (action === 'status') {
          for (const m of await migrator.getMigrations()) {
            io.stdout(`${m.name}  ${m.executedAt === undefined ? 'pending' : `applied ${m.executedAt.toISOString()}`}\n`);
          }
          return 0;
        }
        const run = action === 'latest' ? migrator.migrateToLatest() : action === 'up' ? migrator.migrateUp() : migrator.migrateDown();
        const results = unwrapMigrationResult(await run);
        if (results.length === 0) io.stdout(`${target.display}: nothing to do\n`);
        for (const r of results) io.stdout(`${target.display}: ${r.direction.toLowerCase()} ${r.migrationName} ${r.status.toLowerCase()}\n`);
        return 0;
      } finally {
        await open.close();
      }
    } catch (error) {
      io.stderr(failureLine('migrate', error));
      return 1;
    }
  },
};
