import { createPublicKey, generateKeyPairSync, sign, verify } from 'node:crypto';
import { base58 } from '@scure/base';
import { describe, expect, it } from 'vitest';
import { decodeDIDKey, DIDKeyError, didKeyVerificationMethodID, encodeDIDKey, isDID, parseDIDKey } from '../../src/auth/index.js';
import { privateKeyFromSeed } from './fixtures.js';

// From the did:key method's Ed25519 test vectors: the key derived from each seed,
// its DID, and its raw public key (publicKeyBase58).
const SPEC_VECTORS = [
  {
    seed: '0000000000000000000000000000000000000000000000000000000000000000',
    did: 'did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp',
    publicKeyBase58: '4zvwRjXUKGfvwnParsHAS3HuSVzV5cA4McphgmoCtajS',
  },
  {
    seed: '0000000000000000000000000000000000000000000000000000000000000001',
    did: 'did:key:z6MkjchhfUsD6mmvni8mCdXHw216Xrm9bQe2mBH1P5RDjVJG',
    publicKeyBase58: '6ASf5EcmmEHTgDJ4X4ZT5vT6iHVJBXPg5AN5YoTCpGWt',
  },
];

function rawPublicKey(key: ReturnType<typeof createPublicKey>): Uint8Array {
  return Uint8Array.from(Buffer.from(key.export({ format: 'jwk' }).x!, 'base64url'));
}

function didKeyFromBytes(bytes: number[]): string {
  return `did:key:z${base58.encode(Uint8Array.from(bytes))}`;
}

function expectDIDKeyError(fn: () => unknown, code: DIDKeyError['code'], message?: RegExp): void {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(DIDKeyError);
    expect((error as DIDKeyError).code).toBe(code);
    if (message) expect((error as DIDKeyError).message).toMatch(message);
    return;
  }
  expect.fail(`expected DIDKeyError ${code}`);
}

