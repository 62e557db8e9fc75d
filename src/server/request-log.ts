/**
 * One log line per HTTP request (issue 12 item 3): method, path, status,
 * duration, GraphQL operation name, request id and viewer kind (`service`,
 * `user`, `anonymous`; never a DID's token or any header). Requests slower
 * than the threshold are logged at warn, the others at info. For a
 * subscription over SSE the line is written when the stream starts.
 */
import type { Plugin } from 'graphql-yoga';
import type { Logger } from './logger.js';

/** What the request log learns about a request on its way through. */
export interface RequestLogNotes {
  /** Records the viewer kind once the context knows it. */
  noteViewer(request: Request, kind: 'service' | 'user' | 'anonymous'): void;
  /** Records the operation name of a request whose params yoga did not read (the graphql-sse endpoint). */
  noteOperation(request: Request, operationName: string): void;
}

/** The yoga plugin, and the hook the context factory calls. */
export function useRequestLog(logger: Logger, slowMs: number, requestIDOf: (request: Request) => string): Plugin & RequestLogNotes {
  const log = logger.child({ component: 'http' });
  const started = new WeakMap<Request, number>();
  const operationNames = new WeakMap<Request, string>();
  const viewers = new WeakMap<Request, string>();
  return {
    noteViewer: (request, kind) => void viewers.set(request, kind),
    noteOperation: (request, operationName) => void operationNames.set(request, operationName),
    onRequest: ({ request }) => void started.set(request, performance.now()),
    onParams: ({ params, request }) => {
      if (typeof params.operationName === 'string' && params.operationName.length <= 200) operationNames.set(request, params.operationName);
    },
    onResponse: ({ request, response }) => {
      const begin = started.get(request);
      if (begin === undefined) return;
      const durationMs = Math.round((performance.now() - begin) * 10) / 10;
      const line = {
        method: request.method,
        path: new URL(request.url).pathname,
        status: response.status,
        durationMs,
        operationName: operationNames.get(request) ?? null,
        requestID: requestIDOf(request),
        viewer: viewers.get(request) ?? 'none',
      };
      if (durationMs > slowMs) log.warn(line, 'slow request');
      else log.info(line, 'request');
    },
  };
}
