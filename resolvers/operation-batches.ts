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

/** The most items one batch of fenced steps carries. */
export const MAX_FENCED_BATCH = 100;

/**
 * Refuses a batch that names one operation twice (`InvalidInputError` on
 * `items`): its steps would race each other. `nodeKeys` are the keys the
 * items' ids name ('' for an id of another type), so the refusal depends on
 * the input alone, never on what exists or what the viewer may see.
 */
export function refuseRepeatedOperations(nodeKeys: readonly string[]): void {
  const seen = new Set<string>();
  for (const nodeKey of nodeKeys) {
    if (nodeKey === '') continue;
    if (seen.has(nodeKey)) throw new InvalidInputError('items', 'names one operation twice');
    seen.add(nodeKey);
  }
}

/**
 * Runs `step` on each item with its target (what the step needs to find its
 * operation: the node key the id names, or the operation loaded as the
 * viewer sees it, null when not visible), all at once, and answers one result
 * per item in input order: the step's payload, or the error of `expected`
 * that refused that item (the others are unaffected). An unexpected failure
 * fails the request, as it would a single step.
 */
export async function eachFencedItem<T, I, P>(
  targets: readonly T[],
  items: readonly I[],
  ctx: GraphQLContext,
  expected: readonly (abstract new (...args: never[]) => StoreError)[],
  step: (target: T, item: I, ctx: GraphQLContext) => Promise<P>,
): Promise<{ results: (P | StoreError)[] }> {
  const results = await Promise.all(
    items.map((item, i) =>
      step(targets[i]!, item, ctx).catch((error: unknown) => {
        if (expected.some((type) => error instanceof type)) return error as StoreError;
        throw error;
      }),
    ),
  );
  return { results };
}
