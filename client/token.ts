/**
 * Bearer tokens for the connector store, minted outside the server (SPEC §5):
 * a compact JWT signed with EdDSA (Ed25519) whose `iss` is the signer's
 * did:key, for the server's audience, living at most one hour.
 *
 * Self-contained on purpose: it imports only `jose` and uses Web Crypto
 * (`globalThis.crypto.subtle`), so the same file runs in Node ≥ 20 and in
 * browsers with Ed25519 in Web Crypto (Chrome 137, Firefox 129, Safari 17),
 * and an integrator may copy it as it is. See client/README.md.
 */
import { base64url, SignJWT } from 'jose';

/** The audience (`aud`) a server expects when its `AUTH_AUDIENCE` is unset. */
export const DEFAULT_AUDIENCE = 'connector-store';
/** The longest token lifetime (`exp - iat`) the server accepts, in seconds. */
export const MAX_TOKEN_LIFETIME_SECONDS = 3_600;
/** Default of {@link TokenSourceOptions.renewBeforeSeconds}. */
export const DEFAULT_RENEW_BEFORE_SECONDS = 60;

/**
 * An Ed25519 private key as a JWK, `{ kty: 'OKP', crv: 'Ed25519', d, x }`: as
 * `npm run token` keeps it in `data/local-key.json` and as Web Crypto exports
 * it. Loosely typed so a `JsonWebKey` fits; the members are checked on import.
 */
export interface Ed25519PrivateJWK {
  /** Must be `'OKP'`. */
  kty?: string;
  /** Must be `'Ed25519'`. */
  crv?: string;
  /** The 32-byte private seed, base64url. Required. */
  d?: string;
  /** The 32-byte public key, base64url. Optional; when present it must belong to `d`. */
  x?: string;
}

// Web Crypto's types by way of the `crypto` global, which both the DOM library
// and @types/node declare; the names `CryptoKey` and `CryptoKeyPair` are
// global only in the DOM library, and this file type-checks with either.
type WebCrypto = typeof globalThis.crypto;
type Subtle = WebCrypto['subtle'];
/** A Web Crypto key (`CryptoKey`). */
export type WebCryptoKey = Awaited<ReturnType<Subtle['importKey']>>;
/** A Web Crypto key pair (`CryptoKeyPair`), as `crypto.subtle.generateKey({ name: 'Ed25519' }, …)` makes it. */
export interface Ed25519KeyPair {
  privateKey: WebCryptoKey;
  publicKey: WebCryptoKey;
}

/** A key ready to sign tokens: the Web Crypto private key and the did:key of its public half. */
export interface SigningKey {
  /** The signer's did:key: the `iss` of its tokens, and the viewer the server sees. */
  readonly did: string;
  /** The JWS `kid`: the did:key's verification method (`did:key:z…#z…`). */
  readonly kid: string;
  /** An Ed25519 private key with the `sign` usage (not extractable when imported here). */
  readonly privateKey: WebCryptoKey;
}

/**
 * Anything a token can be minted from: an Ed25519 private JWK, its raw 32-byte
 * seed (the JWK's `d`), a Web Crypto Ed25519 key pair (whose private key may be
 * non-extractable, e.g. kept in IndexedDB), or a {@link SigningKey} imported
 * before.
 */
export type TokenKey = Ed25519PrivateJWK | Uint8Array | Ed25519KeyPair | SigningKey;

const DID_KEY_PREFIX = 'did:key:';
// Multicodec varint of `ed25519-pub`.
const ED25519_PUB_CODEC = [0xed, 0x01] as const;
const ED25519_KEY_BYTES = 32;
// PKCS#8 of an Ed25519 private key is this fixed prefix followed by the seed
// (RFC 8410): the one private format Web Crypto imports without the public key.
const PKCS8_ED25519_PREFIX = [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20] as const;
const ED25519 = { name: 'Ed25519' } as const;
const BASE58BTC_ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

