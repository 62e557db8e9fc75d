/**
 * Row types of every connector-store table, as the database holds them:
 * snake_case columns, ms-epoch integers as numbers (the pg pool parses int8),
 * JSON as text, booleans as 0/1. Store modules map rows to domain types; no
 * code outside `src/store` sees these shapes.
 */
import type { Generated, Insertable, Selectable, Updateable } from 'kysely';

export interface SyncStateTable {
  connector_name: string;
  owner_did: string;
  node_key: string;
  checkpoint: string | null;
  last_synced_at: string;
  entity_count: Generated<number>;
  status: string;
  error: string | null;
  lease_expires_at: number | null;
  recovery: string | null;
  version: Generated<number>;
  incarnation: string | null;
  /** When the store last wrote this state's progress (migration 0007), ms epoch. */
  progressed_at: number | null;
}

export interface PendingAuthTable {
  state: string;
  code_verifier: string;
  provider: string;
  owner_did: string;
  owner_wrappable_did: string | null;
  controller_wrappable_did: string | null;
  created_at: number;
  redirect_url: string;
  scopes: string;
  is_incremental: number;
  expires_at: number;
}

export interface OperationTable {
  caller_did: string;
  operation_id: string;
  node_key: string;
  owner_did: string;
  connector_name: string;
  model: string;
  op: string;
  account_key: string;
  target: string;
  source_id: string | null;
  deterministic_event_id: string;
  payload_hash: string;
  reissue_intent: string;
  provider_etag: string | null;
  document_id: string | null;
  result_entity: string | null;
  state: string;
  attempts: Generated<number>;
  next_attempt_at: number | null;
  defer_reason: string | null;
  send_marker: string | null;
  last_kind: string | null;
  last_http_status: number | null;
  version: Generated<number>;
  incarnation: string | null;
  lease_token: string | null;
  lease_expires_at: number | null;
  /** SHA-256 (base64url) of the lease token that finalized the operation (migration 0003): recognises a replayed finalize. */
  finalized_lease_digest: Generated<string | null>;
  /** What finalized it (migration 0012): the watch identity and current-winner digest as JSON; null before the commit, and for rows finalized before 0012. */
  finalized_input: Generated<string | null>;
  /** The message of the latest recorded outcome (migration 0005), bounded and redacted; null when none or after a commit. */
  last_error: Generated<string | null>;
  /** The longest a send may take, chosen at claim (migration 0013); null: the mark's, or the store's default. */
  send_timeout_ms: Generated<number | null>;
  /** When the marked send must have ended (migration 0013): set by mark-sent, cleared with the marker. */
  send_deadline_at: Generated<number | null>;
  created_at: number;
  updated_at: number;
}

/**
 * How many operations have one combination of the counted columns (migration
 * 0004), kept by triggers on the operations table; '' stands for an absent
 * last kind or defer reason; `shard` spreads one combination over 8 rows.
 */
export interface OperationCountTable {
  caller_did: string;
  owner_did: string;
  connector_name: string;
  model: string;
  state: string;
  last_kind: string;
  defer_reason: string;
  shard: number;
  n: number;
}

/** {@link OperationCountTable} without caller and owner (migration 0004): a service's counts over everyone; 32 shards. */
export interface OperationTotalTable {
  connector_name: string;
  model: string;
  state: string;
  last_kind: string;
  defer_reason: string;
  shard: number;
  n: number;
}

/**
 * What happened to operations in one UTC hour (migration 0011), kept by
 * triggers: `outcome` is 'committed' or a recorded outcome kind; `hour` the
 * hour's start (ms epoch); `shard` spreads one hour over 8 rows. Never
 * decremented; retention prunes old hours.
 */
export interface OperationActivityTable {
  caller_did: string;
  hour: number;
  owner_did: string;
  connector_name: string;
  outcome: string;
  shard: number;
  n: number;
}

/** {@link OperationActivityTable} without caller and owner (migration 0011): a service's series over everyone; 16 shards. */
export interface OperationActivityTotalTable {
  hour: number;
  connector_name: string;
  outcome: string;
  shard: number;
  n: number;
}

/** The due backlog counted at the start of one sampling slot (migration 0011); `capped`: 1 when the count stopped at the cap. */
export interface BacklogSampleTable {
  sampled_at: number;
  due: number;
  capped: number;
}

