/**
 * Compressed answers (issue 39 item 3): an answer of at least
 * {@link COMPRESSION_MIN_BYTES} whose type is text (GraphQL's JSON, GraphiQL's
 * page, `/metrics`, a console file the client did not take gzipped) goes out
 * with brotli or gzip, whichever the request's `Accept-Encoding` prefers
 * (RFC 9110 §12.5.3: q-values, `*`, `identity`; brotli on a tie), with
 * `Vary: Accept-Encoding`. Node's zlib compresses the answer yoga already
 * holds whole, on its thread pool, so the event loop is not held.
 *
 * Never compressed: event streams (`text/event-stream`: yoga's SSE on
 * /graphql, graphql-sse on /graphql/stream) and `multipart/mixed`, whose
 * events a compressor would hold back until its buffer filled
 * (graphql-hive/gateway issue 2259); answers without a length (streams),
 * answers already encoded (the console's and GraphiQL's gzipped files; yoga
 * marks its SSE `Content-Encoding: none`), HEAD, 204 and 304.
 *
 * Why not `useContentEncoding` of @whatwg-node/server (0.11.0, under yoga
 * 5.24): it compresses every answer whatever its size or type (event
 * streams included), picks the first listed coding without reading q-values
 * or trimming spaces (`gzip, br` → gzip, `br;q=0` → nothing), runs brotli at
 * quality 11 (463 ms for the 273 kB introspection answer, against 2.2 ms at
 * quality 4 for 11 % more bytes), and decompresses request bodies after
 * MAX_BODY_BYTES counted them. Request bodies are not decompressed here: a
 * request with a `Content-Encoding` is refused (415, app.ts), so
 * MAX_BODY_BYTES counts what is parsed.
 *
 * MAX_RESPONSE_BYTES bounds the answer before compression (response-size.ts).
 */
import { promisify } from 'node:util';
import { brotliCompress as brotliCallback, constants, gzip as gzipCallback } from 'node:zlib';
import type { Plugin } from 'graphql-yoga';

const brotliCompress = promisify(brotliCallback);
const gzip = promisify(gzipCallback);

/** Smallest answer compressed, in bytes: below it the saving is a few hundred bytes at most. */
export const COMPRESSION_MIN_BYTES = 1_024;
/** Brotli's quality for answers made per request (11, the library's default, costs 200× the CPU for 11 % fewer bytes). */
export const BROTLI_QUALITY = 4;
/** Gzip's level (zlib's default). */
export const GZIP_LEVEL = 6;

/** The codings offered, in the server's order of preference on a tie. */
export type AnswerEncoding = 'br' | 'gzip';

const COMPRESSIBLE = /^(application\/(json|graphql-response\+json)|text\/(html|plain|css|javascript))\b/i;

/**
 * The coding to answer with for `acceptEncoding` (RFC 9110 §12.5.3), or
 * undefined for none: the highest q of `br` and `gzip` (`x-gzip` is gzip; `*`
 * stands for a coding not listed), brotli when they tie; q=0 refuses.
 */
export function negotiateEncoding(acceptEncoding: string | null): AnswerEncoding | undefined {
  if (acceptEncoding === null || acceptEncoding.trim() === '') return undefined;
  const weights = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [name = '', ...parameters] = part.split(';').map((piece) => piece.trim().toLowerCase());
    if (name === '') continue;
    let q = 1;
    for (const parameter of parameters) {
      const match = /^q=([01](?:\.\d{0,3})?)$/.exec(parameter);
      if (match !== null) q = Math.min(1, Number(match[1]));
    }
    const coding = name === 'x-gzip' ? 'gzip' : name;
    weights.set(coding, Math.max(weights.get(coding) ?? 0, q));
  }
  const weightOf = (coding: AnswerEncoding) => weights.get(coding) ?? weights.get('*') ?? 0;
  const br = weightOf('br');
  const gz = weightOf('gzip');
  if (br === 0 && gz === 0) return undefined;
  return br >= gz ? 'br' : 'gzip';
}

/** Whether `response` (to a request of `method`) is one this plugin may compress, whatever the client accepts. */
function compressible(method: string, response: Response): boolean {
  if (method === 'HEAD' || response.body === null) return false;
  if (response.status < 200 || response.status === 204 || response.status === 206 || response.status === 304) return false;
  if (response.headers.has('content-encoding')) return false;
  return COMPRESSIBLE.test(response.headers.get('content-type') ?? '');
}

/** Adds `Accept-Encoding` to the answer's `Vary` (caches must keep one copy per coding). */
function varyOnAcceptEncoding(headers: Headers): void {
  const vary = headers.get('vary');
  if (vary === null) headers.set('vary', 'Accept-Encoding');
  else if (!/(^|,)\s*(accept-encoding|\*)\s*(,|$)/i.test(vary)) headers.set('vary', `${vary}, Accept-Encoding`);
}

/** `body` in `encoding`, with the settings above. */
export function compressAnswer(body: Uint8Array, encoding: AnswerEncoding): Promise<Buffer> {
  return encoding === 'br'
    ? brotliCompress(body, {
        params: {
          [constants.BROTLI_PARAM_QUALITY]: BROTLI_QUALITY,
          [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
          [constants.BROTLI_PARAM_SIZE_HINT]: body.byteLength,
        },
      })
    : gzip(body, { level: GZIP_LEVEL });
}

/**
 * The yoga plugin (an `onResponse` only): first among the plugins, so the
 * request log's duration includes the compression.
 */
export function useCompressedAnswers(minBytes: number = COMPRESSION_MIN_BYTES): Plugin {
  return {
    onResponse: ({ request, response, setResponse, fetchAPI }) => {
      if (!compressible(request.method, response)) return;
      varyOnAcceptEncoding(response.headers);
      const length = Number(response.headers.get('content-length') ?? Number.NaN);
      // No length: a stream (an event stream is excluded by type already; anything else streamed is left alone too).
      if (!(length >= minBytes)) return;
      const encoding = negotiateEncoding(request.headers.get('accept-encoding'));
      if (encoding === undefined) return;
      return response.arrayBuffer().then(async (buffer) => {
        const body = new Uint8Array(buffer);
        const compressed = await compressAnswer(body, encoding);
        const headers = new fetchAPI.Headers(response.headers);
        // Incompressible after all (already-packed data): the original bytes, as they were.
        const smaller = compressed.byteLength < body.byteLength;
        if (smaller) headers.set('content-encoding', encoding);
        headers.set('content-length', String(smaller ? compressed.byteLength : body.byteLength));
        setResponse(new fetchAPI.Response(smaller ? new Uint8Array(compressed.buffer as ArrayBuffer, compressed.byteOffset, compressed.byteLength) : body, { status: response.status, statusText: response.statusText, headers }));
      });
    },
  };
}
