/**
 * Node only: a {@link StoreTransport} over `node:http` / `node:https` with a
 * keep-alive agent. Node's `fetch` (undici, with its web streams and
 * `Request`/`Response` objects) costs a worker three to four times the CPU of
 * a plain `http.request` per request on loopback (bench/queue-peer.ts
 * profiles: about half of a worker process's CPU was `fetch`), so the worker
 * runtime's client posts this way in Node (`storeClientFromKeyFile`). Like
 * `fetch`, it asks for compressed answers unless the client asked for
 * `identity` (its default on loopback), and inflates them.
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
