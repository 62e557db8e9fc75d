/**
 * What the migration provider passes every migration: the column types that
 * differ between dialects. Only ever extended, so frozen migrations can rely on it.
 */

/** Column types that differ between PostgreSQL and SQLite. */
export interface MigrationColumnTypes {
  /** Text of any length. */
  text: 'text';
  /** 64-bit integer for ms-epoch times (`bigint` on Postgres, `integer` on SQLite). */
  bigint: 'bigint' | 'integer';
  /** Raw bytes (`bytea` on Postgres, `blob` on SQLite). */
  binary: 'bytea' | 'blob';
  /** For steps only one dialect can take (e.g. SET NOT NULL on an existing column, which SQLite lacks). */
  dialect: 'postgres' | 'sqlite';
}
