/** Thin resolvers of the watch API. No SQL here. */
import * as watches from '../src/store/projection-watches/index.js';
import type { ArmWatchResult, ProjectionWatch, ProjectionWatchVerificationStatus, VerificationOutcome } from '../src/store/projection-watches/index.js';
import { InvalidInputError, NotFoundError } from '../src/store/errors.js';
import { createContextCache } from '@pothos/core';
import DataLoader from 'dataloader';
import type { GraphQLContext } from './context.js';
import { NEWEST_FIRST } from '../src/store/page.js';
import { ConnectionCursors, pageRequest, toConnection, type ConnectionArgs } from './pagination.js';
import { announce } from './changes.js';
import { actingOwner, canSeeOwned, visibilityScope } from './viewer.js';

/** Cursors of `watches`: they name the connection, so another list's cursor is refused. */
const WATCH_CURSORS = new ConnectionCursors('watches', NEWEST_FIRST);

export { PROJECTION_WATCH_VERIFICATION_STATUSES, type ArmWatchResult, type ProjectionWatch } from '../src/store/projection-watches/index.js';

/** Batch loader of the `ProjectionWatch` node: invisible rows load as null, like missing ones. */
export async function loadWatchesByNodeKeys(nodeKeys: readonly string[], ctx: GraphQLContext): Promise<(ProjectionWatch | null)[]> {
  const rows = await watches.getWatchesByNodeKeys(ctx.store, nodeKeys);
  return rows.map((w) => (w !== null && canSeeOwned(ctx.viewer, w) ? w : null));
}

/** Batch loader of each document's visible watch. */
export async function loadWatchesByDocumentIDs(documentIDs: readonly string[], ctx: GraphQLContext): Promise<(ProjectionWatch | null)[]> {
  // The newest watch the viewer may see, not the newest watch: another owner's must not hide theirs.
  const byDocument = await watches.getAllWatchesByDocumentIDs(ctx.store, documentIDs);
  return documentIDs.map((id) => (byDocument.get(id) ?? []).find((watch) => canSeeOwned(ctx.viewer, watch)) ?? null);
}

/** The request's loader of each document's visible watch (shared by `ConnectorOperation.watch` and `Document.watch`). */
export const watchByDocumentLoader = createContextCache(
  (ctx: GraphQLContext) => new DataLoader((ids: readonly string[]) => loadWatchesByDocumentIDs(ids, ctx), { maxBatchSize: 500 }),
);

/**
 * The visible watch of an operation's document, batched per request. No
 * document: null at once, with no promise (most operations of a page have none).
 */
export function watchOfDocument(documentID: string | null, ctx: GraphQLContext): ProjectionWatch | null | Promise<ProjectionWatch | null> {
  return documentID === null ? null : watchByDocumentLoader(ctx).load(documentID);
}

/** Filter arguments of `watches`. */
export interface WatchFilterArgs {
  statuses?: ProjectionWatchVerificationStatus[] | null;
  connectorName?: string | null;
  ownerDID?: string | null;
  documentID?: string | null;
}

function toStoreFilter(filter: WatchFilterArgs | null | undefined): watches.WatchFilter {
  return {
    ...(filter?.statuses != null && { status: filter.statuses }),
    ...(filter?.connectorName != null && { connectorName: filter.connectorName }),
    ...(filter?.ownerDID != null && { ownerDID: filter.ownerDID }),
    ...(filter?.documentID != null && { documentID: filter.documentID }),
  };
}

/** `watches`: the viewer's watches (a service sees all), newest first, keyset-paged either way. */
export async function listWatches(args: ConnectionArgs & { filter?: WatchFilterArgs | null }, ctx: GraphQLContext) {
  const request = pageRequest(args, WATCH_CURSORS);
  const scope = { visibleTo: visibilityScope(ctx.viewer), filter: toStoreFilter(args.filter) };
  const page = await watches.listWatches(ctx.store, { ...scope, ...request });
  return {
    ...toConnection(request, { items: page.watches, hasMore: page.hasMore }, WATCH_CURSORS),
    totalCount: () => watches.countWatches(ctx.store, scope),
  };
}

