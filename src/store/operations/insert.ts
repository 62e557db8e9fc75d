/** The one INSERT of a new operation, shared by claim (leased to its claimer) and enqueue (no lease). */
import { sql, type QueryCreator } from 'kysely';
import type { Database, OperationRow } from '../../db/tables.js';
import { OPERATION_COLUMNS } from '../../db/tables.js';
import { notifyOperationChanged } from '../change-channel.js';
import type { StoreContext } from '../context.js';
import { prepared } from '../prepared.js';
import { OPERATION_TABLE } from './row.js';
import type { ConnectorOperationOp } from './types.js';

/** Everything a new operation records about its write: the idempotency key and the fields a replay must repeat. */
export interface OperationWriteInput {
  callerDID: string;
  operationID: string;
  ownerDID: string;
  connectorName: string;
  model: string;
  op: ConnectorOperationOp;
  accountKey: string;
  target: string;
  /** The provider's id of the target document, when known. Default `null`. */
  sourceID?: string | null;
  /**
   * The local document the write comes from, when known up front (an update
   * or delete always knows it): stored at once, so the document sweep and
   * `hasConnectorWork` see the live write, and finalize must name the same
   * document. Default `null` (a create learns its document at finalize).
   */
  documentID?: string | null;
  deterministicEventID: string;
  payloadHash: string;
  reissueIntent: string;
  /** The longest a send of this operation may take, in ms; kept for its marks. Default `null`: each mark's, else the store's default (30 s). */
  sendTimeoutMs?: number | null;
}

/** How a new row starts: when it is first due, and its lease (claim) or none (enqueue). */
export interface NewOperationStart {
  now: number;
  nextAttemptAt: number;
  lease: { token: string; expiresAt: number } | null;
}

/** The values of a new operation's INSERT: the write, its new identities, its lease or none, and when it is first due. */
export type NewOperationValues = OperationWriteInput & {
  nodeKey: string;
  incarnation: string;
  token: string | null;
  leaseExpiresAt: number | null;
  nextAttemptAt: number;
  now: number;
};

/**
 * A new operation; nothing when the key exists (only the idempotency key may
 * conflict: a node_key collision must fail loudly, not loop). Also the CTE of
 * a claim's single statement (claim.ts).
 */
export function newOperationInsert(qc: QueryCreator<Database>, v: NewOperationValues) {
  return qc
    .insertInto(OPERATION_TABLE)
    .values(newOperationRow(v))
    .onConflict((oc) => oc.columns(['caller_did', 'operation_id']).doNothing())
    .returning(OPERATION_COLUMNS);
}

/** The columns of a new operation: `attempted`, version 0, no attempt yet. */
function newOperationRow(v: NewOperationValues) {
  return {
    caller_did: v.callerDID,
    operation_id: v.operationID,
    node_key: v.nodeKey,
    owner_did: v.ownerDID,
    connector_name: v.connectorName,
    model: v.model,
    op: v.op,
    account_key: v.accountKey,
    target: v.target,
    source_id: v.sourceID ?? null,
    document_id: v.documentID ?? null,
    deterministic_event_id: v.deterministicEventID,
    payload_hash: v.payloadHash,
    reissue_intent: v.reissueIntent,
    send_timeout_ms: v.sendTimeoutMs ?? null,
    state: 'attempted',
    attempts: 0,
    next_attempt_at: v.nextAttemptAt,
    version: 0,
    incarnation: v.incarnation,
    lease_token: v.token ?? null,
    lease_expires_at: v.leaseExpiresAt ?? null,
    created_at: v.now,
    updated_at: v.now,
  };
}

/**
 * Many new operations in one INSERT, in the order given (callers give key
 * order, so concurrent batches lock shared keys in one order); the rows of
 * keys that existed are left out of the answer. On Postgres the statement
 * announces each row it inserted (a `pg_notify` in its RETURNING list, sent
 * when the transaction commits, never if it rolls back): `announced`.
 */
