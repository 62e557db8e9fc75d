/**
 * client/token.ts against the server's own verification (src/auth): tokens it
 * mints from each kind of key verify, and are the very bytes the server's
 * minting makes; expired and wrong-key tokens are refused; a token source
 * reuses its token and re-mints it before expiry on a fake clock.
 */
import { generateKeyPairSync } from 'node:crypto';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  createTokenSource,
  DEFAULT_AUDIENCE,
  didKeyFromPublicKey,
  importSigningKey,
  MAX_TOKEN_LIFETIME_SECONDS,
  mintToken,
  type Ed25519PrivateJWK,
} from '../../client/token.js';
import {
  AuthenticationError,
  DEFAULT_AUDIENCE as SERVER_DEFAULT_AUDIENCE,
  DEFAULT_MAX_TOKEN_LIFETIME_SECONDS,
  didKeyVerificationMethodID,
  encodeDIDKey,
  generateLocalKey,
  mintToken as serverMintToken,
  verifyBearerToken,
  type AuthenticationErrorCode,
} from '../../src/auth/index.js';
import { AUDIENCE, NOW, NOW_SECONDS, privateKeyFromSeed } from '../auth/fixtures.js';

const alice = generateLocalKey();
const bob = generateLocalKey();
const aliceJWK = alice.privateKeyJWK;
const verify = (token: string, now = NOW) => verifyBearerToken(token, { audience: AUDIENCE, now });

// The did:key method's Ed25519 test vectors (seed → DID), as in test/auth/did-key.test.ts.
const SPEC_VECTORS = [
  { seed: '0000000000000000000000000000000000000000000000000000000000000000', did: 'did:key:z6MkiTBz1ymuepAQ4HEHYSF1H8quG5GLVVQR3djdX3mDooWp' },
  { seed: '0000000000000000000000000000000000000000000000000000000000000001', did: 'did:key:z6MkjchhfUsD6mmvni8mCdXHw216Xrm9bQe2mBH1P5RDjVJG' },
];
const hexBytes = (hex: string) => Uint8Array.from(Buffer.from(hex, 'hex'));

async function expectRefused(token: string, code: AuthenticationErrorCode, now = NOW): Promise<void> {
  const error = await verify(token, now).then(
    () => expect.fail(`expected ${code}`),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AuthenticationError);
  expect((error as AuthenticationError).code).toBe(code);
}

