/** Leasing a batch of due operations at once (issue 40 item 3, SPEC §8 "Batches"). */
import { sql, type SelectQueryBuilder } from 'kysely';
import { OPERATION_COLUMNS, type Database, type OperationRow } from '../../db/tables.js';
import { notifyOperationChanged } from '../change-channel.js';
import { prepared } from '../prepared.js';
import { inTransaction, type StoreContext } from '../context.js';
import { requireIntegerInRange, requireNonEmptyString, requirePositiveMs } from '../validate.js';
import { dueOperationsQuery } from './due.js';
import { OPERATION_TABLE, rowToOperation, SEND_WINDOW_MARGIN_MS } from './row.js';
import { takeOverLease, takeoverSet } from './takeover.js';
import type { ConnectorOperation, OperationLease } from './types.js';

/** The most operations one {@link leaseDueOperations} call leases. */
export const MAX_LEASE_DUE_BATCH = 100;

/** What {@link leaseDueOperations} leases from. */
export interface LeaseDueOperationsInput {
  /** Only this connector's operations. */
  connectorName: string;
  /** Only this owner's operations. Default: every owner's the scope allows. */
  ownerDID?: string;
  /** Only operations this DID is the caller or owner of; null (the default) for every one (a service). */
  visibleTo?: string | null;
  /** At most this many (1 to {@link MAX_LEASE_DUE_BATCH}). */
  limit: number;
  /** Each lease's length in ms. */
  leaseMs: number;
}

/** One leased operation: the operation as the lease left it, and its lease (the holder's secret). */
export interface LeasedOperation {
  operation: ConnectorOperation;
  lease: OperationLease;
}

/**
 * Leases up to `limit` due operations of a connector (what
 * `listDueOperations` would list, oldest first), each as
 * `acquireOperationLease` would: version + 1, a new random token each, and an
 * attempted row with a send marker becomes `reconcile_only` (a takeover of a
 * lapsed lease). On Postgres it is one statement whose rows are taken with
 * `FOR UPDATE SKIP LOCKED`, so concurrent callers lease disjoint operations
 * instead of racing for the same ones; on SQLite one transaction. Returns
 * them oldest first; fewer than `limit` (none) when less is due.
 */
export async function leaseDueOperations(store: StoreContext, input: LeaseDueOperationsInput): Promise<LeasedOperation[]> {
  return (await leaseDueOperationsStep(store, input)).leased;
}

/**
 * {@link leaseDueOperations}, saying whether the lease's own statement
 * announced each leased operation on the change channel (`announced`: on
 * Postgres its `pg_notify`s ride in the UPDATE, delivered when it commits,
 * as a fenced step's do; SQLite's transaction announces nothing).
 */
export async function leaseDueOperationsStep(store: StoreContext, input: LeaseDueOperationsInput): Promise<{ leased: LeasedOperation[]; announced: boolean }> {
  requireNonEmptyString('connectorName', input.connectorName);
  if (input.ownerDID !== undefined) requireNonEmptyString('ownerDID', input.ownerDID);
  if (input.visibleTo != null) requireNonEmptyString('visibleTo', input.visibleTo);
  requireIntegerInRange('limit', input.limit, 1, MAX_LEASE_DUE_BATCH);
  requirePositiveMs('leaseMs', input.leaseMs);
  const now = store.now();
  const expiresAt = now + input.leaseMs;
  const onPostgres = store.dialect === 'postgres';
  const rows = onPostgres ? await leaseOnPostgres(store, input, now, expiresAt) : await leaseOnSQLite(store, input, now);
  const leased = rows
    .map(({ row, token }) => {
      const operation = rowToOperation(row);
      return { operation, lease: { token, expiresAt, version: operation.version } };
    })
    .sort((a, b) => (a.operation.nextAttemptAt ?? 0) - (b.operation.nextAttemptAt ?? 0) || (a.operation.nodeKey < b.operation.nodeKey ? -1 : a.operation.nodeKey > b.operation.nodeKey ? 1 : 0));
  return { leased, announced: onPostgres };
}

