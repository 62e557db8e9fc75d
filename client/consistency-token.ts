/**
 * Read-your-writes across the server's read standbys (its docs/operations.md, "Read
 * standbys"): every mutation's answer carries `extensions.consistencyToken`,
 * the primary's WAL position after it (`X/Y`, two hex numbers, e.g.
 * `0/3000148`), and a query that sends the latest one back in the
 * `Consistency-Token` header reads a standby only once that standby has
 * replayed past it. Keeping the latest is the caller's part: the store client
 * (runtime/store-client.ts) keeps one per client, the console one per tab.
 * No dependencies; browser-safe.
 */

/** The request header the latest consistency token goes back in. */
export const CONSISTENCY_TOKEN_HEADER = 'consistency-token';

/** The same shape the server accepts (src/db/read-replicas.ts `parseLsn`): each half a 32-bit hex number. */
const TOKEN_SHAPE = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/;

/** `[X, Y]` of a token `X/Y`, or null when `value` is not one. */
function positionOf(value: unknown): [high: number, low: number] | null {
  if (typeof value !== 'string') return null;
  const match = TOKEN_SHAPE.exec(value);
  return match === null ? null : [parseInt(match[1]!, 16), parseInt(match[2]!, 16)];
}

/**
 * The later of `kept` and the token an answer's `extensions` carry (its
 * `consistencyToken`); positions compare as (X << 32) + Y. An answer without a
 * token, or with one not shaped `X/Y`, leaves `kept` as it is.
 */
export function laterConsistencyToken(kept: string | null, extensions: unknown): string | null {
  const seen = (extensions as { consistencyToken?: unknown } | null | undefined)?.consistencyToken;
  const next = positionOf(seen);
  if (next === null) return kept;
  const current = positionOf(kept);
  if (current !== null && (current[0] > next[0] || (current[0] === next[0] && current[1] >= next[1]))) return kept;
  return seen as string;
}
