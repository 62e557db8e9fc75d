import { expect, it } from 'vitest';
import { describeGraphQL } from '../helpers/graphql.js';

describeGraphQL('graphql smoke', (suite) => {
  it('answers serverInfo with the viewer and dialect', async () => {
    const res = await suite.gql('{ serverInfo { dialect viewerDID viewerIsService } }', {}, { as: 'worker' });
    expect(res).toEqual({ data: { serverInfo: { dialect: suite.dialect, viewerDID: suite.keys.worker.did, viewerIsService: true } } });
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
    expect(res.data).toBeNull();
    expect(res.errors?.[0]?.message).toMatch(/not authorized/i);
  });
});
