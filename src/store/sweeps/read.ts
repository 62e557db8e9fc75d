/**
 * Batched reads of sweeps for the API's loaders: receipts by node key and by
 * key, checkpoints by partition, candidate counts by state, and candidate
 * pages of many receipts. Each is one statement whatever the number of keys.
 */
import { sql, type SqlBool } from 'kysely';
import type { StoreContext } from '../context.js';
import { alignByKey, alignByNodeKey } from '../node-keys.js';
import { SWEEP_CANDIDATE_ORDER, type CursorOfKeyset } from '../page.js';
import { requireNonNegativeInteger } from '../validate.js';
import { rowToSweepCandidate, rowToSweepCheckpoint, rowToSweepReceipt } from './row.js';
import {
  SWEEP_CANDIDATE_STATES,
  type SweepCandidate,
  type SweepCandidateState,
  type SweepCheckpoint,
  type SweepKey,
  type SweepReceipt,
  type SweepReceiptKey,
} from './types.js';

const receiptKeyString = (key: SweepReceiptKey) => JSON.stringify([key.ownerDID, key.connectorName, key.partition, key.provenance]);
const partitionKeyString = (key: SweepKey) => JSON.stringify([key.ownerDID, key.connectorName, key.partition]);
/** The receipt key of a receipt or candidate row, spelled like {@link receiptKeyString}. */
const receiptKeyOfRow = (row: { owner_did: string; connector_name: string; partition: string; provenance: string }) =>
  receiptKeyString({ ownerDID: row.owner_did, connectorName: row.connector_name, partition: row.partition, provenance: row.provenance });

/**
 * `(owner_did, connector_name, partition, provenance) IN ((…), …)`: a
 * row-value list both dialects match against the receipt key (the primary
 * key of receipts, the key prefix of candidates).
 */
function inReceiptKeys(keys: readonly SweepReceiptKey[]) {
  const rows = keys.map((key) => sql`(${key.ownerDID}, ${key.connectorName}, ${key.partition}, ${key.provenance})`);
  return sql<SqlBool>`(owner_did, connector_name, partition, provenance) in (${sql.join(rows)})`;
}

/** Reads many receipts by node key in one statement; aligned with `nodeKeys` (`null` where none). */
export async function getSweepReceiptsByNodeKeys(store: StoreContext, nodeKeys: readonly string[]): Promise<(SweepReceipt | null)[]> {
  if (nodeKeys.length === 0) return [];
  const rows = await store.db.selectFrom('kubun_connector_sweep_receipt').selectAll().where('node_key', 'in', [...new Set(nodeKeys)]).execute();
  return alignByNodeKey(rows, nodeKeys, rowToSweepReceipt);
}

/** Reads many receipts by key in one statement; aligned with `keys` (`null` where none). */
export async function getSweepReceiptsByKeys(store: StoreContext, keys: readonly SweepReceiptKey[]): Promise<(SweepReceipt | null)[]> {
  if (keys.length === 0) return [];
  const rows = await store.db.selectFrom('kubun_connector_sweep_receipt').selectAll().where(inReceiptKeys(keys)).execute();
  return alignByKey(rows, keys, receiptKeyOfRow, receiptKeyString, rowToSweepReceipt);
}

/** Reads the checkpoints of many partitions in one statement; aligned with `keys` (`null` before a first commit). */
export async function getSweepCheckpointsByKeys(store: StoreContext, keys: readonly SweepKey[]): Promise<(SweepCheckpoint | null)[]> {
  if (keys.length === 0) return [];
  const rows = await store.db
    .selectFrom('kubun_connector_sweep_checkpoint')
    .selectAll()
    .where(({ eb, refTuple, tuple }) =>
      eb(refTuple('owner_did', 'connector_name', 'partition'), 'in', keys.map((key) => tuple(key.ownerDID, key.connectorName, key.partition))),
    )
    .execute();
  return alignByKey(
    rows,
    keys,
    (row) => partitionKeyString({ ownerDID: row.owner_did, connectorName: row.connector_name, partition: row.partition }),
    partitionKeyString,
    rowToSweepCheckpoint,
  );
}

