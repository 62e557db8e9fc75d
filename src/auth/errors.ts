/**
 * Expected failures of authentication. Each has a stable `code`; messages are
 * meant for the client that sent the request and never contain the token.
 */

/** Why a request could not be authenticated; the server answers each with HTTP 401. */
export type AuthenticationErrorCode =
  /** The Authorization header is not a single `Bearer <token>` credential. */
  | 'AUTHORIZATION_HEADER'
  /** The token is not a well-formed compact JWS/JWT (segments, base64url, JSON, claim types). */
  | 'TOKEN_MALFORMED'
  /** The token's `alg` is not `EdDSA` (`none`, HMAC, RSA, ECDSA … are refused). */
  | 'TOKEN_ALGORITHM'
  /** `iss` is missing or not an Ed25519 did:key, or the header `kid` names another DID. */
  | 'TOKEN_ISSUER'
  /** The signature does not verify with the key of the `iss` DID. */
  | 'TOKEN_SIGNATURE'
  /** `aud` is missing or does not name this server's audience. */
  | 'TOKEN_AUDIENCE'
  /** `exp` or `iat` is missing, or `exp - iat` exceeds the allowed lifetime. */
  | 'TOKEN_LIFETIME'
  /** `exp` has passed. */
  | 'TOKEN_EXPIRED'
  /** `nbf` or `iat` lies in the future (beyond the clock tolerance). */
  | 'TOKEN_NOT_YET_VALID'
  /** An `x-viewer-did` header was sent but insecure header auth is not enabled. */
  | 'INSECURE_HEADER_DISABLED'
  /** Insecure header auth is enabled but `x-viewer-did` is not a DID. */
  | 'VIEWER_DID_INVALID';

/** A request's credentials were refused; the server maps it to HTTP 401. */
export class AuthenticationError extends Error {
  readonly httpStatus = 401;
  constructor(
    readonly code: AuthenticationErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'AuthenticationError';
  }
}

/** Why a string is not a usable did:key. */
export type DIDKeyErrorCode =
  /** Not a syntactically valid did:key (prefix, base58btc, length, non-canonical encoding). */
  | 'DID_KEY_INVALID'
  /** A valid multibase/multicodec value, but not a base58btc Ed25519 public key. */
  | 'DID_KEY_UNSUPPORTED';

/** A did:key could not be parsed or encoded; messages never repeat the input. */
export class DIDKeyError extends Error {
  constructor(
    readonly code: DIDKeyErrorCode,
    message: string,
  ) {
    super(message);
    this.name = 'DIDKeyError';
  }
}

/**
 * The `WWW-Authenticate` value for a 401 answer (RFC 6750 §3): `invalid_request`
 * for a malformed Authorization header, `invalid_token` for every token failure.
 */
export function bearerChallenge(error: AuthenticationError, realm = 'connector-store'): string {
  const kind = error.code === 'AUTHORIZATION_HEADER' ? 'invalid_request' : 'invalid_token';
  // RFC 6750 §3: error_description is %x20-21 / %x23-5B / %x5D-7E only. Anything
  // else (a quote, a backslash, a non-ASCII character such as "…") would make the
  // header invalid, and an invalid header means no answer at all.
  const description = error.message.replace(/…/g, '...').replace(/["\\]/g, "'").replace(/[^\x20-\x21\x23-\x5B\x5D-\x7E]/g, '?');
  return `Bearer realm="${realm}", error="${kind}", error_description="${description}"`;
}
