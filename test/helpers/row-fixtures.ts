/**
 * Raw rows of every table, written and read directly (no store code), for
 * tests that set up states or check what a write left behind: finalize,
 * watches, document sweep, retention, bulk seeds. Each helper takes
 * overrides in the table's own column names. No vitest import: `bench/`
 * uses it through bulk-seed.ts.
 */
import type { Insertable } from 'kysely';
import {
  OPERATION_COLUMNS,
  type Database,
  type EntityTrimTable,
  type NewOperationRow,
  type ObservationRecordsTable,
  type ObservationRepairTable,
  type OperationRow,
  type PendingAuthTable,
  type ProjectionWatchRow,
  type ProjectionWatchTable,
  type SweepCandidateTable,
  type SweepReceiptTable,
} from '../../src/db/tables.js';
import type { StoreContext } from '../../src/store/context.js';
import type { OperationKey } from '../../src/store/operations/index.js';
import type { ProjectionWatchIdentity } from '../../src/store/projection-watches/index.js';

let counter = 0;
const unique = (prefix: string): string => `${prefix}-${++counter}`;

/** The owner of every fixture row unless a test names another. */
export const OWNER = 'did:key:z6MkOwner';
/** Another owner; sorts before {@link OWNER}. */
export const OTHER_OWNER = 'did:key:z6MkOther';
/** The caller of every fixture operation unless a test names another. */
export const CALLER = 'did:key:z6MkCaller';
/** The connector of every fixture row unless a test names another. */
export const CONNECTOR = 'google';

/**
 * The columns of a live, leased `attempted` operation (version 1) of
 * {@link CALLER} for {@link OWNER}; `overrides` replace any column. A `state`
 * override keeps the lease columns: override them too where that matters.
 */
export function operationRowValues(store: StoreContext, overrides: Partial<NewOperationRow> = {}): NewOperationRow {
  const n = ++counter;
  const now = store.now();
  return {
    caller_did: CALLER,
    operation_id: `op-${n}`,
    node_key: store.getRandomID(),
    owner_did: OWNER,
    connector_name: CONNECTOR,
    model: 'calendar.event',
    op: 'create',
    account_key: 'account-1',
    target: 'primary',
    source_id: null,
    deterministic_event_id: `event-${n}`,
    payload_hash: `hash-${n}`,
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
    incarnation: `incarnation-${n}`,
    lease_token: `lease-${n}-${store.getRandomID()}`,
    lease_expires_at: now + 30_000,
    created_at: now,
    updated_at: now,
    ...overrides,
  };
}

/** Inserts an operation row ({@link operationRowValues}) and returns it as stored. */
export async function insertOperationRow(store: StoreContext, overrides: Partial<NewOperationRow> = {}): Promise<OperationRow> {
  const values = operationRowValues(store, overrides);
  await store.db.insertInto('kubun_connector_operation').values(values).execute();
  const row = await getOperationRow(store, { callerDID: values.caller_did, operationID: values.operation_id });
  if (row === undefined) throw new Error('inserted operation row not found');
  return row;
}

/**
 * The raw operation row of an idempotency key (secrets included), or
 * undefined: its columns, not the generated ones that only key indexes (migration 0017).
 */
export async function getOperationRow(store: StoreContext, key: OperationKey): Promise<OperationRow | undefined> {
  return store.db
    .selectFrom('kubun_connector_operation')
    .select(OPERATION_COLUMNS)
    .where('caller_did', '=', key.callerDID)
    .where('operation_id', '=', key.operationID)
    .executeTakeFirst();
}

/** The idempotency key of an operation row. */
export function operationKey(row: Pick<OperationRow, 'caller_did' | 'operation_id'>): OperationKey {
  return { callerDID: row.caller_did, operationID: row.operation_id };
}

/** A watch identity of {@link OWNER} (the owner of {@link insertOperationRow}'s rows); `overrides` replace any part. */
export function watchIdentity(overrides: Partial<ProjectionWatchIdentity> = {}): ProjectionWatchIdentity {
  return {
    ownerDID: OWNER,
    connectorName: CONNECTOR,
    model: 'calendar.event',
    accountKey: 'account-1',
    sourceID: 'source-1',
    ...overrides,
  };
}

/** Every raw watch row, in a stable order. */
export async function allWatchRows(store: StoreContext): Promise<ProjectionWatchRow[]> {
  return store.db
    .selectFrom('kubun_connector_projection_watch')
    .selectAll()
    .orderBy('owner_did')
    .orderBy('connector_name')
    .orderBy('model')
    .orderBy('account_key')
    .orderBy('source_id')
    .execute();
}

