/**
 * Every migration of the connector store, in order. Migrations are frozen in
 * time: they take `Kysely<any>`, import nothing from the application, and
 * receive the dialect's column types from the migration provider.
 */
import type { Migration } from 'kysely';
import { initialMigration } from './0001-initial.js';

/** Column types that differ between PostgreSQL and SQLite. */
export interface MigrationColumnTypes {
  /** Text of any length. */
  text: 'text';
  /** 64-bit integer for ms-epoch times (`bigint` on Postgres, `integer` on SQLite). */
  bigint: 'bigint' | 'integer';
  /** Raw bytes (`bytea` on Postgres, `blob` on SQLite). */
  binary: 'bytea' | 'blob';
}

/** The ordered record of migrations, keyed by a name that sorts in order. */
export function getMigrations(types: MigrationColumnTypes): Record<string, Migration> {
  return {
    '0001-initial': initialMigration(types),
  };
}
