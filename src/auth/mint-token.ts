/** Minting bearer tokens with a local Ed25519 key, for local use and tests. */
import type { KeyObject } from 'node:crypto';
import { SignJWT } from 'jose';
import { DEFAULT_MAX_TOKEN_LIFETIME_SECONDS } from './bearer-token.js';
import { didKeyVerificationMethodID, encodeDIDKey } from './did-key.js';

/** Options of {@link mintToken}. */
export interface MintTokenOptions {
  /** The Ed25519 private key that signs. */
  privateKey: KeyObject;
  /** The signer's did:key (`iss`). Default: derived from `privateKey`; must match it when given. */
  did?: string;
  /** The server's audience (`aud`). */
  audience: string;
  /** Seconds from `iat` to `exp`. Default: 3600, the longest the server accepts by default. */
  ttlSeconds?: number;
  /** Issue time in milliseconds since the epoch. Default: `Date.now()`. */
  now?: number;
}

/** Mints an EdDSA-signed JWT with `iss` = the key's did:key, `aud`, `iat` and `exp`. */
export async function mintToken(options: MintTokenOptions): Promise<string> {
  const { privateKey, audience, ttlSeconds = DEFAULT_MAX_TOKEN_LIFETIME_SECONDS, now = Date.now() } = options;
  if (!Number.isInteger(ttlSeconds) || ttlSeconds <= 0) {
    throw new RangeError('ttlSeconds must be a positive whole number of seconds');
  }
  const did = encodeDIDKey(privateKey);
  if (options.did !== undefined && options.did !== did) {
    throw new Error('did does not belong to privateKey');
  }
  const issuedAt = Math.floor(now / 1_000);
  return new SignJWT({})
    .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid: didKeyVerificationMethodID(did) })
    .setIssuer(did)
    .setAudience(audience)
    .setIssuedAt(issuedAt)
    .setExpirationTime(issuedAt + ttlSeconds)
    .sign(privateKey);
}
