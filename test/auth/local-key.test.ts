import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { decodeJwt, decodeProtectedHeader } from 'jose';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  didKeyVerificationMethodID,
  encodeDIDKey,
  generateLocalKey,
  loadOrCreateLocalKey,
  localKeyFromJWK,
  mintToken,
  parseDIDKey,
  verifyBearerToken,
} from '../../src/auth/index.js';
import { AUDIENCE, NOW, NOW_SECONDS } from './fixtures.js';

let directory: string;
beforeEach(async () => {
  directory = await mkdtemp(join(tmpdir(), 'auth-local-key-'));
});
afterEach(async () => {
  await rm(directory, { recursive: true, force: true });
});

describe('generateLocalKey', () => {
  it('makes an Ed25519 key whose did:key is its public half', () => {
    const key = generateLocalKey();
    expect(key.privateKey.type).toBe('private');
    expect(key.privateKey.asymmetricKeyType).toBe('ed25519');
    expect(key.did).toBe(encodeDIDKey(key.privateKey));
    expect(parseDIDKey(key.did).export({ format: 'jwk' }).x).toBe(key.privateKeyJWK.x);
    expect(Object.keys(key.privateKeyJWK).sort()).toEqual(['crv', 'd', 'kty', 'x']);
    expect(generateLocalKey().did).not.toBe(key.did);
  });

  it('round-trips through its private JWK and refuses inconsistent or foreign JWKs', () => {
    const key = generateLocalKey();
    expect(localKeyFromJWK(JSON.parse(JSON.stringify(key.privateKeyJWK))).did).toBe(key.did);
    const other = generateLocalKey();
    expect(() => localKeyFromJWK({ ...key.privateKeyJWK, x: other.privateKeyJWK.x })).toThrow(/"x" does not match/);
    expect(() => localKeyFromJWK({ kty: 'EC', crv: 'P-256', d: 'x', x: 'y' })).toThrow(/Ed25519 private JWK/);
    expect(() => localKeyFromJWK({ kty: 'OKP', crv: 'Ed25519', x: key.privateKeyJWK.x })).toThrow(/Ed25519 private JWK/);
    expect(() => localKeyFromJWK('key')).toThrow(/JWK object/);
  });
});

describe('loadOrCreateLocalKey', () => {
  it('creates the directory and a 0600 JWK file, then loads the same key', async () => {
    const path = join(directory, 'nested', 'data', 'local-key.json');
    const created = await loadOrCreateLocalKey(path);
    expect(created.created).toBe(true);
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect(JSON.parse(await readFile(path, 'utf8'))).toEqual(created.privateKeyJWK);

    const loaded = await loadOrCreateLocalKey(path);
    expect(loaded.created).toBe(false);
    expect(loaded.did).toBe(created.did);
    expect(loaded.privateKey.equals(created.privateKey)).toBe(true);
  });

  it('gives concurrent callers one key and leaves no temporary files', async () => {
    const path = join(directory, 'local-key.json');
    const keys = await Promise.all(Array.from({ length: 8 }, () => loadOrCreateLocalKey(path)));
    expect(new Set(keys.map((k) => k.did)).size).toBe(1);
    expect(keys.filter((k) => k.created)).toHaveLength(1);
    expect(await readdir(directory)).toEqual(['local-key.json']);
  });

  it('refuses a corrupt key file without overwriting it or printing its contents', async () => {
    const path = join(directory, 'local-key.json');
    await writeFile(path, '{"kty":"OKP","crv":"Ed25519","d":"c2VjcmV0');
    await expect(loadOrCreateLocalKey(path)).rejects.toThrow(new RegExp(`${path}.*not JSON`));
    await writeFile(path, '{"kty":"OKP","crv":"Ed25519","d":"c2VjcmV0c2VjcmV0"}');
    const error = await loadOrCreateLocalKey(path).then(
      () => expect.fail('expected the key file to be refused'),
      (e: unknown) => e as Error,
    );
    expect(error.message).toMatch(/Ed25519 private JWK/);
    expect(error.message).not.toContain('c2VjcmV0');
    expect(await readFile(path, 'utf8')).toContain('c2VjcmV0c2VjcmV0');
  });
});

describe('mintToken', () => {
  it('mints a token the verifier accepts, with iss, aud, iat, exp and a did:key kid', async () => {
    const key = generateLocalKey();
    const token = await mintToken({ privateKey: key.privateKey, did: key.did, audience: AUDIENCE, ttlSeconds: 120, now: NOW + 999 });
    expect(decodeProtectedHeader(token)).toEqual({ alg: 'EdDSA', typ: 'JWT', kid: didKeyVerificationMethodID(key.did) });
    expect(decodeJwt(token)).toEqual({ iss: key.did, aud: AUDIENCE, iat: NOW_SECONDS, exp: NOW_SECONDS + 120 });
    await expect(verifyBearerToken(token, { audience: AUDIENCE, now: NOW })).resolves.toEqual({
      did: key.did,
      expiresAt: NOW + 120_000,
    });
  });

  it('defaults to a one-hour token minted now', async () => {
    const key = generateLocalKey();
    const before = Math.floor(Date.now() / 1_000);
    const claims = decodeJwt(await mintToken({ privateKey: key.privateKey, audience: AUDIENCE }));
    expect(claims.iat).toBeGreaterThanOrEqual(before);
    expect(claims.exp! - claims.iat!).toBe(3_600);
    await expect(verifyBearerToken(await mintToken({ privateKey: key.privateKey, audience: AUDIENCE }), { audience: AUDIENCE })).resolves.toMatchObject({ did: key.did });
  });

  it('refuses a DID that is not the key’s and a nonsensical ttl', async () => {
    const key = generateLocalKey();
    const other = generateLocalKey();
    await expect(mintToken({ privateKey: key.privateKey, did: other.did, audience: AUDIENCE })).rejects.toThrow(/does not belong/);
    await expect(mintToken({ privateKey: key.privateKey, audience: AUDIENCE, ttlSeconds: 0 })).rejects.toThrow(RangeError);
    await expect(mintToken({ privateKey: key.privateKey, audience: AUDIENCE, ttlSeconds: 1.5 })).rejects.toThrow(RangeError);
  });
});
