/** Point and batched reads of operations (the batched ones back the API's DataLoaders). */
import type { StoreContext } from '../context.js';
import { finishOperation, OPERATION_TABLE, operationColumns, type OperationOfShape, type OperationShape } from './row.js';
import type { ConnectorOperation, OperationKey } from './types.js';
import { alignByKey, MAX_PREPARED_KEYS } from '../node-keys.js';
import { prepared, preparedForList } from '../prepared.js';

/** The operation with this idempotency key, or `null`. */
export async function getOperationByKey(store: StoreContext, key: OperationKey): Promise<ConnectorOperation | null> {
  const { rows } = await BY_KEY(store, { callerDID: key.callerDID, operationID: key.operationID });
  return rows[0] === undefined ? null : finishOperation(rows[0] as Record<string, unknown>);
}

// The domain fields only: not the row read of the write path (selectOperationRow), which carries the lease token.
const BY_KEY = prepared((db, v: OperationKey) =>
  db.selectFrom(OPERATION_TABLE).select(operationColumns('full')).where('caller_did', '=', v.callerDID).where('operation_id', '=', v.operationID),
);

/** The operation with this node key (its public identity), or `null`. */
export async function getOperationByNodeKey(store: StoreContext, nodeKey: string): Promise<ConnectorOperation | null> {
  const [operation] = await getOperationsByNodeKeys(store, [nodeKey]);
  return operation ?? null;
}

/** A read of operations by a list of keys in `column`, per shape, prepared per number of keys up to a page's worth. */
function byKeys(column: 'node_key' | 'document_id', newestFirst: boolean) {
  const statement = (shape: OperationShape) =>
    preparedForList(MAX_PREPARED_KEYS, (db, keys: readonly string[]) => {
      const query = db.selectFrom(OPERATION_TABLE).select(operationColumns(shape)).where(column, 'in', keys);
      return newestFirst ? query.orderBy('created_at', 'desc').orderBy('node_key', 'desc') : query;
    });
  const shapes = { brief: statement('brief'), summary: statement('summary'), full: statement('full') };
  return async <S extends OperationShape>(store: StoreContext, keys: readonly string[], shape: S) => {
    const { rows } = await shapes[shape](store, keys);
    return (rows as Record<string, unknown>[]).map((row) => finishOperation(row) as OperationOfShape<S>);
  };
}

const BY_NODE_KEYS = byKeys('node_key', false);
const BY_DOCUMENT_IDS = byKeys('document_id', true);

/**
 * The operations of `nodeKeys` in one statement, aligned with the input
 * (`null` where none; a repeated key gets the same operation twice).
 * `shape` (default `full`): which fields each has ({@link OperationShape}).
 */
export async function getOperationsByNodeKeys<S extends OperationShape = 'full'>(
  store: StoreContext,
  nodeKeys: readonly string[],
  shape: S = 'full' as S,
): Promise<(OperationOfShape<S> | null)[]> {
  if (nodeKeys.length === 0) return [];
  const operations = await BY_NODE_KEYS(store, [...new Set(nodeKeys)], shape);
  return alignByKey(operations, nodeKeys, (op) => op.nodeKey, (key) => key, (op) => op);
}

/**
 * The operations naming each document, in one statement: every requested
 * document id is a key of the map (an empty array when none), each list
 * newest first (`created_at`, then `node_key`, descending). `shape`
 * (default `full`): which fields each has ({@link OperationShape}).
 */
export async function getOperationsByDocumentIDs<S extends OperationShape = 'full'>(
  store: StoreContext,
  documentIDs: readonly string[],
  shape: S = 'full' as S,
): Promise<Map<string, OperationOfShape<S>[]>> {
  const byDocument = new Map<string, OperationOfShape<S>[]>(documentIDs.map((id) => [id, []]));
  if (byDocument.size === 0) return byDocument;
  for (const op of await BY_DOCUMENT_IDS(store, [...byDocument.keys()], shape)) byDocument.get(op.documentID!)?.push(op);
  return byDocument;
}
