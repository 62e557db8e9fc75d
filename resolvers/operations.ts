/**
 * Thin resolvers of the operation API: check who may act, call the store,
 * shape the payload, announce what committed. No SQL here.
 */
import { IdempotencyConflictError, InvalidInputError, InvalidStateError, NotFoundError } from '../src/store/errors.js';
import { ForbiddenError } from './errors.js';
import { finalizeOperationStep } from '../src/store/finalize/index.js';
import * as operations from '../src/store/operations/index.js';
import type { ConnectorOperation, ConnectorOperationState, OperationLease } from '../src/store/operations/index.js';
import { hasOfflineWatches, resumeOfflineWatches, type ProjectionWatch } from '../src/store/projection-watches/index.js';
import type { GraphQLContext } from './context.js';
import { ATTEMPT_HISTORY_ORDER, NEWEST_FIRST } from '../src/store/page.js';
import { ConnectionCursors, forwardPageRequest, pageRequest, toConnection, type ConnectionArgs } from './pagination.js';
import { createContextCache } from '@pothos/core';
import DataLoader from 'dataloader';
import type { GraphQLResolveInfo } from 'graphql';
import { announce, announceAll, statementAnnounced } from './changes.js';
import { selectedFieldNames } from './selection.js';
import { actingOwner, canSeeOperation, canSeeOwned, viewerDID, visibilityScope } from './viewer.js';

/** Cursors of `operations`: they name the connection, so another list's cursor is refused. */
const OPERATION_CURSORS = new ConnectionCursors('operations', NEWEST_FIRST);

/** Cursors of `attemptHistory`: they name the connection, so another list's cursor is refused. */
const ATTEMPT_HISTORY_CURSORS = new ConnectionCursors('attemptHistory', ATTEMPT_HISTORY_ORDER);

export {
  MAX_BULK_ACTION,
  MAX_ENQUEUE_BATCH,
  MAX_LEASE_DUE_BATCH,
  MAX_OPERATION_ID_PREFIX,
  OPERATION_DEFER_REASONS,
  OPERATION_OPS,
  OPERATION_OUTCOME_KINDS,
  OPERATION_STATES,
  type ClaimOperationResult,
  type ConnectorOperation,
  type EnqueueOperationResult,
  type LeasedOperation,
  type OperationLease,
} from '../src/store/operations/index.js';


/** Batch loader of the `ConnectorOperation` node: invisible rows come back as null, like missing ones. */
export async function loadOperationsByNodeKeys(nodeKeys: readonly string[], ctx: GraphQLContext): Promise<(ConnectorOperation | null)[]> {
  const rows = await operations.getOperationsByNodeKeys(ctx.store, nodeKeys);
  return rows.map((op) => (op !== null && canSeeOperation(ctx.viewer, op) ? op : null));
}

/** The request's loaders of operation nodes for `node` and `nodes`, one per shape read (each its own statement). */
const operationNodeLoaders = createContextCache(() => new Map<operations.OperationShape, DataLoader<string, ConnectorOperation | null>>());

/**
 * `node` and `nodes` for operations: the visible operations of `nodeKeys`
 * (null where missing or invisible), read with the columns the selection
 * on `ConnectorOperation` needs, batched per request and shape. Mutations
 * load their operation whole, through the node type's own loader.
 */
export function loadOperationNodes(nodeKeys: readonly string[], ctx: GraphQLContext, info: GraphQLResolveInfo): Promise<(ConnectorOperation | null)[]> {
  const shape = selectedOperationShape(info);
  const loaders = operationNodeLoaders(ctx);
  let loader = loaders.get(shape);
  if (loader === undefined) {
    loader = new DataLoader(async (keys: readonly string[]) => {
      const rows = await operations.getOperationsByNodeKeys(ctx.store, keys, shape);
      return answering(rows.map((op) => (op !== null && canSeeOperation(ctx.viewer, op) ? op : null)));
    }, { maxBatchSize: 500 });
    loaders.set(shape, loader);
  }
  return Promise.all(nodeKeys.map((key) => loader.load(key)));
}

/** Batch loader of a document's visible operations, newest first, with the fields of `shape`. */
export async function loadOperationsByDocumentIDs(documentIDs: readonly string[], ctx: GraphQLContext, shape: operations.OperationShape = 'full'): Promise<ConnectorOperation[][]> {
  const byDocument = await operations.getOperationsByDocumentIDs(ctx.store, documentIDs, shape);
  return documentIDs.map((id) => answering((byDocument.get(id) ?? []).filter((op) => canSeeOperation(ctx.viewer, op))));
}

