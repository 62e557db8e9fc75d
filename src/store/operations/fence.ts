/**
 * Fenced holder writes. Each is one conditional UPDATE guarded by the key,
 * `version = expected AND lease_token = token` (plus the write's own state
 * and lease-liveness guards) that never changes the version. When it matches
 * no row, the row is read once to say why: gone, stale lease, or wrong state.
 */
import type { Expression, ExpressionBuilder, Kysely, SqlBool, UpdateObject } from 'kysely';
import type { Database, OperationRow } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { prepared } from '../prepared.js';
import { InvalidStateError, NotFoundError, StaleLeaseError } from '../errors.js';
import { rowHas } from '../row-checks.js';
import { isLeaseLive, OPERATION_TABLE, selectOperationRow } from './row.js';
import type { ConnectorOperationState, OperationFence } from './types.js';
import { OPERATION_COLUMNS } from '../../db/tables.js';

/** An expression builder over the operation table. */
export type OperationEB = ExpressionBuilder<Database, typeof OPERATION_TABLE>;

/** When a fenced write is allowed beyond matching version and token. */
export interface FenceRule {
  /** What the write does, for error messages ("start an attempt"). */
  action: string;
  /** States the write applies to. */
  states: readonly ConnectorOperationState[];
  /**
   * Whether the lease must still be live (`lease_expires_at > now`). Writes
   * that lead to a provider request (start attempt, mark sent) and renew
   * require it; writes that report what already happened (record outcome,
   * reconcile result) and release only need the fence, because until another
   * holder takes over, the version has not moved and nobody else can act.
   */
  requireLiveLease: boolean;
}

/**
 * A condition of one write beyond its rule (issue 37: a start refused while
 * the attempt's marked send has no outcome; a second marker in one attempt),
 * with what a row failing it deserves.
 */
export interface FenceGuard<V> {
  /** Added to the statement's WHERE: the write applies only to rows where it holds. */
  where: (eb: OperationEB, values: V) => Expression<SqlBool>;
  /**
   * A row that passes the fence and the rule but failed `where`: throws the
   * refusal it deserves, or returns it when it is the answer already (a
   * replay that writes nothing), or `undefined` when it would pass now.
   */
  onMiss: (row: OperationRow, values: V) => OperationRow | undefined;
}

/** Bound on rounds lost to the row changing between read and write. */
const MAX_ROUNDS = 5;

/** What a fenced write sets. */
export type OperationUpdate = UpdateObject<Database, typeof OPERATION_TABLE>;
type OperationGuard = Expression<SqlBool>;

/** The values a fenced statement checks: the key, the expected version and token, and the time. */
interface FenceValues {
  callerDID: string;
  operationID: string;
  version: number;
  leaseToken: string;
  now: number;
}

function fencedQuery(db: Kysely<Database>, fence: FenceValues, rule: FenceRule, set: (eb: OperationEB) => OperationUpdate) {
  let query = db
    .updateTable(OPERATION_TABLE)
    .set(set)
    .where('caller_did', '=', fence.callerDID)
    .where('operation_id', '=', fence.operationID)
    // Checked on the row the key found, never a way to find it (row-checks.ts).
    .where((eb) => eb.and([rowHas(eb, 'version', fence.version), rowHas(eb, 'lease_token', fence.leaseToken), rowHas(eb, 'state', rule.states)]));
  if (rule.requireLiveLease) query = query.where('lease_expires_at', '>', fence.now);
  return query;
}

const fenceValues = (fence: OperationFence, now: number): FenceValues => ({
  callerDID: fence.key.callerDID,
  operationID: fence.key.operationID,
  version: fence.version,
  leaseToken: fence.leaseToken,
  now,
});

/**
 * A fenced UPDATE whose new values do not depend on the row, prepared
 * (src/store/prepared.ts): `set` writes `values` (and `now`) by name, and
 * may not decide anything with them. Runs it and returns the updated row.
 */
export function preparedFencedUpdate<V extends object>(
  rule: FenceRule,
  set: (eb: OperationEB, values: V & { now: number }) => OperationUpdate,
  guard?: FenceGuard<V>,
) {
  const statement = prepared((db, v: V & FenceValues) => {
    const query = fencedQuery(db, v, rule, (eb) => set(eb, v));
    return (guard === undefined ? query : query.where((eb) => guard.where(eb, v))).returning(OPERATION_COLUMNS);
  });
  return (store: StoreContext, fence: OperationFence, now: number, values: V): Promise<FencedUpdate> =>
    fencedRounds(store, fence, rule, now, async () => (await statement(store, { ...values, ...fenceValues(fence, now) })).rows[0], (row) => guard?.onMiss(row, values));
}

/** What a fenced write did: the row after it, and whether it wrote it or found its write already there (a replay). */
export interface FencedUpdate {
  row: OperationRow;
  /** True when nothing was written: the row already was this write's result (the guard's `onMiss` said so). */
  replayed: boolean;
}

/** Runs `attempt` until it updates the row, explaining (throwing) each miss the current row deserves. */
async function fencedRounds(
  store: StoreContext,
  fence: OperationFence,
  rule: FenceRule,
  now: number,
  attempt: () => Promise<OperationRow | undefined>,
  onGuardMiss: (row: OperationRow) => OperationRow | undefined,
): Promise<FencedUpdate> {
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const row = await attempt();
    if (row !== undefined) return { row, replayed: false };
    const current = await selectOperationRow(store, fence.key);
    // Throws unless the row now passes the fence and the rule (it changed back between the two statements).
    explainFencedMiss(current, fence, rule, now);
    const answer = onGuardMiss(current);
    if (answer !== undefined) return { row: answer, replayed: true };
  }
  throw new StaleLeaseError('operation');
}

/**
 * A fenced write whose new values are computed from the row: reads the row,
 * checks the fence, computes, then runs one UPDATE guarded by the fence plus
 * `guard` (the values the computation read). If only `guard` failed (the
 * holder raced its own writes), it reads and computes again.
 */
export async function fencedComputedUpdate(
  store: StoreContext,
  fence: OperationFence,
  rule: FenceRule,
  now: number,
  compute: (row: OperationRow) => { set: (eb: OperationEB) => OperationUpdate; guard: (eb: OperationEB) => OperationGuard },
): Promise<OperationRow> {
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const current = await selectOperationRow(store, fence.key);
    explainFencedMiss(current, fence, rule, now);
    const { set, guard } = compute(current);
    const row = await fencedQuery(store.db, fenceValues(fence, now), rule, set).where(guard).returningAll().executeTakeFirst();
    if (row !== undefined) return row;
  }
  throw new StaleLeaseError('operation');
}

/**
 * Throws the error a fenced write deserves given the current row; returns
 * only when the row would pass the fence and the rule.
 */
export function explainFencedMiss(row: OperationRow | undefined, fence: OperationFence, rule: FenceRule, now: number): asserts row is OperationRow {
  if (row === undefined) throw new NotFoundError('operation');
  if (Number(row.version) !== fence.version || row.lease_token !== fence.leaseToken) throw new StaleLeaseError('operation');
  if (rule.requireLiveLease && !isLeaseLive(row, now)) throw new StaleLeaseError('operation');
  if (!rule.states.includes(row.state as ConnectorOperationState)) {
    throw new InvalidStateError(`cannot ${rule.action}: operation is ${row.state} (allowed: ${rule.states.join(', ')})`);
  }
}