/** The due rows of the input's connector and scope, oldest first, at most `limit` (the order and index of `listDueOperations`). */
function dueInScope(store: Pick<StoreContext, 'db'>, input: LeaseDueOperationsInput, now: number, windowCutoff?: number): SelectQueryBuilder<Database, typeof OPERATION_TABLE, object> {
  let query = dueOperationsQuery(store, now, windowCutoff).where('connector_name', '=', input.connectorName);
  if (input.ownerDID !== undefined) query = query.where('owner_did', '=', input.ownerDID);
  const viewer = input.visibleTo;
  if (viewer != null) query = query.where((eb) => eb.or([eb('caller_did', '=', viewer), eb('owner_did', '=', viewer)]));
  return query.orderBy('next_attempt_at', 'asc').orderBy('node_key', 'asc').limit(input.limit);
}

type LeaseValues = LeaseDueOperationsInput & { now: number; windowCutoff: number; expiresAt: number; tokens: string[] };

/**
 * One statement: the due rows locked with `SKIP LOCKED` (a row another
 * caller is leasing right now is left to it), numbered, and each given the
 * token of its number from an array of fresh random ids drawn here (128 bits
 * each, as every lease token). A row whose lease or state changed between the
 * snapshot and its lock is re-checked against the due predicate by Postgres
 * and dropped if no longer due. Prepared per scope (an owner named or not, a
 * viewer or a service), with the table's columns written out: each runs
 * named, parsed once per connection (src/store/prepared.ts). Each leased row
 * is announced by a `pg_notify` in its RETURNING list (src/store/change-channel.ts):
 * no NOTIFY of its own after the lease.
 */
function leaseStatement(byOwner: boolean, byViewer: boolean) {
  return prepared((db, v: LeaseValues) =>
    db
      .with('picked', () =>
        dueInScope({ db }, { connectorName: v.connectorName, limit: v.limit, leaseMs: 0, ...(byOwner && { ownerDID: v.ownerDID }), ...(byViewer && { visibleTo: v.visibleTo }) }, v.now, v.windowCutoff)
          .select(['caller_did', 'operation_id'])
          .forUpdate()
          .skipLocked(),
      )
      .with('numbered', (qc) => qc.selectFrom('picked').select(['caller_did', 'operation_id', sql<number>`row_number() over ()`.as('n')]))
      .updateTable(OPERATION_TABLE)
      .from('numbered')
      .set((eb) => takeoverSet(eb as never, sql<string>`(${v.tokens}::text[])[numbered.n]`, v.expiresAt, v.now))
      .whereRef(`${OPERATION_TABLE}.caller_did`, '=', 'numbered.caller_did')
      .whereRef(`${OPERATION_TABLE}.operation_id`, '=', 'numbered.operation_id')
      .returning([...OPERATION_COLUMNS.map((column) => `${OPERATION_TABLE}.${column}` as const), notifyOperationChanged(sql.ref(`${OPERATION_TABLE}.node_key`)).as('notified')]),
  );
}

const LEASE_STATEMENTS = [leaseStatement(false, false), leaseStatement(false, true), leaseStatement(true, false), leaseStatement(true, true)];

async function leaseOnPostgres(store: StoreContext, input: LeaseDueOperationsInput, now: number, expiresAt: number) {
  const tokens = Array.from({ length: input.limit }, () => store.getRandomID());
  const statement = LEASE_STATEMENTS[(input.ownerDID !== undefined ? 2 : 0) + (input.visibleTo != null ? 1 : 0)]!;
  const { rows } = await statement(store, { ...input, now, windowCutoff: now - SEND_WINDOW_MARGIN_MS, expiresAt, tokens });
  return rows.map((row) => ({ row: row as OperationRow, token: row.lease_token as string }));
}

/** One transaction (SQLite's single connection serializes it): read the due rows, then take each over. */
async function leaseOnSQLite(store: StoreContext, input: LeaseDueOperationsInput, now: number) {
  return inTransaction(store, async (tx) => {
    const due = await dueInScope(tx, input, now).selectAll().execute();
    const taken: { row: OperationRow; token: string }[] = [];
    for (const row of due) {
      const result = await takeOverLease(tx, row, input.leaseMs, now);
      if (result !== undefined) taken.push(result);
    }
    return taken;
  });
}
