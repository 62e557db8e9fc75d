/**
 * Node only: a {@link StoreTransport} over `node:http` / `node:https` with a
 * keep-alive agent. Node's `fetch` (undici, with its web streams and
 * `Request`/`Response` objects) costs a worker three to four times the CPU of
 * a plain `http.request` per request on loopback (bench/queue-peer.ts
 * profiles: about half of a worker process's CPU was `fetch`), so the worker
 * runtime's client posts this way in Node (`storeClientFromKeyFile`). Like
 * `fetch`, it asks for compressed answers unless the client asked for
 * `identity` (its default on loopback), and inflates them. The subscription
 * stream goes the same way ({@link nodeHTTPStreamFetch}): through `fetch`, the
 * first subscribe loaded undici (about 100 ms of a worker's CPU) and every
 * change event was decoded through its web streams.
 */
import { Agent as HTTPAgent, request as httpRequest, type IncomingMessage } from 'node:http';
import { Agent as HTTPSAgent, request as httpsRequest } from 'node:https';
import { brotliDecompressSync, gunzipSync, inflateSync } from 'node:zlib';
import type { StoreTransport } from './runtime/store-client.js';

/** Options of {@link nodeHTTPTransport}. */
export interface NodeHTTPTransportOptions {
  /** Sockets kept open per server (requests beyond it wait for one). Default: 16. */
  maxSockets?: number;
}

/** Posts through `node:http` (or `node:https`), sockets kept alive between requests. */
export function nodeHTTPTransport(options: NodeHTTPTransportOptions = {}): StoreTransport {
  const agentOptions = { keepAlive: true, maxSockets: options.maxSockets ?? 16 };
  const agents = { 'http:': new HTTPAgent(agentOptions), 'https:': new HTTPSAgent(agentOptions) };
  return (url, { headers, body, signal }) =>
    new Promise((resolve, reject) => {
      const target = new URL(url);
      const secure = target.protocol === 'https:';
      const request = (secure ? httpsRequest : httpRequest)(
        target,
        { method: 'POST', agent: secure ? agents['https:'] : agents['http:'], headers: { 'accept-encoding': 'gzip, deflate, br', ...headers, 'content-length': String(Buffer.byteLength(body)) }, signal },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.once('error', reject);
          response.once('end', () => {
            try {
              resolve({ status: response.statusCode ?? 0, header: (name) => headerOf(response, name), text: inflated(response, Buffer.concat(chunks)) });
            } catch (error) {
              reject(error);
            }
          });
        },
      );
      request.once('error', reject);
      request.end(body);
    });
}

/**
 * The `fetch` the client's subscription stream (graphql-sse) calls, over
 * `node:http` / `node:https`: what graphql-sse reads of an answer (`ok`,
 * `status`, `statusText`, `headers`, and `body` as the response stream, read
 * chunk by chunk as it arrives), nothing more. Asks for the stream as it is
 * (no compression); aborting the signal closes the connection. Not a general
 * `fetch`: for the client's `fetch` option beside {@link nodeHTTPTransport}.
 */
export function nodeHTTPStreamFetch(): typeof fetch {
  const streamFetch = (url: string | URL, init: { method?: string; headers?: Record<string, string>; body?: string | null; signal?: AbortSignal | null } = {}) =>
    new Promise<StreamAnswer>((resolve, reject) => {
      const { signal } = init;
      if (signal?.aborted === true) {
        reject(signal.reason);
        return;
      }
      const target = new URL(url);
      const body = init.body ?? undefined;
      let answered = false;
      const request = (target.protocol === 'https:' ? httpsRequest : httpRequest)(
        target,
        // A connection of its own (no pooled socket), closed when the stream ends.
        { method: init.method ?? 'GET', agent: false, headers: { ...init.headers, ...(body !== undefined && { 'content-length': String(Buffer.byteLength(body)) }) } },
        (response) => {
          answered = true;
          // Its reader sees a failure; this keeps one after the reader stopped from going unhandled.
          response.on('error', () => {});
          const done = () => signal?.removeEventListener('abort', onAbort);
          response.once('end', done).once('close', done);
          const status = response.statusCode ?? 0;
          const ok = status >= 200 && status < 300;
          // A refusal's body is not read (graphql-sse reports the status): let it go.
          if (!ok) response.resume();
          resolve({ ok, status, statusText: response.statusMessage ?? '', headers: { get: (name: string) => headerOf(response, name.toLowerCase()) }, body: ok ? response : null });
        },
      );
      // Aborted: the connection is closed; before an answer the call fails with the reason, after it the stream ends.
      const onAbort = () => {
        if (!answered) reject(signal!.reason);
        request.destroy();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      request.on('error', (error) => {
        signal?.removeEventListener('abort', onAbort);
        reject(error);
      });
      request.end(body);
    });
  return streamFetch as unknown as typeof fetch;
}

/** What {@link nodeHTTPStreamFetch} answers: the part of a `Response` graphql-sse reads. */
interface StreamAnswer {
  ok: boolean;
  status: number;
  statusText: string;
  headers: { get(name: string): string | null };
  body: IncomingMessage | null;
}

function headerOf(response: IncomingMessage, name: string): string | null {
  const value = response.headers[name];
  if (value === undefined) return null;
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The body as text, inflated as its `content-encoding` says. */
function inflated(response: IncomingMessage, body: Buffer): string {
  switch (response.headers['content-encoding']?.trim().toLowerCase()) {
    case 'gzip':
    case 'x-gzip':
      return gunzipSync(body).toString('utf8');
    case 'br':
      return brotliDecompressSync(body).toString('utf8');
    case 'deflate':
      return inflateSync(body).toString('utf8');
    default:
      return body.toString('utf8');
  }
}
