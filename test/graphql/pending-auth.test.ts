/** `createPendingAuthorization` and `consumePendingAuthorization` (SPEC §3.2) through yoga.fetch, both dialects. */
import { expect, it } from 'vitest';
import { captureLogs } from '../server/log-capture.js';
import { describeGraphQL, type Principal } from '../helpers/graphql.js';

const CREATE = `mutation($input: CreatePendingAuthorizationInput!) {
  createPendingAuthorization(input: $input) {
    __typename
    ... on PendingAuthorization { state provider ownerDID scopes isIncremental redirectURL createdAt expiresAt }
    ... on Error { code message }
    ... on InvalidInputError { field }
    ... on InputValidationError { issues { path message } }
  }
}`;
const CONSUME = `mutation($state: String!) {
  consumePendingAuthorization(input: { state: $state }) {
    __typename
    ... on ConsumePendingAuthorizationPayload { consumed { codeVerifier authorization { state ownerDID scopes isIncremental } } }
    ... on Error { code }
  }
}`;

const VERIFIER = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
const logs = captureLogs('debug');

describeGraphQL('graphql pending authorizations', (suite) => {
  const input = (overrides: Record<string, unknown> = {}) => ({
    state: 'state-0123456789abcdef',
    codeVerifier: VERIFIER,
    provider: 'google',
    redirectURL: 'https://app.example/callback',
    scopes: ['contacts.readonly', 'calendar'],
    isIncremental: true,
    expiresAt: new Date(suite.clock.now() + 10 * 60_000).toISOString(),
    ...overrides,
  });
  const create = (as: Principal = 'alice', overrides: Record<string, unknown> = {}) => suite.gql(CREATE, { input: input(overrides) }, { as });

  it('an owner records a pending authorization; the answer never carries the verifier', async () => {
    const res = await create();
    expect(res.data.createPendingAuthorization).toEqual({
      __typename: 'PendingAuthorization',
      state: 'state-0123456789abcdef',
      provider: 'google',
      ownerDID: suite.keys.alice.did,
      scopes: ['contacts.readonly', 'calendar'],
      isIncremental: true,
      redirectURL: 'https://app.example/callback',
      createdAt: new Date(suite.clock.now()).toISOString(),
      expiresAt: new Date(suite.clock.now() + 10 * 60_000).toISOString(),
    });
    expect(JSON.stringify(res)).not.toContain(VERIFIER);
  });

  it('only a service consumes, once, and only that consume returns the verifier', async () => {
    await create();
    const asOwner = await suite.gql(CONSUME, { state: 'state-0123456789abcdef' }, { as: 'alice' });
    expect(asOwner.errors).toBeUndefined();
    expect(asOwner.data.consumePendingAuthorization).toEqual({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });

    const first = await suite.gql(CONSUME, { state: 'state-0123456789abcdef' }, { as: 'worker' });
    expect(first.data.consumePendingAuthorization.consumed).toEqual({
      codeVerifier: VERIFIER,
      authorization: { state: 'state-0123456789abcdef', ownerDID: suite.keys.alice.did, scopes: ['contacts.readonly', 'calendar'], isIncremental: true },
    });
    const second = await suite.gql(CONSUME, { state: 'state-0123456789abcdef' }, { as: 'worker' });
    expect(second.data.consumePendingAuthorization).toEqual({ __typename: 'ConsumePendingAuthorizationPayload', consumed: null });
  });

  it('an expired authorization is not returned', async () => {
    await create();
    suite.clock.advance(10 * 60_000 + 1);
    const res = await suite.gql(CONSUME, { state: 'state-0123456789abcdef' }, { as: 'worker' });
    expect(res.data.consumePendingAuthorization.consumed).toBeNull();
  });

  it('a user may not record one for another owner; a service may', async () => {
    const forbidden = await create('alice', { ownerDID: suite.keys.bob.did });
    expect(forbidden.data.createPendingAuthorization).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
    const service = await create('worker', { ownerDID: suite.keys.bob.did, state: 'state-for-bob-0123456789' });
    expect(service.data.createPendingAuthorization).toMatchObject({ __typename: 'PendingAuthorization', ownerDID: suite.keys.bob.did });
  });

  it('refuses bad input with a clear error and stores nothing', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ codeVerifier: 'short' }, 'codeVerifier'],
      [{ state: 'tiny' }, 'state'],
      [{ redirectURL: 'not a url' }, 'redirectURL'],
      [{ redirectURL: 'javascript:alert(document.cookie)' }, 'redirectURL'],
      [{ redirectURL: 'data:text/html,<script>alert(1)</script>' }, 'redirectURL'],
      [{ redirectURL: 'file:///etc/passwd' }, 'redirectURL'],
      [{ redirectURL: 'http://evil.example/callback' }, 'redirectURL'],
      [{ provider: '' }, 'provider'],
    ];
    for (const [overrides, field] of cases) {
      const res = await create('alice', overrides);
      expect(res.data.createPendingAuthorization, field).toMatchObject({ __typename: 'InputValidationError', issues: [{ path: ['input', field] }] });
      expect(JSON.stringify(res)).not.toContain(VERIFIER);
    }
    // What OAuth clients really use stays accepted: https, loopback http, reverse-domain app schemes.
    for (const [n, redirectURL] of ['https://app.example/cb', 'http://127.0.0.1:8765/cb', 'com.example.app:/oauth2redirect'].entries()) {
      const ok = await create('alice', { redirectURL, state: `state-redirect-ok-${n}-0123456789` });
      expect(ok.data.createPendingAuthorization.__typename, redirectURL).toBe('PendingAuthorization');
    }
    const past = await create('alice', { expiresAt: new Date(suite.clock.now() - 1).toISOString() });
    expect(past.data.createPendingAuthorization).toMatchObject({ __typename: 'InvalidInputError', field: 'expiresAt' });
    const tooLong = await create('alice', { expiresAt: new Date(suite.clock.now() + 2 * 3_600_000).toISOString() });
    expect(tooLong.data.createPendingAuthorization).toMatchObject({ __typename: 'InvalidInputError', field: 'expiresAt' });
    const none = await suite.gql(CONSUME, { state: 'state-0123456789abcdef' }, { as: 'worker' });
    expect(none.data.consumePendingAuthorization.consumed).toBeNull();
  });

  it('a reused state is refused and the first record is untouched', async () => {
    await create();
    const again = await create('alice', { codeVerifier: 'x'.repeat(50) });
    expect(again.data.createPendingAuthorization).toMatchObject({ __typename: 'InvalidInputError', field: 'state' });
    expect(JSON.stringify(again)).not.toContain(VERIFIER);
    const consumed = await suite.gql(CONSUME, { state: 'state-0123456789abcdef' }, { as: 'worker' });
    expect(consumed.data.consumePendingAuthorization.consumed.codeVerifier).toBe(VERIFIER);
  });

  it('never writes the verifier to the logs, even at debug level', () => {
    // The requests above were logged (so this can fail), without the secret.
    expect(logs.entries().length).toBeGreaterThan(0);
    expect(logs.text).not.toContain(VERIFIER);
    expect(logs.text).not.toContain('x'.repeat(50));
  });
}, { logger: logs.logger });
