/**
 * `npm run demo` and `npm start -- --demo`: fill the configured database
 * (default: the embedded SQLite file) with the demo set, owned by the local
 * key's DID so the token `npm start` prints in development sees it.
 */
import { resolve } from 'node:path';
import { loadOrCreateLocalKey } from '../auth/index.js';
import { LOCAL_KEY_PATH } from '../auth/token-command.js';
import { checkConnection, openDatabase, type OpenDatabase } from '../db/connect.js';
import { migrateToLatest } from '../db/migrator.js';
import { createStoreContext, type StoreDeps } from '../store/context.js';
import { ConfigError, loadConfig } from './config.js';
import { seedDemoData, type SeedDemoDataResult } from './demo.js';

/** Refuses demo data where it does not belong. */
export class DemoRefusedError extends Error {
  readonly code = 'DEMO_REFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'DemoRefusedError';
  }
}

/** Throws {@link DemoRefusedError} with NODE_ENV=production: demo rows never go into a production database. */
export function assertDemoAllowed(env: string): void {
  if (env === 'production') throw new DemoRefusedError('demo data is refused with NODE_ENV=production');
}

/**
 * Seeds the demo set into an open, migrated database for the local key kept
 * in `cwd`/data/local-key.json (created if missing). Idempotent. `deps`
 * (clock, ids) default to the real ones.
 */
export async function seedLocalDemo(
  database: OpenDatabase,
  cwd: string,
  deps: Partial<StoreDeps> = {},
): Promise<SeedDemoDataResult & { keyPath: string }> {
  const keyPath = resolve(cwd, LOCAL_KEY_PATH);
  const key = await loadOrCreateLocalKey(keyPath);
  const result = await seedDemoData(createStoreContext(database.db, database.dialect, deps), { ownerDID: key.did });
  return { ...result, keyPath };
}

/** Where the command reads and writes; the real process by default. */
export interface DemoCommandIO {
  argv: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  stdout: (text: string) => void;
  stderr: (text: string) => void;
}

const USAGE = `usage: npm run demo

Fills the database named by DATABASE_URL (default: the embedded SQLite file
./data/connector-store.sqlite) with demo data owned by the local key in
./${LOCAL_KEY_PATH} (created if missing). Running it again adds nothing.
Then: npm start, and use the token it prints.
`;

/** Runs the demo command and returns the process exit code. */
export async function runDemoCommand(io: DemoCommandIO): Promise<number> {
  if (io.argv.some((arg) => arg === '-h' || arg === '--help')) {
    io.stdout(USAGE);
    return 0;
  }
  if (io.argv.length > 0) {
    io.stderr(`unknown argument ${JSON.stringify(io.argv[0])}\n${USAGE}`);
    return 2;
  }
  let database: OpenDatabase | undefined;
  try {
    const config = loadConfig(io.env);
    assertDemoAllowed(config.env);
    database = openDatabase(config.database, { statementTimeoutMs: config.db.statementTimeoutMs, poolMax: 2 });
    await checkConnection(database);
    await migrateToLatest(database.db, database.dialect);
    const result = await seedLocalDemo(database, io.cwd);
    io.stdout(
      `demo data in ${database.target.display}: ${result.created} items written, ${result.existing} already there\n` +
        `owner: ${result.ownerDID} (the key in ${result.keyPath})\n` +
        'next: npm start, then use the bearer token it prints (or npm run -s token)\n',
    );
    return 0;
  } catch (error) {
    const message = error instanceof ConfigError || error instanceof Error ? error.message : String(error);
    io.stderr(`demo failed: ${message}\n`);
    return 1;
  } finally {
    await database?.close();
  }
}
