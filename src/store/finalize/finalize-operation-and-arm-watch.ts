import { hash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { inTransaction, type StoreContext } from '../context.js';
import { IdempotencyConflictError } from '../errors.js';
import { firstPerKey, gathered, gatheredColumn } from '../gather.js';
import { prepared, type PreparedStatement } from '../prepared.js';
import { decodeJSONColumn, encodeJSONColumn } from '../json.js';
import { rowToOperation, selectOperationRow } from '../operations/row.js';
import { digestInput, runKeyedRequest, STEP_REQUEST, type RowAnswerCodec } from '../operations/requests.js';
import type { FencedStepAnswer } from '../operations/fenced-step.js';
import { sql, type QueryCreator } from 'kysely';
import { isItemLevelFailure, isUniqueViolation } from '../../db/errors.js';
import { CHANGE_CHANNEL, CHANGE_KIND_CODES } from '../change-channel.js';
import { newGenerationValues, newWatchValues, supersededWatches, WATCH_IDENTITY_COLUMNS, WATCH_SLOT_LOCK_CLASS, watchSlotKey } from '../projection-watches/watch-predicates.js';
import { rowToProjectionWatch } from '../projection-watches/row.js';
import type { ConnectorOperation, ConnectorOperationState } from '../operations/types.js';
import { armWatchForWrite } from '../projection-watches/arm-watch.js';
import { getWatch } from '../projection-watches/read.js';
import type { ProjectionWatch, ProjectionWatchIdentity } from '../projection-watches/types.js';
import { rowHas } from '../row-checks.js';
import { OPERATION_COLUMNS, PROJECTION_WATCH_COLUMNS, type Database, type OperationRow, type ProjectionWatchRow } from '../../db/tables.js';

/**
 * States finalize may commit from, as the reference has it: an attempt in
 * progress, or an already committed row (whose cleared lease token fails the
 * fence anyway). Never reconcile-only: that one must reconcile first.
 */
const FINALIZABLE_STATES = ['attempted', 'committed'] as const satisfies readonly ConnectorOperationState[];

/** Input of {@link finalizeOperationAndArmWatch}. */
export interface FinalizeOperationInput {
  /** The operation's idempotency key. */
  key: { callerDID: string; operationID: string };
  /** The lease epoch the holder acquired; finalize does not advance it. */
  version: number;
  /** The holder's lease token (a secret: never echoed in errors). */
  leaseToken: string;
  /** The local document the write landed in. */
  documentID: string;
  /** What the provider returned, recorded for replays (any JSON value). */
  resultEntity: unknown;
  /** Digest of the local winner the write carried; becomes the watch's observed digest. */
  currentWinnerDigest: string | null;
  /** The provider document to watch for verification. */
  watchIdentity: ProjectionWatchIdentity;
}

/** What {@link finalizeOperationAndArmWatch} did. */
export interface FinalizeOperationResult {
  /** False when the lease CAS lost: nothing at all was written. True for a replay too. */
  finalized: boolean;
  /** True when this repeated a finalize by the same holder for the same document that had already committed: nothing was written. */
  replayed: boolean;
  /** The operation as committed; null when not finalized. */
  operation: ConnectorOperation | null;
  /** The armed watch as committed with the operation; null when not finalized. */
  watch: ProjectionWatch | null;
}

/**
 * Marks a leased operation `committed` and arms the watch of the document it
 * wrote, in one transaction (SPEC §3.4):
 *
 * 1. One conditional UPDATE of the operation to `committed` (document id,
 *    result entity, `updated_at`), guarded by the key, `state IN (attempted,
 *    committed)`, `version = input.version` and `lease_token = input.leaseToken`.
 *    The version (the lease epoch) is not bumped.
 * 2. No row matched → nothing else is written: a stale lease never touches
 *    the watch. It answers `{ finalized: false }`, unless the operation is
 *    committed and was finalized by this same holder (version and lease
 *    token, kept as a digest) with the same parameters: then it is a replay
 *    (SPEC §3.4 "retries"), answering `{ finalized: true, replayed: true }`
 *    with the recorded operation and the document's watch as it is; the same
 *    holder with other parameters is an {@link IdempotencyConflictError}.
 * 3. The document's watch under any other identity is deleted: one watch per
 *    (owner, model, document).
 * 4. The watch is upserted: a new one starts `pending_verification`, attempts
 *    0, generation 0, version 0, due now, with a new node key; an existing one
 *    of the same identity opens a new generation (generation + 1, attempts 0,
 *    pending, observed digest replaced, verified digest null, due now, claim
 *    and defer reason cleared, version + 1; node key, document and
 *    `created_at` kept).
 *
 * Deliberate addition to the reference: the same UPDATE also clears the lease
 * (`lease_token` and `lease_expires_at` null), because a committed operation
 * has no holder; a digest of the token is kept to recognise replays. Of N
 * concurrent identical finalizes, one commits and arms the watch once and
 * the others (on Postgres they wait on the operation's row lock, then find
 * it committed) answer the replay: N × true. Concurrent finalizes
 * and arms of one watch identity queue on the watch row's lock; on Postgres
 * writers that may create the watch of one (owner, model, document) also
 * queue on a transaction-scoped advisory lock (see `lockDocumentWatchSlot`),
 * so a concurrent first write of a document never fails on the second unique
 * index. A lost CAS takes no lock beyond the operation row.
 */
export async function finalizeOperationAndArmWatch(
  store: StoreContext,
  input: FinalizeOperationInput,
): Promise<FinalizeOperationResult> {
  return inTransaction(store, async (tx) => {
    const now = tx.now();
    const { rows } = await COMMIT(tx, commitValues(input, now));
    const committed = rows[0];
    if (committed === undefined) return replayOf(tx, input);

    const watch = await armWatchForWrite(tx, {
      identity: input.watchIdentity,
      documentID: input.documentID,
      observedWinnerDigest: input.currentWinnerDigest,
    });
    return { finalized: true, replayed: false, operation: rowToOperation(committed), watch };
  });
}

/**
 * How a keyed finalize's answer is kept (src/store/operations/requests.ts):
 * only a finalize that committed is recorded; its replay answers
 * `replayed: true` with the operation and watch as they were committed.
 */
export const FINALIZE_ANSWER: RowAnswerCodec<FinalizeOperationResult> = {
  encode: (result) => ({ answer: result, leaseToken: null }),
  fromRow: (row, _token, parts) => ({
    finalized: true,
    replayed: false,
    operation: rowToOperation(row),
    watch: rowToProjectionWatch(parts?.watch as ProjectionWatchRow),
  }),
  decode: (answer) => ({ ...(answer as FinalizeOperationResult), replayed: true }),
  wrote: (result) => result.finalized && !result.replayed,
};

/** The values of the commit: the key, the fence, the result, and what a replay is recognised by. */
type CommitValues = {
  callerDID: string;
  operationID: string;
  version: number;
  leaseToken: string;
  documentID: string;
  resultEntity: string | null;
  now: number;
  leaseDigest: string;
  finalizedInput: string;
};

/** The commit: the holder's fenced write of the result; the committed row comes back with it (no read after commit). */
function commitUpdate(qc: QueryCreator<Database>, v: CommitValues) {
  return qc
    .updateTable('kubun_connector_operation')
    .set({
      state: 'committed',
      document_id: v.documentID,
      result_entity: v.resultEntity,
      updated_at: v.now,
      lease_token: null,
      lease_expires_at: null,
      finalized_lease_digest: v.leaseDigest,
      finalized_input: v.finalizedInput,
      last_error: null,
    })
    .where('caller_did', '=', v.callerDID)
    .where('operation_id', '=', v.operationID)
    // Checked on the row the key found, never a way to find it (row-checks.ts).
    .where((eb) =>
      eb.and([
        rowHas(eb, 'state', FINALIZABLE_STATES),
        rowHas(eb, 'version', v.version),
        rowHas(eb, 'lease_token', v.leaseToken),
        // Claimed for a document: finalized for that one only.
        eb.or([eb('document_id', 'is', null), eb('document_id', '=', v.documentID)]),
      ]),
    )
    .returning(OPERATION_COLUMNS);
}

const COMMIT = prepared((db, v: CommitValues) => commitUpdate(db, v));

/** What the single statement of a finalize takes beyond the commit's values. */
type ArmValues = ProjectionWatchIdentity & { observedWinnerDigest: string | null; watchNodeKey: string; slot: string; requestKey?: string; requestInput?: string };

/**
 * The whole finalize as one statement (Postgres): the commit (`u`); only if
 * it matched, the document's watch slot locked (`l`), the document's watch
 * under another identity deleted (`d`, after the lock), the watch created or
 * given a new generation (`w`, after the delete), the request key recorded
 * (`r`), and the NOTIFY of both nodes. Each step reads the one before it, so
 * they run in this order. One statement per shape: with and without a key.
 */
function finalizeStatement(keyed: boolean) {
  return prepared((db, v: CommitValues & ArmValues) => {
    let query: any = db
      .with('u', (qc) => commitUpdate(qc, v))
      .with('l', (qc) => qc.selectFrom('u').select(sql<null>`pg_advisory_xact_lock(${sql.lit(WATCH_SLOT_LOCK_CLASS)}, hashtext(${v.slot}))`.as('locked')))
      .with('d', (qc) => supersededWatches(qc as unknown as QueryCreator<Database>, v).where(sql<boolean>`exists (select 1 from l)`).returning('node_key') as never)
      .with('w', (qc) =>
        qc
          .insertInto('kubun_connector_projection_watch')
          .expression((eb) =>
            eb
              .selectFrom('u')
              .select(() =>
                Object.entries(newWatchValues({ identity: v, nodeKey: v.watchNodeKey, documentID: v.documentID, observedWinnerDigest: v.observedWinnerDigest, dueAt: v.now, now: v.now })).map(
                  ([column, value]) => eb.val(value).as(column),
                ),
              )
              // After the delete: the document's other watch is gone before this one arrives.
              .where(sql<boolean>`(select count(*) from d) >= 0`),
          )
          .onConflict((oc) => oc.columns([...WATCH_IDENTITY_COLUMNS]).doUpdateSet((eb) => newGenerationValues(eb, { dueAt: v.now, now: v.now, observedWinnerDigest: v.observedWinnerDigest, clearVerifiedDigest: true })))
          .returning(PROJECTION_WATCH_COLUMNS),
      );
    if (keyed) query = query.with('r', (qc: QueryCreator<any>) => STEP_REQUEST(qc, { requestKey: v.requestKey, step: 'finalizeOperation', input: v.requestInput, now: v.now }, false, { table: 'w', part: 'watch' }));
    return query
      .selectFrom(['u', 'w'])
      .select([
        ...OPERATION_COLUMNS.map((column) => `u.${column}`),
        ...PROJECTION_WATCH_COLUMNS.map((column) => sql.ref(`w.${column}`).as(`watch_${column}`)),
        sql`pg_notify(${sql.lit(CHANGE_CHANNEL)}, ${sql.lit(`${CHANGE_KIND_CODES.operation}:`)} || u.node_key || ${sql.lit(` ${CHANGE_KIND_CODES.watch}:`)} || w.node_key)`.as('notified'),
      ]);
  });
}

const FINALIZE_STATEMENTS = { plain: finalizeStatement(false), keyed: finalizeStatement(true) };

/** The watch's columns of a finalize statement's row (`watch_<column>`). */
function watchOf(row: Record<string, unknown>): ProjectionWatchRow {
  return Object.fromEntries(PROJECTION_WATCH_COLUMNS.map((column) => [column, row[`watch_${column}`]])) as unknown as ProjectionWatchRow;
}

/**
 * {@link finalizeOperationAndArmWatch} as the API's step, keyed by the
 * client's request key. On Postgres a finalize that commits is one statement
 * (see `finalizeStatement`), announced by its own NOTIFY (`announced`). One
 * that does not (a lost or replayed fence, a resent request, a concurrent
 * first watch of the same document under another identity) is judged in a
 * transaction, as {@link finalizeOperationAndArmWatch} does.
 */
export async function finalizeOperationStep(
  store: StoreContext,
  input: FinalizeOperationInput,
  request?: { requestKey: string; input: Record<string, unknown> },
): Promise<FencedStepAnswer<FinalizeOperationResult>> {
  if (store.dialect === 'postgres' && !store.db.isTransaction) {
    const requestInput = request === undefined ? undefined : JSON.stringify(digestInput(request.input));
    const together = await (request === undefined ? FINALIZE_TOGETHER.plain : FINALIZE_TOGETHER.keyed)(store, { input, requestKey: request?.requestKey, requestInput });
    if ('row' in together) return committedAnswer(together.row);
    if ('alone' in together) {
      const answer = await finalizeInOneStatement(store, input, request === undefined ? undefined : { requestKey: request.requestKey, requestInput: requestInput! });
      if (answer !== undefined) return answer;
    }
  }
  const keyed = request === undefined ? undefined : { key: input.key, requestKey: request.requestKey, step: 'finalizeOperation' as const, input: request.input };
  return { ...(await runKeyedRequest(store, keyed, FINALIZE_ANSWER, (tx) => finalizeOperationAndArmWatch(tx, input))), announced: false };
}

/** The answer of a finalize statement's row: committed, the watch armed, announced by the statement's NOTIFY. */
function committedAnswer(row: Record<string, unknown>): FencedStepAnswer<FinalizeOperationResult> {
  return {
    answer: { finalized: true, replayed: false, operation: rowToOperation(row as unknown as OperationRow), watch: rowToProjectionWatch(watchOf(row)) },
    replayed: false,
    announced: true,
  };
}

/** The values of the finalize statement for `input` at `now`. */
function finalizeValues(store: StoreContext, input: FinalizeOperationInput, now: number) {
  const identity = input.watchIdentity;
  return {
    ...commitValues(input, now),
    ...identity,
    observedWinnerDigest: input.currentWinnerDigest,
    watchNodeKey: store.getRandomID(),
    slot: watchSlotKey({ ownerDID: identity.ownerDID, model: identity.model, documentID: input.documentID }),
  };
}

/** A finalize alone as its one statement (see `finalizeStatement`); `undefined` when it committed nothing (judged in a transaction then). */
async function finalizeInOneStatement(
  store: StoreContext,
  input: FinalizeOperationInput,
  request: { requestKey: string; requestInput: string } | undefined,
): Promise<FencedStepAnswer<FinalizeOperationResult> | undefined> {
  const values = finalizeValues(store, input, store.now());
  try {
    const { rows } = request === undefined ? await FINALIZE_STATEMENTS.plain(store, values) : await FINALIZE_STATEMENTS.keyed(store, { ...values, ...request });
    const row = rows[0] as Record<string, unknown> | undefined;
    if (row !== undefined) return committedAnswer(row);
  } catch (error) {
    // Nothing was written; the transaction judges it (a recorded key's answer, another watch of the document).
    if (!isUniqueViolation(error)) throw error;
  }
  return undefined;
}

/** One finalize of a gathered batch. */
interface GatheredFinalize {
  input: FinalizeOperationInput;
  requestKey: string | undefined;
  requestInput: string | undefined;
}

/** What a gathered batch did for one finalize: committed it (`row`), matched nothing (`missed`), or left it to its own statement (`alone`). */
type FinalizeOutcome = { row: Record<string, unknown> } | { missed: true } | { alone: true };

const ALONE: FinalizeOutcome = { alone: true };

/** The most finalizes in one statement. */
const MAX_GATHERED_FINALIZES = 100;

/** Each finalize's columns in a batch, by the name of its value in the single statement, with its Postgres type. */
const FINALIZE_COLUMNS = {
  callerDID: 'text',
  operationID: 'text',
  version: 'bigint',
  leaseToken: 'text',
  documentID: 'text',
  resultEntity: 'text',
  leaseDigest: 'text',
  finalizedInput: 'text',
  ownerDID: 'text',
  connectorName: 'text',
  model: 'text',
  accountKey: 'text',
  sourceID: 'text',
  observedWinnerDigest: 'text',
  watchNodeKey: 'text',
  slot: 'text',
  requestKey: 'text',
  requestInput: 'text',
} as const;

type FinalizeColumn = keyof typeof FINALIZE_COLUMNS;

/**
 * A gathered batch of finalizes as one statement (Postgres): the calls as
 * the rows of `i` (parallel arrays unnested, numbered by `in_ord`), the
 * fenced commit of each (`u`, UPDATE … FROM `i`, checked exactly as the
 * single statement checks one), then for the committed ones the documents'
 * watch slots locked in slot order (`l`), their watches under other
 * identities deleted (`d`), their watches created or given a new generation
 * (`w`), the request keys recorded (`r`) and both nodes announced, as
 * `finalizeStatement` does for one. A finalize whose fence failed returns no
 * row and writes nothing; any error (a recorded request key, two finalizes
 * of one watch or document, a deadlock) rolls the whole statement back.
 */
function finalizeBatchStatement(keyed: boolean) {
  return prepared((db, v: Record<FinalizeColumn, unknown> & { ords: number[]; now: number }) => {
    const item = Object.fromEntries(Object.keys(FINALIZE_COLUMNS).map((name) => [name, sql.ref(`i.${gatheredColumn(name)}`)])) as unknown as CommitValues;
    const fromU = (name: FinalizeColumn) => sql.ref(`u.${gatheredColumn(name)}`);
    const sameIdentity = sql.join(
      ([['owner_did', 'ownerDID'], ['connector_name', 'connectorName'], ['model', 'model'], ['account_key', 'accountKey'], ['source_id', 'sourceID']] as const).map(
        ([column, name]) => sql`w.${sql.ref(column)} = ${fromU(name)}`,
      ),
      sql` and `,
    );
    let query: any = (db as any)
      .with('i', (qc: any) =>
        qc.selectNoFrom([
          ...Object.entries(FINALIZE_COLUMNS).map(([name, type]) => sql`unnest(${v[name as FinalizeColumn]}::${sql.raw(type)}[])`.as(gatheredColumn(name))),
          sql<number>`unnest(${v.ords}::int[])`.as('in_ord'),
        ]),
      )
      .with('u', (qc: any) =>
        (commitUpdate(qc, { ...item, now: v.now }) as any).from('i').returning([...Object.keys(FINALIZE_COLUMNS).map((name) => `i.${gatheredColumn(name)}`), 'i.in_ord']),
      )
      // Every slot locked (count reads them all), in slot order (Postgres calls a volatile function after the sort).
      .with('l', (qc: any) => qc.selectFrom('u').select(sql<null>`pg_advisory_xact_lock(${sql.lit(WATCH_SLOT_LOCK_CLASS)}, hashtext(u.in_slot))`.as('locked')).orderBy('u.in_slot'))
      .with('k', (qc: any) => qc.selectFrom('u').select(['u.in_owner_did', 'u.in_model', 'u.document_id as in_document', 'u.in_connector_name', 'u.in_account_key', 'u.in_source_id']))
      .with('d', (qc: any) =>
        qc
          .deleteFrom('kubun_connector_projection_watch')
          .using('k' as never)
          .where(sql<boolean>`(select count(*) from l) >= 0`)
          .where(sql<boolean>`owner_did = k.in_owner_did and model = k.in_model and document_id = k.in_document and (connector_name <> k.in_connector_name or account_key <> k.in_account_key or source_id <> k.in_source_id)`)
          .returning('node_key') as never,
      )
      .with('w', (qc: any) =>
        qc
          .insertInto('kubun_connector_projection_watch')
          .expression((eb: any) =>
            eb
              .selectFrom('u')
              .select(() =>
                Object.entries(
                  newWatchValues({
                    identity: { ownerDID: fromU('ownerDID'), connectorName: fromU('connectorName'), model: fromU('model'), accountKey: fromU('accountKey'), sourceID: fromU('sourceID') } as never,
                    nodeKey: fromU('watchNodeKey') as never,
                    documentID: sql.ref('u.document_id') as never,
                    observedWinnerDigest: fromU('observedWinnerDigest') as never,
                    dueAt: v.now,
                    now: v.now,
                  }),
                ).map(([column, value]) => eb.val(value).as(column)),
              )
              // After the delete: the document's other watch is gone before this one arrives.
              .where(sql<boolean>`(select count(*) from d) >= 0`),
          )
          .onConflict((oc: any) =>
            oc.columns([...WATCH_IDENTITY_COLUMNS]).doUpdateSet((eb: any) => newGenerationValues(eb, { dueAt: v.now, now: v.now, observedWinnerDigest: sql.ref('excluded.observed_winner_digest') as never, clearVerifiedDigest: true })),
          )
          .returning(PROJECTION_WATCH_COLUMNS),
      );
    const inColumns = [...Object.keys(FINALIZE_COLUMNS).map(gatheredColumn), 'in_ord'];
    if (keyed) {
      query = query.with('r', (qc: QueryCreator<any>) =>
        STEP_REQUEST(qc, { requestKey: fromU('requestKey'), step: 'finalizeOperation', input: fromU('requestInput'), now: v.now }, false, { table: 'w', part: 'watch', on: sameIdentity }, inColumns),
      );
    }
    return query
      .selectFrom(['u', 'w'])
      .where(sameIdentity)
      .select([
        ...OPERATION_COLUMNS.map((column) => `u.${column}`),
        'u.in_ord',
        ...PROJECTION_WATCH_COLUMNS.map((column) => sql.ref(`w.${column}`).as(`watch_${column}`)),
        sql`pg_notify(${sql.lit(CHANGE_CHANNEL)}, ${sql.lit(`${CHANGE_KIND_CODES.operation}:`)} || u.node_key || ${sql.lit(` ${CHANGE_KIND_CODES.watch}:`)} || w.node_key)`.as('notified'),
      ]);
  });
}

function gatherFinalizes(keyed: boolean) {
  let statement: PreparedStatement<any, Record<string, unknown>> | undefined;
  return gathered<GatheredFinalize, FinalizeOutcome>(MAX_GATHERED_FINALIZES, async (store, calls) => {
    if (calls.length === 1) return [ALONE];
    // One row per operation in an UPDATE … FROM: a second finalize of the same one runs alone, after.
    const batch = firstPerKey(calls, ({ input }) => JSON.stringify([input.key.callerDID, input.key.operationID]));
    const outcomes: FinalizeOutcome[] = calls.map(() => ALONE);
    for (const i of batch) outcomes[i] = { missed: true };
    if (batch.length === 1) return calls.map(() => ALONE);
    statement ??= finalizeBatchStatement(keyed) as PreparedStatement<any, Record<string, unknown>>;
    const now = store.now();
    const values = batch.map((i) => ({ ...finalizeValues(store, calls[i]!.input, now), requestKey: calls[i]!.requestKey ?? null, requestInput: calls[i]!.requestInput ?? null }));
    const columns = Object.fromEntries(Object.keys(FINALIZE_COLUMNS).map((name) => [name, values.map((value) => value[name as FinalizeColumn] ?? null)]));
    let rows: Record<string, unknown>[];
    try {
      ({ rows } = await statement(store, { ...columns, ords: values.map((_, k) => k + 1), now }));
    } catch (error) {
      // Nothing was written. A failure of the database itself (a timeout, a lost connection) is every finalize's answer;
      // one an item can cause: each finalize on its own (which judges a recorded key, another watch of the document).
      if (!isItemLevelFailure(error)) throw error;
      return calls.map(() => ALONE);
    }
    for (const row of rows) outcomes[batch[Number(row.in_ord) - 1]!] = { row };
    return outcomes;
  });
}

const FINALIZE_TOGETHER = { plain: gatherFinalizes(false), keyed: gatherFinalizes(true) };

/** The commit's values of `input` at `now`. */
function commitValues(input: FinalizeOperationInput, now: number): CommitValues {
  return {
    callerDID: input.key.callerDID,
    operationID: input.key.operationID,
    version: input.version,
    leaseToken: input.leaseToken,
    documentID: input.documentID,
    resultEntity: encodeJSONColumn(input.resultEntity),
    now,
    leaseDigest: leaseDigest(input.leaseToken),
    finalizedInput: JSON.stringify(finalizedInput(input)),
  };
}

/** What a finalize identifies its holder by once the commit cleared the lease: a digest, never the token. */
function leaseDigest(leaseToken: string): string {
  return hash('sha256', leaseToken, 'base64url');
}

/** What a finalize was asked with beyond the document and result the row holds (migration 0012's `finalized_input`). */
function finalizedInput(input: FinalizeOperationInput): Record<string, string | null> {
  const { ownerDID, connectorName, model, accountKey, sourceID } = input.watchIdentity;
  return { ownerDID, connectorName, model, accountKey, sourceID, currentWinnerDigest: input.currentWinnerDigest };
}

/**
 * A finalize that changed nothing. When the operation is committed and was
 * finalized by this same holder (version, lease token): a replay if every
 * parameter matches what it committed with (document, result entity, watch
 * identity, current-winner digest; the result compared as JSON values, so key
 * order does not matter), then the recorded result and the document's watch
 * as it is, and nothing is written; any other parameter is an
 * {@link IdempotencyConflictError} naming each (Stripe's rule: the same key
 * never silently drops a change). Anyone else: refused as a lost or
 * taken-over lease.
 */
async function replayOf(tx: StoreContext, input: FinalizeOperationInput): Promise<FinalizeOperationResult> {
  const row = await selectOperationRow(tx, input.key);
  // The holder, its claim naming another document than this finalize: refused, naming it (nothing was written).
  const holding =
    row !== undefined && row.state === 'attempted' && Number(row.version) === input.version && row.lease_token === input.leaseToken;
  if (holding && row.document_id !== null && row.document_id !== input.documentID) throw new IdempotencyConflictError(['documentID']);
  const sameHolder =
    row !== undefined && row.state === 'committed' && Number(row.version) === input.version && row.finalized_lease_digest === leaseDigest(input.leaseToken);
  if (!sameHolder) return { finalized: false, replayed: false, operation: null, watch: null };
  const differing: string[] = [];
  if (row.document_id !== input.documentID) differing.push('documentID');
  if (!isDeepStrictEqual(decodeJSONColumn(row.result_entity), decodeJSONColumn(encodeJSONColumn(input.resultEntity)))) differing.push('resultEntity');
  // Finalized before migration 0012: only the document and the result can be compared.
  const stored = row.finalized_input === null ? null : (JSON.parse(row.finalized_input) as Record<string, string | null>);
  if (stored !== null) {
    for (const [field, value] of Object.entries(finalizedInput(input))) if (stored[field] !== value) differing.push(field);
  }
  if (differing.length > 0) throw new IdempotencyConflictError(differing);
  return { finalized: true, replayed: true, operation: rowToOperation(row), watch: await getWatch(tx, input.watchIdentity) };
}
