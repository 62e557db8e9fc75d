/**
 * Observation records and repair obligations over the API (SPEC §3.6).
 * Records are keyed by their signer (`owner`): a user writes and reads their
 * own, a service principal any. Repairs are one per document; the "written
 * since" feed is the workers' (service principals only). No SQL here.
 */
import * as observations from '../src/store/observations/index.js';
import type { ObservationRecord, ObservationRepair } from '../src/store/observations/index.js';
import type { GraphQLContext } from './context.js';
import { ForbiddenError } from './errors.js';
import { REPAIR_WRITTEN_ORDER } from '../src/store/page.js';
import { ConnectionCursors, forwardPageRequest, toConnection, type ConnectionArgs } from './pagination.js';
import { actingOwner, canSeeOwned, visibilityScope } from './viewer.js';

/** Cursors of `repairsWrittenSince`: they name the connection, so another list's cursor is refused. */
const REPAIR_CURSORS = new ConnectionCursors('repairsWrittenSince', REPAIR_WRITTEN_ORDER);

export { OBSERVATION_RECORD_TYPE, type ObservationRecord, type ObservationRepair } from '../src/store/observations/index.js';

/** Records and repairs name their owner `owner`; the access rule is that of any owned row. */
const ownedBy = (row: { owner: string }) => ({ ownerDID: row.owner });

/** Batch loader of each document's visible observation records. */
export async function loadObservationRecordsByDocumentIDs(documentIDs: readonly string[], ctx: GraphQLContext): Promise<ObservationRecord[][]> {
  const owner = visibilityScope(ctx.viewer);
  const byDocument = await observations.getObservationRecordsByDocumentIDs(ctx.store, documentIDs, owner === null ? {} : { owner });
  return documentIDs.map((id) => byDocument.get(id) ?? []);
}

/** Batch loader of each document's visible repair obligation. */
export async function loadRepairsByDocumentIDs(documentIDs: readonly string[], ctx: GraphQLContext): Promise<(ObservationRepair | null)[]> {
  const byDocument = await observations.getObservationRepairsByDocumentIDs(ctx.store, documentIDs);
  return documentIDs.map((id) => {
    const repair = byDocument.get(id) ?? null;
    return repair !== null && canSeeOwned(ctx.viewer, ownedBy(repair)) ? repair : null;
  });
}

/** `observationRecords(documentID, owner)`: a document's records, the viewer's own unless a service. */
export async function listObservationRecords(args: { documentID: string; owner?: string | null }, ctx: GraphQLContext): Promise<ObservationRecord[]> {
  const visible = visibilityScope(ctx.viewer);
  // A user naming another signer sees nothing, exactly as if there were no records.
  if (visible !== null && args.owner != null && args.owner !== visible) return [];
  const owner = visible ?? args.owner ?? undefined;
  return observations.listObservationRecords(ctx.store, { documentID: args.documentID, ...(owner !== undefined && { owner }) });
}

/** Input of `putObservationRecord`. */
export interface PutObservationRecordArgs {
  type: string;
  owner?: string | null;
  documentID: string;
  opHash: string;
  hlc: string;
  opJWT: string;
  payload?: Uint8Array | null;
}

/**
 * `putObservationRecord`: stores a signed observation op, idempotent on
 * (type, owner, document, op hash). Only type `connector.observation` is
 * accepted (`ObservationRecordTypeError`). The signer defaults to the viewer.
 */
export async function putObservationRecord(input: PutObservationRecordArgs, ctx: GraphQLContext): Promise<{ inserted: boolean }> {
  const owner = actingOwner(ctx.viewer, input.owner);
  const inserted = await observations.putObservationRecord(ctx.store, {
    type: input.type,
    owner,
    id: input.documentID,
    opHash: input.opHash,
    hlc: input.hlc,
    opJWT: input.opJWT,
    payload: input.payload ?? null,
  });
  return { inserted };
}

/** Input of `upsertObservationRepair`. */
export interface UpsertObservationRepairArgs {
  documentID: string;
  owner?: string | null;
  fetchHLC: string;
  decisionHLC: string;
  present: boolean;
  valueDigest?: string | null;
}

/** `upsertObservationRepair`: writes (replaces) a document's repair; a user may not replace another owner's. */
export async function upsertObservationRepair(input: UpsertObservationRepairArgs, ctx: GraphQLContext): Promise<{ repair: ObservationRepair }> {
  const owner = actingOwner(ctx.viewer, input.owner);
  const repair = { documentID: input.documentID, owner, fetchHLC: input.fetchHLC, decisionHLC: input.decisionHLC, present: input.present, valueDigest: input.valueDigest ?? null };
  if (ctx.viewer.kind === 'service') return { repair: await observations.upsertObservationRepair(ctx.store, repair) };
  const stored = await observations.upsertObservationRepair(ctx.store, repair, { ifOwnedBy: owner });
  if (stored === null) throw new ForbiddenError('this document’s repair obligation belongs to another owner');
  return { repair: stored };
}

/** `deleteObservationRepair`: removes the document's visible repair; false when there was none the viewer may see. */
export async function deleteObservationRepair(documentID: string, ctx: GraphQLContext): Promise<{ deleted: boolean }> {
  const owner = visibilityScope(ctx.viewer);
  return { deleted: await observations.deleteObservationRepair(ctx.store, documentID, owner === null ? {} : { owner }) };
}

/**
 * `repairsWrittenSince` (service principals): repairs in (writtenAt,
 * documentID) order after the cursor. A reader keeps the last `endCursor`
 * and asks again later: a rewritten repair moves to the end of the order, so
 * it is seen again. Only repairs written before the current millisecond are
 * listed, so a cursor never skips a repair written in the same millisecond.
 */
export async function repairsWrittenSince(args: ConnectionArgs, ctx: GraphQLContext) {
  const request = forwardPageRequest(args, REPAIR_CURSORS);
  const page = await observations.listRepairsWrittenSince(ctx.store, { after: request.after ?? null, limit: Math.max(request.first, 1) });
  const repairs = request.first === 0 ? [] : page.repairs;
  return {
    ...toConnection(request, { items: repairs, hasMore: request.first === 0 ? page.repairs.length > 0 : page.hasMore }, REPAIR_CURSORS),
    totalCount: () => observations.countObservationRepairs(ctx.store),
  };
}
