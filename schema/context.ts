/** What every resolver receives: built fresh for each request. */
import type { Logger } from 'pino';
import type { Viewer } from '../src/auth/index.js';
import type { ChangeFeed } from '../src/server/change-feed.js';
import type { StoreContext } from '../src/store/context.js';

/** Per-process guard on open subscriptions (a resource limit, not a data invariant). */
export interface SubscriptionLimiter {
  /** Opens one for `viewerDID`; throws when the viewer is at the cap. Returns its release. */
  open(viewerDID: string): () => void;
  /** Remembers how to end an open stream; returns the function that forgets it. */
  register(end: () => void): () => void;
}

export interface GraphQLContext {
  /** Who is asking: anonymous, a user DID, or a configured service principal. */
  viewer: Viewer;
  /** The store over this server's database. */
  store: StoreContext;
  /** Committed changes: mutations publish to it, subscriptions listen to it. */
  changes: ChangeFeed;
  subscriptions: SubscriptionLimiter;
  /** Correlates log lines of one request; also sent back as `x-request-id`. */
  requestID: string;
  /** The request's logger (carries the request id). */
  log: Logger;
}
