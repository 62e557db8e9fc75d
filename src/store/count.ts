/**
 * Counts that never scan a table. Operations are counted from their counter
 * table (exact, O(combinations) rows; see migration 0004); every other count
 * reads at most {@link COUNT_CAP} + 1 matching index entries and says when it
 * stopped there.
 */
import { sql, type SelectQueryBuilder } from 'kysely';
import type { Database } from '../db/tables.js';
import type { StoreContext } from './context.js';

/** The most rows a count outside the counter tables reads; beyond it the count is reported as capped. */
export const COUNT_CAP = 10_000;

/** A count and whether it stopped at the cap (then `count` is {@link COUNT_CAP}, a lower bound). */
export interface BoundedCount {
  count: number;
  capped: boolean;
}

/**
 * Counts the rows `query` selects (its selection is ignored), reading at most
 * `cap` + 1 of them.
 */
export async function countUpTo(
  store: StoreContext,
  query: SelectQueryBuilder<Database, any, {}>,
  cap: number = COUNT_CAP,
): Promise<BoundedCount> {
  const row = await store.db
    .selectFrom(query.select(sql<number>`1`.as('one')).limit(cap + 1).as('bounded'))
    .select((eb) => eb.fn.countAll<number | string>().as('count'))
    .executeTakeFirstOrThrow();
  const count = Number(row.count);
  return count > cap ? { count: cap, capped: true } : { count, capped: false };
}