/**
 * The fields of the domain type each field of `ConnectorOperation` reads,
 * where not the one of its own name (every `expose`d field). A field of
 * neither kind counts as a field the summary lacks: the full shape is read.
 */
const OPERATION_FIELD_READS: Readonly<Record<string, readonly string[]>> = {
  __typename: [],
  id: ['nodeKey'],
  watch: ['documentID'],
  attemptHistory: ['callerDID', 'operationID', 'state'],
};

/** The smallest shape of operation ({@link operations.OperationShape}) that answers the `ConnectorOperation` fields `selected`. */
export function operationShapeOf(selected: Iterable<string>): operations.OperationShape {
  const fields: string[] = [];
  for (const name of selected) fields.push(...(OPERATION_FIELD_READS[name] ?? [name]));
  return operations.operationShapeFor(fields);
}

/** Per field of a request (graphql-js passes each item of a list the same `fieldNodes`): the shape its selection needs. */
const shapeByFieldNodes = new WeakMap<GraphQLResolveInfo['fieldNodes'], operations.OperationShape>();

/** The shape of the operations selected at `path` below the field `info` resolves (`[]`: the field is itself operations, or a node). */
export function selectedOperationShape(info: GraphQLResolveInfo, path: readonly string[] = []): operations.OperationShape {
  let shape = shapeByFieldNodes.get(info.fieldNodes);
  if (shape === undefined) {
    shape = operationShapeOf(selectedFieldNames(info, path, 'ConnectorOperation'));
    shapeByFieldNodes.set(info.fieldNodes, shape);
  }
  return shape;
}

/**
 * Operations read in a shape, as the schema's `ConnectorOperation` takes
 * them: the shape was chosen from the selection ({@link operationShapeOf}),
 * so the fields a summary lacks are fields no resolver of this request reads.
 */
function answering(ops: operations.OperationOfShape<operations.OperationShape>[]): ConnectorOperation[];
function answering(ops: (operations.OperationOfShape<operations.OperationShape> | null)[]): (ConnectorOperation | null)[];
function answering(ops: (operations.OperationOfShape<operations.OperationShape> | null)[]): (ConnectorOperation | null)[] {
  return ops as (ConnectorOperation | null)[];
}

/** Filter arguments of `operations` and `operationCounts`. */
export interface OperationFilterArgs {
  states?: ConnectorOperationState[] | null;
  connectorName?: string | null;
  ownerDID?: string | null;
  documentID?: string | null;
  operationID?: string | null;
  model?: string | null;
  lastKinds?: operations.OperationOutcomeKind[] | null;
  deferReasons?: operations.OperationDeferReason[] | null;
  minAttempts?: number | null;
  stuck?: boolean | null;
  dueBefore?: Date | null;
  createdAfter?: Date | null;
  createdBefore?: Date | null;
  updatedAfter?: Date | null;
  updatedBefore?: Date | null;
}

/** The store's filter for the GraphQL one: absent and null both mean "any"; instants as ms epoch. */
export function toStoreFilter(filter: OperationFilterArgs | null | undefined): operations.OperationFilter {
  const result: operations.OperationFilter = {};
  if (filter == null) return result;
  const plain = ['states', 'connectorName', 'ownerDID', 'documentID', 'operationID', 'model', 'lastKinds', 'deferReasons', 'minAttempts', 'stuck'] as const;
  for (const field of plain) if (filter[field] != null) (result as Record<string, unknown>)[field] = filter[field];
  const instants = ['dueBefore', 'createdAfter', 'createdBefore', 'updatedAfter', 'updatedBefore'] as const;
  for (const field of instants) if (filter[field] != null) result[field] = filter[field]!.getTime();
  return result;
}

/** Dimensions `operationCounts` can group by, as the API names them. */
export const OPERATION_COUNT_DIMENSIONS = ['STATE', 'LAST_KIND', 'CONNECTOR', 'DEFER_REASON', 'OWNER'] as const;
export type OperationCountDimensionArg = (typeof OPERATION_COUNT_DIMENSIONS)[number];
const DIMENSION_OF: Record<OperationCountDimensionArg, operations.OperationCountDimension> = {
  STATE: 'state',
  LAST_KIND: 'lastKind',
  CONNECTOR: 'connectorName',
  DEFER_REASON: 'deferReason',
  OWNER: 'ownerDID',
};