describe('client token: keys and DIDs', () => {
  it('agrees with the server on the limits it mints for', () => {
    expect(DEFAULT_AUDIENCE).toBe(SERVER_DEFAULT_AUDIENCE);
    expect(MAX_TOKEN_LIFETIME_SECONDS).toBe(DEFAULT_MAX_TOKEN_LIFETIME_SECONDS);
  });

  it.each(SPEC_VECTORS)('derives the spec DID $did from its seed, as a JWK and as raw bytes', async ({ seed, did }) => {
    const privateKey = privateKeyFromSeed(seed);
    const jwk = privateKey.export({ format: 'jwk' });
    expect((await importSigningKey(hexBytes(seed))).did).toBe(did);
    expect((await importSigningKey({ kty: 'OKP', crv: 'Ed25519', d: jwk.d!, x: jwk.x! })).did).toBe(did);
    // `x` is optional: it is derived from `d`.
    expect((await importSigningKey({ kty: 'OKP', crv: 'Ed25519', d: jwk.d! })).did).toBe(did);
    expect(didKeyFromPublicKey(Uint8Array.from(Buffer.from(jwk.x!, 'base64url')))).toBe(did);
  });

  it('encodes every key as the server does', () => {
    for (let i = 0; i < 200; i++) {
      const { publicKey } = generateKeyPairSync('ed25519');
      const raw = Uint8Array.from(Buffer.from(publicKey.export({ format: 'jwk' }).x!, 'base64url'));
      expect(didKeyFromPublicKey(raw)).toBe(encodeDIDKey(raw));
    }
    // Leading zero bytes and all-ones keys: the edges of base58.
    for (const raw of [new Uint8Array(32), new Uint8Array(32).fill(0xff), Uint8Array.from({ length: 32 }, (_, i) => (i < 5 ? 0 : i))]) {
      expect(didKeyFromPublicKey(raw)).toBe(encodeDIDKey(raw));
    }
  });

  it('imports the local key file’s JWK (npm run token) with its DID and kid', async () => {
    const key = await importSigningKey(aliceJWK);
    expect(key.did).toBe(alice.did);
    expect(key.kid).toBe(didKeyVerificationMethodID(alice.did));
    // The signing copy cannot be exported, even though the JWK could be read.
    expect(key.privateKey.extractable).toBe(false);
    expect(await importSigningKey(key)).toBe(key);
  });

  it('refuses keys it cannot sign with, saying why', async () => {
    const bobX = bob.privateKeyJWK.x!;
    await expect(importSigningKey({ ...aliceJWK, x: bobX })).rejects.toThrow(/"x" does not match its "d"/);
    await expect(importSigningKey(new Uint8Array(31))).rejects.toThrow(/seed is 32 bytes, got 31/);
    await expect(importSigningKey({ kty: 'EC', crv: 'P-256', d: aliceJWK.d })).rejects.toThrow(/Ed25519 private JWK/);
    await expect(importSigningKey({ kty: 'OKP', crv: 'Ed25519', x: aliceJWK.x })).rejects.toThrow(/Ed25519 private JWK/);
    await expect(importSigningKey({ kty: 'OKP', crv: 'Ed25519', d: '!!!' })).rejects.toThrow(/base64url/);
    await expect(importSigningKey('key' as unknown as Ed25519PrivateJWK)).rejects.toThrow(TypeError);
    const one = (await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify'])) as CryptoKeyPair;
    const other = (await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify'])) as CryptoKeyPair;
    await expect(importSigningKey({ privateKey: one.privateKey, publicKey: other.publicKey })).rejects.toThrow(/does not belong/);
    const ecdsa = (await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign', 'verify'])) as CryptoKeyPair;
    await expect(importSigningKey(ecdsa)).rejects.toThrow(/Ed25519 key pair/);
  });
});

describe('client token: the server verifies it', () => {
  it('mints exactly what the server’s own minting does: same header, claims and bytes', async () => {
    const token = await mintToken({ key: aliceJWK, audience: AUDIENCE, lifetimeSeconds: 600, now: NOW + 999 });
    expect(token).toBe(await serverMintToken({ privateKey: alice.privateKey, audience: AUDIENCE, ttlSeconds: 600, now: NOW + 999 }));
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'EdDSA', typ: 'JWT', kid: didKeyVerificationMethodID(alice.did) });
    expect(decodeJwt(token)).toEqual({ iss: alice.did, aud: AUDIENCE, iat: NOW_SECONDS, exp: NOW_SECONDS + 600 });
    await expect(verify(token)).resolves.toEqual({ did: alice.did, expiresAt: NOW + 600_000 });
  });

  it('verifies from a seed, a JWK, a non-extractable Web Crypto key pair and an imported key', async () => {
    const seed = hexBytes(SPEC_VECTORS[1]!.seed);
    const pair = (await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify'])) as CryptoKeyPair;
    const pairDID = didKeyFromPublicKey(new Uint8Array(await crypto.subtle.exportKey('raw', pair.publicKey)));
    const imported = await importSigningKey(aliceJWK);
    for (const [key, did] of [
      [seed, SPEC_VECTORS[1]!.did],
      [aliceJWK, alice.did],
      [pair, pairDID],
      [imported, alice.did],
    ] as const) {
      await expect(verify(await mintToken({ key, audience: AUDIENCE, now: NOW }))).resolves.toMatchObject({ did });
    }
  });

  it('defaults to the server’s default audience and the longest lifetime it accepts', async () => {
    const token = await mintToken({ key: aliceJWK, now: NOW });
    expect(decodeJwt(token)).toMatchObject({ aud: 'connector-store', exp: NOW_SECONDS + 3_600 });
    await expect(verifyBearerToken(token, { audience: SERVER_DEFAULT_AUDIENCE, now: NOW })).resolves.toMatchObject({ did: alice.did });
  });

  it('refuses to mint what the server would refuse: a lifetime over an hour, zero, fractional; no audience', async () => {
    for (const lifetimeSeconds of [3_601, 0, -5, 1.5, Number.NaN]) {
      await expect(mintToken({ key: aliceJWK, lifetimeSeconds })).rejects.toThrow(/lifetimeSeconds must be a whole number from 1 to 3600/);
    }
    await expect(mintToken({ key: aliceJWK, audience: '' })).rejects.toThrow(/audience/);
  });

  it('the server refuses an expired token, one for another audience and one signed by another key', async () => {
    const expired = await mintToken({ key: aliceJWK, audience: AUDIENCE, lifetimeSeconds: 600, now: NOW - 3_600_000 });
    await expectRefused(expired, 'TOKEN_EXPIRED');
    // Still good while it lived: expired because of the clock, not its shape.
    await expect(verify(expired, NOW - 3_600_000 + 599_000)).resolves.toMatchObject({ did: alice.did });

    await expectRefused(await mintToken({ key: aliceJWK, audience: 'another-server', now: NOW }), 'TOKEN_AUDIENCE');

    // Alice's header and claims under Bob's signature: it does not verify with Alice's DID.
    const aliceToken = await mintToken({ key: aliceJWK, audience: AUDIENCE, now: NOW });
    const bobToken = await mintToken({ key: bob.privateKeyJWK, audience: AUDIENCE, now: NOW });
    const [header, payload] = aliceToken.split('.');
    await expectRefused(`${header}.${payload}.${bobToken.split('.')[2]}`, 'TOKEN_SIGNATURE');
  });
});

describe('client token: createTokenSource', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  /** A fake clock and a count of signatures made (jose signs with crypto.subtle.sign). */
  function setUp() {
    const clock = { current: NOW, now: () => clock.current };
    const sign = vi.spyOn(crypto.subtle, 'sign');
    return { clock, sign };
  }

  it('reuses its token until renewBeforeSeconds before expiry, then mints one the server accepts', async () => {
    const { clock, sign } = setUp();
    const source = createTokenSource({ key: aliceJWK, audience: AUDIENCE, lifetimeSeconds: 600, renewBeforeSeconds: 60, now: clock.now });

    const first = await source.getToken();
    expect(decodeJwt(first)).toMatchObject({ iss: alice.did, iat: NOW_SECONDS, exp: NOW_SECONDS + 600 });
    await expect(verify(first, clock.current)).resolves.toMatchObject({ did: alice.did });

    clock.current = NOW + 539_999;
    expect(await source.getToken()).toBe(first);
    expect(sign).toHaveBeenCalledTimes(1);

    // 60 s before expiry: a new token, while the old one is still valid.
    clock.current = NOW + 540_000;
    await expect(verify(first, clock.current)).resolves.toMatchObject({ did: alice.did });
    const second = await source.getToken();
    expect(second).not.toBe(first);
    expect(decodeJwt(second)).toMatchObject({ iss: alice.did, iat: NOW_SECONDS + 540, exp: NOW_SECONDS + 1_140 });
    await expect(verify(second, clock.current)).resolves.toMatchObject({ did: alice.did });
    expect(sign).toHaveBeenCalledTimes(2);

    // Past the first token's expiry the second one is served, and it verifies then.
    clock.current = NOW + 700_000;
    await expectRefused(first, 'TOKEN_EXPIRED', clock.current);
    expect(await source.getToken()).toBe(second);
    await expect(verify(second, clock.current)).resolves.toMatchObject({ did: alice.did });
    expect(sign).toHaveBeenCalledTimes(2);
  });

  it('concurrent callers share one mint; invalidate() makes the next call mint', async () => {
    const { clock, sign } = setUp();
    const source = createTokenSource({ key: hexBytes(SPEC_VECTORS[0]!.seed), audience: AUDIENCE, lifetimeSeconds: 300, now: clock.now });
    const tokens = await Promise.all(Array.from({ length: 10 }, () => source.getToken()));
    expect(new Set(tokens).size).toBe(1);
    expect(sign).toHaveBeenCalledTimes(1);
    expect(decodeJwt(tokens[0]!).iss).toBe(SPEC_VECTORS[0]!.did);

    clock.current += 1_000;
    source.invalidate();
    const fresh = await source.getToken();
    expect(fresh).not.toBe(tokens[0]);
    expect(decodeJwt(fresh).iat).toBe(NOW_SECONDS + 1);
    expect(sign).toHaveBeenCalledTimes(2);
  });

  it('renews 60 s before expiry by default, or at half the lifetime when that is shorter', async () => {
    const { clock } = setUp();
    const hourly = createTokenSource({ key: aliceJWK, audience: AUDIENCE, now: clock.now });
    const short = createTokenSource({ key: aliceJWK, audience: AUDIENCE, lifetimeSeconds: 30, now: clock.now });
    const [hour, half] = [await hourly.getToken(), await short.getToken()];
    clock.current = NOW + 14_999;
    expect(await short.getToken()).toBe(half);
    clock.current = NOW + 15_000;
    expect(await short.getToken()).not.toBe(half);
    clock.current = NOW + 3_539_999;
    expect(await hourly.getToken()).toBe(hour);
    clock.current = NOW + 3_540_000;
    expect(await hourly.getToken()).not.toBe(hour);
  });

  it('refuses settings that could serve an expired token, and does not cache a failure', async () => {
    expect(() => createTokenSource({ key: aliceJWK, lifetimeSeconds: 600, renewBeforeSeconds: 600 })).toThrow(/less than lifetimeSeconds/);
    expect(() => createTokenSource({ key: aliceJWK, renewBeforeSeconds: -1 })).toThrow(RangeError);
    expect(() => createTokenSource({ key: aliceJWK, lifetimeSeconds: 7_200 })).toThrow(/from 1 to 3600/);
    expect(() => createTokenSource({ key: aliceJWK, audience: '' })).toThrow(/audience/);

    const { clock } = setUp();
    const key: Ed25519PrivateJWK = { kty: 'OKP', crv: 'Ed25519', d: 'AAAA' };
    const source = createTokenSource({ key, audience: AUDIENCE, now: clock.now });
    await expect(source.getToken()).rejects.toThrow(/seed is 32 bytes/);
    // The key was read on first use; a fixed key works on the next call.
    key.d = aliceJWK.d;
    await expect(verify(await source.getToken())).resolves.toMatchObject({ did: alice.did });
  });
});