/** The did:key (`did:key:z6Mk…`) of a raw 32-byte Ed25519 public key. */
export function didKeyFromPublicKey(publicKey: Uint8Array): string {
  if (!(publicKey instanceof Uint8Array) || publicKey.length !== ED25519_KEY_BYTES) {
    throw new TypeError(`an Ed25519 public key is ${ED25519_KEY_BYTES} bytes`);
  }
  const bytes = new Uint8Array(ED25519_PUB_CODEC.length + publicKey.length);
  bytes.set(ED25519_PUB_CODEC, 0);
  bytes.set(publicKey, ED25519_PUB_CODEC.length);
  return `${DID_KEY_PREFIX}z${base58btc(bytes)}`;
}

/**
 * Imports `key` once for signing many tokens, deriving its did:key. Throws
 * `TypeError` for anything but an Ed25519 private key (a JWK whose `x` does not
 * belong to its `d`, a seed that is not 32 bytes, a key pair whose halves do
 * not match).
 */
export async function importSigningKey(key: TokenKey): Promise<SigningKey> {
  if (key instanceof Uint8Array) return importSeed(key);
  if (typeof key !== 'object' || key === null) throw new TypeError(KEY_SHAPES);
  if ('did' in key && 'privateKey' in key) return checkedSigningKey(key);
  if ('privateKey' in key && 'publicKey' in key) return importKeyPair(key);
  if ('kty' in key) return importJWK(key);
  throw new TypeError(KEY_SHAPES);
}

/** Options of {@link mintToken}. */
export interface MintTokenOptions {
  /** The signer. */
  key: TokenKey;
  /** The server's audience (`aud`): its `AUTH_AUDIENCE`. Default: {@link DEFAULT_AUDIENCE}. */
  audience?: string;
  /** Seconds from `iat` to `exp`, 1 to {@link MAX_TOKEN_LIFETIME_SECONDS}. Default: the maximum, 3600. */
  lifetimeSeconds?: number;
  /** Issue time in milliseconds since the epoch. Default: `Date.now()`. */
  now?: number;
}

/**
 * Mints a bearer token the server accepts: header `{ alg: 'EdDSA', typ: 'JWT',
 * kid }`, claims `{ iss, aud, iat, exp }` with `iss` the key's did:key. Send it
 * as `Authorization: Bearer <token>`. The server allows 30 s of clock skew, so
 * the minting machine's clock must be about right.
 */
export async function mintToken(options: MintTokenOptions): Promise<string> {
  const { audience = DEFAULT_AUDIENCE, lifetimeSeconds = MAX_TOKEN_LIFETIME_SECONDS, now = Date.now() } = options;
  checkLifetime(lifetimeSeconds);
  checkAudience(audience);
  if (!Number.isFinite(now)) throw new TypeError('now must be a time in milliseconds since the epoch');
  const key = await importSigningKey(options.key);
  const issuedAt = Math.floor(now / 1_000);
  // Claim and header order as the server's own minting (src/auth/mint-token.ts),
  // so both produce the same bytes for the same key and time.
  return new SignJWT({})
    .setProtectedHeader({ alg: 'EdDSA', typ: 'JWT', kid: key.kid })
    .setIssuer(key.did)
    .setAudience(audience)
    .setIssuedAt(issuedAt)
    .setExpirationTime(issuedAt + lifetimeSeconds)
    .sign(key.privateKey);
}

/** Options of {@link createTokenSource}. */
export interface TokenSourceOptions {
  /** The signer; imported once, on the first {@link TokenSource.getToken}. */
  key: TokenKey;
  /** The server's audience (`aud`). Default: {@link DEFAULT_AUDIENCE}. */
  audience?: string;
  /** Lifetime of each token, 1 to {@link MAX_TOKEN_LIFETIME_SECONDS}. Default: 3600. */
  lifetimeSeconds?: number;
  /**
   * A new token is minted once the cached one has this many seconds or fewer
   * left, so a request never leaves with a token about to expire. Must be less
   * than `lifetimeSeconds`. Default: 60, or half the lifetime when that is shorter.
   */
  renewBeforeSeconds?: number;
  /** The clock, in milliseconds since the epoch. Default: `Date.now`. */
  now?: () => number;
}

/** Tokens for a long-running client: one cached token, re-minted before it expires. */
export interface TokenSource {
  /**
   * A token valid for at least `renewBeforeSeconds` more: the cached one, or a
   * fresh one when it is that close to expiry. Concurrent calls share one mint.
   */
  getToken(): Promise<string>;
  /** Drops the cached token (e.g. after a 401 `TOKEN_EXPIRED`), so the next {@link getToken} mints. */
  invalidate(): void;
}

