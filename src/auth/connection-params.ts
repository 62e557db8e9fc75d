/** Credentials of a connection that has no HTTP request of its own (graphql-ws). */
import { INSECURE_VIEWER_DID_HEADER } from './viewer.js';

/**
 * The request headers a WebSocket connection stands for: `authorization`
 * (also spelled `Authorization`) and, for insecure development mode, the
 * viewer DID header, taken from the client's `connectionParams`.
 */
export function connectionParamsHeaders(params: Readonly<Record<string, unknown>> | undefined): Headers {
  const headers = new Headers();
  const authorization = params?.authorization ?? params?.Authorization;
  if (typeof authorization === 'string') headers.set('authorization', authorization);
  const viewerDID = params?.[INSECURE_VIEWER_DID_HEADER];
  if (typeof viewerDID === 'string') headers.set(INSECURE_VIEWER_DID_HEADER, viewerDID);
  return headers;
}
