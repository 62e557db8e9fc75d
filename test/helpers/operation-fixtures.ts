/**
 * Operation rows written straight into `kubun_connector_operation`, so tests
 * of finalize and watches need nothing from the operations module.
 * (Owned by the finalize / projection-watches tests.)
 */
import type { NewOperationRow, OperationRow } from '../../src/db/tables.js';
import type { StoreContext } from '../../src/store/context.js';

let sequence = 0;

/** Inserts a live, leased `attempted` operation (version 1); `overrides` replace any column. */
export async function insertOperationRow(store: StoreContext, overrides: Partial<NewOperationRow> = {}): Promise<OperationRow> {
  sequence += 1;
  const now = store.now();
  const values: NewOperationRow = {
    caller_did: 'did:key:zCaller',
    operation_id: `op-${sequence}`,
    node_key: store.getRandomID(),
    owner_did: 'did:key:zOwner',
    connector_name: 'google',
    model: 'calendar.event',
    op: 'create',
    account_key: 'account-1',
    target: 'primary',
    source_id: null,
    deterministic_event_id: `event-${sequence}`,
    payload_hash: `hash-${sequence}`,
    reissue_intent: 'none',
    provider_etag: null,
    document_id: null,
    result_entity: null,
    state: 'attempted',
    attempts: 1,
    next_attempt_at: now,
    defer_reason: null,
    send_marker: null,
    last_kind: null,
    last_http_status: null,
    version: 1,
    incarnation: `incarnation-${sequence}`,
    lease_token: `lease-${sequence}-${store.getRandomID()}`,
    lease_expires_at: now + 30_000,
    created_at: now,
    updated_at: now,
    ...overrides,
  };
  await store.db.insertInto('kubun_connector_operation').values(values).execute();
  const row = await getOperationRow(store, { callerDID: values.caller_did, operationID: values.operation_id });
  if (row === undefined) throw new Error('inserted operation row not found');
  return row;
}

/** The raw operation row of an idempotency key, or undefined. */
export async function getOperationRow(
  store: StoreContext,
  key: { callerDID: string; operationID: string },
): Promise<OperationRow | undefined> {
  return store.db
    .selectFrom('kubun_connector_operation')
    .selectAll()
    .where('caller_did', '=', key.callerDID)
    .where('operation_id', '=', key.operationID)
    .executeTakeFirst();
}

/** The idempotency key of an operation row. */
export function operationKey(row: Pick<OperationRow, 'caller_did' | 'operation_id'>): { callerDID: string; operationID: string } {
  return { callerDID: row.caller_did, operationID: row.operation_id };
}
