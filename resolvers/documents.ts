/**
 * A document's connector state: per-request loaders of its visible
 * operations, watch, trim record and sweep candidates, and whether any of
 * them means connector work remains. No SQL here.
 */
import { createContextCache } from '@pothos/core';
import DataLoader from 'dataloader';
import { sweepDocument as sweepDocumentRows, type DocumentSweepResult } from '../src/store/document-sweep/index.js';
import type { GraphQLResolveInfo } from 'graphql';
import { LIVE_OPERATION_STATES, type ConnectorOperation, type OperationShape } from '../src/store/operations/index.js';
import { getSweepCandidatesByDocumentIDs, type SweepCandidate } from '../src/store/sweeps/index.js';
import type { GraphQLContext } from './context.js';
import { loadEntityTrimsByDocumentIDs } from './entity-trim.js';
import { loadObservationRecordsByDocumentIDs, loadRepairsByDocumentIDs } from './observations.js';
import { loadOperationsByDocumentIDs, selectedOperationShape } from './operations.js';
import { canSeeOwned, requireService } from './viewer.js';
import { watchByDocumentLoader } from './watches.js';

/** Batch loader of each document's visible sweep candidates (deletion candidates of a listing pass). */
export async function loadSweepCandidatesByDocumentIDs(documentIDs: readonly string[], ctx: GraphQLContext): Promise<SweepCandidate[][]> {
  const byDocument = await getSweepCandidatesByDocumentIDs(ctx.store, documentIDs);
  return documentIDs.map((id) => (byDocument.get(id) ?? []).filter((c) => canSeeOwned(ctx.viewer, c)));
}

/**
 * Per-request loaders keyed by document id: N documents cost one statement
 * per table, and `hasConnectorWork` reuses what the other fields loaded.
 */
export const documentLoaders = createContextCache((ctx: GraphQLContext) => {
  const options = { maxBatchSize: 500 };
  return {
    watch: watchByDocumentLoader(ctx),
    trim: new DataLoader((ids: readonly string[]) => loadEntityTrimsByDocumentIDs(ids, ctx), options),
    candidates: new DataLoader((ids: readonly string[]) => loadSweepCandidatesByDocumentIDs(ids, ctx), options),
    observationRecords: new DataLoader((ids: readonly string[]) => loadObservationRecordsByDocumentIDs(ids, ctx), options),
    repair: new DataLoader((ids: readonly string[]) => loadRepairsByDocumentIDs(ids, ctx), options),
  };
});

/** The request's loaders of each document's visible operations, one per shape read (each its own statement). */
const operationLoaders = createContextCache(() => new Map<OperationShape, DataLoader<string, ConnectorOperation[]>>());

function operationsLoader(ctx: GraphQLContext, shape: OperationShape): DataLoader<string, ConnectorOperation[]> {
  const loaders = operationLoaders(ctx);
  let loader = loaders.get(shape);
  if (loader === undefined) {
    loader = new DataLoader((ids: readonly string[]) => loadOperationsByDocumentIDs(ids, ctx, shape), { maxBatchSize: 500 });
    loaders.set(shape, loader);
  }
  return loader;
}

/** `DocumentConnectorState.operations`: the document's visible operations, with the columns the selection needs. */
export function documentOperations(documentID: string, ctx: GraphQLContext, info: GraphQLResolveInfo): Promise<ConnectorOperation[]> {
  return operationsLoader(ctx, selectedOperationShape(info)).load(documentID);
}

/**
 * Whether the document has connector work the viewer can see: a watch, a
 * sweep candidate, a trim record or an unfinished operation (SPEC §3.6).
 * Built from the same per-request loaders as the other document fields, so
 * it costs no statement of its own beyond the candidates.
 */
export async function hasConnectorWork(documentID: string, ctx: GraphQLContext): Promise<boolean> {
  const loaders = documentLoaders(ctx);
  const [operations, watch, trim, candidates] = await Promise.all([
    // Any shape has the state: the loader `operations` already made, if any, so the two share a statement.
    (operationLoaders(ctx).values().next().value ?? operationsLoader(ctx, 'brief')).load(documentID),
    loaders.watch.load(documentID),
    loaders.trim.load(documentID),
    loaders.candidates.load(documentID),
  ]);
  const live: readonly string[] = LIVE_OPERATION_STATES;
  return watch !== null || trim !== null || candidates.length > 0 || operations.some((op: ConnectorOperation) => live.includes(op.state));
}

/**
 * `sweepDocument` (service principals): the local document was deleted, so
 * its connector rows go too — observation records, repair, trim, watch,
 * candidates and finished operations — in one transaction. Refused with
 * `DocumentSweepUnfinishedOperationError`, deleting nothing, while an
 * unfinished operation names it. Deletions are not streamed to subscribers:
 * a watch or operation that is gone simply stops emitting.
 */
export async function sweepDocument(documentID: string, ctx: GraphQLContext): Promise<DocumentSweepResult> {
  requireService(ctx.viewer, 'sweep a document (a document id names one document across owners)');
  return sweepDocumentRows(ctx.store, documentID);
}

/** Visible connector state of one document: its type is just the id; every field loads. */
export function documentState(documentID: string): { documentID: string } {
  return { documentID };
}
