/**
 * What a field may cost (the complexity plugin): every selected field of
 * every row it may return counts once, so a list's price grows with the rows
 * it can return — the ids of `nodes` / `documents`, the page size of a
 * connection (`first`/`last`, also when sent as a variable). Lists without
 * such an argument count as 10 rows. `src/server/query-cost.ts` holds each
 * request to the `MAX_QUERY_COST` budget before anything runs.
 */
import { DEFAULT_PAGE_SIZE } from '../resolvers/pagination.js';

/**
 * The only arguments any field's price reads (a page size, or the length of a
 * list of ids). The server's budget check relies on this list to remember a
 * verdict across requests whose other variables differ: keep it complete.
 */
export const COST_ARGUMENTS: ReadonlySet<string> = new Set(['first', 'last', 'ids', 'documentIDs']);

/** A connection: its page size, as asked for (an out-of-range size is refused later anyway). */
export const connectionComplexity = (args: { first?: number | null; last?: number | null }) => ({
  field: 1,
  multiplier: Math.max(0, args.first ?? args.last ?? DEFAULT_PAGE_SIZE),
});

/** A list whose length is the length of an argument (ids, document ids). */
export const listComplexity = (items: readonly unknown[] | null | undefined) => ({ field: 1, multiplier: items?.length ?? 0 });

/** A list capped by a `first` argument. */
export const firstComplexity = (args: { first?: number | null }) => ({ field: 1, multiplier: Math.max(0, args.first ?? DEFAULT_PAGE_SIZE) });
