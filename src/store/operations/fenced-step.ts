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
import { isItemLevelFailure, isUniqueViolation } from '../../db/errors.js';
import { firstPerKey, gathered, gatheredColumn } from '../gather.js';
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
   * The Postgres type of each of the step's own values (every key of `V`):
   * a gathered batch passes each as an array, one element per call (see
   * `stepBatchStatement`).
   */
  valueTypes: { readonly [K in keyof V]-?: 'text' | 'bigint' };
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
 * A gathered batch of the step as one statement (Postgres): the calls as the
 * rows of `i` (parallel arrays unnested, numbered by `in_ord`), one fenced
 * UPDATE … FROM `i` (each operation found by its node key and checked
 * exactly as the single statement checks it), and from its rows the
 * history, the request keys' records and the NOTIFYs, as in
 * {@link stepStatement}. A call whose operation failed a check returns no
 * row and writes nothing; any error (a request key recorded already, a
 * concurrent history entry) rolls the whole statement back.
 */
function stepBatchStatement<V extends object, A>(definition: FencedStepDefinition<V, A>, keyed: boolean) {
  const types = Object.entries(definition.valueTypes) as [string, string][];
  return prepared((db: Kysely<Database>, v: Record<string, unknown> & { now: number }) => {
    const array = (values: unknown, type: string) => sql`unnest(${values}::${sql.raw(type)}[])`;
    const inputs = [
      array(v.nodeKeys, 'text').as('in_node_key'),
      array(v.visibleTo, 'text').as('in_visible_to'),
      array(v.versions, 'bigint').as('in_version'),
      array(v.leaseTokens, 'text').as('in_lease_token'),
      array(v.requestKeys, 'text').as('in_request_key'),
      array(v.requestInputs, 'text').as('in_request_input'),
      sql<number>`unnest(${v.ords}::int[])`.as('in_ord'),
      ...types.map(([name, type]) => array(v[name], type).as(gatheredColumn(name))),
    ];
    // The step's values as references to this call's row of `i`; `now` is the batch's.
    const item = Object.fromEntries([...types.map(([name]) => [name, sql.ref(`i.${gatheredColumn(name)}`)]), ['now', v.now]]) as unknown as V & StepValues;
    let query: any = db
      .with('i', (qc) => qc.selectNoFrom(inputs))
      .with('u', (qc) => {
        let update = (qc.updateTable(OPERATION_TABLE).from('i' as never) as any)
          .set((eb: OperationEB) => definition.set(eb, item))
          .where('node_key', '=', sql.ref('i.in_node_key'))
          .where((eb: OperationEB) =>
            eb.and([
              visibleRow(eb, sql.ref('i.in_visible_to')),
              rowHas(eb, 'version', sql.ref('i.in_version') as never),
              rowHas(eb, 'lease_token', sql.ref('i.in_lease_token') as never),
              rowHas(eb, 'state', definition.rule.states),
            ]),
          );
        if (definition.rule.requireLiveLease) update = update.where('lease_expires_at', '>', v.now);
        const { guard } = definition;
        if (guard !== undefined) update = update.where((eb: OperationEB) => guard.where(eb, item));
        return update.returning([...OPERATION_COLUMNS, 'i.in_ord', 'i.in_request_key', 'i.in_request_input']);
      });
    const { history } = definition;
    if (history !== undefined) query = query.with('h', (qc: QueryCreator<any>) => history(qc, v.now));
    if (keyed) {
      query = query.with('r', (qc: QueryCreator<any>) =>
        STEP_REQUEST(qc, { requestKey: sql.ref('u.in_request_key'), step: definition.step, input: sql.ref('u.in_request_input'), now: v.now }, definition.grantsLease, undefined, BATCH_COLUMNS),
      );
    }
    return query.selectFrom('u').select([...OPERATION_COLUMNS.map((column) => `u.${column}`), 'u.in_ord', notifyOperationChanged(sql.ref('u.node_key')).as('notified')]);
  });
}

/** What a batch's `u` returns beyond the operation's columns (left out of a recorded answer). */
const BATCH_COLUMNS = ['in_ord', 'in_request_key', 'in_request_input'] as const;

/**
 * The final SELECT of a one-statement write whose CTE `u` returned the
 * operation's row: the row, and the NOTIFY of its change, sent once per row
 * the statement wrote (none when it wrote nothing).
 */
export function selectWritten(query: any) {
  return query.selectFrom('u').select([...OPERATION_COLUMNS.map((column) => `u.${column}`), notifyOperationChanged(sql.ref('u.node_key')).as('notified')]);
}

/**
 * What `make` builds for a definition, with and without a request key,
 * made on first use and kept for the definition's life.
 */