/** One group of `operationCounts`. */
export interface OperationCountShape {
  state: ConnectorOperationState | null;
  lastKind: operations.OperationOutcomeKind | null;
  connectorName: string | null;
  deferReason: operations.OperationDeferReason | null;
  ownerDID: string | null;
  count: number;
  capped: boolean;
}

/** `operations`: the viewer's visible operations, newest first, keyset-paged, each with the columns its selection needs. */
export async function listOperations(args: ConnectionArgs & { filter?: OperationFilterArgs | null }, ctx: GraphQLContext, info: GraphQLResolveInfo) {
  const request = pageRequest(args, OPERATION_CURSORS);
  const scope = { visibleTo: visibilityScope(ctx.viewer), filter: toStoreFilter(args.filter) };
  const page = await operations.listOperations(ctx.store, { ...scope, ...request }, selectedOperationShape(info, ['edges', 'node']));
  return {
    ...toConnection(request, { items: answering(page.operations), hasMore: page.hasMore }, OPERATION_CURSORS),
    totalCount: () => operations.countOperations(ctx.store, scope),
  };
}

/**
 * `operationCounts`: how many visible operations fall in each group. Grouped
 * by state alone (the default), every state is listed, zeros included;
 * otherwise only groups with operations, largest first.
 */
export async function countOperations(
  args: { filter?: OperationFilterArgs | null; groupBy?: readonly OperationCountDimensionArg[] | null },
  ctx: GraphQLContext,
): Promise<OperationCountShape[]> {
  const scope = { visibleTo: visibilityScope(ctx.viewer), filter: toStoreFilter(args.filter) };
  const groupBy: OperationCountDimensionArg[] = [...new Set(args.groupBy ?? (['STATE'] as const))];
  const none = { state: null, lastKind: null, connectorName: null, deferReason: null, ownerDID: null };
  if (groupBy.length === 1 && groupBy[0] === 'STATE') {
    const { counts, capped } = await operations.countOperationsByState(ctx.store, scope);
    return operations.OPERATION_STATES.map((state) => ({ ...none, state, count: counts[state], capped }));
  }
  const { groups, capped } = await operations.countOperationGroups(ctx.store, scope, groupBy.map((d) => DIMENSION_OF[d]));
  if (groupBy.length === 0) return [{ ...none, count: groups[0]?.count ?? 0, capped }];
  return groups.map((group) => ({
    ...none,
    state: (group.key.state ?? null) as ConnectorOperationState | null,
    lastKind: (group.key.lastKind ?? null) as operations.OperationOutcomeKind | null,
    connectorName: group.key.connectorName ?? null,
    deferReason: (group.key.deferReason ?? null) as operations.OperationDeferReason | null,
    ownerDID: group.key.ownerDID ?? null,
    count: group.count,
    capped,
  }));
}

/** `operationByKey`: by idempotency key; the caller defaults to the viewer. Invisible → null. */
export async function operationByKey(args: { operationID: string; callerDID?: string | null }, ctx: GraphQLContext) {
  const op = await operations.getOperationByKey(ctx.store, { callerDID: args.callerDID ?? viewerDID(ctx.viewer), operationID: args.operationID });
  return op !== null && canSeeOperation(ctx.viewer, op) ? op : null;
}

/**
 * Input of `claimOperation`: the store's claim input without the caller (always
 * the viewer), with the owner optional (default: the viewer).
 */
export type ClaimOperationArgs = Omit<operations.ClaimOperationInput, 'callerDID' | 'ownerDID' | 'sourceID' | 'documentID'> & {
  ownerDID?: string | null;
  sourceID?: string | null;
  documentID?: string | null;
};

/** `claimOperation`: the viewer is always the caller; only a service may name another owner. */
export async function claimOperation(input: ClaimOperationArgs & { requestKey?: string | null }, ctx: GraphQLContext) {
  const callerDID = viewerDID(ctx.viewer);
  const ownerDID = actingOwner(ctx.viewer, input.ownerDID);
  const { requestKey, ...fields } = input;
  const claim = { ...fields, callerDID, ownerDID, sourceID: input.sourceID ?? null, documentID: input.documentID ?? null };
  const { answer, replayed, announced } = await operations.claimOperationStep(
    ctx.store,
    claim,
    requestKey == null ? undefined : { requestKey, input: requestFields(fields) },
  );
  // Only a claim that took a lease wrote anything; a new one on Postgres announced itself.
  if (answer.outcome === 'CLAIMED' && !replayed && !statementAnnounced(ctx, announced)) await announce(ctx, 'operation', [answer.operation.nodeKey]);
  return { ...answer, replayed };
}

