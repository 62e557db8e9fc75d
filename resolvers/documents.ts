/**
 * A document's connector state: batch loaders for its visible trim record and
 * sweep candidates, and finalize (which commits an operation and arms the
 * document's watch). No SQL here.
 */
import { getEntityTrimsByDocumentIDs, type EntityTrimRecord } from '../src/store/entity-trim/index.js';
import { NotFoundError } from '../src/store/errors.js';
import { finalizeOperationAndArmWatch } from '../src/store/finalize/index.js';
import type { ConnectorOperation } from '../src/store/operations/index.js';
import { LIVE_OPERATION_STATES } from '../src/store/operations/index.js';
import type { ProjectionWatch } from '../src/store/projection-watches/index.js';
import { getSweepCandidatesByDocumentIDs, type SweepCandidate } from '../src/store/sweeps/index.js';
import type { GraphQLContext } from '../schema/context.js';
import { announce } from './changes.js';
import { canSeeOwned } from './viewer.js';

/** Batch loader of each document's visible trim record. */
export async function loadEntityTrimsByDocumentIDs(documentIDs: readonly string[], ctx: GraphQLContext): Promise<(EntityTrimRecord | null)[]> {
  const byDocument = await getEntityTrimsByDocumentIDs(ctx.store, documentIDs);
  return documentIDs.map((id) => {
    const trim = byDocument.get(id) ?? null;
    return trim !== null && canSeeOwned(ctx.viewer, trim) ? trim : null;
  });
}

/** Batch loader of each document's visible sweep candidates (deletion candidates of a listing pass). */
export async function loadSweepCandidatesByDocumentIDs(documentIDs: readonly string[], ctx: GraphQLContext): Promise<SweepCandidate[][]> {
  const byDocument = await getSweepCandidatesByDocumentIDs(ctx.store, documentIDs);
  return documentIDs.map((id) => (byDocument.get(id) ?? []).filter((c) => canSeeOwned(ctx.viewer, c)));
}

/**
 * Whether the document has connector work the viewer can see: a watch, a
 * sweep candidate, a trim record or an unfinished operation (SPEC §3.6).
 * Built from the same per-request loaders as the other document fields, so
 * it costs no statement of its own beyond the candidates.
 */
export function hasConnectorWork(parts: {
  operations: ConnectorOperation[];
  watch: ProjectionWatch | null;
  trim: EntityTrimRecord | null;
  candidates: SweepCandidate[];
}): boolean {
  const live: readonly string[] = LIVE_OPERATION_STATES;
  return parts.watch !== null || parts.trim !== null || parts.candidates.length > 0 || parts.operations.some((op) => live.includes(op.state));
}

/** Input of `finalizeOperation`. */
export interface FinalizeArgs {
  version: number;
  leaseToken: string;
  documentID: string;
  sourceID: string;
  resultEntity?: unknown;
  currentWinnerDigest?: string | null;
}

/**
 * `finalizeOperation` (SPEC §3.4): commits the operation and arms the watch of
 * its owner, connector, model and account with `sourceID`, in one
 * transaction; a stale lease or version changes nothing and returns false.
 */
export async function finalizeOperation(operation: ConnectorOperation | null, input: FinalizeArgs, ctx: GraphQLContext) {
  if (operation === null) throw new NotFoundError('operation');
  const result = await finalizeOperationAndArmWatch(ctx.store, {
    key: { callerDID: operation.callerDID, operationID: operation.operationID },
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
  });
  // A lost finalize wrote nothing and announces nothing.
  if (result.finalized) {
    await announce(ctx, 'operation', [operation.nodeKey]);
    await announce(ctx, 'watch', [result.watch?.nodeKey]);
  }
  return result;
}
