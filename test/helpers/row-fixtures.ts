/**
 * Minimal rows of every table, inserted directly (no store code), for tests
 * that need another area's rows to exist: document sweep, retention.
 * Each helper takes overrides in the table's own column names.
 */
import type { Insertable } from 'kysely';
import type {
  Database,
  EntityTrimTable,
  ObservationRecordsTable,
  ObservationRepairTable,
  OperationTable,
  PendingAuthTable,
  ProjectionWatchTable,
  SweepCandidateTable,
  SweepReceiptTable,
} from '../../src/db/tables.js';
import type { StoreContext } from '../../src/store/context.js';

let counter = 0;
const unique = (prefix: string): string => `${prefix}-${++counter}`;

export const OWNER = 'did:key:z6MkOwner';
export const OTHER_OWNER = 'did:key:z6MkOther';
export const CALLER = 'did:key:z6MkCaller';
export const CONNECTOR = 'google';

/** Inserts an operation row (default: committed, naming no document). */
export async function insertOperationRow(store: StoreContext, row: Partial<Insertable<OperationTable>> = {}): Promise<Insertable<OperationTable>> {
  const now = store.now();
  const values: Insertable<OperationTable> = {
    caller_did: CALLER,
    operation_id: unique('op'),
    node_key: unique('node'),
    owner_did: OWNER,
    connector_name: CONNECTOR,
    model: 'model-1',
    op: 'create',
    account_key: 'account-1',
    target: 'calendar',
    source_id: null,
    deterministic_event_id: unique('event'),
    payload_hash: 'hash',
    reissue_intent: 'none',
    document_id: null,
    state: 'committed',
    created_at: now,
    updated_at: now,
    ...row,
  };
  await store.db.insertInto('kubun_connector_operation').values(values).execute();
  return values;
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