/** One attempt of an operation (migration 0005), newest has the highest `seq`. */
export interface OperationHistoryTable {
  caller_did: string;
  operation_id: string;
  seq: number;
  /** 'attempt', or the operator action: 'retry', 'cancel', 'requeue'. */
  kind: string;
  /** The operation's attempt counter when this attempt started. */
  attempt: number;
  started_at: number;
  sent_at: number | null;
  ended_at: number | null;
  /** The recorded outcome kind; null while the attempt is open. */
  outcome: string | null;
  http_status: number | null;
  retry_after_ms: number | null;
  defer_reason: string | null;
  message: string | null;
  actor_did: string | null;
}

/**
 * One keyed request of the write-back protocol that wrote something
 * (migration 0013): what it was and what it answered, so the same request
 * resent after a lost answer is answered again without writing.
 */
export interface OperationRequestTable {
  caller_did: string;
  operation_id: string;
  /** The client's key for this request, unique per operation. */
  request_key: string;
  /** Which mutation it was ('claim', 'start', …). */
  step: string;
  /** JSON: a digest of each input field (secrets never in the clear). */
  input: string;
  /** JSON: the answer (no secret). */
  answer: string;
  /** The lease a claim or acquire granted (a secret, never listed). */
  lease_token: string | null;
  created_at: number;
}

export interface ProjectionWatchTable {
  owner_did: string;
  connector_name: string;
  model: string;
  account_key: string;
  source_id: string;
  node_key: string;
  document_id: string;
  verified_state_digest: string | null;
  observed_winner_digest: string | null;
  verification_status: string;
  verification_attempts: Generated<number>;
  repair_generation: Generated<number>;
  next_attempt_at: number | null;
  claimed_until: number | null;
  defer_reason: string | null;
  version: Generated<number>;
  created_at: number;
  updated_at: number;
}

export interface ObservationRecordsTable {
  type: string;
  owner: string;
  id: string;
  op_hash: string;
  hlc: string;
  op_jwt: string;
  payload: Uint8Array | null;
}

export interface ObservationRepairTable {
  document_id: string;
  owner: string;
  fetch_hlc: string;
  decision_hlc: string;
  present: number;
  value_digest: string | null;
  written_at: number;
}

export interface EntityTrimTable {
  document_id: string;
  owner_did: string;
  connector_name: string;
  trimmed_fields: string;
  updated_at: number;
}

export interface SweepReceiptTable {
  owner_did: string;
  connector_name: string;
  partition: string;
  provenance: string;
  /** Public identity for the API (migration 0002); always written by the store. */
  node_key: string;
  sequence: number;
  model_id: string;
  scope: string;
  keep: string;
  source_fetch_hlc: string;
  predicate: string | null;
  kind: string;
  complete: number;
  created_at: number;
  committed_at: number | null;
  /** Digest of the candidate list as recorded (migration 0012); null for receipts recorded before it. */
  candidates_digest: Generated<string | null>;
}

export interface SweepCandidateTable {
  owner_did: string;
  connector_name: string;
  partition: string;
  provenance: string;
  document_id: string;
  source_id: string;
  model_id: string;
  state: string;
  attempts: number;
  apply_failures: Generated<number>;
  last_error: string | null;
  next_attempt_at: Generated<number>;
  updated_at: number;
}

export interface SweepCheckpointTable {
  owner_did: string;
  connector_name: string;
  partition: string;
  provenance: string;
  receipt_sequence: number;
  updated_at: number;
}

/** The whole database as Kysely sees it. */
/** Change events of writes made outside the server, on SQLite only (migration 0014). */
export interface ChangeOutboxTable {
  seq: Generated<number>;
  /** The events, encoded as the Postgres change feed's NOTIFY payload. */
  payload: string;
  created_at: number;
}

export interface Database {
  kubun_connector_sync_state: SyncStateTable;
  kubun_connector_pending_auth: PendingAuthTable;
  kubun_connector_operation: OperationTable;
  kubun_connector_operation_count: OperationCountTable;
  kubun_connector_operation_total: OperationTotalTable;
  kubun_connector_operation_history: OperationHistoryTable;
  kubun_connector_operation_request: OperationRequestTable;
  kubun_connector_change_outbox: ChangeOutboxTable;
  kubun_connector_operation_activity: OperationActivityTable;
  kubun_connector_operation_activity_total: OperationActivityTotalTable;
  kubun_connector_backlog_sample: BacklogSampleTable;
  kubun_connector_projection_watch: ProjectionWatchTable;
  kubun_connector_observation_records: ObservationRecordsTable;
  kubun_connector_observation_repair: ObservationRepairTable;
  kubun_connector_entity_trim: EntityTrimTable;
  kubun_connector_sweep_receipt: SweepReceiptTable;
  kubun_connector_sweep_candidate: SweepCandidateTable;
  kubun_connector_sweep_checkpoint: SweepCheckpointTable;
}

