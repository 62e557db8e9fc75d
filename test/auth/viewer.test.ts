import { describe, expect, it } from 'vitest';
import {
  ANONYMOUS_VIEWER,
  AuthenticationError,
  bearerChallenge,
  generateLocalKey,
  mintToken,
  resolveViewer,
  type AuthConfig,
  type AuthenticationErrorCode,
  type RequestHeaders,
} from '../../src/auth/index.js';
import { AUDIENCE, NOW, validClaims, signEdDSA } from './fixtures.js';

const user = generateLocalKey();
const worker = generateLocalKey();
const config: AuthConfig = { audience: AUDIENCE, serviceDIDs: new Set([worker.did]) };
const at = { now: NOW };

function bearer(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

async function expectRefused(
  headers: RequestHeaders,
  code: AuthenticationErrorCode,
  withConfig: AuthConfig = config,
): Promise<AuthenticationError> {
  const error = await resolveViewer(headers, withConfig, at).then(
    () => expect.fail(`expected ${code}`),
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AuthenticationError);
  expect((error as AuthenticationError).code).toBe(code);
  return error as AuthenticationError;
}

describe('resolveViewer', () => {
  it('is anonymous without credentials', async () => {
    await expect(resolveViewer({}, config, at)).resolves.toEqual({ kind: 'anonymous' });
    await expect(resolveViewer(new Headers(), config, at)).resolves.toBe(ANONYMOUS_VIEWER);
    await expect(resolveViewer({ authorization: '' }, config, at)).resolves.toBe(ANONYMOUS_VIEWER);
  });

  it('resolves a token from any did:key to a user', async () => {
    const token = await mintToken({ privateKey: user.privateKey, audience: AUDIENCE, now: NOW });
    await expect(resolveViewer(bearer(token), config, at)).resolves.toEqual({ kind: 'user', did: user.did });
    const fetchHeaders = new Headers({ Authorization: `Bearer ${token}` });
    await expect(resolveViewer(fetchHeaders, config, at)).resolves.toEqual({ kind: 'user', did: user.did });
    await expect(resolveViewer({ Authorization: `Bearer ${token}` }, config, at)).resolves.toEqual({
      kind: 'user',
      did: user.did,
    });
  });

  it('resolves a token from a configured service DID to a service', async () => {
    const token = await mintToken({ privateKey: worker.privateKey, audience: AUDIENCE, now: NOW });
    await expect(resolveViewer(bearer(token), config, at)).resolves.toEqual({ kind: 'service', did: worker.did });
    const noServices: AuthConfig = { ...config, serviceDIDs: new Set() };
    await expect(resolveViewer(bearer(token), noServices, at)).resolves.toEqual({ kind: 'user', did: worker.did });
  });

  it('refuses bad tokens and bad headers instead of falling back to anonymous', async () => {
    const expired = await mintToken({ privateKey: user.privateKey, audience: AUDIENCE, now: NOW - 2 * 3_600_000 });
    await expectRefused(bearer(expired), 'TOKEN_EXPIRED');
    const otherAudience = await mintToken({ privateKey: user.privateKey, audience: 'elsewhere', now: NOW });
    await expectRefused(bearer(otherAudience), 'TOKEN_AUDIENCE');
    // A service DID in iss does not help a token signed by someone else.
    const forged = signEdDSA(user.privateKey, { alg: 'EdDSA' }, validClaims(worker.did));
    await expectRefused(bearer(forged), 'TOKEN_SIGNATURE');
    await expectRefused({ authorization: 'Basic dXNlcjpwYXNz' }, 'AUTHORIZATION_HEADER');
    await expectRefused({ authorization: ['Bearer a.b.c', 'Bearer d.e.f'] }, 'AUTHORIZATION_HEADER');
    const headers = new Headers();
    headers.append('authorization', 'Bearer a.b.c');
    headers.append('authorization', 'Bearer d.e.f');
    await expectRefused(headers, 'AUTHORIZATION_HEADER');
  });

  it('passes the configured lifetime and tolerance on', async () => {
    const token = await mintToken({ privateKey: user.privateKey, audience: AUDIENCE, ttlSeconds: 600, now: NOW });
    await expectRefused(bearer(token), 'TOKEN_LIFETIME', { ...config, maxLifetimeSeconds: 300 });
    const later = { now: NOW + 610_000 };
    await expect(resolveViewer(bearer(token), config, later)).resolves.toMatchObject({ kind: 'user' });
    const strict = await resolveViewer(bearer(token), { ...config, clockToleranceSeconds: 0 }, later).catch((e: unknown) => e);
    expect((strict as AuthenticationError).code).toBe('TOKEN_EXPIRED');
  });

  describe('insecure header mode', () => {
    const insecure: AuthConfig = { ...config, insecureHeaderAuth: true };

    it('is off by default: x-viewer-did is refused, not trusted and not ignored', async () => {
      const error = await expectRefused({ 'x-viewer-did': user.did }, 'INSECURE_HEADER_DISABLED');
      expect(error.message).toMatch(/Authorization: Bearer/);
      await expectRefused({ 'x-viewer-did': worker.did }, 'INSECURE_HEADER_DISABLED', { ...config, insecureHeaderAuth: false });
    });

    it('trusts x-viewer-did only when explicitly enabled', async () => {
      await expect(resolveViewer({ 'x-viewer-did': user.did }, insecure, at)).resolves.toEqual({ kind: 'user', did: user.did });
      await expect(resolveViewer(new Headers({ 'X-Viewer-DID': worker.did }), insecure, at)).resolves.toEqual({
        kind: 'service',
        did: worker.did,
      });
      await expect(resolveViewer({ 'x-viewer-did': 'did:example:alice' }, insecure, at)).resolves.toEqual({
        kind: 'user',
        did: 'did:example:alice',
      });
      await expectRefused({ 'x-viewer-did': 'alice' }, 'VIEWER_DID_INVALID', insecure);
    });

    it('still verifies a bearer token, which wins over the header', async () => {
      const token = await mintToken({ privateKey: user.privateKey, audience: AUDIENCE, now: NOW });
      await expect(resolveViewer({ ...bearer(token), 'x-viewer-did': worker.did }, insecure, at)).resolves.toEqual({
        kind: 'user',
        did: user.did,
      });
      await expectRefused({ authorization: 'Bearer a.b.c', 'x-viewer-did': worker.did }, 'TOKEN_MALFORMED', insecure);
    });
  });
});

describe('bearerChallenge', () => {
  it('builds an RFC 6750 WWW-Authenticate value', () => {
    expect(bearerChallenge(new AuthenticationError('TOKEN_EXPIRED', 'token has expired ("exp" has passed)'))).toBe(
      `Bearer realm="connector-store", error="invalid_token", error_description="token has expired ('exp' has passed)"`,
    );
    expect(bearerChallenge(new AuthenticationError('AUTHORIZATION_HEADER', 'x'), 'store')).toBe(
      'Bearer realm="store", error="invalid_request", error_description="x"',
    );
  });
});
