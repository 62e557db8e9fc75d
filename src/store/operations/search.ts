/**
 * Operations by the start of their idempotency key (issue 38 item 5: the
 * console's search offers what starts with the text typed). The rows whose
 * key starts with a prefix are exactly one range of keys in code-point
 * order, from the prefix up to the prefix with its last code point
 * incremented, so an index in that order answers a page by walking the range
 * in order and stopping after it: SQLite's idx_connector_operation_operation_id
 * (BINARY collation: UTF-8 bytes, which sort as code points), Postgres's
 * idx_connector_operation_operation_id_bytes (the key in the "C" collation,
 * migration 0015; the column's own collation is no such order).
 */
import { sql } from 'kysely';
import type { StoreContext } from '../context.js';
import { InvalidInputError } from '../errors.js';
import { requirePositiveInteger } from '../validate.js';
import { finishOperation, OPERATION_TABLE, operationAsDomain } from './row.js';
import type { ConnectorOperation } from './types.js';

/** The longest prefix accepted (an idempotency key is at most this long anyway). */
export const MAX_OPERATION_ID_PREFIX = 256;

/** Options of {@link listOperationsByIDPrefix}. */
export interface OperationIDPrefixInput {
  /** The start of the key: 1 to {@link MAX_OPERATION_ID_PREFIX} characters. */
  prefix: string;
  /** At most this many operations. */
  first: number;
}

/**
 * Every caller's operations whose idempotency key starts with `prefix`
 * (case-sensitive), in key order, then caller; at most `first`. Across
 * tenants: the API offers it to service principals only, whose visibility
 * is every row (a viewer's rows by prefix have no index in that order).
 */
export async function listOperationsByIDPrefix(store: StoreContext, input: OperationIDPrefixInput): Promise<ConnectorOperation[]> {
  const length = [...input.prefix].length;
  if (length === 0 || length > MAX_OPERATION_ID_PREFIX) throw new InvalidInputError('prefix', `must be 1 to ${MAX_OPERATION_ID_PREFIX} characters`);
  requirePositiveInteger('first', input.first);
  const upper = prefixUpperBound(input.prefix);
  // The key in code-point order: as stored on SQLite, in the "C" collation on Postgres (the index's expression).
  const key = store.dialect === 'postgres' ? sql<string>`operation_id collate "C"` : sql<string>`operation_id`;
  let query = store.db.selectFrom(OPERATION_TABLE).select(operationAsDomain).where(key, '>=', input.prefix);
  if (upper !== null) query = query.where(key, '<', upper);
  const rows = await query.orderBy(key).orderBy('caller_did').limit(input.first).execute();
  return rows.map((row) => finishOperation(row as Record<string, unknown>));
}

/**
 * The least string greater than every string that starts with `prefix`, in
 * code-point order: the prefix with its last code point incremented (a last
 * U+10FFFF is dropped and the one before incremented; surrogates, which no
 * stored text holds, are skipped). Null when every code point is U+10FFFF:
 * the range is then open above.
 */
export function prefixUpperBound(prefix: string): string | null {
  const points = [...prefix].map((char) => char.codePointAt(0)!);
  while (points.length > 0) {
    const last = points.pop()!;
    if (last < 0x10ffff) {
      const next = last + 1 === 0xd800 ? 0xe000 : last + 1;
      return String.fromCodePoint(...points, next);
    }
  }
  return null;
}
