/**
 * Conditions a keyed statement checks on the row its key found, written so
 * that no index can be chosen to find the row by them.
 *
 * A fenced write is `WHERE <key> AND version = … AND lease_token = … AND
 * state IN (…)`. Postgres costs every index those conditions could use, and
 * when its statistics are behind the table (a table analyzed before its
 * leases, states or attempt counts looked as they do now) an index on a
 * checked column looks as cheap as the primary key: a partial index of held
 * leases that was empty when analyzed (`lease_token = …` proves its
 * `lease_token IS NOT NULL`), or the attempts index when every row had
 * another count. The write then walks that whole index: 17 ms instead of
 * 0.03 ms at 60 000 held leases, growing with the table; in the benchmark's
 * write-back sequence it cut throughput by 8× after a minute of claims.
 * test/store/keyed-write-plans.test.ts explains every keyed UPDATE under such
 * statistics. `IS NOT DISTINCT FROM` is served by no
 * index and, being null-safe, proves nothing for a partial index, so the key
 * is the only way in whatever the statistics say. Both dialects (SQLite
 * 3.39+) read it as `=` for the non-null values these checks compare.
 */
import type { Expression, ExpressionBuilder, ReferenceExpression, SqlBool } from 'kysely';

/** `column` equals `expected` (one of `expected`, for a list) on the row found by the key, never an index condition. */
export function rowHas<DB, TB extends keyof DB>(
  eb: ExpressionBuilder<DB, TB>,
  column: ReferenceExpression<DB, TB>,
  expected: string | number | null | readonly (string | number)[],
): Expression<SqlBool> {
  const values = Array.isArray(expected) ? expected : [expected];
  const same = (value: unknown) => eb(column, 'is not distinct from', value as never);
  return values.length === 1 ? same(values[0]) : eb.or(values.map(same));
}
