/**
 * Deletion sweeps over the API (SPEC §3.6): a worker records a listing pass
 * (a receipt with its deletion candidates), applies each candidate, and
 * commits the receipt, which advances the partition's checkpoint; dashboards
 * page receipts with candidate counts and watch them live. Receipts belong to
 * their owner: a user reads and writes their own, a service principal any.
 * No SQL here.
 */
import { createContextCache } from '@pothos/core';
import DataLoader from 'dataloader';
import * as sweeps from '../src/store/sweeps/index.js';
import type {
  SweepCandidate,
  SweepCandidatePage,
  SweepCandidatePageRequest,
  SweepCandidateState,
  SweepCheckpoint,
  SweepKey,
  SweepReceipt,
  SweepReceiptKey,
} from '../src/store/sweeps/index.js';
import { announce } from './changes.js';
import type { GraphQLContext } from './context.js';
import { NotFoundError } from './errors.js';
import { NEWEST_FIRST, SWEEP_CANDIDATE_ORDER } from '../src/store/page.js';
import { ConnectionCursors, forwardPageRequest, toConnection, type ConnectionArgs } from './pagination.js';
import { actingOwner, canSeeOwned, viewerDID, visibilityScope } from './viewer.js';

/** Cursors of `candidates`: they name the connection, so another list's cursor is refused. */
const SWEEP_CANDIDATE_CURSORS = new ConnectionCursors('candidates', SWEEP_CANDIDATE_ORDER);

/** Cursors of `sweepReceipts`: they name the connection, so another list's cursor is refused. */
const SWEEP_RECEIPT_CURSORS = new ConnectionCursors('sweepReceipts', NEWEST_FIRST);

export {
  MAX_SWEEP_APPLY_ATTEMPTS,
  SWEEP_CANDIDATE_STATES,
  SWEEP_OUTCOMES,
  type SweepCandidate,
  type SweepCandidateCounts,
  type SweepCheckpoint,
  type SweepReceipt,
} from '../src/store/sweeps/index.js';

/** Most candidates one `recordSweepReceipt` may carry (the body size limit bounds it too). */
export const MAX_CANDIDATES_PER_RECEIPT = 10_000;

const receiptKeyOf = (r: SweepReceiptKey): SweepReceiptKey => ({ ownerDID: r.ownerDID, connectorName: r.connectorName, partition: r.partition, provenance: r.provenance });
const receiptCacheKey = (r: SweepReceiptKey) => JSON.stringify([r.ownerDID, r.connectorName, r.partition, r.provenance]);

/** Batch loader of the `SweepReceipt` node: invisible rows load as null, like missing ones. */
export async function loadSweepReceiptsByNodeKeys(nodeKeys: readonly string[], ctx: GraphQLContext): Promise<(SweepReceipt | null)[]> {
  const rows = await sweeps.getSweepReceiptsByNodeKeys(ctx.store, nodeKeys);
  return rows.map((r) => (r !== null && canSeeOwned(ctx.viewer, r) ? r : null));
}

/**
 * Per-request loaders of everything hung off a receipt or a partition, so a
 * page of receipts with their counts, checkpoints and first candidates costs
 * one statement per kind, not one per receipt.
 */
const sweepLoaders = createContextCache((ctx: GraphQLContext) => ({
  receiptByKey: new DataLoader((keys: readonly SweepReceiptKey[]) => sweeps.getSweepReceiptsByKeys(ctx.store, keys), { cacheKeyFn: receiptCacheKey, maxBatchSize: 500 }),
  checkpoint: new DataLoader((keys: readonly SweepKey[]) => sweeps.getSweepCheckpointsByKeys(ctx.store, keys), {
    cacheKeyFn: (k) => JSON.stringify([k.ownerDID, k.connectorName, k.partition]),
    maxBatchSize: 500,
  }),
  counts: new DataLoader((keys: readonly SweepReceiptKey[]) => sweeps.countSweepCandidatesByReceiptKeys(ctx.store, keys), { cacheKeyFn: receiptCacheKey, maxBatchSize: 500 }),
  // Keys that share a page request are read together: one statement per distinct request.
  candidatePages: new DataLoader(
    async (keys: readonly { receipt: SweepReceiptKey; request: SweepCandidatePageRequest }[]) => {
      const groups = new Map<string, number[]>();
      keys.forEach((key, index) => {
        const group = JSON.stringify(key.request);
        groups.set(group, [...(groups.get(group) ?? []), index]);
      });
      const pages: SweepCandidatePage[] = new Array(keys.length);
      for (const indexes of groups.values()) {
        const request = keys[indexes[0]!]!.request;
        const found = await sweeps.getSweepCandidatePages(ctx.store, indexes.map((i) => keys[i]!.receipt), request);
        indexes.forEach((i, n) => (pages[i] = found[n]!));
      }
      return pages;
    },
    { cacheKeyFn: (k) => JSON.stringify([receiptCacheKey(k.receipt), k.request]), maxBatchSize: 500 },
  ),
}));

