/** The receipt listing for dashboards: newest first, keyset-paged, counted. */
import type { ExpressionBuilder } from 'kysely';
import type { Database } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { countUpTo, type BoundedCount } from '../count.js';
import { ACROSS_TENANTS, NEWEST_FIRST, type NewestFirstCursor } from '../page.js';
import { rowToSweepReceipt } from './row.js';
import type { SweepReceipt } from './types.js';

/** Narrows a receipt listing; every given field must match. */
export interface SweepReceiptFilter {
  ownerDID?: string;
  connectorName?: string;
  partition?: string;
  /** true: committed receipts only; false: passes still being applied. */
  committed?: boolean;
}

/** Position in the newest-first order ({@link NEWEST_FIRST}): the last receipt of the previous page. */
export type SweepReceiptCursor = NewestFirstCursor;

/** Who sees what, and which receipts. */
export interface SweepReceiptScope {
  /** The viewer's DID: only their receipts. Null: every receipt (a service principal). */
  visibleTo: string | null;
  filter?: SweepReceiptFilter;
}

/** A page of receipts, newest first. */
export interface SweepReceiptPage {
  receipts: SweepReceipt[];
  hasMore: boolean;
}

/** Receipts the viewer may see, newest first by keyset on (created_at DESC, node_key DESC), never OFFSET; forward pages. */
export async function listSweepReceipts(
  store: StoreContext,
  options: SweepReceiptScope & { first: number; after?: SweepReceiptCursor | null },
): Promise<SweepReceiptPage> {
  let query = store.db.selectFrom('kubun_connector_sweep_receipt').selectAll().where(visibleReceipts(options));
  if (options.visibleTo === null && options.filter?.ownerDID === undefined) query = query.where(ACROSS_TENANTS);
  const page = await NEWEST_FIRST.page(query, { first: options.first, after: options.after ?? null }, rowToSweepReceipt);
  return { receipts: page.items, hasMore: page.hasMore };
}

/** How many receipts {@link listSweepReceipts} would list over all pages, up to the count cap. */
export async function countSweepReceipts(store: StoreContext, scope: SweepReceiptScope): Promise<BoundedCount> {
  return countUpTo(store, store.db.selectFrom('kubun_connector_sweep_receipt').where(visibleReceipts(scope)));
}

function visibleReceipts({ visibleTo, filter = {} }: SweepReceiptScope) {
  return (eb: ExpressionBuilder<Database, 'kubun_connector_sweep_receipt'>) => {
    const parts = [];
    if (visibleTo !== null) parts.push(eb('owner_did', '=', visibleTo));
    if (filter.ownerDID !== undefined) parts.push(eb('owner_did', '=', filter.ownerDID));
    if (filter.connectorName !== undefined) parts.push(eb('connector_name', '=', filter.connectorName));
    if (filter.partition !== undefined) parts.push(eb('partition', '=', filter.partition));
    if (filter.committed !== undefined) parts.push(eb('committed_at', filter.committed ? 'is not' : 'is', null));
    return eb.and(parts);
  };
}
