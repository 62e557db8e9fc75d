/** Identity and access (SPEC §5): did:key bearer tokens and request principals. */
export {
  AuthenticationError,
  bearerChallenge,
  DIDKeyError,
  type AuthenticationErrorCode,
  type DIDKeyErrorCode,
} from './errors.js';
export { decodeDIDKey, didKeyVerificationMethodID, encodeDIDKey, parseDIDKey } from './did-key.js';
export { isDID } from './did.js';
export {
  DEFAULT_AUDIENCE,
  DEFAULT_CLOCK_TOLERANCE_SECONDS,
  DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
  parseAuthorizationHeader,
  verifyBearerToken,
  type VerifiedBearerToken,
  type VerifyBearerTokenOptions,
} from './bearer-token.js';
export {
  ANONYMOUS_VIEWER,
  INSECURE_VIEWER_DID_HEADER,
  resolveCredentials,
  resolveViewer,
  viewerForDID,
  type AuthConfig,
  type RequestHeaders,
  type ResolveViewerOptions,
  type ResolvedCredentials,
  type Viewer,
} from './viewer.js';
export { connectionParamsHeaders } from './connection-params.js';
export {
  generateLocalKey,
  KeyFileError,
  loadKeyFile,
  LOCAL_KEY_PATH,
  loadOrCreateLocalKey,
  localKeyFromJWK,
  writeKeyFile,
  type LocalKey,
  type WriteKeyFileOptions,
} from './local-key.js';
export { mintToken, type MintTokenOptions } from './mint-token.js';
