/**
 * The SharedWorker that holds the console's event stream for every tab of
 * this server (stream-hub.ts says how). The browser starts it with the first
 * console tab and ends it after the last one; a new build of the console
 * has a new script URL, so its tabs get a worker (and a stream) of their own.
 */
import { createStreamHub } from './stream-hub';

const scope = self as unknown as { location: Location; onconnect: ((event: MessageEvent) => void) | null };
const hub = createStreamHub(scope.location.origin);
scope.onconnect = (event) => {
  const port = event.ports[0];
  if (port !== undefined) hub.connect(port);
};
