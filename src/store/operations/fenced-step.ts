/**
 * A holder's fenced step as the API asks for it: the operation by node key as
 * the viewer sees it, the lease (version and token), the step's own values
 * and, optionally, the client's request key (issue 40 item 1).
 *
 * On Postgres the whole step is one statement: the fenced UPDATE (found by
 * node key, checked for visibility, version, token, state, lease and the
 * step's guard) in a CTE `u`, then from `u` the step's history write, the
 * request key's record and the `pg_notify` of the change. Nothing outside
 * the UPDATE writes unless it did, all of it commits together, and the
 * NOTIFY is delivered at that commit: one round trip, no BEGIN/COMMIT, no
 * read before it and no announcement after it. Only when the UPDATE matched
 * nothing is the row read, to say why (or to find the recorded answer of a
 * resent request).
 *
 * SQLite, one process on one connection, runs the same step as before: a
 * transaction of the step's statements, found by the same node key and
 * visibility.
 */
import { sql, type Kysely, type QueryCreator } from 'kysely';
import { OPERATION_COLUMNS, type Database, type OperationRow } from '../../db/tables.js';
import { notifyOperationChanged } from '../change-channel.js';
import type { StoreContext } from '../context.js';
import { NotFoundError, StaleLeaseError } from '../errors.js';
import { isUniqueViolation } from '../../db/errors.js';
import { prepared, type PreparedStatement } from '../prepared.js';
import { rowHas } from '../row-checks.js';
import { requireNonEmptyString, requireNonNegativeInteger } from '../validate.js';
import { explainFencedMiss, type FenceGuard, type FenceRule, type OperationEB, type OperationUpdate } from './fence.js';
import {
  digestInput,
  findRecordedRequest,
  recordRequest,
  replay,
  REQUEST_KEY_CONSTRAINT,
  runKeyedRequest,
  STEP_REQUEST,
  type KeyedAnswer,
  type OperationRequestStep,
  type RowAnswerCodec,
} from './requests.js';
import { OPERATION_TABLE } from './row.js';
import type { OperationFence, OperationKey } from './types.js';

/** Which operation a step acts on: its node key, and whose rows the caller may see (`null`: every row, a service). */
export interface FencedStepTarget {
  nodeKey: string;
  visibleTo: string | null;
}

/** A step's call: the target, the lease, and the client's request key with the request's fields (digested when recorded). */
export interface FencedStepCall extends FencedStepTarget {
  version: number;
  leaseToken: string;
  request?: { requestKey: string; input: Record<string, unknown> };
}

/** What a step did: the answer (recorded or new), and whether the step's own statement already announced it. */
export interface FencedStepAnswer<A> extends KeyedAnswer<A> {
  /** True when the change was announced on the database's change channel by the write itself (Postgres). */
  announced: boolean;
}

/** One fenced step: what it writes to the operation and beside it, and how its answer is kept. */
export interface FencedStepDefinition<V extends object, A> {
  step: OperationRequestStep;
  rule: FenceRule;
  set: (eb: OperationEB, values: V & { now: number }) => OperationUpdate;
  guard?: FenceGuard<V>;
  /** The step's history write from the updated row `u` (src/store/operations/history.ts, `STEP_HISTORY`). */
  history?: (qc: QueryCreator<any>, now: unknown) => { compile(): unknown };
  /** Whether the recorded answer grants the lease (a renewal keeps the token in the request's own column). */
  grantsLease: boolean;
  codec: RowAnswerCodec<A>;
  /**
   * The step as one transaction (SQLite): the existing store function on
   * the operation's key, inside the transaction `tx`.
   */
  inTransaction: (tx: StoreContext, fence: OperationFence, values: V) => Promise<A>;
}

/** Bound on rounds lost to the row changing between the statement and the read that explains it. */
const MAX_ROUNDS = 5;

/** The history's primary key: a concurrent entry of the same operation took the seq this statement read. */
const HISTORY_KEY_CONSTRAINT = 'kubun_connector_operation_history_pkey';

/** `visibleTo` may see the row: its caller or its owner; `null` sees every row. Never an index condition (row-checks.ts). */
function visibleRow(eb: OperationEB, visibleTo: unknown) {
  return eb.or([eb(eb.cast(eb.val(visibleTo), 'text'), 'is', null), rowHas(eb, 'caller_did', visibleTo as string), rowHas(eb, 'owner_did', visibleTo as string)]);
}