/**
 * Input of `enqueueOperation` (and each item of `enqueueOperations`): the
 * store's enqueue input without the caller (always the viewer), with the
 * owner optional (default: the viewer) and `notBefore` an instant.
 */
export type EnqueueOperationArgs = Omit<operations.EnqueueOperationInput, 'callerDID' | 'ownerDID' | 'sourceID' | 'documentID' | 'sendTimeoutMs' | 'notBefore'> & {
  ownerDID?: string | null;
  sourceID?: string | null;
  documentID?: string | null;
  sendTimeoutMs?: number | null;
  notBefore?: Date | null;
};

/** The store's enqueue of `input` by the viewer: the viewer is the caller; only a service may name another owner. */
function enqueueWrite(input: EnqueueOperationArgs, ctx: GraphQLContext): operations.EnqueueOperationInput {
  // Field by field (every field, optional ones included, or this does not compile): with an object
  // rest (`const { ownerDID, ...fields } = input`) this function was 3.4–4.1 % of a batch of 100's
  // server CPU, field by field 1.1 % (`npx tsx bench/profile.ts enqueue`, self time).
  const write: Required<operations.EnqueueOperationInput> = {
    callerDID: viewerDID(ctx.viewer),
    operationID: input.operationID,
    ownerDID: actingOwner(ctx.viewer, input.ownerDID),
    connectorName: input.connectorName,
    model: input.model,
    op: input.op,
    accountKey: input.accountKey,
    target: input.target,
    sourceID: input.sourceID ?? null,
    documentID: input.documentID ?? null,
    deterministicEventID: input.deterministicEventID,
    payloadHash: input.payloadHash,
    reissueIntent: input.reissueIntent,
    sendTimeoutMs: input.sendTimeoutMs ?? null,
    notBefore: input.notBefore?.getTime() ?? null,
  };
  return write;
}

/** `enqueueOperation`: records a write-back intent with no lease; a new one is announced so a waiting worker starts. */
export async function enqueueOperation(input: EnqueueOperationArgs, ctx: GraphQLContext): Promise<operations.EnqueueOperationResult> {
  const { result, announced } = await operations.enqueueOperationStep(ctx.store, enqueueWrite(input, ctx));
  // On Postgres a new key's INSERT announced it inside its transaction.
  if (result.outcome === 'created' && !statementAnnounced(ctx, announced)) await announce(ctx, 'operation', [result.operation.nodeKey]);
  return result;
}

/** What `enqueueOperations` answers: one result per item, in input order (a conflict as its error), and the counts. */
export interface EnqueueOperationsPayload {
  results: (operations.EnqueueOperationResult | IdempotencyConflictError)[];
  created: number;
  replayed: number;
  conflicts: number;
}

/**
 * `enqueueOperations`: every item as `enqueueOperation`, in one transaction.
 * An item naming an owner the viewer may not act for refuses the whole
 * batch before anything is written.
 */
export async function enqueueOperations(input: { operations: readonly EnqueueOperationArgs[] }, ctx: GraphQLContext): Promise<EnqueueOperationsPayload> {
  const writes = input.operations.map((item) => enqueueWrite(item, ctx));
  const { results, announced } = await operations.enqueueOperationsStep(ctx.store, writes);
  const created = results.flatMap((r) => (r.outcome === 'created' ? [r.operation.nodeKey] : []));
  // On Postgres the batch's INSERT announced what it inserted, inside its transaction: the rest, if any, is announced here.
  await announce(ctx, 'operation', created.filter((nodeKey) => !statementAnnounced(ctx, announced.has(nodeKey))));
  return {
    results: results.map((r) => (r.outcome === 'conflict' ? r.error : r)),
    created: created.length,
    replayed: results.filter((r) => r.outcome === 'replayed').length,
    conflicts: results.filter((r) => r.outcome === 'conflict').length,
  };
}

/** What every fenced write carries besides its own fields: the lease epoch, the holder's token, and the request's key. */
export interface FenceArgs {
  version: number;
  leaseToken: string;
  /** The client's key for this request: the same request resent (after a lost answer) gets the same answer and writes nothing more. */
  requestKey?: string | null;
}

/** What a fenced write returns: the operation after it, the lease when it granted one, and whether it was a replay. */
export interface OperationPayload {
  operation: ConnectorOperation;
  lease?: OperationLease | null;
  /** True when this answered a request already recorded under its request key: nothing was written. */
  replayed?: boolean;
}

