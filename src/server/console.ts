/**
 * Serves the operations console at /console (issue 13 item 2) from its
 * build in memory (console-build.ts): static files with their content
 * types, `index.html` for every other path under /console/ (the app routes
 * in the browser), hashed assets cached for a year, `index.html` never
 * stored, and a Content-Security-Policy that allows nothing but this origin.
 *
 * In development (NODE_ENV=development), `POST /console/dev-token` hands the
 * console a fresh token of the local key, under GraphiQL's rule
 * (dev-credentials.ts: loopback connection, loopback host) and only to this
 * server's own pages (the request's Origin must be the server's): the
 * console then signs in without pasting anything. Everywhere else it answers
 * 404 and the console asks for a token or a key.
 */
import type { Plugin } from 'graphql-yoga';
import type { ConsoleBuild, ConsoleFile } from './console-build.js';
import { developmentTokenAllowedFor, type DevelopmentCredentials } from './dev-credentials.js';
import type { Logger } from './logger.js';

/** What yoga hands an `onRequest` hook. */
type OnRequestPayload = Parameters<NonNullable<Plugin['onRequest']>>[0];

/** Where the console is served. */
export const CONSOLE_PATH = '/console';
/** The development sign-in endpoint. */
export const CONSOLE_DEV_TOKEN_PATH = `${CONSOLE_PATH}/dev-token`;

/** Nothing but this origin: scripts, styles, fetches (GraphQL, graphql-sse), images; no frames, no plugins. */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** What {@link useConsole} needs. */
export interface ConsoleOptions {
  /** The built console, or undefined when it could not be built (then /console explains). */
  build: ConsoleBuild | undefined;
  /** The local key (development only; see the file comment). */
  developmentCredentials?: Pick<DevelopmentCredentials, 'mintToken' | 'did' | 'ttlSeconds'> | undefined;
  logger: Logger;
}

/** The yoga plugin serving /console. */
export function useConsole({ build, developmentCredentials, logger }: ConsoleOptions): Plugin {
  return {
    // Synchronous until the path is the console's: every other request (each GraphQL one) passes without a promise.
    onRequest: ({ request, url, serverContext, endResponse, fetchAPI }) => {
      if (url.pathname !== CONSOLE_PATH && !url.pathname.startsWith(`${CONSOLE_PATH}/`)) return;
      return serveConsole({ request, url, serverContext, endResponse, fetchAPI });
    },
  };

  async function serveConsole({ request, url, serverContext, endResponse, fetchAPI }: Pick<OnRequestPayload, 'request' | 'url' | 'serverContext' | 'endResponse' | 'fetchAPI'>): Promise<void> {
    if (url.pathname === CONSOLE_DEV_TOKEN_PATH) {
      endResponse(await devToken(request, serverContext as Record<string, unknown> | undefined));
      return;
    }
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      endResponse(new fetchAPI.Response(null, { status: 405, headers: { allow: 'GET, HEAD' } }));
      return;
    }
    if (url.pathname === CONSOLE_PATH) {
      endResponse(new fetchAPI.Response(null, { status: 308, headers: { location: `${CONSOLE_PATH}/${url.search}` } }));
      return;
    }
    if (build === undefined) {
      endResponse(
        new fetchAPI.Response('The console is not built: run `npm run console:build` (see the server log for why the build at start failed).\n', {
          status: 503,
          headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' },
        }),
      );
      return;
    }
    const path = url.pathname.slice(CONSOLE_PATH.length + 1);
    let file = build.files.get(path);
    // A missing asset is a 404 (a stale tab asking for an old hash must not get HTML as JavaScript); any other path is a route of the app.
    if (file === undefined && (path.startsWith('assets/') || /\.[a-z0-9]+$/i.test(path))) {
      endResponse(new fetchAPI.Response('not found\n', { status: 404, headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' } }));
      return;
    }
    file ??= build.files.get('index.html')!;
    endResponse(serveFile(file, request, fetchAPI.Response));
  }

  async function devToken(request: Request, serverContext: Record<string, unknown> | undefined): Promise<Response> {
    const refuse = (why: string) =>
      new Response(JSON.stringify({ available: false, reason: why }), { status: 404, headers: { 'content-type': 'application/json', 'cache-control': 'no-store' } });
    if (developmentCredentials === undefined) return refuse('development sign-in is off: NODE_ENV is not development, or the local key could not be loaded');
    if (request.method !== 'POST') return refuse('POST only');
    if (!developmentTokenAllowedFor(request, serverContext)) return refuse('development sign-in is only for pages opened from this machine at a loopback address');
    // Only this server's own pages: a page elsewhere cannot have its answer (no CORS here) nor even ask.
    if (request.headers.get('origin') !== new URL(request.url).origin) return refuse('development sign-in is only for this server’s own pages');
    try {
      const token = await developmentCredentials.mintToken();
      return new Response(JSON.stringify({ available: true, token, did: developmentCredentials.did, expiresInSeconds: developmentCredentials.ttlSeconds }), {
        status: 200,
        headers: { 'content-type': 'application/json', 'cache-control': 'no-store' },
      });
    } catch (error) {
      logger.warn({ err: error }, 'could not mint a development token for the console');
      return refuse('could not mint a token of the local key (see the server log)');
    }
  }
}

/** A file served from memory: what {@link serveFile} needs. */
export type ServedFile = Omit<ConsoleFile, 'path'>;

/** Answers `file` (gzipped when accepted and smaller; cacheable for ever when `immutable`, else `no-store`). */
export function serveFile(file: ServedFile, request: Request, ResponseClass: typeof Response): Response {
  const gzip = file.gzip !== undefined && /\bgzip\b/.test(request.headers.get('accept-encoding') ?? '');
  const body = gzip ? file.gzip! : file.body;
  const headers: Record<string, string> = {
    'content-type': file.contentType,
    'content-length': String(body.length),
    'cache-control': file.immutable ? 'public, max-age=31536000, immutable' : 'no-store',
    'x-content-type-options': 'nosniff',
    'referrer-policy': 'no-referrer',
    vary: 'accept-encoding',
  };
  if (gzip) headers['content-encoding'] = 'gzip';
  if (file.contentType.startsWith('text/html')) {
    headers['content-security-policy'] = CONSOLE_CSP;
    headers['x-frame-options'] = 'DENY';
  }
  return new ResponseClass(request.method === 'HEAD' ? null : new Uint8Array(body), { status: 200, headers });
}
