/**
 * `npm run migrate -- <latest|up|down|status>` against DATABASE_URL
 * (default: the embedded SQLite file). `down` reverts only with `--yes`;
 * without it, it says what it would revert and changes nothing.
 */
import { existsSync } from 'node:fs';
import { checkConnection, openDatabase, parseDatabaseURL, type OpenDatabase } from '../db/connect.js';
import { createMigrator, unwrapMigrationResult } from '../db/migrator.js';
import { migrationEvents } from '../store/store-changes.js';
import { publishFromOutside } from '../server/change-feed.js';
import { changeOutboxExists } from '../store/change-outbox.js';
import { createStoreContext } from '../store/context.js';
import { failureLine, usageError, wantsHelp, type Command, type CommandIO } from './command.js';

const ACTIONS = ['latest', 'up', 'down', 'status'] as const;
const YES = new Set(['--yes', '-y']);
/** The migration whose `down` drops every table. */
const INITIAL_MIGRATION = '0001-initial';

export const migrateCommand: Command = {
  summary: 'apply, revert or list migrations',
  usage: `usage: npm run migrate -- <latest|up|status|down --yes>

Migrates the database named by DATABASE_URL (default: the embedded SQLite file
./data/connector-store.sqlite): to the latest version, one step up or down, or
lists each migration and whether it is applied. down reverts the last applied
migration only with --yes (reverting ${INITIAL_MIGRATION} drops every table);
without it, it says what it would revert, changes nothing and exits 1. With
DATABASE_POOL_MODE=transaction (DATABASE_URL goes through PgBouncer) it uses the
direct CHANGE_FEED_DATABASE_URL.
`,

  async run(io) {
    if (wantsHelp(io.argv)) {
      io.stdout(migrateCommand.usage);
      return 0;
    }
    const yes = io.argv.some((arg) => YES.has(arg));
    const [action, ...rest] = io.argv.filter((arg) => !YES.has(arg));
    if (action === undefined || !(ACTIONS as readonly string[]).includes(action) || rest.length > 0) {
      return usageError(io, migrateCommand, action === undefined ? 'name an action' : `unknown argument ${JSON.stringify(rest[0] ?? action)}`);
    }
    if (yes && action !== 'down') return usageError(io, migrateCommand, '--yes is only for down');
    try {
      // Kysely's migration lock is session-scoped: never through a transaction pooler.
      const pooled = io.env.DATABASE_POOL_MODE === 'transaction';
      if (pooled && (io.env.CHANGE_FEED_DATABASE_URL?.trim() ?? '') === '') {
        throw new Error('DATABASE_POOL_MODE=transaction: migrations need the direct CHANGE_FEED_DATABASE_URL (not the pooled DATABASE_URL)');
      }
      const target = pooled ? parseDatabaseURL(io.env.CHANGE_FEED_DATABASE_URL, 'CHANGE_FEED_DATABASE_URL') : parseDatabaseURL(io.env.DATABASE_URL);
      // Opening a SQLite file creates it: a revert of nothing must not.
      if (action === 'down' && target.dialect === 'sqlite' && target.path !== ':memory:' && !existsSync(target.path)) {
        (yes ? io.stdout : io.stderr)(`${yes ? '' : 'migrate down: '}nothing to revert on ${target.display}: the file does not exist\n`);
        return yes ? 0 : 1;
      }
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
        if (action === 'down' && !yes) {
          // Reading the migration table only: nothing is created or changed.
          const last = (await migrator.getMigrations()).filter((m) => m.executedAt !== undefined).at(-1);
          if (last === undefined) {
            io.stderr(`migrate down: nothing to revert on ${target.display}: no migration is applied\n`);
          } else {
            const drops = last.name === INITIAL_MIGRATION ? ', which drops every table and all their data' : '';
            io.stderr(`migrate down: would revert ${last.name} on ${target.display}${drops}; nothing was changed. To revert it: npm run migrate -- down --yes\n`);
          }
          return 1;
        }
        const run = action === 'latest' ? migrator.migrateToLatest() : action === 'up' ? migrator.migrateUp() : migrator.migrateDown();
        const results = unwrapMigrationResult(await run);
        if (results.length === 0) io.stdout(`${target.display}: nothing to do\n`);
        for (const r of results) io.stdout(`${target.display}: ${r.direction.toLowerCase()} ${r.migrationName} ${r.status.toLowerCase()}\n`);
        if (results.length > 0) await tellServers(open, io);
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

/**
 * Tells the servers on the database that migrations ran (`storeChanged`,
 * reason MIGRATION), so open consoles re-read rows a data fix may have
 * rewritten. A database reverted past the change outbox (SQLite) has no
 * server of this version to tell; a failure to publish is a warning, not a
 * failed migration.
 */
async function tellServers(open: OpenDatabase, io: CommandIO): Promise<void> {
  const store = createStoreContext(open.db, open.dialect);
  try {
    if (open.dialect === 'sqlite' && !(await changeOutboxExists(store))) return;
    await publishFromOutside(store, migrationEvents());
  } catch (error) {
    io.stderr(`migrate: applied, but could not tell running servers (their open pages re-read on their next change): ${error instanceof Error ? error.message : String(error)}\n`);
  }
}
