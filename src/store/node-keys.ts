/** Shared by the batched node-key readers of every area (the API's node loaders). */

/**
 * Aligns rows read by node key with the keys asked for: one entry per key, in
 * order, `null` where no row has it, the same value again for a repeated key.
 */
export function alignByNodeKey<R extends { node_key: string }, D>(
  rows: readonly R[],
  nodeKeys: readonly string[],
  toDomain: (row: R) => D,
): (D | null)[] {
  const byKey = new Map(rows.map((row) => [row.node_key, toDomain(row)]));
  return nodeKeys.map((key) => byKey.get(key) ?? null);
}
