/**
 * Principals: who is making a request. A viewer is anonymous, a user (any
 * did:key that signed a valid token) or a service (a DID listed in the
 * server's configuration; connector workers that act on every owner's rows).
 */
import { parseAuthorizationHeader, verifyBearerToken } from './bearer-token.js';
import { isDID } from './did.js';
import { AuthenticationError } from './errors.js';

/** The principal behind a request. */
export type Viewer =
  | { readonly kind: 'anonymous' }
  | { readonly kind: 'user'; readonly did: string }
  | { readonly kind: 'service'; readonly did: string };

/** The one anonymous viewer. */
export const ANONYMOUS_VIEWER: Viewer = Object.freeze({ kind: 'anonymous' });

/** Header read by the insecure development mode; see {@link AuthConfig.insecureHeaderAuth}. */
export const INSECURE_VIEWER_DID_HEADER = 'x-viewer-did';

/** How requests are authenticated (the `auth` part of the server configuration). */
export interface AuthConfig {
  /** The audience tokens must be minted for (`aud`). */
  audience: string;
  /** DIDs that resolve to `service` viewers; every other DID is a `user`. */
  serviceDIDs: ReadonlySet<string>;
  /**
   * Development only, default `false`: when no Authorization header is sent,
   * trust the DID in the `x-viewer-did` header **without any signature**.
   * Anyone who can reach the server can then act as any DID, including a
   * service DID, so the server refuses to start with this enabled unless it
   * listens on a loopback address (and never with `NODE_ENV=production`).
   * When disabled, a request carrying `x-viewer-did` is refused with
   * `INSECURE_HEADER_DISABLED` rather than silently treated as anonymous.
   */
  insecureHeaderAuth?: boolean;
  /** Longest accepted token lifetime in seconds. Default: 3600. */
  maxLifetimeSeconds?: number;
  /** Clock skew allowed for `exp`, `nbf`, `iat`, in seconds. Default: 30. */
  clockToleranceSeconds?: number;
}

/** Request headers as a fetch `Headers` object or a Node-style record. */
export type RequestHeaders = Headers | Readonly<Record<string, string | readonly string[] | undefined>>;

/** Options of {@link resolveViewer}. */
export interface ResolveViewerOptions {
  /** Current time in milliseconds since the epoch. Default: `Date.now()`. */
  now?: number;
}

/**
 * Resolves the viewer of a request: a valid bearer token gives a user or
 * service viewer, no credentials give the anonymous viewer, and bad
 * credentials throw `AuthenticationError` (the server answers 401).
 */
export async function resolveViewer(headers: RequestHeaders, config: AuthConfig, options: ResolveViewerOptions = {}): Promise<Viewer> {
  return (await resolveCredentials(headers, config, options)).viewer;
}

/** A request's viewer, and when its credentials stop being valid. */
export interface ResolvedCredentials {
  viewer: Viewer;
  /** When the bearer token expires (ms since the epoch); null without a token (anonymous, insecure header mode). */
  expiresAt: number | null;
}

/** {@link resolveViewer}, with the token's expiry: long-lived streams (subscriptions) end when it passes. */
export async function resolveCredentials(headers: RequestHeaders, config: AuthConfig, options: ResolveViewerOptions = {}): Promise<ResolvedCredentials> {
  const token = parseAuthorizationHeader(readSingleHeader(headers, 'authorization'));
  if (token !== null) {
    const { did, expiresAt } = await verifyBearerToken(token, {
      audience: config.audience,
      ...(options.now === undefined ? {} : { now: options.now }),
      ...(config.maxLifetimeSeconds === undefined ? {} : { maxLifetimeSeconds: config.maxLifetimeSeconds }),
      ...(config.clockToleranceSeconds === undefined ? {} : { clockToleranceSeconds: config.clockToleranceSeconds }),
    });
    return { viewer: viewerForDID(did, config), expiresAt };
  }

  const headerDID = readSingleHeader(headers, INSECURE_VIEWER_DID_HEADER)?.trim();
  if (headerDID === undefined || headerDID === '') return { viewer: ANONYMOUS_VIEWER, expiresAt: null };
  if (config.insecureHeaderAuth !== true) {
    throw new AuthenticationError(
      'INSECURE_HEADER_DISABLED',
      `the ${INSECURE_VIEWER_DID_HEADER} header is accepted only in insecure development mode; send "Authorization: Bearer <token>"`,
    );
  }
  if (!isDID(headerDID)) {
    throw new AuthenticationError('VIEWER_DID_INVALID', `the ${INSECURE_VIEWER_DID_HEADER} header must be a DID (did:method:id)`);
  }
  return { viewer: viewerForDID(headerDID, config), expiresAt: null };
}

/** The viewer for an authenticated DID: `service` when listed in the config, else `user`. */
export function viewerForDID(did: string, config: Pick<AuthConfig, 'serviceDIDs'>): Viewer {
  return config.serviceDIDs.has(did) ? { kind: 'service', did } : { kind: 'user', did };
}

function readSingleHeader(headers: RequestHeaders, name: string): string | undefined {
  if (isFetchHeaders(headers)) return headers.get(name) ?? undefined;
  for (const [key, value] of Object.entries(headers)) {
    if (key.toLowerCase() !== name || value === undefined) continue;
    if (typeof value === 'string') return value;
    if (value.length > 1) {
      throw new AuthenticationError(
        name === 'authorization' ? 'AUTHORIZATION_HEADER' : 'VIEWER_DID_INVALID',
        `the ${name} header must be sent once`,
      );
    }
    return value[0];
  }
  return undefined;
}

function isFetchHeaders(headers: RequestHeaders): headers is Headers {
  return typeof (headers as Headers).get === 'function' && typeof (headers as Headers).has === 'function';
}
