/** Point and batched reads of operations (the batched ones back the API's DataLoaders). */
import type { StoreContext } from '../context.js';
import { OPERATION_TABLE, rowToOperation, selectOperationRow } from './row.js';
import type { ConnectorOperation, OperationKey } from './types.js';
import { alignByNodeKey, MAX_PREPARED_KEYS } from '../node-keys.js';
import { preparedForList } from '../prepared.js';
import { OPERATION_COLUMNS } from '../../db/tables.js';

/** The operation with this idempotency key, or `null`. */
export async function getOperationByKey(store: StoreContext, key: OperationKey): Promise<ConnectorOperation | null> {
  const row = await selectOperationRow(store, key);
  return row === undefined ? null : rowToOperation(row);
}

/** The operation with this node key (its public identity), or `null`. */
export async function getOperationByNodeKey(store: StoreContext, nodeKey: string): Promise<ConnectorOperation | null> {
  const { rows } = await BY_NODE_KEYS(store, [nodeKey]);
  return rows[0] === undefined ? null : rowToOperation(rows[0]);
}

/** Prepared per number of keys up to a page's worth (a mutation's node argument is one). */
const BY_NODE_KEYS = preparedForList(MAX_PREPARED_KEYS, (db, nodeKeys: readonly string[]) => db.selectFrom(OPERATION_TABLE).select(OPERATION_COLUMNS).where('node_key', 'in', nodeKeys));

/**
 * The operations of `nodeKeys` in one statement, aligned with the input
 * (`null` where none; a repeated key gets the same operation twice).
 */
export async function getOperationsByNodeKeys(store: StoreContext, nodeKeys: readonly string[]): Promise<(ConnectorOperation | null)[]> {
  if (nodeKeys.length === 0) return [];
  const { rows } = await BY_NODE_KEYS(store, [...new Set(nodeKeys)]);
  return alignByNodeKey(rows, nodeKeys, rowToOperation);
}

/** Prepared per number of documents up to a page's worth, newest first. */
const BY_DOCUMENT_IDS = preparedForList(MAX_PREPARED_KEYS, (db, documentIDs: readonly string[]) =>
  db.selectFrom(OPERATION_TABLE).select(OPERATION_COLUMNS).where('document_id', 'in', documentIDs).orderBy('created_at', 'desc').orderBy('node_key', 'desc'),
);

/**
 * The operations naming each document, in one statement: every requested
 * document id is a key of the map (an empty array when none), each list
 * newest first (`created_at`, then `node_key`, descending).
 */
export async function getOperationsByDocumentIDs(
  store: StoreContext,
  documentIDs: readonly string[],
): Promise<Map<string, ConnectorOperation[]>> {
  const byDocument = new Map<string, ConnectorOperation[]>(documentIDs.map((id) => [id, []]));
  if (byDocument.size === 0) return byDocument;
  const { rows } = await BY_DOCUMENT_IDS(store, [...byDocument.keys()]);
  for (const row of rows) byDocument.get(row.document_id as string)?.push(rowToOperation(row));
  return byDocument;
}
