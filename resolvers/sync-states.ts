/** Thin resolvers of the sync-state API. No SQL here. */
import { createContextCache } from '@pothos/core';
import DataLoader from 'dataloader';
import { NotFoundError } from '../src/store/errors.js';
import * as syncStates from '../src/store/sync-state/index.js';
import type { SyncState } from '../src/store/sync-state/index.js';
import type { GraphQLContext } from './context.js';
import { SYNC_STATE_ORDER } from '../src/store/page.js';
import { ConnectionCursors, pageRequest, toConnection, type ConnectionArgs } from './pagination.js';
import { announce } from './changes.js';
import { actingOwner, canSeeOwned, viewerDID, visibilityScope } from './viewer.js';

/** Cursors of `syncStates`: they name the connection, so another list's cursor is refused. */
const SYNC_STATE_CURSORS = new ConnectionCursors('syncStates', SYNC_STATE_ORDER);

export type { SyncState } from '../src/store/sync-state/index.js';

/** Batch loader of the `SyncState` node: invisible rows load as null, like missing ones. */
export async function loadSyncStatesByNodeKeys(nodeKeys: readonly string[], ctx: GraphQLContext): Promise<(SyncState | null)[]> {
  const rows = await syncStates.getSyncStatesByNodeKeys(ctx.store, nodeKeys);
  return rows.map((s) => (s !== null && canSeeOwned(ctx.viewer, s) ? s : null));
}

/** Filter arguments of `syncStates`. */
export interface SyncStateFilterArgs {
  connectorName?: string | null;
  ownerDID?: string | null;
  status?: string | null;
  staleForMs?: number | null;
}

/** `syncStates`: the viewer's sync states (a service sees all) by connector, then owner, keyset-paged either way. */
export async function listSyncStates(args: ConnectionArgs & { filter?: SyncStateFilterArgs | null }, ctx: GraphQLContext) {
  const request = pageRequest(args, SYNC_STATE_CURSORS);
  const filter: syncStates.SyncStateFilter = {
    ...(args.filter?.connectorName != null && { connectorName: args.filter.connectorName }),
    ...(args.filter?.ownerDID != null && { ownerDID: args.filter.ownerDID }),
    ...(args.filter?.status != null && { status: args.filter.status }),
    ...(args.filter?.staleForMs != null && { staleForMs: args.filter.staleForMs }),
  };
  const scope = { visibleTo: visibilityScope(ctx.viewer), filter };
  const page = await syncStates.listSyncStates(ctx.store, { ...scope, ...request });
  return {
    ...toConnection(request, { items: page.syncStates, hasMore: page.hasMore }, SYNC_STATE_CURSORS),
    totalCount: () => syncStates.countSyncStates(ctx.store, scope),
  };
}

/** `syncState(connectorName, ownerDID)`: one sync state by its key; the owner defaults to the viewer. Invisible → null. */
export async function syncStateByKey(args: { connectorName: string; ownerDID?: string | null }, ctx: GraphQLContext): Promise<SyncState | null> {
  const state = await syncStateKeyLoader(ctx).load({ connectorName: args.connectorName, ownerDID: args.ownerDID ?? viewerDID(ctx.viewer) });
  return state !== null && canSeeOwned(ctx.viewer, state) ? state : null;
}

/** Per-request loader of sync states by (connector, owner): aliased lookups cost one statement. */
const syncStateKeyLoader = createContextCache(
  (ctx: GraphQLContext) =>
    new DataLoader((keys: readonly syncStates.SyncStateKey[]) => syncStates.getSyncStatesByKeys(ctx.store, keys), {
      cacheKeyFn: (key) => JSON.stringify([key.connectorName, key.ownerDID]),
      maxBatchSize: 500,
    }),
);

/**
 * `deleteSyncState`: deletes a visible sync state, exactly the row the id
 * names. A later `setSyncState` creates a new row: version 0, a new
 * incarnation and a new node id.
 */
export async function deleteSyncState(state: SyncState | null, ctx: GraphQLContext): Promise<{ deletedNodeKey: string }> {
  if (state === null) throw new NotFoundError('sync state');
  // Deleted in between by someone else: nothing to show, same as not found.
  if (!(await syncStates.deleteSyncStateByNodeKey(ctx.store, state.nodeKey))) throw new NotFoundError('sync state');
  await announce(ctx, 'syncState', [state.nodeKey]);
  return { deletedNodeKey: state.nodeKey };
}

/** Input of `setSyncState`. */
export interface SetSyncStateArgs {
  connectorName: string;
  ownerDID?: string | null;
  checkpoint?: unknown;
  lastSyncedAt: string;
  entityCount: number;
  status: string;
  error?: string | null;
  recovery?: unknown;
}

/**
 * `setSyncState`: creates the row (version 0, a new incarnation and node key)
 * or overwrites its fields, leaving version and incarnation alone (SPEC §3.1).
 * For the viewer; a service may name the owner.
 */
export async function setSyncState(input: SetSyncStateArgs, ctx: GraphQLContext) {
  const ownerDID = actingOwner(ctx.viewer, input.ownerDID);
  const state = await syncStates.setSyncState(ctx.store, input.connectorName, ownerDID, {
    checkpoint: input.checkpoint ?? null,
    lastSyncedAt: input.lastSyncedAt,
    entityCount: input.entityCount,
    status: input.status,
    error: input.error ?? null,
    recovery: input.recovery ?? null,
  });
  await announce(ctx, 'syncState', [state.nodeKey]);
  return { syncState: state };
}

/** Input of `updateSyncProgress`: one compare-and-swap round. */
export interface UpdateSyncProgressArgs {
  expectedVersion: number;
  expectedIncarnation?: string | null;
  checkpoint?: unknown;
  lastSyncedAt: string;
  entityCount: number;
  error?: string | null;
  recovery?: unknown;
}

/**
 * `updateSyncProgress`: single-shot CAS on (version, incarnation). A lost
 * round returns `applied: false` and the current row so the client can
 * rebase and retry.
 */
export async function updateSyncProgress(state: SyncState | null, input: UpdateSyncProgressArgs, ctx: GraphQLContext) {
  if (state === null) throw new NotFoundError('sync state');
  const result = await syncStates.compareAndSetSyncProgress(ctx.store, {
    connectorName: state.connectorName,
    ownerDID: state.ownerDID,
    expectedVersion: input.expectedVersion,
    expectedIncarnation: input.expectedIncarnation ?? null,
    checkpoint: input.checkpoint ?? null,
    lastSyncedAt: input.lastSyncedAt,
    entityCount: input.entityCount,
    error: input.error ?? null,
    recovery: input.recovery ?? null,
  });
  // A delete between load and write leaves nothing to show: same as not found.
  if (result.state === null) throw new NotFoundError('sync state');
  if (result.applied) await announce(ctx, 'syncState', [result.state.nodeKey]);
  return { applied: result.applied, syncState: result.state };
}