/** Overwrites columns of the watch of `identity` directly (to set up states). */
export async function patchWatchRow(
  store: StoreContext,
  identity: ProjectionWatchIdentity,
  patch: Partial<Omit<ProjectionWatchRow, 'owner_did' | 'connector_name' | 'model' | 'account_key' | 'source_id'>>,
): Promise<void> {
  await store.db
    .updateTable('kubun_connector_projection_watch')
    .set(patch)
    .where('owner_did', '=', identity.ownerDID)
    .where('connector_name', '=', identity.connectorName)
    .where('model', '=', identity.model)
    .where('account_key', '=', identity.accountKey)
    .where('source_id', '=', identity.sourceID)
    .execute();
}

/** Inserts a projection watch row for `document_id`. */
export async function insertWatchRow(store: StoreContext, row: Partial<Insertable<ProjectionWatchTable>> & { document_id: string }): Promise<void> {
  const now = store.now();
  await store.db
    .insertInto('kubun_connector_projection_watch')
    .values({
      owner_did: OWNER,
      connector_name: CONNECTOR,
      model: 'model-1',
      account_key: 'account-1',
      source_id: unique('source'),
      node_key: unique('watch-node'),
      verification_status: 'pending_verification',
      created_at: now,
      updated_at: now,
      ...row,
    })
    .execute();
}

/** Inserts an entity trim row for `document_id`. */
export async function insertTrimRow(store: StoreContext, row: Partial<Insertable<EntityTrimTable>> & { document_id: string }): Promise<void> {
  await store.db
    .insertInto('kubun_connector_entity_trim')
    .values({ owner_did: OWNER, connector_name: CONNECTOR, trimmed_fields: '[]', updated_at: store.now(), ...row })
    .execute();
}

/** Inserts an observation record row naming document `id`. */
export async function insertObservationRecordRow(
  store: StoreContext,
  row: Partial<Insertable<ObservationRecordsTable>> & { id: string },
): Promise<void> {
  await store.db
    .insertInto('kubun_connector_observation_records')
    .values({ type: 'connector.observation', owner: OWNER, op_hash: unique('hash'), hlc: '0001', op_jwt: 'jwt', payload: null, ...row })
    .execute();
}

/** Inserts an observation repair row for `document_id`. */
export async function insertRepairRow(store: StoreContext, row: Partial<Insertable<ObservationRepairTable>> & { document_id: string }): Promise<void> {
  await store.db
    .insertInto('kubun_connector_observation_repair')
    .values({ owner: OWNER, fetch_hlc: '0001', decision_hlc: '0002', present: 1, value_digest: null, written_at: store.now(), ...row })
    .execute();
}

/** Inserts a sweep receipt row (uncommitted unless `committed_at` is given). */
export async function insertReceiptRow(store: StoreContext, row: Partial<Insertable<SweepReceiptTable>> = {}): Promise<Insertable<SweepReceiptTable>> {
  const values: Insertable<SweepReceiptTable> = {
    owner_did: OWNER,
    connector_name: CONNECTOR,
    partition: 'p1',
    provenance: unique('run'),
    node_key: store.getRandomID(),
    sequence: 1,
    model_id: 'model-1',
    scope: 'all',
    keep: 'seen',
    source_fetch_hlc: '0001',
    predicate: null,
    kind: 'full',
    complete: 1,
    created_at: store.now(),
    committed_at: null,
    ...row,
  };
  await store.db.insertInto('kubun_connector_sweep_receipt').values(values).execute();
  return values;
}

/** Inserts a sweep candidate row for `document_id` (its receipt need not exist). */
export async function insertCandidateRow(store: StoreContext, row: Partial<Insertable<SweepCandidateTable>> & { document_id: string }): Promise<void> {
  await store.db
    .insertInto('kubun_connector_sweep_candidate')
    .values({
      owner_did: OWNER,
      connector_name: CONNECTOR,
      partition: 'p1',
      provenance: 'run-x',
      source_id: unique('source'),
      model_id: 'model-1',
      state: 'pending',
      attempts: 0,
      updated_at: store.now(),
      ...row,
    })
    .execute();
}

/** Inserts a pending authorization row expiring at `expires_at`. */
export async function insertPendingAuthRow(store: StoreContext, row: Partial<Insertable<PendingAuthTable>> & { expires_at: number }): Promise<void> {
  await store.db
    .insertInto('kubun_connector_pending_auth')
    .values({
      state: unique('state'),
      code_verifier: 'verifier',
      provider: 'google',
      owner_did: OWNER,
      created_at: store.now(),
      redirect_url: 'http://127.0.0.1/callback',
      scopes: '[]',
      is_incremental: 0,
      ...row,
    })
    .execute();
}

/** Number of rows in `table`. */
export async function countRows(store: StoreContext, table: keyof Database): Promise<number> {
  const row = await store.db
    .selectFrom(table as 'kubun_connector_operation')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