export type SyncStateRow = Selectable<SyncStateTable>;
export type PendingAuthRow = Selectable<PendingAuthTable>;
export type OperationRow = Selectable<OperationTable>;
export type OperationHistoryRow = Selectable<OperationHistoryTable>;
export type OperationRequestRow = Selectable<OperationRequestTable>;
export type NewOperationRow = Insertable<OperationTable>;
export type OperationUpdate = Updateable<OperationTable>;
export type ProjectionWatchRow = Selectable<ProjectionWatchTable>;
export type ObservationRecordRow = Selectable<ObservationRecordsTable>;
export type ObservationRepairRow = Selectable<ObservationRepairTable>;
export type EntityTrimRow = Selectable<EntityTrimTable>;
export type SweepReceiptRow = Selectable<SweepReceiptTable>;
export type SweepCandidateRow = Selectable<SweepCandidateTable>;
export type SweepCheckpointRow = Selectable<SweepCheckpointTable>;

/**
 * A table's columns written out, checked complete against its row type when
 * compiled: a column missing from `columns` makes the call a type error.
 * A statement the store prepares lists these instead of `*`, so a migration
 * that adds a column leaves its result as it was and Postgres may keep it
 * parsed (src/db/named-statements.ts).
 */
function everyColumnOf<T>() {
  return <const C extends readonly (keyof T & string)[]>(columns: C & ([Exclude<keyof T, C[number]>] extends [never] ? unknown : { missing: Exclude<keyof T, C[number]> })): C => columns;
}

/** Every column of `kubun_connector_operation`. */
export const OPERATION_COLUMNS = everyColumnOf<OperationTable>()([
  'caller_did', 'operation_id', 'node_key', 'owner_did', 'connector_name', 'model', 'op', 'account_key', 'target', 'source_id',
  'deterministic_event_id', 'payload_hash', 'reissue_intent', 'provider_etag', 'document_id', 'result_entity', 'state', 'attempts',
  'next_attempt_at', 'defer_reason', 'send_marker', 'last_kind', 'last_http_status', 'version', 'incarnation', 'lease_token',
  'lease_expires_at', 'finalized_lease_digest', 'finalized_input', 'last_error', 'send_timeout_ms', 'send_deadline_at', 'created_at', 'updated_at',
]);

/** Every column of `kubun_connector_projection_watch`. */
export const PROJECTION_WATCH_COLUMNS = everyColumnOf<ProjectionWatchTable>()([
  'owner_did', 'connector_name', 'model', 'account_key', 'source_id', 'node_key', 'document_id', 'verified_state_digest',
  'observed_winner_digest', 'verification_status', 'verification_attempts', 'repair_generation', 'next_attempt_at', 'claimed_until',
  'defer_reason', 'version', 'created_at', 'updated_at',
]);

/** Every column of `kubun_connector_entity_trim`. */
export const ENTITY_TRIM_COLUMNS = everyColumnOf<EntityTrimTable>()(['document_id', 'owner_did', 'connector_name', 'trimmed_fields', 'updated_at']);

/** Every column of `kubun_connector_sweep_candidate`. */
export const SWEEP_CANDIDATE_COLUMNS = everyColumnOf<SweepCandidateTable>()([
  'owner_did', 'connector_name', 'partition', 'provenance', 'document_id', 'source_id', 'model_id', 'state', 'attempts', 'apply_failures',
  'last_error', 'next_attempt_at', 'updated_at',
]);

/** Every column of `kubun_connector_observation_records`. */
export const OBSERVATION_RECORD_COLUMNS = everyColumnOf<ObservationRecordsTable>()(['type', 'owner', 'id', 'op_hash', 'hlc', 'op_jwt', 'payload']);

/** Every column of `kubun_connector_observation_repair`. */
export const OBSERVATION_REPAIR_COLUMNS = everyColumnOf<ObservationRepairTable>()(['document_id', 'owner', 'fetch_hlc', 'decision_hlc', 'present', 'value_digest', 'written_at']);
