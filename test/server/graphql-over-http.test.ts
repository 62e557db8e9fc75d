/**
 * GraphQL over HTTP conformance (issue 23: every refusal carries a code, with
 * the status the spec gives for the `Accept` sent): graphql-http's server
 * audits against the app, signed in as a service. Every audit passes: none
 * warns or errors.
 */
import { auditServer } from 'graphql-http';
import { expect, it } from 'vitest';
import { describeGraphQL } from '../helpers/graphql.js';

describeGraphQL('GraphQL over HTTP (graphql-http audits)', (suite) => {
  it('passes every audit', { timeout: 60_000 }, async () => {
    const token = await suite.token('worker');
    const results = await auditServer({
      url: 'http://localhost/graphql',
      fetchFn: (input: RequestInfo | URL, init?: RequestInit) => {
        const headers = new Headers(init?.headers);
        headers.set('authorization', `Bearer ${token}`);
        return suite.app.yoga.fetch(input as string, { ...init, headers });
      },
    });
    const failed = results.filter((result) => result.status !== 'ok').map((result) => `${result.id} ${result.name}: ${result.status} ${'reason' in result ? result.reason : ''}`);
    expect(failed).toEqual([]);
    expect(results.length).toBeGreaterThanOrEqual(61);
  });
});