/**
 * Creates a {@link TokenSource} for a worker that makes requests for hours:
 * call `getToken()` before each request (or WebSocket connection) instead of
 * keeping a token around.
 */
export function createTokenSource(options: TokenSourceOptions): TokenSource {
  const { audience = DEFAULT_AUDIENCE, lifetimeSeconds = MAX_TOKEN_LIFETIME_SECONDS, now = Date.now } = options;
  checkLifetime(lifetimeSeconds);
  checkAudience(audience);
  const renewBeforeSeconds = options.renewBeforeSeconds ?? Math.min(DEFAULT_RENEW_BEFORE_SECONDS, Math.floor(lifetimeSeconds / 2));
  if (!Number.isFinite(renewBeforeSeconds) || renewBeforeSeconds < 0 || renewBeforeSeconds >= lifetimeSeconds) {
    throw new RangeError(`renewBeforeSeconds must be at least 0 and less than lifetimeSeconds (${lifetimeSeconds})`);
  }
  let signingKey: Promise<SigningKey> | undefined;
  let cached: { token: Promise<string>; renewAt: number } | undefined;

  const importOnce = (): Promise<SigningKey> => {
    if (signingKey === undefined) {
      const importing = importSigningKey(options.key);
      // A failed import is not kept: the next call tries again.
      importing.catch(() => {
        if (signingKey === importing) signingKey = undefined;
      });
      signingKey = importing;
    }
    return signingKey;
  };

  return {
    getToken() {
      const current = now();
      if (cached !== undefined && current < cached.renewAt) return cached.token;
      // `exp` is whole seconds after the floored `iat`, as mintToken computes it.
      const expiresAt = (Math.floor(current / 1_000) + lifetimeSeconds) * 1_000;
      const token = importOnce().then((key) => mintToken({ key, audience, lifetimeSeconds, now: current }));
      const entry = { token, renewAt: expiresAt - renewBeforeSeconds * 1_000 };
      cached = entry;
      // A failed mint is not cached either.
      token.catch(() => {
        if (cached === entry) cached = undefined;
      });
      return token;
    },
    invalidate() {
      cached = undefined;
    },
  };
}

const KEY_SHAPES =
  'key must be an Ed25519 private JWK ({ kty: "OKP", crv: "Ed25519", d, x }), its 32-byte seed, a Web Crypto Ed25519 CryptoKeyPair, or a SigningKey';

function checkLifetime(lifetimeSeconds: number): void {
  if (!Number.isInteger(lifetimeSeconds) || lifetimeSeconds < 1 || lifetimeSeconds > MAX_TOKEN_LIFETIME_SECONDS) {
    throw new RangeError(
      `lifetimeSeconds must be a whole number from 1 to ${MAX_TOKEN_LIFETIME_SECONDS} (the server refuses longer tokens)`,
    );
  }
}

function checkAudience(audience: string): void {
  if (typeof audience !== 'string' || audience === '') throw new TypeError('audience must be a non-empty string');
}

function subtle(): Subtle {
  const webCrypto = (globalThis as { crypto?: WebCrypto }).crypto;
  if (webCrypto?.subtle === undefined) {
    // Browsers expose it only in secure contexts (https:// or localhost).
    throw new TypeError('Web Crypto (crypto.subtle) is not available here; in a browser it needs a secure context (https)');
  }
  return webCrypto.subtle;
}

