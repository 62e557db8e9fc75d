/**
 * One log line per HTTP request (issue 12 item 3): method, path, status,
 * duration, GraphQL operation name (sent, or else the document's only
 * operation's name), request id and viewer kind (`service`,
 * `user`, `anonymous`; never a DID's token or any header). Requests slower
 * than the threshold are logged at warn, the others at info. For a
 * subscription over SSE the line is written when the stream starts.
 */
import { Kind, type DocumentNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Logger } from './logger.js';
import { requestState } from './request-state.js';

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
  return {
    noteViewer: (request, kind) => void (requestState(request).viewer = kind),
    noteOperation: (request, operationName) => void (requestState(request).operationName = operationName),
    onRequest: ({ request }) => void (requestState(request).startedAt = performance.now()),
    onParams: ({ params, request }) => {
      if (typeof params.operationName === 'string' && params.operationName.length <= 200) requestState(request).operationName = params.operationName;
    },
    // No operationName sent: the document's only operation names it (most clients send only the query).
    onParse: ({ context }) => {
      const request = (context as { request?: Request }).request;
      if (request === undefined) return;
      return ({ result }) => {
        const state = requestState(request);
        if (state.operationName !== undefined || result === null || result instanceof Error) return;
        const operations = (result as DocumentNode).definitions.filter((definition) => definition.kind === Kind.OPERATION_DEFINITION);
        const name = operations.length === 1 && operations[0]!.kind === Kind.OPERATION_DEFINITION ? operations[0]!.name?.value : undefined;
        if (name !== undefined && name.length <= 200) state.operationName = name;
      };
    },
    onResponse: ({ request, response }) => {
      const state = requestState(request);
      if (state.startedAt === undefined) return;
      const durationMs = Math.round((performance.now() - state.startedAt) * 10) / 10;
      const line = {
        method: request.method,
        path: new URL(request.url).pathname,
        status: response.status,
        durationMs,
        operationName: state.operationName ?? null,
        requestID: requestIDOf(request),
        viewer: state.viewer ?? 'none',
      };
      if (durationMs > slowMs) log.warn(line, 'slow request');
      else log.info(line, 'request');
    },
  };
}