/** The keyed request of a step, or undefined without a request key (the step then runs unkeyed). */
function keyed(key: operations.OperationKey, requestKey: string | null | undefined, step: operations.OperationRequestStep, input: object): operations.KeyedRequest | undefined {
  if (requestKey == null) return undefined;
  return { key: { callerDID: key.callerDID, operationID: key.operationID }, requestKey, step, input: requestFields(input) };
}

/** The fields a keyed request is compared by: every input field given but the request key and the operation's id. */
function requestFields(input: object): Record<string, unknown> {
  const fields: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(input)) if (field !== 'requestKey' && field !== 'id' && value != null) fields[field] = value;
  return fields;
}

/** Turns a loaded (visible) operation and the holder's credentials into a store fence. */
function fenceOf(operation: ConnectorOperation | null, { version, leaseToken }: FenceArgs): operations.OperationFence {
  if (operation === null) throw new NotFoundError('operation');
  return { key: { callerDID: operation.callerDID, operationID: operation.operationID }, version, leaseToken };
}

/** Runs one fenced store write on a visible operation, keyed by its request key, and announces the change once it committed. */
async function fencedWrite<A>(
  operation: ConnectorOperation | null,
  input: FenceArgs,
  ctx: GraphQLContext,
  step: operations.OperationRequestStep,
  codec: operations.AnswerCodec<A>,
  write: (tx: GraphQLContext['store'], fence: operations.OperationFence) => Promise<A>,
  payload: (answer: A) => OperationPayload,
): Promise<OperationPayload> {
  const fence = fenceOf(operation, input);
  const { answer, replayed } = await operations.runKeyedRequest(ctx.store, keyed(fence.key, input.requestKey, step, input), codec, (tx) => write(tx, fence));
  const result = payload(answer);
  if (!replayed) await announce(ctx, 'operation', [result.operation.nodeKey]);
  return { ...result, replayed };
}

const operationOnly = (operation: ConnectorOperation): OperationPayload => ({ operation });

/** `acquireOperationLease`: take an absent or expired lease of a visible live operation. */
export async function acquireOperationLease(
  operation: ConnectorOperation | null,
  input: { leaseMs: number; requestKey?: string | null },
  ctx: GraphQLContext,
): Promise<OperationPayload> {
  if (operation === null) throw new NotFoundError('operation');
  const key = { callerDID: operation.callerDID, operationID: operation.operationID };
  const { answer, replayed } = await operations.runKeyedRequest(
    ctx.store,
    keyed(key, input.requestKey, 'acquireOperationLease', { leaseMs: input.leaseMs }),
    operations.ACQUIRE_ANSWER,
    (tx) => operations.acquireOperationLease(tx, { key, leaseMs: input.leaseMs }),
  );
  if (!answer.acquired) throw new InvalidStateError('a live lease is held, or the operation is finished');
  if (!replayed) await announce(ctx, 'operation', [answer.operation.nodeKey]);
  return { operation: answer.operation, lease: answer.lease, replayed };
}

/**
 * Runs one fenced step on the operation `nodeKey` names as the viewer sees
 * it, keyed by its request key, and announces the change unless the step's
 * own statement already did on the channel this server's feed listens to.
 */
async function fencedStep<A>(
  nodeKey: string,
  input: FenceArgs,
  ctx: GraphQLContext,
  run: (store: GraphQLContext['store'], call: operations.FencedStepCall) => Promise<operations.FencedStepAnswer<A>>,
  payload: (answer: A) => OperationPayload,
): Promise<OperationPayload> {
  const call: operations.FencedStepCall = {
    nodeKey,
    visibleTo: visibilityScope(ctx.viewer),
    version: input.version,
    leaseToken: input.leaseToken,
    ...(input.requestKey != null && { request: { requestKey: input.requestKey, input: requestFields(input) } }),
  };
  const { answer, replayed, announced } = await run(ctx.store, call);
  const result = payload(answer);
  if (!replayed && !statementAnnounced(ctx, announced)) await announce(ctx, 'operation', [result.operation.nodeKey]);
  return { ...result, replayed };
}

/** What `leaseDueOperations` answers: each leased operation with its lease, oldest first. */
export interface LeaseDueOperationsPayload {
  operations: operations.LeasedOperation[];
}

/**
 * `leaseDueOperations`: lease up to `limit` due operations of a connector in
 * one statement. A service leases any owner's (one owner's with `ownerDID`);
 * anyone else only operations they are the caller or owner of, as
 * `acquireOperationLease` lets them take only operations they can see.
 */
