/**
 * Entity trim over the API (SPEC §3.6): what a write trimmed from a document
 * to fit a model's caps. Owners read and write their own documents' records;
 * a service principal any. No SQL here.
 */
import { clearEntityTrim as clearTrim, getEntityTrimsByDocumentIDs, setEntityTrim as setTrim, type EntityTrimRecord } from '../src/store/entity-trim/index.js';
import type { GraphQLContext } from './context.js';
import { ForbiddenError } from './errors.js';
import { actingOwner, canSeeOwned, visibilityScope } from './viewer.js';

export type { EntityTrimRecord } from '../src/store/entity-trim/index.js';

/** Batch loader of each document's visible trim record. */
export async function loadEntityTrimsByDocumentIDs(documentIDs: readonly string[], ctx: GraphQLContext): Promise<(EntityTrimRecord | null)[]> {
  const byDocument = await getEntityTrimsByDocumentIDs(ctx.store, documentIDs);
  return documentIDs.map((id) => {
    const trim = byDocument.get(id) ?? null;
    return trim !== null && canSeeOwned(ctx.viewer, trim) ? trim : null;
  });
}

/** Input of `setEntityTrim`. */
export interface SetEntityTrimArgs {
  documentID: string;
  ownerDID?: string | null;
  connectorName: string;
  trimmedFields: Record<string, unknown>;
}

/**
 * `setEntityTrim`: records (replaces) what the last write trimmed. For the
 * viewer (a service may name the owner); a user may not replace a record
 * another owner holds for the same document.
 */
export async function setEntityTrim(input: SetEntityTrimArgs, ctx: GraphQLContext): Promise<{ entityTrim: EntityTrimRecord }> {
  const ownerDID = actingOwner(ctx.viewer, input.ownerDID);
  const record = { documentID: input.documentID, ownerDID, connectorName: input.connectorName, trimmedFields: input.trimmedFields };
  if (ctx.viewer.kind === 'service') return { entityTrim: await setTrim(ctx.store, record) };
  const entityTrim = await setTrim(ctx.store, record, { ifOwnedBy: ownerDID });
  if (entityTrim === null) throw new ForbiddenError('this document’s trim record belongs to another owner');
  return { entityTrim };
}

/** `clearEntityTrim`: removes the document's visible trim record; false when there was none (or it is not the viewer's). */
export async function clearEntityTrim(documentID: string, ctx: GraphQLContext): Promise<{ cleared: boolean }> {
  const ownerDID = visibilityScope(ctx.viewer);
  return { cleared: await clearTrim(ctx.store, documentID, ownerDID === null ? {} : { ownerDID }) };
}
