/**
 * Bearer tokens: compact JWTs signed with EdDSA (Ed25519) by the did:key in
 * their `iss` claim. Nothing is fetched: the issuer DID carries its own key.
 */
import { hash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { compactVerify, errors as joseErrors } from 'jose';
import { parseDIDKey } from './did-key.js';
import { AuthenticationError, DIDKeyError } from './errors.js';

/** Options of {@link verifyBearerToken}. */
export interface VerifyBearerTokenOptions {
  /** This server's audience: `aud` must equal it or, when an array, contain it. */
  audience: string;
  /** Current time in milliseconds since the epoch. Default: `Date.now()`. */
  now?: number;
  /** Longest accepted `exp - iat`, in seconds. Default: 3600 (one hour). */
  maxLifetimeSeconds?: number;
  /** Clock skew allowed when checking `exp`, `nbf` and `iat`, in seconds. Default: 30. */
  clockToleranceSeconds?: number;
}

/** What a verified token proves. */
export interface VerifiedBearerToken {
  /** The issuer DID, whose key signed the token: the viewer. */
  did: string;
  /** When the token stops being valid (`exp`), in milliseconds since the epoch. */
  expiresAt: number;
}

/** Default for {@link VerifyBearerTokenOptions.maxLifetimeSeconds}. */
export const DEFAULT_MAX_TOKEN_LIFETIME_SECONDS = 3_600;
/** The audience (`aud`) tokens are minted for and checked against when `AUTH_AUDIENCE` is unset. */
export const DEFAULT_AUDIENCE = 'connector-store';
/** Default for {@link VerifyBearerTokenOptions.clockToleranceSeconds}. */
export const DEFAULT_CLOCK_TOLERANCE_SECONDS = 30;

// A did:key JWT is a few hundred bytes; anything far larger is not one of ours
// and is refused before any decoding work.
const MAX_TOKEN_LENGTH = 8_192;
const BASE64URL_SEGMENT = /^[A-Za-z0-9_-]+$/;
// RFC 6750 b64token.
const B64TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/;

/**
 * Extracts the token from an `Authorization` header value: `null` when the
 * header is absent or blank, the token for `Bearer <token>` (scheme
 * case-insensitive), and `AuthenticationError('AUTHORIZATION_HEADER')` for any
 * other scheme or a malformed credential.
 */
export function parseAuthorizationHeader(header: string | null | undefined): string | null {
  if (header === null || header === undefined || header.trim() === '') return null;
  const match = /^([A-Za-z0-9!#$%&'*+.^_`|~-]+)(?: +(.*))?$/.exec(header.trim());
  if (match === null) {
    throw new AuthenticationError('AUTHORIZATION_HEADER', 'Authorization header must be "Bearer <token>"');
  }
  const scheme = match[1]!;
  const credentials = match[2] ?? '';
  if (scheme.toLowerCase() !== 'bearer') {
    // Name the scheme back only when it looks like one: a bare token sent
    // without "Bearer " would otherwise be echoed.
    const named = match[2] !== undefined && /^[A-Za-z][A-Za-z0-9_-]{0,19}$/.test(scheme) ? ` "${scheme}"` : '';
    throw new AuthenticationError(
      'AUTHORIZATION_HEADER',
      `Authorization scheme${named} is not supported; use "Bearer <token>"`,
    );
  }
  if (!B64TOKEN.test(credentials)) {
    throw new AuthenticationError(
      'AUTHORIZATION_HEADER',
      'Authorization header must be "Bearer <token>" with exactly one token',
    );
  }
  return credentials;
}

/**
 * Verifies a did:key bearer token and returns the issuer DID. Throws
 * `AuthenticationError` with a stable code; messages never include the token.
 */
export async function verifyBearerToken(
  token: string,
  options: VerifyBearerTokenOptions,
): Promise<VerifiedBearerToken> {
  const {
    audience,
    now = Date.now(),
    maxLifetimeSeconds = DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
    clockToleranceSeconds = DEFAULT_CLOCK_TOLERANCE_SECONDS,
  } = options;
  // The signature and the claims that do not depend on the clock are checked
  // once per token; every use checks the clock again (expiry, iat, nbf).
  // A digest, not the token: 10 000 tokens of up to 8 KiB would otherwise be 80 MB of keys. One-shot
  // `hash`, not a Hash object per request (issue 21: the object was ~1 % of a request's CPU).
  const cacheKey = hash('sha256', `${audience}\u0000${maxLifetimeSeconds}\u0000${token}`, 'base64url');
  let verified = verifiedTokens.get(cacheKey);
  if (verified === undefined) {
    verified = await verifySignatureAndClaims(token, audience, maxLifetimeSeconds);
    verifiedTokens.set(cacheKey, verified, { ttl: Math.max(1, verified.expiresAt * 1_000 + clockToleranceSeconds * 1_000 - now) });
  }
  checkTokenTimes(verified, now, clockToleranceSeconds);
  return { did: verified.did, expiresAt: verified.expiresAt * 1_000 };
}

/** What a token proves once its signature verified: its issuer and its times (seconds). */
interface VerifiedClaims {
  did: string;
  expiresAt: number;
  issuedAt: number;
  notBefore: number | undefined;
}

/** Tokens whose signature and static claims verified, until they expire; bounded, so a flood of tokens cannot grow it. */
const verifiedTokens = new LRUCache<string, VerifiedClaims>({ max: 10_000 });

/** The signature, issuer, audience and lifetime checks: everything that does not change with time. */
async function verifySignatureAndClaims(token: string, audience: string, maxLifetimeSeconds: number): Promise<VerifiedClaims> {

  if (typeof token !== 'string' || token.length === 0) {
    throw malformed('token is empty');
  }
  if (token.length > MAX_TOKEN_LENGTH) {
    throw malformed(`token is longer than ${MAX_TOKEN_LENGTH} characters`);
  }
  const segments = token.split('.');
  if (segments.length !== 3) {
    throw malformed('token must be a compact JWT: three base64url segments separated by dots');
  }
  const [headerSegment, payloadSegment] = segments as [string, string, string];
  const header = decodeJSONSegment(headerSegment, 'header');
  const claims = decodeJSONSegment(payloadSegment, 'payload');

  if (header.alg !== 'EdDSA') {
    throw new AuthenticationError(
      'TOKEN_ALGORITHM',
      'token must be signed with alg "EdDSA" (Ed25519); "none", HMAC and other algorithms are refused',
    );
  }
  if (header.b64 !== undefined && header.b64 !== true) {
    throw malformed('token must not use an unencoded payload (b64)');
  }

  const issuer = claims.iss;
  if (typeof issuer !== 'string') {
    throw new AuthenticationError('TOKEN_ISSUER', 'token has no "iss" claim: it must be the did:key that signed it');
  }
  let key;
  try {
    key = parseDIDKey(issuer);
  } catch (error) {
    if (error instanceof DIDKeyError) {
      throw new AuthenticationError('TOKEN_ISSUER', `token issuer ("iss") must be an Ed25519 did:key: ${error.message}`);
    }
    throw error;
  }
  // The key comes from `iss`; a `kid` that names some other DID would mean the
  // client and this server disagree about who signed, so refuse it.
  if (typeof header.kid === 'string' && header.kid.startsWith('did:') && header.kid.split('#', 1)[0] !== issuer) {
    throw new AuthenticationError('TOKEN_ISSUER', 'token header "kid" names a different DID than "iss"');
  }

  try {
    await compactVerify(token, key, { algorithms: ['EdDSA'] });
  } catch (error) {
    if (error instanceof joseErrors.JWSSignatureVerificationFailed) {
      throw new AuthenticationError(
        'TOKEN_SIGNATURE',
        'token signature does not verify with the key of its issuer ("iss") DID',
      );
    }
    if (error instanceof joseErrors.JOSEError) {
      // e.g. unknown "crit" header parameters; jose's own message carries no token data.
      throw malformed(`token is not a valid JWS (${error.code})`);
    }
    throw error;
  }

  const expiresAt = numericDate(claims, 'exp');
  const issuedAt = numericDate(claims, 'iat');
  const notBefore = numericDate(claims, 'nbf');

  if (!audienceMatches(claims.aud, audience)) {
    throw new AuthenticationError(
      'TOKEN_AUDIENCE',
      `token audience ("aud") must be "${audience}", the audience this server is configured with`,
    );
  }
  if (expiresAt === undefined) {
    throw new AuthenticationError(
      'TOKEN_LIFETIME',
      `token has no "exp" claim: tokens must expire at most ${maxLifetimeSeconds} s after "iat"`,
    );
  }
  if (issuedAt === undefined) {
    throw new AuthenticationError(
      'TOKEN_LIFETIME',
      `token has no "iat" claim: it is needed to bound the lifetime to ${maxLifetimeSeconds} s`,
    );
  }
  if (expiresAt < issuedAt) {
    throw new AuthenticationError('TOKEN_LIFETIME', 'token "exp" is before its "iat"');
  }
  if (expiresAt - issuedAt > maxLifetimeSeconds) {
    throw new AuthenticationError(
      'TOKEN_LIFETIME',
      `token lifetime (exp - iat) is ${expiresAt - issuedAt} s; at most ${maxLifetimeSeconds} s is accepted`,
    );
  }
  return { did: issuer, expiresAt, issuedAt, notBefore };
}

/** The checks that depend on the clock, made on every use of a token. */
function checkTokenTimes({ issuedAt, notBefore, expiresAt }: VerifiedClaims, now: number, clockToleranceSeconds: number): void {
  const nowSeconds = now / 1_000;
  // Without this a token "issued" far in the future would stay valid until
  // then, defeating the lifetime bound.
  if (issuedAt > nowSeconds + clockToleranceSeconds) {
    throw new AuthenticationError(
      'TOKEN_NOT_YET_VALID',
      'token "iat" is in the future; check the clock of the machine that minted it',
    );
  }
  if (notBefore !== undefined && notBefore > nowSeconds + clockToleranceSeconds) {
    throw new AuthenticationError('TOKEN_NOT_YET_VALID', 'token is not valid yet ("nbf" is in the future)');
  }
  if (expiresAt <= nowSeconds - clockToleranceSeconds) {
    throw new AuthenticationError('TOKEN_EXPIRED', 'token has expired ("exp" has passed); mint a new one');
  }
}

function malformed(message: string): AuthenticationError {
  return new AuthenticationError('TOKEN_MALFORMED', message);
}

function decodeJSONSegment(segment: string, name: 'header' | 'payload'): Record<string, unknown> {
  if (!BASE64URL_SEGMENT.test(segment)) {
    throw malformed(`token ${name} is not base64url`);
  }
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(segment, 'base64url')));
  } catch {
    throw malformed(`token ${name} is not base64url-encoded JSON`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw malformed(`token ${name} must be a JSON object`);
  }
  return value as Record<string, unknown>;
}

function numericDate(claims: Record<string, unknown>, claim: 'exp' | 'iat' | 'nbf'): number | undefined {
  const value = claims[claim];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value)) {
    throw malformed(`token "${claim}" claim must be a NumericDate (seconds since the epoch)`);
  }
  return value;
}

function audienceMatches(aud: unknown, audience: string): boolean {
  if (typeof aud === 'string') return aud === audience;
  return Array.isArray(aud) && aud.some((entry) => entry === audience);
}
