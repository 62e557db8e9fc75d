/**
 * Batch forms of the holder's fenced steps (issue 40 item 3): start, mark
 * sent, record outcome and finalize for up to {@link MAX_FENCED_BATCH}
 * operations in one request, one typed result per item, in input order.
 * Each item is exactly its single step (the same fence, request key, replay
 * and announcement). The items' steps are called side by side, in one turn
 * of the event loop, so on Postgres the store gathers them into one
 * statement (src/store/gather.ts) for every step but record outcome.
 */
import { InvalidInputError, StoreError } from '../src/store/errors.js';
import type { GraphQLContext } from './context.js';
import type { ConnectorOperation } from './operations.js';

/** The most items one batch of fenced steps carries. */
export const MAX_FENCED_BATCH = 100;

/**
 * Runs `step` on each item with its (visible, or null) operation, all at
 * once, and answers one result per item in input order: the step's payload,
 * or the error of `expected` that refused that item (the others are unaffected).
 * An unexpected failure fails the request, as it would a single step. The
 * same operation twice in one batch is refused whole (`InvalidInputError` on
 * `items`): its steps would race each other.
 */
export async function eachFencedItem<I, P>(
  operations: readonly (ConnectorOperation | null)[],
  items: readonly I[],
  ctx: GraphQLContext,
  expected: readonly (abstract new (...args: never[]) => StoreError)[],
  step: (operation: ConnectorOperation | null, item: I, ctx: GraphQLContext) => Promise<P>,
): Promise<{ results: (P | StoreError)[] }> {
  const seen = new Set<string>();
  for (const operation of operations) {
    if (operation === null) continue;
    if (seen.has(operation.nodeKey)) throw new InvalidInputError('items', 'names one operation twice');
    seen.add(operation.nodeKey);
  }
  const results = await Promise.all(
    items.map((item, i) =>
      step(operations[i] ?? null, item, ctx).catch((error: unknown) => {
        if (expected.some((type) => error instanceof type)) return error as StoreError;
        throw error;
      }),
    ),
  );
  return { results };
}