export async function insertOperations(store: StoreContext, values: readonly NewOperationValues[]): Promise<{ rows: OperationRow[]; announced: boolean }> {
  if (values.length === 0) return { rows: [], announced: false };
  if (store.dialect === 'postgres') {
    // One named statement whatever the batch's size: each column one array, unnested in the order given.
    const columns = Object.fromEntries(UNNESTED_COLUMNS.map(([column]) => [column, [] as unknown[]]));
    for (const value of values) {
      const row = newOperationRow(value) as Record<string, unknown>;
      for (const [column] of UNNESTED_COLUMNS) columns[column]!.push(row[column]);
    }
    const { rows } = await INSERT_OPERATIONS(store, { ...columns, now: values[0]!.now });
    return { rows, announced: true };
  }
  const rows = await store.db
    .insertInto(OPERATION_TABLE)
    .values(values.map(newOperationRow))
    .onConflict((oc) => oc.columns(['caller_did', 'operation_id']).doNothing())
    .returning(OPERATION_COLUMNS)
    .execute();
  return { rows, announced: false };
}

/** The columns of a new operation that differ per row, with their Postgres types; the others are constants of the batch. */
const UNNESTED_COLUMNS = [
  ['caller_did', 'text'],
  ['operation_id', 'text'],
  ['node_key', 'text'],
  ['owner_did', 'text'],
  ['connector_name', 'text'],
  ['model', 'text'],
  ['op', 'text'],
  ['account_key', 'text'],
  ['target', 'text'],
  ['source_id', 'text'],
  ['document_id', 'text'],
  ['deterministic_event_id', 'text'],
  ['payload_hash', 'text'],
  ['reissue_intent', 'text'],
  ['send_timeout_ms', 'bigint'],
  ['next_attempt_at', 'bigint'],
  ['incarnation', 'text'],
  ['lease_token', 'text'],
  ['lease_expires_at', 'bigint'],
] as const;

/**
 * Many new operations as one statement (Postgres): each column's values as
 * an array, unnested `with ordinality` and inserted in that order (key
 * order: concurrent batches lock shared keys in one order), `now` and the
 * new row's constants once for all.
 */
const INSERT_OPERATIONS = prepared((db, v: Record<string, unknown> & { now: number }) => {
  const names = UNNESTED_COLUMNS.map(([column]) => column);
  const arrays = sql.join(UNNESTED_COLUMNS.map(([column, type]) => sql`${v[column]}::${sql.raw(type)}[]`));
  const source = sql<Record<string, unknown>>`unnest(${arrays}) with ordinality`.as(sql`i(${sql.join(names.map((name) => sql.ref(name)))}, ord)` as never);
  return db
    .insertInto(OPERATION_TABLE)
    .columns([...names, 'state', 'attempts', 'version', 'created_at', 'updated_at'])
    .expression(
      db
        .selectFrom(source)
        .select([...names.map((name) => sql.ref(`i.${name}`).as(name)), sql.lit('attempted').as('state'), sql.lit(0).as('attempts'), sql.lit(0).as('version'), sql`${v.now}::bigint`.as('created_at'), sql`${v.now}::bigint`.as('updated_at')])
        .orderBy(sql.ref('i.ord')) as never,
    )
    .onConflict((oc) => oc.columns(['caller_did', 'operation_id']).doNothing())
    // Evaluated for the rows inserted only: a key that existed is not announced.
    .returning([...OPERATION_COLUMNS, notifyOperationChanged(sql.ref('node_key')).as('notified')]);
});

const INSERT_OPERATION = prepared((db, v: NewOperationValues) => newOperationInsert(db, v));

/** The values of `write`'s INSERT started as `start`, with a new node key and incarnation. */
export function newOperationValues(store: StoreContext, write: OperationWriteInput, start: NewOperationStart): NewOperationValues {
  return {
    ...write,
    nodeKey: store.getRandomID(),
    incarnation: store.getRandomID(),
    token: start.lease?.token ?? null,
    leaseExpiresAt: start.lease?.expiresAt ?? null,
    nextAttemptAt: start.nextAttemptAt,
    now: start.now,
  };
}

/**
 * Inserts the operation `write` as `attempted`, version 0, with a new node
 * key and incarnation, due at `start.nextAttemptAt`, leased or not. Returns
 * the row, or `undefined` when its idempotency key already exists.
 */
export async function insertOperation(store: StoreContext, write: OperationWriteInput, start: NewOperationStart): Promise<OperationRow | undefined> {
  const { rows } = await INSERT_OPERATION(store, newOperationValues(store, write, start));
  return rows[0];
}
