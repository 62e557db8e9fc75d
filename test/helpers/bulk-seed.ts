/**
 * Many documents' connector rows in four INSERTs, for statement-count tests
 * and benchmarks. No vitest import: `bench/` uses it too.
 */
import type { NewOperationRow } from '../../src/db/tables.js';
import type { StoreContext } from '../../src/store/context.js';
import { operationRowValues } from './row-fixtures.js';

/** What {@link seedDocumentsInBulk} wrote, in creation order. */
export interface BulkSeed {
  documentIDs: string[];
  operationNodeKeys: string[];
  watchNodeKeys: string[];
  syncStateNodeKeys: string[];
}

/**
 * Writes `count` documents of `ownerDID`, each with a committed operation
 * (called by `callerDID`, default the owner), a pending watch and a trim
 * record, plus `count` sync states (one per connector). Creation times
 * advance by 1 ms per document so listings have a stable order.
 */
export async function seedDocumentsInBulk(
  store: StoreContext,
  options: { ownerDID: string; callerDID?: string; count: number; prefix?: string },
): Promise<BulkSeed> {
  const { ownerDID, count } = options;
  const callerDID = options.callerDID ?? ownerDID;
  const prefix = options.prefix ?? 'doc';
  const now = store.now();
  const seed: BulkSeed = { documentIDs: [], operationNodeKeys: [], watchNodeKeys: [], syncStateNodeKeys: [] };
  if (count === 0) return seed;
  const operations: NewOperationRow[] = [];
  const watches = [];
  const trims = [];
  const syncStates = [];
  for (let i = 0; i < count; i++) {
    const documentID = `${prefix}-${String(i).padStart(4, '0')}`;
    const at = now + i;
    const operationKey = store.getRandomID();
    const watchKey = store.getRandomID();
    const syncKey = store.getRandomID();
    seed.documentIDs.push(documentID);
    seed.operationNodeKeys.push(operationKey);
    seed.watchNodeKeys.push(watchKey);
    seed.syncStateNodeKeys.push(syncKey);
    operations.push(
      operationRowValues(store, {
        caller_did: callerDID,
        operation_id: `${prefix}-op-${i}`,
        node_key: operationKey,
        owner_did: ownerDID,
        deterministic_event_id: `${prefix}-event-${i}`,
        payload_hash: `${prefix}-hash-${i}`,
        document_id: documentID,
        result_entity: JSON.stringify({ documentID }),
        // Committed: finished, so no lease and nothing due.
        state: 'committed',
        next_attempt_at: null,
        incarnation: store.getRandomID(),
        lease_token: null,
        lease_expires_at: null,
        created_at: at,
        updated_at: at,
      }),
    );
    watches.push({
      owner_did: ownerDID,
      connector_name: 'google',
      model: 'calendar.event',
      account_key: 'account-1',
      source_id: `source-${documentID}`,
      node_key: watchKey,
      document_id: documentID,
      verified_state_digest: null,
      observed_winner_digest: null,
      verification_status: 'pending_verification',
      verification_attempts: 0,
      repair_generation: 0,
      next_attempt_at: at,
      claimed_until: null,
      defer_reason: null,
      version: 0,
      created_at: at,
      updated_at: at,
    });
    trims.push({ document_id: documentID, owner_did: ownerDID, connector_name: 'google', trimmed_fields: '{"description":"…"}', updated_at: at });
    syncStates.push({
      connector_name: `${prefix}-connector-${i}`,
      owner_did: ownerDID,
      node_key: syncKey,
      checkpoint: null,
      last_synced_at: '',
      entity_count: 0,
      status: 'idle',
      error: null,
      lease_expires_at: null,
      recovery: null,
      version: 0,
      incarnation: store.getRandomID(),
    });
  }
  await store.db.insertInto('kubun_connector_operation').values(operations).execute();
  await store.db.insertInto('kubun_connector_projection_watch').values(watches).execute();
  await store.db.insertInto('kubun_connector_entity_trim').values(trims).execute();
  await store.db.insertInto('kubun_connector_sync_state').values(syncStates).execute();
  return seed;
}