/** How many candidates a receipt has in each state. */
export type SweepCandidateCounts = Record<SweepCandidateState, number>;

/**
 * Candidate counts by state of many receipts in one grouped statement, read
 * through the candidate primary key (the receipt key is its prefix); aligned
 * with `keys`, every state present (zero when none).
 */
export async function countSweepCandidatesByReceiptKeys(store: StoreContext, keys: readonly SweepReceiptKey[]): Promise<SweepCandidateCounts[]> {
  const zero = (): SweepCandidateCounts => Object.fromEntries(SWEEP_CANDIDATE_STATES.map((state) => [state, 0])) as SweepCandidateCounts;
  if (keys.length === 0) return [];
  const rows = await store.db
    .selectFrom('kubun_connector_sweep_candidate')
    .select(['owner_did', 'connector_name', 'partition', 'provenance', 'state', (eb) => eb.fn.countAll<number>().as('count')])
    .where(inReceiptKeys(keys))
    .groupBy(['owner_did', 'connector_name', 'partition', 'provenance', 'state'])
    .execute();
  const byKey = new Map<string, SweepCandidateCounts>();
  for (const row of rows) {
    const key = receiptKeyOfRow(row);
    const counts = byKey.get(key) ?? zero();
    counts[row.state as SweepCandidateState] = Number(row.count);
    byKey.set(key, counts);
  }
  return keys.map((key) => byKey.get(receiptKeyString(key)) ?? zero());
}

/** A position in a receipt's candidates ({@link SWEEP_CANDIDATE_ORDER}): the candidate at a page's edge. */
export type SweepCandidateCursor = CursorOfKeyset<typeof SWEEP_CANDIDATE_ORDER>;

/** One page request applied to each of several receipts' candidates. */
export interface SweepCandidatePageRequest {
  /** Page size, 0 or more. */
  first: number;
  /** Start after this candidate (exclusive). */
  after?: SweepCandidateCursor;
  /** Only candidates in these states. Default: every state. */
  states?: readonly SweepCandidateState[];
}

/** A page of one receipt's candidates, by document id. */
export interface SweepCandidatePage {
  candidates: SweepCandidate[];
  hasMore: boolean;
}

/**
 * The same page of the candidates of many receipts, by document id, in one
 * statement: a window function numbers each receipt's candidates, so a list
 * of receipts each with its first candidates costs one read, not one per
 * receipt. Aligned with `keys`.
 */
export async function getSweepCandidatePages(
  store: StoreContext,
  keys: readonly SweepReceiptKey[],
  request: SweepCandidatePageRequest,
): Promise<SweepCandidatePage[]> {
  requireNonNegativeInteger('first', request.first);
  if (keys.length === 0) return [];
  let inner = store.db
    .selectFrom('kubun_connector_sweep_candidate')
    .selectAll()
    .select(
      sql<number>`row_number() over (partition by owner_did, connector_name, partition, provenance order by document_id)`.as('position'),
    )
    .where(inReceiptKeys(keys));
  if (request.after !== undefined) inner = inner.where(SWEEP_CANDIDATE_ORDER.beyond(SWEEP_CANDIDATE_ORDER.require('after', request.after), 'after'));
  if (request.states !== undefined) {
    if (request.states.length === 0) return keys.map(() => ({ candidates: [], hasMore: false }));
    inner = inner.where('state', 'in', [...request.states]);
  }
  const rows = await store.db
    .selectFrom(inner.as('numbered'))
    .selectAll()
    .where('position', '<=', request.first + 1)
    .orderBy('document_id')
    .execute();
  const byKey = new Map<string, SweepCandidate[]>();
  for (const row of rows) {
    const key = receiptKeyOfRow(row);
    const list = byKey.get(key) ?? [];
    list.push(rowToSweepCandidate(row));
    byKey.set(key, list);
  }
  return keys.map((key) => {
    const list = byKey.get(receiptKeyString(key)) ?? [];
    return { candidates: list.slice(0, request.first), hasMore: list.length > request.first };
  });
}