type StepValues = FencedStepTarget & { version: number; leaseToken: string; now: number; requestKey?: string; requestInput?: string };

/** The step's single statement (Postgres), with or without a request key's record. */
function stepStatement<V extends object, A>(definition: FencedStepDefinition<V, A>, keyed: boolean) {
  return prepared((db: Kysely<Database>, v: V & StepValues) => {
    let query: any = db.with('u', (qc) => {
      let update = qc
        .updateTable(OPERATION_TABLE)
        .set((eb) => definition.set(eb, v))
        .where('node_key', '=', v.nodeKey)
        .where((eb) => eb.and([visibleRow(eb, v.visibleTo), rowHas(eb, 'version', v.version), rowHas(eb, 'lease_token', v.leaseToken), rowHas(eb, 'state', definition.rule.states)]));
      if (definition.rule.requireLiveLease) update = update.where('lease_expires_at', '>', v.now);
      const { guard } = definition;
      if (guard !== undefined) update = update.where((eb) => guard.where(eb, v));
      return update.returning(OPERATION_COLUMNS);
    });
    const { history } = definition;
    if (history !== undefined) query = query.with('h', (qc: QueryCreator<any>) => history(qc, v.now));
    if (keyed) query = query.with('r', (qc: QueryCreator<any>) => STEP_REQUEST(qc, { requestKey: v.requestKey, step: definition.step, input: v.requestInput, now: v.now }, definition.grantsLease));
    return selectWritten(query);
  });
}

/**
 * The final SELECT of a one-statement write whose CTE `u` returned the
 * operation's row: the row, and the NOTIFY of its change, sent once per row
 * the statement wrote (none when it wrote nothing).
 */
export function selectWritten(query: any) {
  return query.selectFrom('u').select([...OPERATION_COLUMNS.map((column) => `u.${column}`), notifyOperationChanged(sql.ref('u.node_key')).as('notified')]);
}

/** The prepared statements of each definition, made on first use. */
const statements = new WeakMap<object, { plain: PreparedStatement<any, OperationRow>; keyed: PreparedStatement<any, OperationRow> }>();

function statementsOf<V extends object, A>(definition: FencedStepDefinition<V, A>) {
  let pair = statements.get(definition);
  if (pair === undefined) {
    pair = { plain: stepStatement(definition, false) as PreparedStatement<any, OperationRow>, keyed: stepStatement(definition, true) as PreparedStatement<any, OperationRow> };
    statements.set(definition, pair);
  }
  return pair;
}

/** The operation `target` names, if the caller may see it (lease token included: internal use only). */
async function selectVisibleRow(store: StoreContext, target: FencedStepTarget): Promise<OperationRow | undefined> {
  const { rows } = await SELECT_BY_NODE_KEY(store, { nodeKey: target.nodeKey });
  const row = rows[0];
  if (row === undefined) return undefined;
  return target.visibleTo === null || row.caller_did === target.visibleTo || row.owner_did === target.visibleTo ? row : undefined;
}

const SELECT_BY_NODE_KEY = prepared((db, v: { nodeKey: string }) => db.selectFrom(OPERATION_TABLE).select(OPERATION_COLUMNS).where('node_key', '=', v.nodeKey));

function requireCall(call: FencedStepCall): void {
  // An id of another type decodes to no node key: the same answer as an unknown id.
  if (call.nodeKey === '') throw new NotFoundError('operation');
  requireNonNegativeInteger('version', call.version);
  requireNonEmptyString('leaseToken', call.leaseToken);
}

/**
 * Runs `definition` for `call` with the step's `values` (validated by the
 * caller): one statement on Postgres, one transaction on SQLite (see the
 * module comment). An operation the caller may not see is a
 * {@link NotFoundError}, like one that does not exist.
 */
