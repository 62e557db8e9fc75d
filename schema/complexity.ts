/**
 * What a field may cost (the complexity plugin): every selected field of
 * every row it may return counts once, so a list's price grows with the rows
 * it can return — the ids of `nodes` / `documents`, the page size of a
 * connection (`first`/`last`, also when sent as a variable). Lists without
 * such an argument count as 10 rows. A bulk mutation also costs 1 per row it
 * may write (issue 19): see {@link bulkActionComplexity}.
 * `src/server/query-cost.ts` holds each request to the `MAX_QUERY_COST`
 * budget, and the rows of its bulk fields to `MAX_BULK_ROWS_PER_REQUEST`
 * ({@link BULK_ROWS}), before anything runs.
 */
import { MAX_BULK_ACTION, MAX_ENQUEUE_BATCH, MAX_LEASE_DUE_BATCH } from '../resolvers/operations.js';
import { DEFAULT_PAGE_SIZE } from '../resolvers/pagination.js';
import { MAX_FENCED_BATCH } from '../resolvers/operation-batches.js';

/**
 * The only argument and input-field names any field's price (or bulk rows)
 * reads: a page size, the length of a list of ids, a bulk action's `cap`
 * a receipt's `candidates`, a batch enqueue's `operations`, a batch
 * lease's `limit` and a batch of fenced steps' `items`, the last five inside
 * an `input` argument. The
 * server's budget check relies on this list to remember a verdict across
 * requests whose other variables differ: keep it complete.
 */
export const COST_ARGUMENTS: ReadonlySet<string> = new Set(['first', 'last', 'ids', 'documentIDs', 'input', 'cap', 'candidates', 'operations', 'limit', 'items']);

/**
 * The field extension that says how many rows a bulk mutation may write,
 * from its arguments: `extensions: { [BULK_ROWS]: (args) => rows }`. The
 * server adds it up over every field of a request (aliases included) and
 * refuses more than `MAX_BULK_ROWS_PER_REQUEST` before anything runs.
 */
export const BULK_ROWS = 'bulkRows';

/** How many items a list input may hold as sent (a single value coerces to a list of one). */
const itemsOf = (value: unknown): number => (Array.isArray(value) ? value.length : value == null ? 0 : 1);

/** Rows a bulk operator action (`retryOperations`, `cancelOperations`, `requeueOperations`) may change: its cap, default the maximum. */
export const bulkActionRows = (args: { input?: { cap?: number | null } | null }): number => Math.max(0, args.input?.cap ?? MAX_BULK_ACTION);

/**
 * A bulk operator action: 1 per operation it may change (its cap), so 30
 * aliases at cap 1 000 cost 30 000 and more whatever they select. What it
 * answers is priced by its payload: `operations` as the most one action may
 * list ({@link BULK_ACTION_LIST_ROWS}).
 */
export const bulkActionComplexity = (args: { input?: { cap?: number | null } | null }) => ({ field: Math.max(1, bulkActionRows(args)), multiplier: 1 });

/**
 * Rows a bulk action's `operations` list is priced as: the most it may list
 * (the list cannot see the action's cap), so each field selected of it costs
 * 1 000 and one action at its cap fits with a handful of fields per row.
 */
export const BULK_ACTION_LIST_ROWS = MAX_BULK_ACTION;

/** Rows a sweep receipt may write: one per candidate. */
export const sweepReceiptRows = (args: { input?: { candidates?: unknown } | null }): number => itemsOf(args.input?.candidates);

/** A sweep receipt: 1 per candidate it writes (the payload is one receipt, priced as usual). */
export const sweepReceiptComplexity = (args: { input?: { candidates?: unknown } | null }) => ({ field: Math.max(1, sweepReceiptRows(args)), multiplier: 1 });

/** Rows a batch enqueue may write: one per item, never more than {@link MAX_ENQUEUE_BATCH} counted. */
export const enqueueBatchRows = (args: { input?: { operations?: unknown } | null }): number => Math.min(MAX_ENQUEUE_BATCH, itemsOf(args.input?.operations));

/** A batch enqueue: 1 per item it writes (its `results` are priced as the most a batch may answer). */
export const enqueueBatchComplexity = (args: { input?: { operations?: unknown } | null }) => ({ field: Math.max(1, enqueueBatchRows(args)), multiplier: 1 });

/** Rows a batch lease may write: its `limit`, never more than {@link MAX_LEASE_DUE_BATCH} counted. */
export const leaseDueRows = (args: { input?: { limit?: number | null } | null }): number => Math.min(MAX_LEASE_DUE_BATCH, Math.max(0, args.input?.limit ?? 0));

/** A batch lease: 1 per operation it may lease (its `operations` are priced as the most a batch may answer). */
export const leaseDueComplexity = (args: { input?: { limit?: number | null } | null }) => ({ field: Math.max(1, leaseDueRows(args)), multiplier: 1 });

/** Rows a batch of fenced steps may write: one per item, never more than {@link MAX_FENCED_BATCH} counted. */
export const fencedBatchRows = (args: { input?: { items?: unknown } | null }): number => Math.min(MAX_FENCED_BATCH, itemsOf(args.input?.items));

/** A batch of fenced steps: 1 per item it writes (its `results` are priced as the most a batch may answer). */
export const fencedBatchComplexity = (args: { input?: { items?: unknown } | null }) => ({ field: Math.max(1, fencedBatchRows(args)), multiplier: 1 });

/** A connection: its page size, as asked for (an out-of-range size is refused later anyway). */
export const connectionComplexity = (args: { first?: number | null; last?: number | null }) => ({
  field: 1,
  multiplier: Math.max(0, args.first ?? args.last ?? DEFAULT_PAGE_SIZE),
});

/** A list whose length is the length of an argument (ids, document ids). */
export const listComplexity = (items: readonly unknown[] | null | undefined) => ({ field: 1, multiplier: items?.length ?? 0 });

/** A list capped by a `first` argument. */
export const firstComplexity = (args: { first?: number | null }) => ({ field: 1, multiplier: Math.max(0, args.first ?? DEFAULT_PAGE_SIZE) });
