/** Wires the frozen migrations in `migrations/` to Kysely's `Migrator`. */
import { Migrator, type MigrationProvider, type MigrationResultSet, type Kysely } from 'kysely';
import { getMigrations, type MigrationColumnTypes } from '../../migrations/index.js';
import { checkConnection, openDatabase, type DatabaseTarget, type DialectName } from './connect.js';

/** The column types each dialect passes to the migrations. */
export function migrationColumnTypes(dialect: DialectName): MigrationColumnTypes {
  return dialect === 'postgres'
    ? { text: 'text', bigint: 'bigint', binary: 'bytea', dialect: 'postgres' }
    : { text: 'text', bigint: 'integer', binary: 'blob', dialect: 'sqlite' };
}

/** Creates a `Migrator` over this project's migrations for `dialect`. */
export function createMigrator(db: Kysely<any>, dialect: DialectName): Migrator {
  const provider: MigrationProvider = {
    getMigrations: async () => getMigrations(migrationColumnTypes(dialect)),
  };
  return new Migrator({
    db,
    provider,
    migrationTableName: 'kubun_connector_migration',
    migrationLockTableName: 'kubun_connector_migration_lock',
  });
}

/** Thrown when a migration step fails; names the migration that failed. */
export class MigrationError extends Error {
  readonly code = 'MIGRATION_FAILED';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MigrationError';
  }
}

/** Throws a {@link MigrationError} if a migration run failed; returns the results otherwise. */
export function unwrapMigrationResult({ error, results }: MigrationResultSet): NonNullable<MigrationResultSet['results']> {
  if (error !== undefined) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName;
    const reason = error instanceof Error ? error.message : String(error);
    throw new MigrationError(`migration ${failed ?? '(setup)'} failed: ${reason}`, { cause: error });
  }
  return results ?? [];
}

/** Applies every pending migration. */
export async function migrateToLatest(db: Kysely<any>, dialect: DialectName): Promise<NonNullable<MigrationResultSet['results']>> {
  return unwrapMigrationResult(await createMigrator(db, dialect).migrateToLatest());
}

/**
 * Applies every pending migration over a connection of its own to `target`,
 * closed afterwards. Behind a transaction-pooling PgBouncer this is the
 * direct URL: Kysely's migration lock on Postgres is a session-level advisory
 * lock, taken and released by separate statements around the migration
 * transaction, which a transaction pooler may run on different server
 * connections (the unlock then fails and the lock stays held by a pooled
 * connection, blocking every later migration).
 */
export async function migrateOverOwnConnection(
  target: DatabaseTarget,
  options: { statementTimeoutMs?: number } = {},
): Promise<NonNullable<MigrationResultSet['results']>> {
  const open = openDatabase(target, { ...options, poolMax: 1 });
  try {
    await checkConnection(open);
    return await migrateToLatest(open.db, open.dialect);
  } finally {
    await open.close();
  }
}
