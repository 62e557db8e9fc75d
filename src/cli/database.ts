/**
 * What the commands that work on data share: the server's configuration
 * from the environment, its database opened, checked and migrated, and
 * closed again whatever happens.
 */
import { checkConnection, openDatabase, type OpenDatabase } from '../db/connect.js';
import { migrateOverOwnConnection, migrateToLatest } from '../db/migrator.js';
import { loadConfig, type ServerConfig } from '../server/config.js';

/** Runs `work` on the configured database (DATABASE_URL, default the embedded SQLite file), migrated to the latest schema. */
export async function withConfiguredDatabase<T>(
  env: Readonly<Record<string, string | undefined>>,
  work: (database: OpenDatabase, config: ServerConfig) => Promise<T>,
  options: { poolMax?: number; before?: (config: ServerConfig) => void } = {},
): Promise<T> {
  const config = loadConfig(env);
  options.before?.(config);
  const database = openDatabase(config.database, {
    statementTimeoutMs: config.db.statementTimeoutMs,
    poolMode: config.db.poolMode,
    ...(options.poolMax !== undefined && { poolMax: options.poolMax }),
  });
  try {
    await checkConnection(database);
    // Behind a transaction pooler, over the direct URL (see migrateOverOwnConnection).
    if (config.db.poolMode === 'transaction') await migrateOverOwnConnection(config.directDatabase, { statementTimeoutMs: config.db.statementTimeoutMs });
    else await migrateToLatest(database.db, database.dialect);
    return await work(database, config);
  } finally {
    await database.close();
  }
}
