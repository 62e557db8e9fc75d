/**
 * Statements Postgres parses once per connection instead of once per run.
 *
 * An unnamed statement (what Kysely sends) is parsed and analysed by the
 * server on every run. For the store's short statements that is most of
 * their cost in Postgres: under the throughput benchmark's load the
 * dashboard list cost Postgres 0.35 ms of CPU per request unnamed and 0.28
 * named (issue 21; `bench/throughput.ts` with and without
 * `DATABASE_NAMED_STATEMENTS=false`, its Postgres CPU column; docs/benchmarks.md,
 * "What Postgres parsed"). The store's statements whose text never
 * changes (src/store/prepared.ts) are registered here by text and get a name
 * derived from it; the pg wrapper in connect.ts sends a registered text with
 * its name on a direct connection, so each connection parses it once. Through
 * a transaction pooler statements stay unnamed: the next transaction may run
 * on a server connection that never saw the name. `DATABASE_NAMED_STATEMENTS=false`
 * (OpenDatabaseOptions.namedStatements) turns naming off everywhere.
 *
 * Two rules keep a named statement answering as its unnamed self:
 *
 * - Plans stay custom: every connection sets `plan_cache_mode =
 *   force_custom_plan` before the pool lends it (connect.ts; a server
 *   older than PostgreSQL 12 has no such setting, and its connections name
 *   nothing), so Postgres plans each run with its
 *   values, as it plans an unnamed statement, instead of switching to a
 *   generic plan after five runs (a generic plan cannot see that one caller
 *   owns most rows, or that statistics lag the table: the plan tests).
 * - No `*` column list: Postgres expands `*` when it parses, and a named
 *   statement whose table gained a column fails with "cached plan must not
 *   change result type" (SQLSTATE 0A000) instead of answering, which a
 *   running replica would meet on every connection during a rolling
 *   migration. A text with `*` other than `count(*)` stays unnamed. Should a
 *   named statement fail so anyway (a column's type changed), connect.ts
 *   ends that connection, and the pool opens a new one that parses afresh.
 */
import { createHash } from 'node:crypto';

/** Registered texts by their names. Bounded by the code: one entry per statement the store prepares (src/store/prepared.ts). */
const names = new Map<string, string>();

/** Registers `sql` to run named on direct Postgres connections (a text with a `*` column list is not: see the module comment). */
export function nameStatement(sql: string): void {
  if (names.has(sql) || !keepsResultType(sql)) return;
  names.set(sql, `cs_${createHash('sha256').update(sql).digest('base64url').slice(0, 32)}`);
}

/** The name of a registered text, or undefined. */
export function statementName(sql: string): string | undefined {
  return names.get(sql);
}

/** Whether `sql` names its columns: no `*` but `count(*)`, so a column added to its tables leaves its result as it was. */
export function keepsResultType(sql: string): boolean {
  return !sql.replace(/count\(\*\)/gi, '').includes('*');
}

/** SQLSTATE of "cached plan must not change result type" (feature_not_supported). */
export const CACHED_PLAN_CHANGED = '0A000';