describe('did:key (Ed25519)', () => {
  it.each(SPEC_VECTORS)('matches the spec vector $did', ({ seed, did, publicKeyBase58 }) => {
    const expectedKey = base58.decode(publicKeyBase58);
    expect(decodeDIDKey(did)).toEqual(expectedKey);
    expect(rawPublicKey(parseDIDKey(did))).toEqual(expectedKey);
    expect(encodeDIDKey(expectedKey)).toBe(did);
    // Independently of the published key bytes: the seed's key encodes to the DID.
    const privateKey = privateKeyFromSeed(seed);
    expect(encodeDIDKey(privateKey)).toBe(did);
    expect(encodeDIDKey(createPublicKey(privateKey))).toBe(did);
  });

  it('round-trips a generated key, and the parsed key verifies its signatures', () => {
    const { publicKey, privateKey } = generateKeyPairSync('ed25519');
    const did = encodeDIDKey(publicKey);
    expect(did).toMatch(/^did:key:z6Mk[1-9A-HJ-NP-Za-km-z]{44}$/);
    expect(encodeDIDKey(privateKey)).toBe(did);
    expect(encodeDIDKey(rawPublicKey(publicKey))).toBe(did);

    const bytes = base58.decode(did.slice('did:key:z'.length));
    expect([...bytes.subarray(0, 2)]).toEqual([0xed, 0x01]);
    expect(bytes.subarray(2)).toEqual(rawPublicKey(publicKey));

    const parsed = parseDIDKey(did);
    expect(parsed.type).toBe('public');
    expect(parsed.asymmetricKeyType).toBe('ed25519');
    expect(parsed.equals(publicKey)).toBe(true);
    const message = Buffer.from('hello');
    expect(verify(null, message, parsed, sign(null, message, privateKey))).toBe(true);
  });

  it('names the verification method the way did:key documents do', () => {
    const did = SPEC_VECTORS[0]!.did;
    expect(didKeyVerificationMethodID(did)).toBe(`${did}#${did.slice('did:key:'.length)}`);
  });

  it('refuses other DID methods and malformed values', () => {
    expectDIDKeyError(() => parseDIDKey('did:web:example.com'), 'DID_KEY_INVALID', /not a did:key/);
    expectDIDKeyError(() => parseDIDKey('did:key:'), 'DID_KEY_INVALID');
    expectDIDKeyError(() => parseDIDKey('did:key:z'), 'DID_KEY_INVALID');
    expectDIDKeyError(() => parseDIDKey('did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooW0'), 'DID_KEY_INVALID', /base58/);
    expectDIDKeyError(() => parseDIDKey(`${SPEC_VECTORS[0]!.did}#key-1`), 'DID_KEY_INVALID', /fragment/);
    expectDIDKeyError(() => parseDIDKey(`did:key:z${'2'.repeat(2_000)}`), 'DID_KEY_INVALID', /longer/);
  });

  it('refuses other multibase encodings with a clear error', () => {
    const bytes = base58.decode(SPEC_VECTORS[0]!.did.slice('did:key:z'.length));
    expectDIDKeyError(() => parseDIDKey(`did:key:f${Buffer.from(bytes).toString('hex')}`), 'DID_KEY_UNSUPPORTED', /"f".*base58btc/);
    expectDIDKeyError(() => parseDIDKey(`did:key:u${Buffer.from(bytes).toString('base64url')}`), 'DID_KEY_UNSUPPORTED', /"u"/);
  });

  it('refuses other key codecs, naming them', () => {
    const secp256k1 = didKeyFromBytes([0xe7, 0x01, 0x02, ...new Array<number>(32).fill(7)]);
    expectDIDKeyError(() => parseDIDKey(secp256k1), 'DID_KEY_UNSUPPORTED', /0xe7 \(secp256k1-pub\)/);
    const p256 = didKeyFromBytes([0x80, 0x24, 0x03, ...new Array<number>(32).fill(7)]);
    expectDIDKeyError(() => parseDIDKey(p256), 'DID_KEY_UNSUPPORTED', /0x1200 \(p256-pub\)/);
    const x25519 = didKeyFromBytes([0xec, 0x01, ...new Array<number>(32).fill(7)]);
    expectDIDKeyError(() => parseDIDKey(x25519), 'DID_KEY_UNSUPPORTED', /x25519-pub/);
  });

  it('refuses a wrong key length and a non-minimal codec varint', () => {
    const key = base58.decode(SPEC_VECTORS[0]!.publicKeyBase58);
    expectDIDKeyError(() => parseDIDKey(didKeyFromBytes([0xed, 0x01, ...key.subarray(0, 31)])), 'DID_KEY_INVALID', /32 bytes, got 31/);
    expectDIDKeyError(() => parseDIDKey(didKeyFromBytes([0xed, 0x01, ...key, 0])), 'DID_KEY_INVALID', /32 bytes, got 33/);
    // 0xed encoded in three bytes instead of two: same codec, second spelling of the same key.
    expectDIDKeyError(() => parseDIDKey(didKeyFromBytes([0xed, 0x81, 0x00, ...key])), 'DID_KEY_INVALID', /minimally/);
  });

  it('refuses to encode keys that are not Ed25519', () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    expectDIDKeyError(() => encodeDIDKey(publicKey), 'DID_KEY_UNSUPPORTED');
    expectDIDKeyError(() => encodeDIDKey(new Uint8Array(31)), 'DID_KEY_INVALID');
  });
});

describe('isDID', () => {
  it('accepts DIDs and refuses DID URLs and junk', () => {
    expect(isDID(SPEC_VECTORS[0]!.did)).toBe(true);
    expect(isDID('did:web:example.com:user:alice')).toBe(true);
    expect(isDID('did:example:123%2F456')).toBe(true);
    expect(isDID('did:web:example.com#key')).toBe(false);
    expect(isDID('did:web:')).toBe(false);
    expect(isDID('did:Web:example.com')).toBe(false);
    expect(isDID('did:web:example.com:')).toBe(false);
    expect(isDID('alice')).toBe(false);
    expect(isDID(42)).toBe(false);
  });
});