/** The receipt a candidate belongs to (visible with it: same owner). */
export function candidateReceipt(candidate: SweepCandidate, ctx: GraphQLContext): Promise<SweepReceipt | null> {
  return sweepLoaders(ctx).receiptByKey.load(receiptKeyOf(candidate));
}

/** The partition's checkpoint, null before its first commit. */
export function partitionCheckpoint(receipt: SweepReceipt, ctx: GraphQLContext): Promise<SweepCheckpoint | null> {
  return sweepLoaders(ctx).checkpoint.load({ ownerDID: receipt.ownerDID, connectorName: receipt.connectorName, partition: receipt.partition });
}

/** `SweepReceipt.candidateCounts`: every state with its count. */
export async function candidateCounts(receipt: SweepReceipt, ctx: GraphQLContext): Promise<{ state: SweepCandidateState; count: number }[]> {
  const counts = await sweepLoaders(ctx).counts.load(receiptKeyOf(receipt));
  return sweeps.SWEEP_CANDIDATE_STATES.map((state) => ({ state, count: counts[state] }));
}

/** `SweepReceipt.candidates`: the receipt's candidates by document id, forward pages, optionally by state. */
export async function receiptCandidates(
  receipt: SweepReceipt,
  args: ConnectionArgs & { states?: SweepCandidateState[] | null },
  ctx: GraphQLContext,
) {
  const request = forwardPageRequest(args, SWEEP_CANDIDATE_CURSORS);
  const pageRequest: SweepCandidatePageRequest = {
    first: request.first,
    ...(request.after !== undefined && { after: request.after }),
    ...(args.states != null && { states: [...new Set(args.states)].sort() }),
  };
  const page = await sweepLoaders(ctx).candidatePages.load({ receipt: receiptKeyOf(receipt), request: pageRequest });
  const counts = () => sweepLoaders(ctx).counts.load(receiptKeyOf(receipt));
  return {
    ...toConnection(request, { items: page.candidates, hasMore: page.hasMore }, SWEEP_CANDIDATE_CURSORS),
    totalCount: async () => {
      const byState = await counts();
      return (pageRequest.states ?? sweeps.SWEEP_CANDIDATE_STATES).reduce((sum, state) => sum + byState[state], 0);
    },
  };
}

/** Filter arguments of `sweepReceipts` and `sweepReceiptsChanged`. */
export interface SweepReceiptFilterArgs {
  ownerDID?: string | null;
  connectorName?: string | null;
  partition?: string | null;
  committed?: boolean | null;
}

function toStoreFilter(filter: SweepReceiptFilterArgs | null | undefined): sweeps.SweepReceiptFilter {
  return {
    ...(filter?.ownerDID != null && { ownerDID: filter.ownerDID }),
    ...(filter?.connectorName != null && { connectorName: filter.connectorName }),
    ...(filter?.partition != null && { partition: filter.partition }),
    ...(filter?.committed != null && { committed: filter.committed }),
  };
}

/** Whether a receipt matches a filter (for the change streams, which see one receipt at a time). */
export function sweepReceiptMatches(filter: SweepReceiptFilterArgs | null | undefined) {
  return (receipt: SweepReceipt) =>
    (filter?.ownerDID == null || filter.ownerDID === receipt.ownerDID) &&
    (filter?.connectorName == null || filter.connectorName === receipt.connectorName) &&
    (filter?.partition == null || filter.partition === receipt.partition) &&
    (filter?.committed == null || filter.committed === (receipt.committedAt !== null));
}

/** `sweepReceipts`: the viewer's receipts (a service sees all), newest first, keyset-paged forward. */
export async function listSweepReceipts(args: ConnectionArgs & { filter?: SweepReceiptFilterArgs | null }, ctx: GraphQLContext) {
  const request = forwardPageRequest(args, SWEEP_RECEIPT_CURSORS);
  const scope = { visibleTo: visibilityScope(ctx.viewer), filter: toStoreFilter(args.filter) };
  const page = await sweeps.listSweepReceipts(ctx.store, { ...scope, first: request.first, ...(request.after && { after: request.after }) });
  return {
    ...toConnection(request, { items: page.receipts, hasMore: page.hasMore }, SWEEP_RECEIPT_CURSORS),
    totalCount: () => sweeps.countSweepReceipts(ctx.store, scope),
  };
}

/** The receipt key an API call names; the owner defaults to the viewer. */
interface ReceiptKeyArgs {
  ownerDID?: string | null;
  connectorName: string;
  partition: string;
}

/** `sweepReceipt(…)`: one receipt by its key; null when missing or not visible. */
export async function sweepReceiptByKey(args: ReceiptKeyArgs & { provenance: string }, ctx: GraphQLContext): Promise<SweepReceipt | null> {
  const key = { ownerDID: args.ownerDID ?? viewerDID(ctx.viewer), connectorName: args.connectorName, partition: args.partition, provenance: args.provenance };
  const receipt = await sweepLoaders(ctx).receiptByKey.load(key);
  return receipt !== null && canSeeOwned(ctx.viewer, receipt) ? receipt : null;
}

