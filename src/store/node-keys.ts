/** Shared by the batched readers of every area (the API's loaders). */

/** Longest key list a batched read prepares its statement for (src/store/prepared.ts): one page; longer batches are built each time. */
export const MAX_PREPARED_KEYS = 100;

/**
 * Aligns rows read for many keys with the keys asked for: one entry per key,
 * in order, `null` where no row has it, the same value again for a repeated
 * key. `rowKey` and `keyOf` must spell a key the same way (e.g. JSON of its parts).
 */
export function alignByKey<R, K, D>(
  rows: readonly R[],
  keys: readonly K[],
  rowKey: (row: R) => string,
  keyOf: (key: K) => string,
  toDomain: (row: R) => D,
): (D | null)[] {
  const byKey = new Map(rows.map((row) => [rowKey(row), toDomain(row)]));
  return keys.map((key) => byKey.get(keyOf(key)) ?? null);
}

/** {@link alignByKey} for rows read by their public node key. */
export function alignByNodeKey<R extends { node_key: string }, D>(
  rows: readonly R[],
  nodeKeys: readonly string[],
  toDomain: (row: R) => D,
): (D | null)[] {
  return alignByKey(rows, nodeKeys, (row) => row.node_key, (key) => key, toDomain);
}
