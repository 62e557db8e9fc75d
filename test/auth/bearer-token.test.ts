import { createHmac, generateKeyPairSync } from 'node:crypto';
import { SignJWT } from 'jose';
import { describe, expect, it } from 'vitest';
import {
  AuthenticationError,
  didKeyVerificationMethodID,
  generateLocalKey,
  mintToken,
  parseAuthorizationHeader,
  verifyBearerToken,
  type AuthenticationErrorCode,
} from '../../src/auth/index.js';
import { AUDIENCE, base64urlJSON, NOW, NOW_SECONDS, signEdDSA, validClaims } from './fixtures.js';

const alice = generateLocalKey();
const bob = generateLocalKey();
const options = { audience: AUDIENCE, now: NOW };

async function expectRejected(
  token: string,
  code: AuthenticationErrorCode,
  message?: RegExp,
  overrides: Partial<Parameters<typeof verifyBearerToken>[1]> = {},
): Promise<AuthenticationError> {
  const error = await verifyBearerToken(token, { ...options, ...overrides }).then(
    () => expect.fail(`expected ${code}`),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AuthenticationError);
  const authError = error as AuthenticationError;
  expect(authError.code).toBe(code);
  expect(authError.httpStatus).toBe(401);
  if (message) expect(authError.message).toMatch(message);
  // The message is for the client and for logs: it never carries the credential.
  for (const segment of token.split('.')) {
    if (segment.length > 8) expect(authError.message).not.toContain(segment);
  }
  return authError;
}

function aliceToken(claims: Record<string, unknown> = {}, header: Record<string, unknown> = {}): string {
  return signEdDSA(alice.privateKey, { alg: 'EdDSA', typ: 'JWT', ...header }, validClaims(alice.did, claims));
}

