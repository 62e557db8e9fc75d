/**
 * `npm run migrate -- <latest|up|down|status>` against DATABASE_URL
 * (default: the embedded SQLite file). Exits 1 with a one-line message on failure.
 */
import { checkConnection, openDatabase, parseDatabaseURL } from './connect.js';
import { createMigrator, unwrapMigrationResult } from './migrator.js';

const USAGE = 'usage: npm run migrate -- <latest|up|down|status>';

async function main(command: string | undefined): Promise<void> {
  if (command === undefined || !['latest', 'up', 'down', 'status'].includes(command)) {
    throw new Error(USAGE);
  }
  const target = parseDatabaseURL(process.env.DATABASE_URL);
  const open = openDatabase(target);
  try {
    await checkConnection(open);
    const migrator = createMigrator(open.db, open.dialect);
    if (command === 'status') {
      for (const m of await migrator.getMigrations()) {
        const applied = m.executedAt === undefined ? 'pending' : `applied ${m.executedAt.toISOString()}`;
        console.log(`${m.name}  ${applied}`);
      }
      return;
    }
    const run = command === 'latest' ? migrator.migrateToLatest() : command === 'up' ? migrator.migrateUp() : migrator.migrateDown();
    const results = unwrapMigrationResult(await run);
    if (results.length === 0) console.log(`${target.display}: nothing to do`);
    for (const r of results) console.log(`${target.display}: ${r.direction.toLowerCase()} ${r.migrationName} ${r.status.toLowerCase()}`);
  } finally {
    await open.close();
  }
}

main(process.argv[2]).catch((error: unknown) => {
  console.error(`migrate: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
});
