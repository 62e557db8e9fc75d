/**
 * MAX_BODY_BYTES, without a stream per request. Yoga's own limit
 * (`maxRequestBodySize`) checks a declared Content-Length and then pipes
 * every body through a counting TransformStream as well; on this server that
 * pipe (and the AbortController, and the DOMException Node builds when the
 * pipe finishes) cost about as much as the rest of a `{ __typename }`
 * request (`npx tsx bench/profile.ts typename`). A body that came through
 * Node's HTTP parser with a Content-Length cannot be longer than it says (the
 * parser reads exactly that many bytes; what follows is the next request, and
 * a length beside `Transfer-Encoding` is refused), so only a body with no
 * declared length is counted as it arrives. The answers are yoga's: 413
 * `REQUEST_ENTITY_TOO_LARGE` for a declared or counted excess, 400
 * `BAD_REQUEST` for a length that is not one non-negative integer.
 */
import { IncomingMessage } from 'node:http';
import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';

const CONTENT_LENGTH = /^\d+$/;

const tooLarge = () => new GraphQLError('Request body too large', { extensions: { http: { status: 413 }, code: 'REQUEST_ENTITY_TOO_LARGE' } });
const invalidLength = () => new GraphQLError('Content-Length header is invalid.', { extensions: { http: { status: 400 }, code: 'BAD_REQUEST' } });

type FetchAPI = Parameters<NonNullable<Plugin['onRequestParse']>>[0]['fetchAPI'];

/** `request` with its body counted as it is read: past `limit` bytes the read fails with 413. */
function countingBody(request: Request, limit: number, fetchAPI: FetchAPI): Request {
  // A native stream needs the native TransformStream; whatwg-node's ponyfill body needs its own.
  const Transform = request.body instanceof ReadableStream ? globalThis.TransformStream : fetchAPI.TransformStream;
  let read = 0;
  const body = request.body!.pipeThrough(
    new Transform<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        read += chunk.byteLength;
        if (read > limit) controller.error(tooLarge());
        else controller.enqueue(chunk);
      },
    }),
  );
  return new fetchAPI.Request(request.url, { method: request.method, headers: request.headers, signal: request.signal, body, duplex: 'half' } as RequestInit);
}

/** The yoga plugin; `maxRequestBodySize: false` turns yoga's own off. Last among the plugins, so it wraps whichever parser was chosen. */
export function useRequestBodyLimit(limit: number): Plugin {
  return {
    onRequestParse({ request, requestParser, setRequestParser, serverContext, fetchAPI }) {
      const declared = request.headers.get('content-length');
      if (declared !== null) {
        if (!CONTENT_LENGTH.test(declared)) throw invalidLength();
        if (Number(declared) > limit) throw tooLarge();
        // Bounded by Node's parser; a Request built in process (yoga.fetch) is counted all the same.
        if ((serverContext as { req?: unknown }).req instanceof IncomingMessage) return;
      }
      if (requestParser === undefined || request.body === null) return;
      setRequestParser((next) => requestParser(countingBody(next, limit, fetchAPI)));
    },
  };
}

/**
 * The same rule for a transport that reads bodies itself (graphql-sse on
 * `/graphql/stream`): a declared length is checked first (400 / 413), then
 * the bytes are counted as they arrive. Throws the GraphQLError yoga's
 * path answers with.
 */
export async function readBodyWithin(request: Request, limit: number): Promise<string> {
  const declared = request.headers.get('content-length');
  if (declared !== null) {
    if (!CONTENT_LENGTH.test(declared)) throw invalidLength();
    if (Number(declared) > limit) throw tooLarge();
  }
  if (request.body === null) return '';
  const reader = request.body.getReader();
  const chunks: Uint8Array[] = [];
  let read = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    read += value.byteLength;
    if (read > limit) {
      void reader.cancel().catch(() => {});
      throw tooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString('utf8');
}