describe('verifyBearerToken', () => {
  it('accepts a token signed by the did:key in iss', async () => {
    await expect(verifyBearerToken(aliceToken(), options)).resolves.toEqual({
      did: alice.did,
      expiresAt: (NOW_SECONDS + 600) * 1_000,
    });
  });

  it('accepts minted tokens, an aud array containing the audience and a kid naming iss', async () => {
    const minted = await mintToken({ privateKey: alice.privateKey, audience: AUDIENCE, now: NOW });
    await expect(verifyBearerToken(minted, options)).resolves.toMatchObject({ did: alice.did });
    const many = aliceToken({ aud: ['other', AUDIENCE] }, { kid: didKeyVerificationMethodID(alice.did) });
    await expect(verifyBearerToken(many, options)).resolves.toMatchObject({ did: alice.did });
    const opaqueKid = aliceToken({}, { kid: 'key-1' });
    await expect(verifyBearerToken(opaqueKid, options)).resolves.toMatchObject({ did: alice.did });
  });

  it('refuses a tampered signature or payload', async () => {
    const token = aliceToken();
    const [header, payload, signature] = token.split('.') as [string, string, string];
    const flipped = signature.slice(0, 10) + (signature[10] === 'A' ? 'B' : 'A') + signature.slice(11);
    await expectRejected(`${header}.${payload}.${flipped}`, 'TOKEN_SIGNATURE', /does not verify/);
    const otherPayload = base64urlJSON(validClaims(alice.did, { exp: NOW_SECONDS + 3_000 }));
    await expectRejected(`${header}.${otherPayload}.${signature}`, 'TOKEN_SIGNATURE');
    await expectRejected(`${header}.${payload}.`, 'TOKEN_SIGNATURE');
  });

  it('refuses a token whose iss is not the key that signed it', async () => {
    // Signed by Alice's key, claiming to be Bob.
    const forged = signEdDSA(alice.privateKey, { alg: 'EdDSA' }, validClaims(bob.did));
    await expectRejected(forged, 'TOKEN_SIGNATURE', /issuer/);
  });

  it('refuses a kid that names another DID than iss', async () => {
    const token = aliceToken({}, { kid: didKeyVerificationMethodID(bob.did) });
    await expectRejected(token, 'TOKEN_ISSUER', /kid/);
  });

  it('refuses a wrong or missing audience', async () => {
    await expectRejected(aliceToken({ aud: 'someone-else' }), 'TOKEN_AUDIENCE', new RegExp(AUDIENCE));
    await expectRejected(aliceToken({ aud: ['a', 'b'] }), 'TOKEN_AUDIENCE');
    await expectRejected(aliceToken({ aud: undefined }), 'TOKEN_AUDIENCE');
    await expectRejected(aliceToken(), 'TOKEN_AUDIENCE', undefined, { audience: 'production' });
  });

  it('refuses an expired token, allowing the clock tolerance', async () => {
    const expired = aliceToken({ iat: NOW_SECONDS - 3_600, exp: NOW_SECONDS - 31 });
    await expectRejected(expired, 'TOKEN_EXPIRED', /expired/);
    const justExpired = aliceToken({ iat: NOW_SECONDS - 3_600, exp: NOW_SECONDS - 29 });
    await expect(verifyBearerToken(justExpired, options)).resolves.toMatchObject({ did: alice.did });
    await expectRejected(justExpired, 'TOKEN_EXPIRED', undefined, { clockToleranceSeconds: 0 });
  });

  it('honours nbf, allowing the clock tolerance', async () => {
    await expectRejected(aliceToken({ nbf: NOW_SECONDS + 120 }), 'TOKEN_NOT_YET_VALID', /nbf/);
    await expect(verifyBearerToken(aliceToken({ nbf: NOW_SECONDS + 20 }), options)).resolves.toMatchObject({
      did: alice.did,
    });
    await expect(verifyBearerToken(aliceToken({ nbf: NOW_SECONDS - 20 }), options)).resolves.toMatchObject({
      did: alice.did,
    });
  });

  it('refuses a token issued in the future, which would outlive the lifetime bound', async () => {
    const token = aliceToken({ iat: NOW_SECONDS + 86_400, exp: NOW_SECONDS + 86_400 + 3_600 });
    await expectRejected(token, 'TOKEN_NOT_YET_VALID', /iat/);
  });

  it('bounds the lifetime to one hour (configurable)', async () => {
    await expectRejected(aliceToken({ iat: NOW_SECONDS, exp: NOW_SECONDS + 3_601 }), 'TOKEN_LIFETIME', /3601 s.*3600 s/);
    const exactlyOneHour = aliceToken({ iat: NOW_SECONDS, exp: NOW_SECONDS + 3_600 });
    await expect(verifyBearerToken(exactlyOneHour, options)).resolves.toMatchObject({ did: alice.did });
    await expectRejected(exactlyOneHour, 'TOKEN_LIFETIME', undefined, { maxLifetimeSeconds: 300 });
    await expectRejected(aliceToken({ iat: NOW_SECONDS, exp: NOW_SECONDS - 1 }), 'TOKEN_LIFETIME', /before/);
  });

  it('requires exp and iat', async () => {
    await expectRejected(aliceToken({ exp: undefined }), 'TOKEN_LIFETIME', /no "exp"/);
    await expectRejected(aliceToken({ iat: undefined }), 'TOKEN_LIFETIME', /no "iat"/);
    await expectRejected(aliceToken({ exp: String(NOW_SECONDS + 600) }), 'TOKEN_MALFORMED', /"exp"/);
    await expectRejected(aliceToken({ nbf: 'soon' }), 'TOKEN_MALFORMED', /"nbf"/);
  });

  it('refuses every algorithm but EdDSA', async () => {
    const claims = validClaims(alice.did);
    const unsecured = `${base64urlJSON({ alg: 'none', typ: 'JWT' })}.${base64urlJSON(claims)}.`;
    await expectRejected(unsecured, 'TOKEN_ALGORITHM', /EdDSA/);

    // The classic confusion attack: HMAC keyed with the (public) key bytes.
    const secret = Buffer.from(alice.privateKeyJWK.x!, 'base64url');
    const hs256 = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256' }).sign(secret);
    await expectRejected(hs256, 'TOKEN_ALGORITHM');
    const signingInput = `${base64urlJSON({ alg: 'HS256' })}.${base64urlJSON(claims)}`;
    const manual = `${signingInput}.${createHmac('sha256', Buffer.from(alice.did)).update(signingInput).digest('base64url')}`;
    await expectRejected(manual, 'TOKEN_ALGORITHM');

    const { privateKey: ecKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const es256 = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256' }).sign(ecKey);
    await expectRejected(es256, 'TOKEN_ALGORITHM');
    // Right key, fully-specified alg name: still not the agreed "EdDSA".
    await expectRejected(signEdDSA(alice.privateKey, { alg: 'Ed25519' }, claims), 'TOKEN_ALGORITHM');
    await expectRejected(signEdDSA(alice.privateKey, {}, claims), 'TOKEN_ALGORITHM');
  });

  it('refuses an iss that is not an Ed25519 did:key', async () => {
    await expectRejected(aliceToken({ iss: undefined }), 'TOKEN_ISSUER', /no "iss"/);
    await expectRejected(aliceToken({ iss: 'did:web:example.com' }), 'TOKEN_ISSUER', /did:key/);
    await expectRejected(aliceToken({ iss: 42 }), 'TOKEN_ISSUER');
    await expectRejected(aliceToken({ iss: `${alice.did}#key-1` }), 'TOKEN_ISSUER');
    await expectRejected(
      aliceToken({ iss: 'did:key:zQ3shokFTS3brHcDQrn82RUDfCZESWL1ZdCEJwekUDPQiYBme' }),
      'TOKEN_ISSUER',
      /secp256k1-pub/,
    );
  });

  it('refuses malformed tokens', async () => {
    const token = aliceToken();
    const [header, payload, signature] = token.split('.') as [string, string, string];
    await expectRejected('', 'TOKEN_MALFORMED');
    await expectRejected('not-a-jwt', 'TOKEN_MALFORMED', /three/);
    await expectRejected(`${header}.${payload}`, 'TOKEN_MALFORMED', /three/);
    await expectRejected(`${token}.extra.parts`, 'TOKEN_MALFORMED');
    await expectRejected(`%%%.${payload}.${signature}`, 'TOKEN_MALFORMED', /header is not base64url/);
    await expectRejected(`${Buffer.from('{"alg":').toString('base64url')}.${payload}.${signature}`, 'TOKEN_MALFORMED', /header/);
    await expectRejected(`${base64urlJSON(['EdDSA'])}.${payload}.${signature}`, 'TOKEN_MALFORMED', /JSON object/);
    await expectRejected(`${header}.${base64urlJSON('claims')}.${signature}`, 'TOKEN_MALFORMED', /payload/);
    await expectRejected(`${header}.${'A'.repeat(9_000)}.${signature}`, 'TOKEN_MALFORMED', /longer/);
  });

  it('refuses critical header parameters it does not understand', async () => {
    const token = signEdDSA(alice.privateKey, { alg: 'EdDSA', crit: ['exp-policy'], 'exp-policy': 1 }, validClaims(alice.did));
    await expectRejected(token, 'TOKEN_MALFORMED', /not a valid JWS/);
    const unencoded = signEdDSA(alice.privateKey, { alg: 'EdDSA', b64: false, crit: ['b64'] }, validClaims(alice.did));
    await expectRejected(unencoded, 'TOKEN_MALFORMED', /unencoded/);
  });
});

describe('parseAuthorizationHeader', () => {
  it('returns null without credentials', () => {
    expect(parseAuthorizationHeader(undefined)).toBeNull();
    expect(parseAuthorizationHeader(null)).toBeNull();
    expect(parseAuthorizationHeader('')).toBeNull();
    expect(parseAuthorizationHeader('   ')).toBeNull();
  });

  it('returns the bearer token, scheme case-insensitive', () => {
    expect(parseAuthorizationHeader('Bearer aaa.bbb.ccc')).toBe('aaa.bbb.ccc');
    expect(parseAuthorizationHeader('bearer  aaa.bbb.ccc ')).toBe('aaa.bbb.ccc');
    expect(parseAuthorizationHeader('BEARER abc~+/_-=')).toBe('abc~+/_-=');
  });

  it('refuses other schemes and malformed credentials without echoing them', () => {
    const refused = (header: string): AuthenticationError => {
      try {
        parseAuthorizationHeader(header);
      } catch (error) {
        expect(error).toBeInstanceOf(AuthenticationError);
        expect((error as AuthenticationError).code).toBe('AUTHORIZATION_HEADER');
        return error as AuthenticationError;
      }
      return expect.fail(`expected ${header} to be refused`);
    };
    expect(refused('Basic dXNlcjpwYXNzd29yZA==').message).toMatch(/"Basic" is not supported/);
    expect(refused('Basic dXNlcjpwYXNzd29yZA==').message).not.toContain('dXNlcjpwYXNzd29yZA');
    refused('Bearer');
    refused('Bearer aaa.bbb.ccc ddd');
    refused('Bearer "aaa"');
    const bare = refused('eyJhbGciOiJFZERTQSJ9.eyJpc3MiOiJkaWQ6a2V5In0.c2ln');
    expect(bare.message).not.toContain('eyJ');
    refused('Bearer, Bearer x');
  });
});

describe('verified-token cache', () => {
  it('a token verified once is still checked against the clock on every use: it expires, and an early one is not yet valid', async () => {
    const token = await mintToken({ privateKey: alice.privateKey, audience: AUDIENCE, now: NOW, ttlSeconds: 60 });
    expect((await verifyBearerToken(token, options)).did).toBe(alice.did);
    expect((await verifyBearerToken(token, { ...options, now: NOW + 59_000 })).did).toBe(alice.did);
    await expectRejected(token, 'TOKEN_EXPIRED', undefined, { now: NOW + 60_000 + 31_000 });
    await expectRejected(token, 'TOKEN_NOT_YET_VALID', undefined, { now: NOW - 120_000 });
  });

  it('is keyed by the audience and lifetime bound it was verified under: another audience or a shorter bound is refused', async () => {
    const token = await mintToken({ privateKey: alice.privateKey, audience: AUDIENCE, now: NOW, ttlSeconds: 600 });
    await verifyBearerToken(token, options);
    await expectRejected(token, 'TOKEN_AUDIENCE', undefined, { audience: 'another-audience' });
    await expectRejected(token, 'TOKEN_LIFETIME', undefined, { maxLifetimeSeconds: 300 });
  });

  it('never remembers a refusal as a success, nor a success for a token differing by one character', async () => {
    const token = await mintToken({ privateKey: alice.privateKey, audience: AUDIENCE, now: NOW });
    await verifyBearerToken(token, options);
    const [header, payload, signature] = token.split('.') as [string, string, string];
    // A character in the middle: the last one of a 64-byte signature carries padding bits only.
    const middle = Math.floor(signature.length / 2);
    const flipped = `${header}.${payload}.${signature.slice(0, middle)}${signature[middle] === 'A' ? 'B' : 'A'}${signature.slice(middle + 1)}`;
    await expectRejected(flipped, 'TOKEN_SIGNATURE');
    await expectRejected(flipped, 'TOKEN_SIGNATURE');
    const forged = `${header}.${base64urlJSON({ ...validClaims(bob.did), iss: alice.did })}.${signature}`;
    await expectRejected(forged, 'TOKEN_SIGNATURE');
  });
});
