/**
 * What the server learns about one HTTP request on its way through (its id,
 * when it started, its operation name, the viewer's kind), kept on the
 * request itself under a private symbol.
 *
 * It used to live in five process-wide WeakMaps keyed by the request. Every
 * request then added entries to long-lived tables, which the young-generation
 * collector must trace and clear: on the dashboard list that was a good share
 * of the collector's work per request (issue 21, bench/instructions.ts).
 * A property of the request dies with it, at no cost to the collector.
 *
 * A request the graphql-sse endpoint derives from the one that arrived
 * shares that request's state (one id, one log line).
 */

const STATE = Symbol('connector-store.request-state');

export interface RequestState {
  /** The request id (sent as `x-request-id`, or made here); set on first use. */
  id?: string;
  /** `performance.now()` when the request arrived. */
  startedAt?: number;
  /** The operation name, when the client named one. */
  operationName?: string;
  /** The viewer's kind once the context knows it. */
  viewer?: 'service' | 'user' | 'anonymous';
}

type WithState = Request & { [STATE]?: RequestState };

/** The request's state, made on first use. */
export function requestState(request: Request): RequestState {
  const holder = request as WithState;
  return (holder[STATE] ??= {});
}

/** `derived` (a request made in place of `original`) shares `original`'s state from now on. */
export function shareRequestState(original: Request, derived: Request): void {
  (derived as WithState)[STATE] = requestState(original);
}
