/** Who may see and do what (SPEC §5), as plain functions of the viewer. */
import type { Viewer } from '../src/auth/index.js';
import { ForbiddenError } from './errors.js';

/** Whether a value is a syntactically valid DID (the `DID` scalar's input rule). */
export { isDID } from '../src/auth/index.js';

/** A viewer past the `authenticated` scope. */
export type KnownViewer = Exclude<Viewer, { kind: 'anonymous' }>;

/** The viewer's DID, failing closed for an anonymous viewer (scopes keep them out first). */
export function viewerDID(viewer: Viewer): string {
  if (viewer.kind === 'anonymous') throw new ForbiddenError('sign in with a bearer token');
  return viewer.did;
}

/** The DID a store listing is scoped to: null for a service principal (every row). */
export function visibilityScope(viewer: Viewer): string | null {
  return viewer.kind === 'service' ? null : viewerDID(viewer);
}

/** Whether the viewer may see an operation: its caller or owner, or a service. */
export function canSeeOperation(viewer: Viewer, operation: { callerDID: string; ownerDID: string }): boolean {
  if (viewer.kind === 'service') return true;
  if (viewer.kind === 'anonymous') return false;
  return operation.callerDID === viewer.did || operation.ownerDID === viewer.did;
}

/** Whether the viewer may see an owner's row (watch, sync state, trim): its owner, or a service. */
export function canSeeOwned(viewer: Viewer, row: { ownerDID: string }): boolean {
  if (viewer.kind === 'service') return true;
  if (viewer.kind === 'anonymous') return false;
  return row.ownerDID === viewer.did;
}

/**
 * The owner a write acts for: `requested` (default: the viewer). A non-service
 * viewer may act only as themselves.
 */
export function actingOwner(viewer: Viewer, requested: string | null | undefined): string {
  const did = viewerDID(viewer);
  const owner = requested ?? did;
  if (viewer.kind !== 'service' && owner !== did) throw new ForbiddenError('only a service principal may act for another owner');
  return owner;
}

/**
 * Refuses a write that only service principals may make, as a typed
 * `ForbiddenError` in the mutation's result (queries refuse through their
 * `service` scope, a top-level FORBIDDEN).
 */
export function requireService(viewer: Viewer, what: string): void {
  if (viewer.kind !== 'service') throw new ForbiddenError(`only a service principal may ${what}`);
}
