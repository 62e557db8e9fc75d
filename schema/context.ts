/** What every resolver receives: built fresh for each request. */
import type { Logger } from 'pino';
import type { Viewer } from '../src/auth/index.js';
import type { StoreContext } from '../src/store/context.js';

export interface GraphQLContext {
  /** Who is asking: anonymous, a user DID, or a configured service principal. */
  viewer: Viewer;
  /** The store over this server's database. */
  store: StoreContext;
  /** Correlates log lines of one request; also sent back as `x-request-id`. */
  requestID: string;
  /** The request's logger (carries the request id). */
  log: Logger;
}

/** The DID whose rows the viewer may see, or null for a service principal (sees all). */
export function visibleTo(viewer: Viewer): string | null {
  if (viewer.kind === 'service') return null;
  if (viewer.kind === 'user') return viewer.did;
  // Anonymous viewers never get past the auth scopes; this is the fail-closed value.
  throw new Error('anonymous viewer has no visibility');
}
