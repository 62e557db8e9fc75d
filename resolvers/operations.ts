/**
 * Thin resolvers of the operation API: check who may act, call the store,
 * shape the payload. No SQL here.
 */
import { InvalidInputError, NotFoundError } from '../src/store/errors.js';
import * as operations from '../src/store/operations/index.js';
import type { ConnectorOperation, ConnectorOperationState } from '../src/store/operations/index.js';
import { resumeOfflineWatches } from '../src/store/projection-watches/index.js';
import type { GraphQLContext } from '../schema/context.js';
import { createdAtCursor, pageRequest, toConnection, type ConnectionArgs } from '../schema/pagination.js';
import { announce } from './changes.js';
import { actingOwner, canSeeOperation, viewerDID, visibilityScope } from './viewer.js';

/** Batch loader of the `ConnectorOperation` node: invisible rows come back as null, like missing ones. */
export async function loadOperationsByNodeKeys(nodeKeys: readonly string[], ctx: GraphQLContext): Promise<(ConnectorOperation | null)[]> {
  const rows = await operations.getOperationsByNodeKeys(ctx.store, nodeKeys);
  return rows.map((op) => (op !== null && canSeeOperation(ctx.viewer, op) ? op : null));
}

/** Batch loader of a document's visible operations, newest first. */
export async function loadOperationsByDocumentIDs(documentIDs: readonly string[], ctx: GraphQLContext): Promise<ConnectorOperation[][]> {
  const byDocument = await operations.getOperationsByDocumentIDs(ctx.store, documentIDs);
  return documentIDs.map((id) => (byDocument.get(id) ?? []).filter((op) => canSeeOperation(ctx.viewer, op)));
}

/** Filter arguments of `operations` and `operationCounts`. */
export interface OperationFilterArgs {
  states?: ConnectorOperationState[] | null;
  connectorName?: string | null;
  ownerDID?: string | null;
  documentID?: string | null;
}

function toStoreFilter(filter: OperationFilterArgs | null | undefined): operations.OperationFilter {
  return {
    ...(filter?.states != null && { states: filter.states }),
    ...(filter?.connectorName != null && { connectorName: filter.connectorName }),
    ...(filter?.ownerDID != null && { ownerDID: filter.ownerDID }),
    ...(filter?.documentID != null && { documentID: filter.documentID }),
  };
}

/** `operations`: the viewer's visible operations, newest first, keyset-paged. */
export async function listOperations(args: ConnectionArgs & { filter?: OperationFilterArgs | null }, ctx: GraphQLContext) {
  const request = pageRequest(args, createdAtCursor);
  const scope = { visibleTo: visibilityScope(ctx.viewer), filter: toStoreFilter(args.filter) };
  const page = await operations.listOperations(ctx.store, { ...scope, ...request });
  return {
    ...toConnection(request, { items: page.operations, hasMore: page.hasMore }, operations.operationCursor),
    totalCount: () => operations.countOperations(ctx.store, scope),
  };
}

/** `operationCounts`: how many visible operations are in each state. */
export async function countOperationsByState(filter: OperationFilterArgs | null | undefined, ctx: GraphQLContext) {
  const counts = await operations.countOperationsByState(ctx.store, { visibleTo: visibilityScope(ctx.viewer), filter: toStoreFilter(filter) });
  return operations.OPERATION_STATES.map((state) => ({ state, count: counts[state] }));
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
export type ClaimOperationArgs = Omit<operations.ClaimOperationInput, 'callerDID' | 'ownerDID' | 'sourceID'> & {
  ownerDID?: string | null;
  sourceID?: string | null;
};

/** `claimOperation`: the viewer is always the caller; only a service may name another owner. */
export async function claimOperation(input: ClaimOperationArgs, ctx: GraphQLContext) {
  const callerDID = viewerDID(ctx.viewer);
  const ownerDID = actingOwner(ctx.viewer, input.ownerDID);
  const result = await operations.claimOperation(ctx.store, { ...input, callerDID, ownerDID, sourceID: input.sourceID ?? null });
  // Only a claim that took a lease wrote anything.
  if (result.outcome === 'CLAIMED') await announce(ctx, 'operation', [result.operation.nodeKey]);
  return result;
}

/** A fenced write's input: the operation node, the lease epoch and the holder's token. */
export interface FenceArgs {
  operation: ConnectorOperation | null;
  version: number;
  leaseToken: string;
}

/** Turns a loaded (visible) operation and the holder's credentials into a store fence. */
export function fenceOf({ operation, version, leaseToken }: FenceArgs): operations.OperationFence {
  if (operation === null) throw new NotFoundError('operation');
  return { key: { callerDID: operation.callerDID, operationID: operation.operationID }, version, leaseToken };
}

/** `acquireOperationLease`: take an absent or expired lease of a visible live operation. */
export async function acquireOperationLease(operation: ConnectorOperation | null, leaseMs: number, ctx: GraphQLContext) {
  if (operation === null) throw new NotFoundError('operation');
  const result = await operations.acquireOperationLease(ctx.store, { key: { callerDID: operation.callerDID, operationID: operation.operationID }, leaseMs });
  if (result.acquired) await announce(ctx, 'operation', [result.operation.nodeKey]);
  return result;
}

/** `resumeDeferred`: a service resumes any owner's work; a user only their own. */
export async function resumeDeferred(
  input: { reason: 'offline' | 'auth'; ownerDID?: string | null; connectorName?: string | null },
  ctx: GraphQLContext,
): Promise<{ operations: number; watches: number }> {
  const ownerDID = ctx.viewer.kind === 'service' ? (input.ownerDID ?? undefined) : actingOwner(ctx.viewer, input.ownerDID);
  if (input.reason === 'offline') {
    if (input.connectorName != null) throw new InvalidInputError('connectorName', 'applies only to AUTH: OFFLINE resumes every connector');
    const resumed = await operations.resumeDeferred(ctx.store, { reason: 'offline', ...(ownerDID !== undefined && { ownerDID }) });
    const watches = await resumeOfflineWatches(ctx.store, ownerDID !== undefined ? { ownerDID } : {});
    await announce(ctx, 'operation', resumed);
    await announce(ctx, 'watch', watches);
    return { operations: resumed.length, watches: watches.length };
  }
  if (ownerDID === undefined || input.connectorName == null) {
    throw new InvalidInputError('connectorName', 'ownerDID and connectorName are required to resume auth-deferred work');
  }
  const resumed = await operations.resumeDeferred(ctx.store, { reason: 'auth', ownerDID, connectorName: input.connectorName });
  await announce(ctx, 'operation', resumed);
  return { operations: resumed.length, watches: 0 };
}
