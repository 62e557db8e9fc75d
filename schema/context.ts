/** What every resolver receives: built fresh for each request. */
import type { StoreContext } from '../src/store/context.js';

export interface GraphQLContext {
  /** The store over this server's database. */
  store: StoreContext;
  /** Correlates log lines of one request; also sent back as `x-request-id`. */
  requestID: string;
}
