/**
 * Which web pages may talk to this server (issue 12 item 5). By default
 * none but its own: no CORS headers are sent, so a browser page on another
 * origin cannot read any answer (and cannot send the JSON POSTs or the auth
 * header at all, since those need a preflight). `CORS_ORIGINS` names the
 * origins that may, exactly (`https://dash.example.com`); they get
 * credentials and the headers a client sends.
 *
 * In the development header mode (INSECURE_HEADER_AUTH, loopback only) a
 * request naming another origin is refused outright, HTTP and WebSocket
 * alike: there the `x-viewer-did` header *is* the identity, so any page a
 * developer visits could otherwise act as anyone against their server.
 */
import type { IncomingMessage } from 'node:http';
import type { CORSOptions } from 'graphql-yoga';

/** Parses `CORS_ORIGINS`: comma-separated origins (scheme://host[:port], nothing else); throws a readable error. */
export function parseCorsOrigins(value: string | undefined): string[] {
  if (value === undefined || value.trim() === '') return [];
  return value.split(',').map((part) => {
    const origin = part.trim();
    let parsed: URL;
    try {
      parsed = new URL(origin);
    } catch {
      throw new Error(`${JSON.stringify(origin)} is not an origin`);
    }
    if (parsed.origin !== origin || (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')) {
      throw new Error(`${JSON.stringify(origin)} is not an origin (no path, trailing slash or wildcard)`);
    }
    return origin;
  });
}

/** The yoga `cors` option: CORS headers only for a listed origin, never in the header mode. */
export function corsPolicy(origins: readonly string[], insecureHeaderAuth: boolean): (request: Request) => CORSOptions {
  const allowed = new Set(insecureHeaderAuth ? [] : origins);
  return (request) => {
    const origin = request.headers.get('origin');
    if (origin === null || !allowed.has(origin)) return false;
    return {
      origin: [origin],
      credentials: true,
      methods: ['GET', 'POST', 'OPTIONS'],
      allowedHeaders: ['authorization', 'content-type', 'accept', 'x-request-id', 'consistency-token'],
      exposedHeaders: ['x-request-id', 'retry-after', 'www-authenticate'],
      maxAge: 600,
    };
  };
}

/** Whether a request's Origin (if any) is the server's own or a listed one. Requests without Origin are not from a browser page. */
export function originAllowed(origin: string | null | undefined, ownOrigin: string, origins: readonly string[], insecureHeaderAuth: boolean): boolean {
  if (origin === null || origin === undefined || origin === ownOrigin) return true;
  return !insecureHeaderAuth && origins.includes(origin);
}

/** The origin a request to this server has when it comes from the server's own pages. */
export function ownOriginOf(request: Pick<IncomingMessage, 'headers'> & { encrypted?: boolean }): string {
  return `${request.encrypted === true ? 'https' : 'http'}://${request.headers.host ?? ''}`;
}