export async function leaseDueOperations(
  input: { connectorName: string; limit: number; leaseMs: number; ownerDID?: string | null },
  ctx: GraphQLContext,
): Promise<LeaseDueOperationsPayload> {
  const { leased, announced } = await operations.leaseDueOperationsStep(ctx.store, {
    connectorName: input.connectorName,
    limit: input.limit,
    leaseMs: input.leaseMs,
    visibleTo: visibilityScope(ctx.viewer),
    ...(input.ownerDID != null && { ownerDID: input.ownerDID }),
  });
  // On Postgres the lease's own statement announced each leased operation.
  if (!statementAnnounced(ctx, announced)) await announce(ctx, 'operation', leased.map((item) => item.operation.nodeKey));
  return { operations: leased };
}

/** `renewOperationLease`: extend the holder's live lease. */
export function renewOperationLease(nodeKey: string, input: FenceArgs & { leaseMs: number }, ctx: GraphQLContext) {
  return fencedStep(nodeKey, input, ctx, (store, call) => operations.renewLeaseStep(store, call, { leaseMs: input.leaseMs }), (a) => a);
}

/** `releaseOperationLease`: give the lease up. */
export function releaseOperationLease(nodeKey: string, input: FenceArgs, ctx: GraphQLContext) {
  return fencedStep(nodeKey, input, ctx, (store, call) => operations.releaseLeaseStep(store, call), operationOnly);
}

/** `startOperationAttempt`: the next attempt (attempts + 1, send marker cleared). */
export function startOperationAttempt(nodeKey: string, input: FenceArgs, ctx: GraphQLContext) {
  return fencedStep(nodeKey, input, ctx, (store, call) => operations.startAttemptStep(store, call), operationOnly);
}

/** `markOperationSent`: the holder is about to send the provider request. */
export function markOperationSent(nodeKey: string, input: FenceArgs & { sendMarker: string; sendTimeoutMs?: number | null }, ctx: GraphQLContext) {
  return fencedStep(nodeKey, input, ctx, (store, call) => operations.markSentStep(store, call, input), operationOnly);
}

/** Input of `recordOperationAttempt`. */
export interface RecordOperationAttemptArgs extends FenceArgs {
  kind: operations.OperationOutcomeKind;
  lastHTTPStatus?: number | null;
  providerEtag?: string | null;
  retryAfterMs?: number | null;
  message?: string | null;
}

/** `recordOperationAttempt`: how the attempt ended; reschedules, reconciles, defers or gives up. */
export function recordOperationAttempt(operation: ConnectorOperation | null, input: RecordOperationAttemptArgs, ctx: GraphQLContext) {
  return fencedWrite(operation, input, ctx, 'recordOperationAttempt', operations.OPERATION_ANSWER, (tx, fence) =>
    operations.recordOperationOutcome(tx, {
      ...fence,
      kind: input.kind,
      ...(input.lastHTTPStatus != null && { lastHTTPStatus: input.lastHTTPStatus }),
      ...(input.providerEtag != null && { providerEtag: input.providerEtag }),
      ...(input.retryAfterMs != null && { retryAfterMs: input.retryAfterMs }),
      ...(input.message != null && { message: input.message }),
    }),
    operationOnly,
  );
}

/** One entry of `ConnectorOperation.attemptHistory`. */
export type OperationAttempt = operations.OperationAttempt & { committed: boolean };

/** The key of one `attemptHistory` page request (the loader's key). */
interface AttemptHistoryKey {
  operation: ConnectorOperation;
  first: number;
  after?: operations.AttemptCursor;
}

const historyLoaders = createContextCache((ctx: GraphQLContext) => ({
  pages: new DataLoader((keys: readonly AttemptHistoryKey[]) => loadAttemptHistories(keys, ctx), {
    cacheKeyFn: (key) => JSON.stringify([key.operation.nodeKey, key.first, key.after?.seq ?? null]),
    maxBatchSize: 500,
  }),
}));

/** `ConnectorOperation.attemptHistory`: its attempts, newest first, forward pages; every operation of a request level in one statement. */
export async function attemptHistory(operation: ConnectorOperation, args: ConnectionArgs, ctx: GraphQLContext) {
  const request = forwardPageRequest(args, ATTEMPT_HISTORY_CURSORS);
  const page = await historyLoaders(ctx).pages.load({ operation, first: request.first, ...(request.after !== undefined && { after: request.after }) });
  return {
    ...toConnection(request, { items: page.attempts, hasMore: page.hasMore }, ATTEMPT_HISTORY_CURSORS),
    totalCount: () => operations.countAttemptHistory(ctx.store, { callerDID: operation.callerDID, operationID: operation.operationID }),
  };
}

