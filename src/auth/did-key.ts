/**
 * did:key for Ed25519 public keys (W3C CCG did:key method): `did:key:z…` where
 * `z` is the multibase prefix for base58btc and the decoded bytes are the
 * multicodec varint for `ed25519-pub` (0xed 0x01) followed by the 32-byte key.
 * Resolution is purely local: the DID *is* the key.
 */
import { createPublicKey, type KeyObject } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { base58 } from '@scure/base';
import { DIDKeyError } from './errors.js';

const DID_KEY_PREFIX = 'did:key:';
const BASE58BTC_MULTIBASE = 'z';
const ED25519_PUB_CODEC = 0xed;
const ED25519_PUB_PREFIX = [0xed, 0x01] as const;
const ED25519_KEY_BYTES = 32;
// Long enough for an RSA-4096 did:key (so its codec can be named), short enough
// that base58 decoding of hostile input stays cheap.
const MAX_DID_KEY_LENGTH = 1_024;

const KNOWN_KEY_CODECS: ReadonlyMap<number, string> = new Map([
  [0xe7, 'secp256k1-pub'],
  [0xea, 'bls12_381-g1-pub'],
  [0xeb, 'bls12_381-g2-pub'],
  [0xec, 'x25519-pub'],
  [0xed, 'ed25519-pub'],
  [0x1200, 'p256-pub'],
  [0x1201, 'p384-pub'],
  [0x1202, 'p521-pub'],
  [0x1205, 'rsa-pub'],
  [0x1300, 'ed25519-priv'],
]);

/** Decodes an Ed25519 did:key to its raw 32-byte public key; throws `DIDKeyError`. */
export function decodeDIDKey(did: string): Uint8Array {
  if (typeof did !== 'string' || !did.startsWith(DID_KEY_PREFIX)) {
    throw new DIDKeyError('DID_KEY_INVALID', 'not a did:key (expected "did:key:z…")');
  }
  if (did.length > MAX_DID_KEY_LENGTH) {
    throw new DIDKeyError('DID_KEY_INVALID', `did:key is longer than ${MAX_DID_KEY_LENGTH} characters`);
  }
  const multibase = did.slice(DID_KEY_PREFIX.length);
  if (/[/?#]/.test(multibase)) {
    throw new DIDKeyError('DID_KEY_INVALID', 'a did:key must not carry a path, query or fragment');
  }
  if (multibase.length < 2) {
    throw new DIDKeyError('DID_KEY_INVALID', 'did:key has no multibase value');
  }
  if (!multibase.startsWith(BASE58BTC_MULTIBASE)) {
    const prefix = /^[A-Za-z0-9]$/.test(multibase[0]!) ? ` "${multibase[0]}"` : '';
    throw new DIDKeyError(
      'DID_KEY_UNSUPPORTED',
      `did:key multibase prefix${prefix} is not supported; only "z" (base58btc) is`,
    );
  }
  const encoded = multibase.slice(1);
  let bytes: Uint8Array;
  try {
    bytes = base58.decode(encoded);
  } catch {
    throw new DIDKeyError('DID_KEY_INVALID', 'did:key value is not valid base58btc');
  }
  const codec = readVarint(bytes);
  if (codec === null) {
    throw new DIDKeyError('DID_KEY_INVALID', 'did:key value does not start with a multicodec varint');
  }
  if (codec.value !== ED25519_PUB_CODEC) {
    const name = KNOWN_KEY_CODECS.get(codec.value);
    const label = `0x${codec.value.toString(16)}${name === undefined ? '' : ` (${name})`}`;
    throw new DIDKeyError(
      'DID_KEY_UNSUPPORTED',
      `did:key uses multicodec ${label}; only Ed25519 public keys (ed25519-pub, 0xed) are supported`,
    );
  }
  // The codec matched numerically; the prefix must also be the minimal varint,
  // so one key has exactly one DID.
  if (codec.length !== ED25519_PUB_PREFIX.length || bytes[0] !== ED25519_PUB_PREFIX[0] || bytes[1] !== ED25519_PUB_PREFIX[1]) {
    throw new DIDKeyError('DID_KEY_INVALID', 'did:key multicodec prefix is not minimally encoded');
  }
  const key = bytes.subarray(codec.length);
  if (key.length !== ED25519_KEY_BYTES) {
    throw new DIDKeyError(
      'DID_KEY_INVALID',
      `did:key Ed25519 key must be ${ED25519_KEY_BYTES} bytes, got ${key.length}`,
    );
  }
  return Uint8Array.from(key);
}

/** Parses an Ed25519 did:key into a Node public `KeyObject`; throws `DIDKeyError`. */
export function parseDIDKey(did: string): KeyObject {
  const cached = publicKeys.get(did);
  if (cached !== undefined) return cached;
  const x = Buffer.from(decodeDIDKey(did)).toString('base64url');
  let key: KeyObject;
  try {
    key = createPublicKey({ key: { kty: 'OKP', crv: 'Ed25519', x }, format: 'jwk' });
  } catch {
    throw new DIDKeyError('DID_KEY_INVALID', 'did:key does not hold a usable Ed25519 public key');
  }
  publicKeys.set(did, key);
  return key;
}

/** Public keys of the DIDs seen lately: a did:key names its key forever, so no expiry, only a bound. */
const publicKeys = new LRUCache<string, KeyObject>({ max: 10_000 });

/**
 * Encodes an Ed25519 key as a did:key: a public or private `KeyObject` (the
 * public half is used) or the raw 32-byte public key.
 */
export function encodeDIDKey(key: KeyObject | Uint8Array): string {
  const raw = key instanceof Uint8Array ? key : rawEd25519PublicKey(key);
  if (raw.length !== ED25519_KEY_BYTES) {
    throw new DIDKeyError('DID_KEY_INVALID', `an Ed25519 public key is ${ED25519_KEY_BYTES} bytes, got ${raw.length}`);
  }
  const bytes = new Uint8Array(ED25519_PUB_PREFIX.length + raw.length);
  bytes.set(ED25519_PUB_PREFIX, 0);
  bytes.set(raw, ED25519_PUB_PREFIX.length);
  return `${DID_KEY_PREFIX}${BASE58BTC_MULTIBASE}${base58.encode(bytes)}`;
}

/** The verification method id of a did:key (`did:key:z…#z…`), the conventional JWS `kid`. */
export function didKeyVerificationMethodID(did: string): string {
  return `${did}#${did.slice(DID_KEY_PREFIX.length)}`;
}

function rawEd25519PublicKey(key: KeyObject): Uint8Array {
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new DIDKeyError(
      'DID_KEY_UNSUPPORTED',
      `only Ed25519 keys can be encoded as did:key here, got ${key.asymmetricKeyType ?? key.type}`,
    );
  }
  const publicKey = key.type === 'private' ? createPublicKey(key) : key;
  const { x } = publicKey.export({ format: 'jwk' });
  if (typeof x !== 'string') {
    throw new DIDKeyError('DID_KEY_INVALID', 'Ed25519 key has no public component');
  }
  return Buffer.from(x, 'base64url');
}

/** Reads an unsigned LEB128 varint (multiformats limit: 9 bytes). */
function readVarint(bytes: Uint8Array): { value: number; length: number } | null {
  let value = 0;
  for (let i = 0; i < Math.min(bytes.length, 9); i++) {
    const byte = bytes[i]!;
    value += (byte & 0x7f) * 2 ** (7 * i);
    if ((byte & 0x80) === 0) return { value, length: i + 1 };
  }
  return null;
}