export async function runFencedStep<V extends object, A>(
  store: StoreContext,
  definition: FencedStepDefinition<V, A>,
  call: FencedStepCall,
  values: V,
): Promise<FencedStepAnswer<A>> {
  requireCall(call);
  if (store.dialect !== 'postgres' || store.db.isTransaction) return inOneTransaction(store, definition, call, values);
  const request = call.request === undefined ? undefined : { requestKey: call.request.requestKey, input: digestInput(call.request.input) };
  const statement = request === undefined ? statementsOf(definition).plain : statementsOf(definition).keyed;
  for (let round = 0; round < MAX_ROUNDS; round++) {
    const now = store.now();
    let row: OperationRow | undefined;
    try {
      const { rows } = await statement(store, {
        ...values,
        nodeKey: call.nodeKey,
        visibleTo: call.visibleTo,
        version: call.version,
        leaseToken: call.leaseToken,
        now,
        ...(request !== undefined && { requestKey: request.requestKey, requestInput: JSON.stringify(request.input) }),
      });
      row = rows[0];
    } catch (error) {
      // A concurrent history entry of this operation (its holder racing its own steps): nothing was
      // written. The transaction, whose statements each see what committed before them, cannot collide.
      if (isUniqueViolation(error, HISTORY_KEY_CONSTRAINT)) return inOneTransaction(store, definition, call, values);
      // The request key is recorded already: nothing was written; the recorded answer is read below.
      if (!isUniqueViolation(error, REQUEST_KEY_CONSTRAINT)) throw error;
    }
    if (row !== undefined) return { answer: definition.codec.fromRow(row, call.leaseToken), replayed: false, announced: true };
    const answer = await explainMiss(store, definition, call, values, request, now);
    if (answer !== undefined) return answer;
  }
  throw new StaleLeaseError('operation');
}

/**
 * Why the step's statement wrote nothing: the answer recorded under the
 * request key (a resend), the refusal the row deserves, the row itself when
 * the guard says it already is this step's result (recorded under the key,
 * if any), or `undefined` when the row would pass now (run again).
 */
async function explainMiss<V extends object, A>(
  store: StoreContext,
  definition: FencedStepDefinition<V, A>,
  call: FencedStepCall,
  values: V,
  request: { requestKey: string; input: Record<string, string> } | undefined,
  now: number,
): Promise<FencedStepAnswer<A> | undefined> {
  const row = await selectVisibleRow(store, call);
  if (row === undefined) throw new NotFoundError('operation');
  const key: OperationKey = { callerDID: row.caller_did, operationID: row.operation_id };
  if (request !== undefined) {
    const stored = await findRecordedRequest(store, key, request.requestKey);
    if (stored !== undefined) return { ...replay(stored, { key, ...request, step: definition.step }, request.input, definition.codec), announced: false };
  }
  explainFencedMiss(row, { key, version: call.version, leaseToken: call.leaseToken }, definition.rule, now);
  const current = definition.guard?.onMiss(row, values);
  if (current === undefined) return undefined;
  const answer = definition.codec.fromRow(current, call.leaseToken);
  if (request !== undefined) {
    const { answer: json, leaseToken } = definition.codec.encode(answer);
    const recorded = await recordRequest(store, { key, requestKey: request.requestKey, step: definition.step, input: request.input, answer: json, leaseToken });
    if (!recorded) {
      const stored = await findRecordedRequest(store, key, request.requestKey);
      if (stored !== undefined) return { ...replay(stored, { key, ...request, step: definition.step }, request.input, definition.codec), announced: false };
    }
  }
  return { answer, replayed: false, announced: false };
}

/**
 * The step as a transaction of its statements, on the key the node key
 * names: SQLite, a caller's transaction, and a Postgres statement that lost
 * its history entry's seq to a concurrent step of the same operation.
 */
async function inOneTransaction<V extends object, A>(
  store: StoreContext,
  definition: FencedStepDefinition<V, A>,
  call: FencedStepCall,
  values: V,
): Promise<FencedStepAnswer<A>> {
  const row = await selectVisibleRow(store, call);
  if (row === undefined) throw new NotFoundError('operation');
  const key: OperationKey = { callerDID: row.caller_did, operationID: row.operation_id };
  const request = call.request === undefined ? undefined : { key, requestKey: call.request.requestKey, step: definition.step, input: call.request.input };
  const keyed = await runKeyedRequest(store, request, definition.codec, (tx) => definition.inTransaction(tx, { key, version: call.version, leaseToken: call.leaseToken }, values));
  return { ...keyed, announced: false };
}