/** `sweepCheckpoint(…)`: a partition's checkpoint; null before its first commit or when not visible. */
export async function sweepCheckpoint(args: ReceiptKeyArgs, ctx: GraphQLContext): Promise<SweepCheckpoint | null> {
  const key = { ownerDID: args.ownerDID ?? viewerDID(ctx.viewer), connectorName: args.connectorName, partition: args.partition };
  const checkpoint = await sweepLoaders(ctx).checkpoint.load(key);
  return checkpoint !== null && canSeeOwned(ctx.viewer, checkpoint) ? checkpoint : null;
}

/** `dueSweepCandidates` (service principals): one owner's connector's pending candidates due now, earliest first. */
export function listDueSweepCandidates(args: { ownerDID: string; connectorName: string; first: number }, ctx: GraphQLContext): Promise<SweepCandidate[]> {
  return sweeps.listDueSweepCandidates(ctx.store, { ownerDID: args.ownerDID, connectorName: args.connectorName, limit: args.first });
}

/** Input of `recordSweepReceipt`. */
export interface RecordSweepReceiptArgs extends ReceiptKeyArgs {
  provenance: string;
  sequence: number;
  modelID: string;
  scope: string;
  keep: string;
  sourceFetchHLC: string;
  predicate?: unknown;
  kind: string;
  complete: boolean;
  candidates: { documentID: string; sourceID: string; modelID: string }[];
}

/**
 * `recordSweepReceipt`: one listing pass and its deletion candidates, in one
 * transaction; replaying an identical receipt writes nothing, a different
 * one under the same key is an IdempotencyConflictError. The predicate is
 * JSON, kept as its text.
 */
export async function recordSweepReceipt(input: RecordSweepReceiptArgs, ctx: GraphQLContext): Promise<{ created: boolean; receipt: SweepReceipt }> {
  const ownerDID = actingOwner(ctx.viewer, input.ownerDID);
  const result = await sweeps.recordSweepReceipt(ctx.store, {
    key: { ownerDID, connectorName: input.connectorName, partition: input.partition, provenance: input.provenance },
    sequence: input.sequence,
    modelID: input.modelID,
    scope: input.scope,
    keep: input.keep,
    sourceFetchHLC: input.sourceFetchHLC,
    predicate: input.predicate == null ? null : JSON.stringify(input.predicate),
    kind: input.kind,
    complete: input.complete,
    candidates: input.candidates,
  });
  if (result.created) await announce(ctx, 'sweepReceipt', [result.receipt.nodeKey]);
  return result;
}

/** A receipt's predicate as JSON: stored as JSON text by the API; text written by another client comes back as a string. */
export function predicateOf(receipt: SweepReceipt): unknown {
  if (receipt.predicate === null) return null;
  try {
    return JSON.parse(receipt.predicate);
  } catch {
    return receipt.predicate;
  }
}

function candidateKeyOf(receipt: SweepReceipt | null, documentID: string): sweeps.SweepCandidateKey {
  if (receipt === null) throw new NotFoundError('sweep receipt');
  return { ...receiptKeyOf(receipt), documentID };
}

/** `recordSweepOutcome`: a pending candidate of a visible receipt was applied (deleted locally) or kept. */
export async function recordSweepOutcome(
  receipt: SweepReceipt | null,
  input: { documentID: string; outcome: 'applied' | 'kept' },
  ctx: GraphQLContext,
): Promise<{ candidate: SweepCandidate }> {
  const candidate = await sweeps.recordSweepOutcome(ctx.store, { candidateKey: candidateKeyOf(receipt, input.documentID), outcome: input.outcome });
  await announce(ctx, 'sweepReceipt', [receipt?.nodeKey]);
  return { candidate };
}

/** `recordSweepApplyFailure`: applying a pending candidate failed; backoff, and `failed` after the maximum. */
export async function recordSweepApplyFailure(
  receipt: SweepReceipt | null,
  input: { documentID: string; error: string },
  ctx: GraphQLContext,
): Promise<{ candidate: SweepCandidate }> {
  const candidate = await sweeps.recordSweepApplyFailure(ctx.store, { candidateKey: candidateKeyOf(receipt, input.documentID), error: input.error });
  await announce(ctx, 'sweepReceipt', [receipt?.nodeKey]);
  return { candidate };
}

/** `commitSweepReceipt`: closes a visible receipt and advances its partition's checkpoint, never backwards. */
export async function commitSweepReceipt(receipt: SweepReceipt | null, ctx: GraphQLContext): Promise<sweeps.CommitSweepReceiptResult> {
  if (receipt === null) throw new NotFoundError('sweep receipt');
  const result = await sweeps.commitSweepReceipt(ctx.store, receiptKeyOf(receipt));
  if (result.newlyCommitted) await announce(ctx, 'sweepReceipt', [receipt.nodeKey]);
  return result;
}