/**
 * Batch loader of `attemptHistory` pages. The newest attempt of a committed
 * operation shows as ended by the commit: finalize writes no history row
 * (it stays at its six statements), so the commit time is the operation's.
 */
async function loadAttemptHistories(keys: readonly AttemptHistoryKey[], ctx: GraphQLContext) {
  const pages = await operations.getAttemptHistories(
    ctx.store,
    keys.map((key) => ({ key: { callerDID: key.operation.callerDID, operationID: key.operation.operationID }, first: key.first, ...(key.after !== undefined && { after: key.after }) })),
  );
  return pages.map((page, i) => {
    const operation = keys[i]!.operation;
    const newest = Math.max(0, ...page.attempts.map((a) => a.seq));
    return {
      hasMore: page.hasMore,
      attempts: page.attempts.map((attempt): OperationAttempt => {
        const committedHere = operation.state === 'committed' && attempt.seq === newest && keys[i]!.after === undefined && attempt.endedAt === null;
        return committedHere ? { ...attempt, endedAt: operation.updatedAt, committed: true } : { ...attempt, committed: false };
      }),
    };
  });
}

/** `recordReconcileResult`: whether a reconcile-only write landed at the provider. */
export function recordReconcileResult(operation: ConnectorOperation | null, input: FenceArgs & { landed: boolean; providerEtag?: string | null }, ctx: GraphQLContext) {
  return fencedWrite(
    operation,
    input,
    ctx,
    'recordReconcileResult',
    operations.OPERATION_ANSWER,
    (tx, fence) => operations.recordReconcileResult(tx, { ...fence, landed: input.landed, ...(input.providerEtag != null && { providerEtag: input.providerEtag }) }),
    operationOnly,
  );
}

/** Input of `finalizeOperation`. */
export interface FinalizeArgs extends FenceArgs {
  documentID: string;
  sourceID: string;
  resultEntity?: unknown;
  currentWinnerDigest?: string | null;
}

/**
 * `finalizeOperation` (SPEC §3.4): commits the operation and arms the watch of
 * its owner, connector, model and account with `sourceID`, in one
 * transaction; a stale lease or version changes nothing and returns false.
 * The armed watch is the owner's: a caller who is not the owner gets null.
 */
export async function finalizeOperation(
  operation: ConnectorOperation | null,
  input: FinalizeArgs,
  ctx: GraphQLContext,
): Promise<{ finalized: boolean; replayed: boolean; operationNodeKey: string; operation: ConnectorOperation | null; watch: ProjectionWatch | null }> {
  if (operation === null) throw new NotFoundError('operation');
  const key = { callerDID: operation.callerDID, operationID: operation.operationID };
  const { answer: result, announced } = await finalizeOperationStep(
    ctx.store,
    {
      key,
      version: input.version,
      leaseToken: input.leaseToken,
      documentID: input.documentID,
      resultEntity: input.resultEntity ?? null,
      currentWinnerDigest: input.currentWinnerDigest ?? null,
      watchIdentity: {
        ownerDID: operation.ownerDID,
        connectorName: operation.connectorName,
        model: operation.model,
        accountKey: operation.accountKey,
        sourceID: input.sourceID,
      },
    },
    input.requestKey == null ? undefined : { requestKey: input.requestKey, input: requestFields(input) },
  );
  // A lost finalize, and a replay of one that already committed, wrote nothing and announce nothing; one statement on Postgres announced itself.
  if (result.finalized && !result.replayed && !statementAnnounced(ctx, announced)) {
    await announceAll(ctx, { operation: [operation.nodeKey], watch: [result.watch?.nodeKey] });
  }
  const watch = result.watch != null && canSeeOwned(ctx.viewer, result.watch) ? result.watch : null;
  // The committed row, if the viewer may still see it (a caller or owner may); null means "read it again".
  const committed = result.operation !== null && canSeeOperation(ctx.viewer, result.operation) ? result.operation : null;
  return { finalized: result.finalized, replayed: result.replayed, operationNodeKey: operation.nodeKey, operation: committed, watch };
}

/** `dueOperations` (service principals): live operations due now with no live lease, oldest first; one connector's when named. */
export function listDueOperations(input: { first: number; connectorName?: string | null }, ctx: GraphQLContext): Promise<ConnectorOperation[]> {
  return operations.listDueOperations(ctx.store, { limit: input.first, connectorName: input.connectorName ?? undefined });
}

