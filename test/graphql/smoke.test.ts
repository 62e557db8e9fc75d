import { readFileSync } from 'node:fs';
import { expect, it } from 'vitest';
import { describeGraphQL, TEST_AUDIENCE } from '../helpers/graphql.js';

describeGraphQL('graphql smoke', (suite) => {
  it('answers serverInfo with the release, the viewer and dialect', async () => {
    const res = await suite.gql('{ serverInfo { version dialect viewerDID viewerIsService } }', {}, { as: 'worker' });
    // The audience tokens must name, open to anonymous callers: a console that mints tokens from a key needs it before it has one.
    expect(await suite.gql('{ serverInfo { audience viewerDID } }', {}, { as: 'anonymous' })).toEqual({ data: { serverInfo: { audience: TEST_AUDIENCE, viewerDID: null } } });
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(res).toEqual({ data: { serverInfo: { version, dialect: suite.dialect, viewerDID: suite.keys.worker.did, viewerIsService: true } } });
    expect(readFileSync(new URL('../../CHANGELOG.md', import.meta.url), 'utf8')).toContain(`## ${version}`);
  });

  it('refuses a bad token with 401 and a WWW-Authenticate challenge', async () => {
    const response = await suite.request('{ serverInfo { dialect } }', {}, { as: 'anonymous', headers: { authorization: 'Bearer not-a-jwt' } });
    expect(response.status).toBe(401);
    expect(response.headers.get('www-authenticate')).toMatch(/^Bearer /);
    const body = await response.json();
    expect(body.errors[0].extensions.code).toBe('TOKEN_MALFORMED');
  });

  it('keeps anonymous callers away from data', async () => {
    const res = await suite.gql('{ operations(first: 1) { totalCount } }', {}, { as: 'anonymous' });
    expect(res.data).toBeUndefined();
    expect(res.errors?.[0]?.message).toMatch(/needs a bearer token/i);
  });

  it('no token: refused whole with 401 and a bare bearer challenge, fragments followed; the open fields alone answer 200', async () => {
    for (const query of [
      '{ operations(first: 1) { totalCount } }',
      '{ serverInfo { version } operationCounts { count } }',
      '{ ...F } fragment F on Query { ... on Query { operationCounts { count } } }',
      'mutation { __typename }',
    ]) {
      const response = await suite.request(query, {}, { as: 'anonymous' });
      if (query.startsWith('mutation')) {
        expect(response.status, query).toBe(200);
        continue;
      }
      expect(response.status, query).toBe(401);
      expect(response.headers.get('www-authenticate'), query).toBe('Bearer realm="connector-store"');
      const body = (await response.json()) as { data?: unknown; errors?: { extensions?: { code?: string } }[] };
      expect(body.data, query).toBeUndefined();
      expect(body.errors?.map((e) => e.extensions?.code), query).toEqual(['UNAUTHENTICATED']);
    }
    const open = await suite.request('{ __typename serverInfo { version viewerDID } }', {}, { as: 'anonymous' });
    expect(open.status).toBe(200);
    expect(((await open.json()) as { data: { serverInfo: { viewerDID: null } } }).data.serverInfo.viewerDID).toBeNull();
  });
});

describeGraphQL('graphql request caps', (suite) => {
  it('nodes takes at most 500 ids: more is a validation error, not 500 more lookups', async () => {
    const ids = (n: number) => Array.from({ length: n }, (_, i) => Buffer.from(`ConnectorOperation:${String(i).padStart(22, 'A')}`).toString('base64url'));
    const ok = await suite.gql('query($ids: [ID!]!) { nodes(ids: $ids) { id } }', { ids: ids(500) });
    expect(ok.errors).toBeUndefined();
    expect(ok.data.nodes).toHaveLength(500);
    const tooMany = await suite.gql('query($ids: [ID!]!) { nodes(ids: $ids) { id } }', { ids: ids(501) });
    expect(tooMany.data).toBeNull();
    expect(tooMany.errors?.[0]?.message).toMatch(/at most 500 ids/);
  });
});
