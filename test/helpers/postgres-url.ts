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