async function importSeed(seed: Uint8Array, expectedX?: string): Promise<SigningKey> {
  if (seed.length !== ED25519_KEY_BYTES) {
    throw new TypeError(`an Ed25519 private key seed is ${ED25519_KEY_BYTES} bytes, got ${seed.length}`);
  }
  const der = new Uint8Array(PKCS8_ED25519_PREFIX.length + seed.length);
  der.set(PKCS8_ED25519_PREFIX, 0);
  der.set(seed, PKCS8_ED25519_PREFIX.length);
  let x: string | undefined;
  let privateKey: WebCryptoKey;
  try {
    // Web Crypto has no "public key of this private key"; a private key's JWK
    // export carries `x`, so import once extractable to read it, then keep a
    // non-extractable copy for signing.
    const extractable = await subtle().importKey('pkcs8', der, ED25519, true, ['sign']);
    x = (await subtle().exportKey('jwk', extractable)).x;
    privateKey = await subtle().importKey('pkcs8', der, ED25519, false, ['sign']);
  } catch {
    throw new TypeError('the key is not a usable Ed25519 private key (does this runtime support Ed25519 in Web Crypto?)');
  } finally {
    der.fill(0);
  }
  if (x === undefined) throw new TypeError('this runtime does not export the public half of an Ed25519 private key');
  if (expectedX !== undefined && expectedX !== x) {
    // Else the key would claim one DID while its tokens carry another.
    throw new TypeError('private key JWK "x" does not match its "d"');
  }
  return signingKeyFor(base64url.decode(x), privateKey);
}

async function importJWK(jwk: Ed25519PrivateJWK): Promise<SigningKey> {
  const { kty, crv, d, x } = jwk as Record<string, unknown>;
  if (kty !== 'OKP' || crv !== 'Ed25519' || typeof d !== 'string' || (x !== undefined && typeof x !== 'string')) {
    throw new TypeError('private key must be an Ed25519 private JWK ({ kty: "OKP", crv: "Ed25519", d, x })');
  }
  let seed: Uint8Array;
  try {
    seed = base64url.decode(d);
  } catch {
    throw new TypeError('private key JWK "d" is not base64url');
  }
  try {
    return await importSeed(seed, x);
  } finally {
    seed.fill(0);
  }
}

async function importKeyPair(pair: Ed25519KeyPair): Promise<SigningKey> {
  const { privateKey, publicKey } = pair;
  if (!isEd25519(privateKey, 'private') || !isEd25519(publicKey, 'public') || !privateKey.usages.includes('sign')) {
    throw new TypeError('key pair must be a Web Crypto Ed25519 key pair whose private key may sign');
  }
  const raw = new Uint8Array(await subtle().exportKey('raw', publicKey));
  // A pair whose halves do not belong together would mint tokens the server
  // refuses as forged; find out here, with a clear message.
  const probe = new TextEncoder().encode('connector-store key pair check');
  const signature = await subtle().sign(ED25519, privateKey, probe);
  if (!(await subtle().verify(ED25519, publicKey, signature, probe))) {
    throw new TypeError('key pair publicKey does not belong to its privateKey');
  }
  return signingKeyFor(raw, privateKey);
}

function checkedSigningKey(key: SigningKey): SigningKey {
  if (!isEd25519(key.privateKey, 'private') || typeof key.did !== 'string' || !key.did.startsWith(`${DID_KEY_PREFIX}z`)) {
    throw new TypeError('a SigningKey comes from importSigningKey()');
  }
  return key;
}

function isEd25519(key: unknown, type: 'private' | 'public'): key is WebCryptoKey {
  return typeof key === 'object' && key !== null && (key as WebCryptoKey).type === type && (key as WebCryptoKey).algorithm?.name === 'Ed25519';
}

function signingKeyFor(publicKey: Uint8Array, privateKey: WebCryptoKey): SigningKey {
  const did = didKeyFromPublicKey(publicKey);
  return Object.freeze({ did, kid: `${did}#${did.slice(DID_KEY_PREFIX.length)}`, privateKey });
}

/** Base58 with the Bitcoin alphabet (multibase `z`). */
function base58btc(bytes: Uint8Array): string {
  let zeros = 0;
  while (zeros < bytes.length && bytes[zeros] === 0) zeros++;
  // Little-endian base-58 digits of the big-endian number in `bytes`.
  const digits: number[] = [];
  for (let i = zeros; i < bytes.length; i++) {
    let carry = bytes[i]!;
    for (let j = 0; j < digits.length; j++) {
      carry += digits[j]! * 256;
      digits[j] = carry % 58;
      carry = Math.floor(carry / 58);
    }
    while (carry > 0) {
      digits.push(carry % 58);
      carry = Math.floor(carry / 58);
    }
  }
  let encoded = '1'.repeat(zeros);
  for (let i = digits.length - 1; i >= 0; i--) encoded += BASE58BTC_ALPHABET[digits[i]!];
  return encoded;
}