function perDefinition<T>(make: (definition: FencedStepDefinition<any, unknown>, keyed: boolean) => T): (definition: object, keyed: boolean) => T {
  const made = new WeakMap<object, { plain: T; keyed: T }>();
  return (definition, keyed) => {
    let pair = made.get(definition);
    if (pair === undefined) {
      pair = { plain: make(definition as FencedStepDefinition<any, unknown>, false), keyed: make(definition as FencedStepDefinition<any, unknown>, true) };
      made.set(definition, pair);
    }
    return keyed ? pair.keyed : pair.plain;
  };
}

/** The single statement of each definition. */
const statementOf = perDefinition((definition, keyed) => stepStatement(definition, keyed) as PreparedStatement<any, OperationRow>);

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
 * module comment). On Postgres, calls of the same step made in the same turn
 * of the event loop (a batch request's items, concurrent requests) are first
 * tried together as one statement (see {@link stepBatchStatement}). An
 * operation the caller may not see is a {@link NotFoundError}, like one that
 * does not exist.
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
  const together = await gatheredStepsOf(definition, request !== undefined)(store, { call, values, requestInput: request === undefined ? null : JSON.stringify(request.input) });
  let firstRound = 0;
  if ('row' in together) return { answer: definition.codec.fromRow(together.row, call.leaseToken), replayed: false, announced: true };
  if ('missedAt' in together) {
    // The batch's statement wrote nothing for this call: why, exactly as after its own statement.
    const answer = await explainMiss(store, definition, call, values, request, together.missedAt);
    if (answer !== undefined) return answer;
    firstRound = 1;
  }
  const statement = statementOf(definition, request !== undefined);
  for (let round = firstRound; round < MAX_ROUNDS; round++) {
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

/** One call of a gathered batch of a step: the call, its values, and its request's digested input as JSON (keyed steps). */
interface GatheredStep<V> {
  call: FencedStepCall;
  values: V;
  requestInput: string | null;
}

/**
 * What a gathered batch did for one call: wrote its row (and everything the
 * step writes beside it, announced), or matched nothing at `missedAt`, or
 * left it to its own statement (`alone`: the only call, an operation named
 * twice, or a batch whose statement failed and wrote nothing).
 */
type GatheredOutcome = { row: OperationRow } | { missedAt: number } | { alone: true };

const ALONE: GatheredOutcome = { alone: true };

/** The most calls of one step in one statement. */
const MAX_GATHERED = 100;

/** The gatherer of each definition. */
const gatheredStepsOf = perDefinition(gatherSteps);

function gatherSteps<V extends object, A>(definition: FencedStepDefinition<V, A>, keyed: boolean) {
  type BatchRow = OperationRow & { in_ord: number };
  let statement: PreparedStatement<any, BatchRow> | undefined;
  return gathered<GatheredStep<V>, GatheredOutcome>(MAX_GATHERED, async (store, steps) => {
    if (steps.length === 1) return [ALONE];
    // One row per operation in an UPDATE … FROM: a second call naming the same one runs alone, after.
    const batch = firstPerKey(steps, ({ call }) => call.nodeKey);
    const outcomes: GatheredOutcome[] = steps.map(() => ALONE);
    if (batch.length === 1) return steps.map(() => ALONE);
    statement ??= stepBatchStatement(definition, keyed) as PreparedStatement<any, BatchRow>;
    const now = store.now();
    const columns: Record<string, unknown[]> = {};
    for (const name of Object.keys(definition.valueTypes)) columns[name] = batch.map((i) => (steps[i]!.values as Record<string, unknown>)[name] ?? null);
    let rows: BatchRow[];
    try {
      ({ rows } = await statement(store, {
        ...columns,
        nodeKeys: batch.map((i) => steps[i]!.call.nodeKey),
        visibleTo: batch.map((i) => steps[i]!.call.visibleTo),
        versions: batch.map((i) => steps[i]!.call.version),
        leaseTokens: batch.map((i) => steps[i]!.call.leaseToken),
        requestKeys: batch.map((i) => steps[i]!.call.request?.requestKey ?? null),
        requestInputs: batch.map((i) => steps[i]!.requestInput),
        ords: batch.map((_, k) => k + 1),
        now,
      }));
    } catch (error) {
      // Nothing was written. A failure of the database itself (a timeout, a lost connection) is every call's answer;
      // one an item can cause (a request key recorded already, a concurrent history entry, a deadlock): each call on its own.
      if (!isItemLevelFailure(error)) throw error;
      return steps.map(() => ALONE);
    }
    for (const i of batch) outcomes[i] = { missedAt: now };
    for (const row of rows) outcomes[batch[Number(row.in_ord) - 1]!] = { row };
    return outcomes;
  });
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