/** `dueWatches` (service principals): watches pending verification, due now and unclaimed, oldest first. */
export function listDueWatches(first: number, ctx: GraphQLContext): Promise<ProjectionWatch[]> {
  return watches.listDueWatches(ctx.store, { limit: first });
}

/** Input of `armWatch`: the watch identity (owner defaults to the viewer), why, and when. */
export interface ArmWatchArgs {
  ownerDID?: string | null;
  connectorName: string;
  model: string;
  accountKey: string;
  sourceID: string;
  documentID?: string | null;
  reason: 'ingest' | 'repair' | 'manual';
  dueAt?: Date | null;
  observedWinnerDigest?: string | null;
}

/**
 * `armWatch` (SPEC §3.5): creates the watch (with `documentID`) or opens a
 * new generation; `INGEST` on a pending watch only moves `nextAttemptAt`
 * (coalesced, version kept). For the viewer's own watches; a service may
 * name any owner. `WRITE` arms belong to finalize and are not offered here.
 */
export async function armWatch(input: ArmWatchArgs, ctx: GraphQLContext): Promise<ArmWatchResult> {
  const ownerDID = actingOwner(ctx.viewer, input.ownerDID);
  const result = await watches.armWatch(ctx.store, {
    identity: { ownerDID, connectorName: input.connectorName, model: input.model, accountKey: input.accountKey, sourceID: input.sourceID },
    reason: input.reason,
    ...(input.documentID != null && { documentID: input.documentID }),
    ...(input.dueAt != null && { dueAt: input.dueAt.getTime() }),
    ...(input.observedWinnerDigest !== undefined && { observedWinnerDigest: input.observedWinnerDigest }),
  });
  await announce(ctx, 'watch', [result.watch.nodeKey]);
  return result;
}

/** `requestRepull`: re-arm a visible watch (a new generation), due at `dueAt` or now. */
export async function requestRepull(watch: ProjectionWatch | null, dueAt: Date | null | undefined, ctx: GraphQLContext) {
  if (watch === null) throw new NotFoundError('watch');
  const rearmed = await watches.requestRepullByNodeKey(ctx.store, watch.nodeKey, {
    visibleTo: visibilityScope(ctx.viewer),
    ...(dueAt != null && { dueAt: dueAt.getTime() }),
  });
  await announce(ctx, 'watch', [rearmed.nodeKey]);
  return rearmed;
}

/** `claimWatchAttempt`: hold the current verification attempt of a visible watch. */
export async function claimWatchAttempt(watch: ProjectionWatch | null, input: { version: number; claimMs: number }, ctx: GraphQLContext) {
  if (watch === null) throw new NotFoundError('watch');
  const claimed = await watches.claimWatchAttempt(ctx.store, { nodeKey: watch.nodeKey, version: input.version, claimMs: input.claimMs });
  await announce(ctx, 'watch', [claimed.nodeKey]);
  return claimed;
}

/** Input of `recordVerification`. */
export interface RecordVerificationArgs {
  version: number;
  repairGeneration: number;
  result: 'match' | 'mismatch' | 'offline';
  digest?: string | null;
}

/** `recordVerification`: the verifier's result; a stale one changes nothing. */
export async function recordVerification(watch: ProjectionWatch | null, input: RecordVerificationArgs, ctx: GraphQLContext) {
  if (watch === null) throw new NotFoundError('watch');
  let outcome: VerificationOutcome;
  if (input.result === 'match') {
    if (input.digest == null) throw new InvalidInputError('digest', 'is required when the result is MATCH');
    outcome = { kind: 'match', digest: input.digest };
  } else if (input.result === 'mismatch') {
    outcome = input.digest == null ? { kind: 'mismatch' } : { kind: 'mismatch', observedDigest: input.digest };
  } else {
    outcome = { kind: 'offline' };
  }
  const result = await watches.recordVerification(ctx.store, {
    nodeKey: watch.nodeKey,
    version: input.version,
    repairGeneration: input.repairGeneration,
    outcome,
  });
  if (result.status === 'applied') await announce(ctx, 'watch', [result.watch.nodeKey]);
  return { stale: result.status === 'stale', watch: result.watch };
}
