import type { StoreContext } from '../context.js';
import { rowToProjectionWatch } from './row.js';
import type { ProjectionWatch, ProjectionWatchIdentity } from './types.js';
import { matchesIdentity } from './watch-predicates.js';
import { alignByNodeKey, MAX_PREPARED_KEYS } from '../node-keys.js';
import { preparedForList } from '../prepared.js';
import { PROJECTION_WATCH_COLUMNS } from '../../db/tables.js';

/** The watch of `identity`, or null. */
export async function getWatch(store: StoreContext, identity: ProjectionWatchIdentity): Promise<ProjectionWatch | null> {
  const row = await store.db
    .selectFrom('kubun_connector_projection_watch')
    .selectAll()
    .where(matchesIdentity(identity))
    .executeTakeFirst();
  return row === undefined ? null : rowToProjectionWatch(row);
}

/** The watch with this node key, or null. */
export async function getWatchByNodeKey(store: StoreContext, nodeKey: string): Promise<ProjectionWatch | null> {
  const row = await store.db
    .selectFrom('kubun_connector_projection_watch')
    .selectAll()
    .where('node_key', '=', nodeKey)
    .executeTakeFirst();
  return row === undefined ? null : rowToProjectionWatch(row);
}

/** Prepared per number of keys up to a page's worth (src/store/prepared.ts). */
const BY_NODE_KEYS = preparedForList(MAX_PREPARED_KEYS, (db, nodeKeys: readonly string[]) =>
  db.selectFrom('kubun_connector_projection_watch').select(PROJECTION_WATCH_COLUMNS).where('node_key', 'in', nodeKeys),
);
const BY_DOCUMENT_IDS = preparedForList(MAX_PREPARED_KEYS, (db, documentIDs: readonly string[]) =>
  db.selectFrom('kubun_connector_projection_watch').select(PROJECTION_WATCH_COLUMNS).where('document_id', 'in', documentIDs).orderBy('created_at', 'desc').orderBy('node_key', 'desc'),
);

/**
 * The watches with these node keys in one statement, aligned with `nodeKeys`
 * (null where none exists; a repeated key gets the same watch again).
 */
export async function getWatchesByNodeKeys(
  store: StoreContext,
  nodeKeys: readonly string[],
): Promise<(ProjectionWatch | null)[]> {
  if (nodeKeys.length === 0) return [];
  const { rows } = await BY_NODE_KEYS(store, [...new Set(nodeKeys)]);
  return alignByNodeKey(rows, nodeKeys, rowToProjectionWatch);
}

/**
 * The watch of a document, or null: an applied write names only its document
 * id. The unique index makes that one watch per (owner, model, document); if
 * one document id were watched under several owners or models, the most
 * recently created watch is returned.
 */
export async function getWatchByDocument(store: StoreContext, documentID: string): Promise<ProjectionWatch | null> {
  const row = await store.db
    .selectFrom('kubun_connector_projection_watch')
    .selectAll()
    .where('document_id', '=', documentID)
    .orderBy('created_at', 'desc')
    .orderBy('node_key', 'desc')
    .limit(1)
    .executeTakeFirst();
  return row === undefined ? null : rowToProjectionWatch(row);
}

/**
 * Every watch of these documents in one statement, newest first per document
 * (a document id may be watched under several owners or models); every
 * requested id is in the map, with an empty list when nothing watches it.
 * Readers that filter by viewer pick from the whole list, so another owner's
 * newer watch never hides the viewer's own.
 */
export async function getAllWatchesByDocumentIDs(store: StoreContext, documentIDs: readonly string[]): Promise<Map<string, ProjectionWatch[]>> {
  const result = new Map<string, ProjectionWatch[]>();
  for (const id of documentIDs) result.set(id, []);
  if (result.size === 0) return result;
  const { rows } = await BY_DOCUMENT_IDS(store, [...result.keys()]);
  for (const row of rows) result.get(row.document_id)?.push(rowToProjectionWatch(row));
  return result;
}

/**
 * The watches of these documents in one statement, keyed by document id
 * (absent when a document has none). Same choice as
 * {@link getWatchByDocument} when a document id has several.
 */
export async function getWatchesByDocumentIDs(
  store: StoreContext,
  documentIDs: readonly string[],
): Promise<Map<string, ProjectionWatch>> {
  const result = new Map<string, ProjectionWatch>();
  for (const [documentID, watches] of await getAllWatchesByDocumentIDs(store, documentIDs)) {
    if (watches[0] !== undefined) result.set(documentID, watches[0]);
  }
  return result;
}
