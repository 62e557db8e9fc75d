/** The test Postgres server (`PG_TEST_URL`) and the scratch databases tests make on it. */
import { randomBytes } from 'node:crypto';
import pg from 'pg';

/** The Postgres server tests create their databases on (`PG_TEST_URL`). */
export function adminPostgresURL(): string {
  return process.env.PG_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
}

/** The same server, another database. */
export function postgresURLFor(database: string): string {
  const url = new URL(adminPostgresURL());
  url.pathname = `/${database}`;
  return url.toString();
}

/** A database made for one suite; `drop` removes it even with open connections. */
export interface ScratchPostgresDatabase {
  url: string;
  drop(): Promise<void>;
}

/** Creates an empty database (no tables) named `${prefix}_<time>_<random>` on the test server. */
export async function createScratchPostgresDatabase(prefix: string): Promise<ScratchPostgresDatabase> {
  const name = `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  await adminQuery(`create database ${name}`);
  return {
    url: postgresURLFor(name),
    drop: () => adminQuery(`drop database if exists ${name} with (force)`),
  };
}

async function adminQuery(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminPostgresURL() });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}