/** `operationsByIDPrefix`: a service's lookup of idempotency keys by their start (every caller's), in key order. */
export function listOperationsByIDPrefix(input: { prefix: string; first: number }, ctx: GraphQLContext): Promise<ConnectorOperation[]> {
  return operations.listOperationsByIDPrefix(ctx.store, input);
}

/** `resumeDeferred`: a service resumes any owner's work; a user only their own. */
export async function resumeDeferred(
  input: { reason: 'offline' | 'auth'; ownerDID?: string | null; connectorName?: string | null },
  ctx: GraphQLContext,
): Promise<{ operations: number; watches: number; more: boolean }> {
  const ownerDID = ctx.viewer.kind === 'service' ? (input.ownerDID ?? undefined) : actingOwner(ctx.viewer, input.ownerDID);
  // Capped like the bulk actions: one call changes (and publishes) at most MAX_BULK_ACTION of each; `more` says run it again.
  const limit = operations.MAX_BULK_ACTION;
  if (input.reason === 'offline') {
    if (input.connectorName != null) throw new InvalidInputError('connectorName', 'applies only to AUTH: OFFLINE resumes every connector');
    const which = { reason: 'offline' as const, ...(ownerDID !== undefined && { ownerDID }) };
    const resumed = await operations.resumeDeferred(ctx.store, which, { limit });
    const watchScope = ownerDID !== undefined ? { ownerDID } : {};
    const watches = await resumeOfflineWatches(ctx.store, { ...watchScope, limit });
    await announceAll(ctx, { operation: resumed, watch: watches });
    const more =
      (resumed.length === limit && (await operations.hasDeferredOperations(ctx.store, which))) ||
      (watches.length === limit && (await hasOfflineWatches(ctx.store, watchScope)));
    return { operations: resumed.length, watches: watches.length, more };
  }
  if (ownerDID === undefined || input.connectorName == null) {
    throw new InvalidInputError('connectorName', 'ownerDID and connectorName are required to resume auth-deferred work');
  }
  const which = { reason: 'auth' as const, ownerDID, connectorName: input.connectorName };
  const resumed = await operations.resumeDeferred(ctx.store, which, { limit });
  await announce(ctx, 'operation', resumed);
  return { operations: resumed.length, watches: 0, more: resumed.length === limit && (await operations.hasDeferredOperations(ctx.store, which)) };
}

/**
 * `retryOperation`, `cancelOperation`, `requeueOperation`: an operator action
 * (issue 11), for service principals and the operation's owner. A viewer
 * who cannot see the operation gets NotFoundError, as for an unknown id; a
 * caller who sees it but is not its owner gets ForbiddenError.
 */
export async function operatorAction(
  action: operations.OperationAction,
  operation: ConnectorOperation | null,
  input: { version: number; reason?: string | null },
  ctx: GraphQLContext,
): Promise<OperationPayload> {
  if (operation === null) throw new NotFoundError('operation');
  const actor = viewerDID(ctx.viewer);
  if (ctx.viewer.kind !== 'service' && operation.ownerDID !== actor) throw new ForbiddenError('only the operation’s owner or a service principal may retry, cancel or requeue it');
  const changed = await operations.applyOperationAction(ctx.store, {
    key: { callerDID: operation.callerDID, operationID: operation.operationID },
    version: input.version,
    action,
    actorDID: actor,
    reason: input.reason ?? null,
  });
  await announce(ctx, 'operation', [changed.nodeKey]);
  return { operation: changed, lease: null };
}

/** What a bulk operator action answers. */
export interface BulkActionPayload {
  changed: number;
  more: boolean;
  operations: ConnectorOperation[];
}

/**
 * `retryOperations`, `cancelOperations`, `requeueOperations`: an operator
 * action on every matching operation (a service: any owner's; a user: their
 * own), at most `cap`, all or nothing.
 */
export async function bulkOperatorAction(
  action: operations.OperationAction,
  input: { filter: OperationFilterArgs; cap?: number | null; reason?: string | null },
  ctx: GraphQLContext,
): Promise<BulkActionPayload> {
  const actor = viewerDID(ctx.viewer);
  const result = await operations.applyOperationActionToMany(ctx.store, {
    filter: toStoreFilter(input.filter),
    ownerDID: ctx.viewer.kind === 'service' ? null : actor,
    action,
    actorDID: actor,
    reason: input.reason ?? null,
    cap: input.cap ?? operations.MAX_BULK_ACTION,
  });
  await announce(ctx, 'operation', result.operations.map((op) => op.nodeKey));
  return { changed: result.operations.length, more: result.more, operations: result.operations };
}
