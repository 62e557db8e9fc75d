/**
 * Hostile ids and strings at the edge, on both dialects: a malformed id or an
 * id of another node type is the same `NotFoundError` as an unknown id, and a
 * NUL character in any string input is an `InputValidationError` naming the
 * field, with nothing written.
 */
import { describe, expect, it } from 'vitest';
import { getOperationByKey } from '../../src/store/operations/index.js';
import { describeGraphQL } from '../helpers/graphql.js';
import { CLAIM_WATCH_ATTEMPT, FINALIZE, REQUEST_REPULL, UPDATE_SYNC_PROGRESS } from '../helpers/graphql-documents.js';
import { nodeID, seedClaim, seedSyncState, seedWatch, unknownNodeID } from '../helpers/graphql-seed.js';
import { claimInput } from '../helpers/operation-graphql.js';

const RELEASE = /* GraphQL */ `
  mutation Release($input: ReleaseOperationLeaseInput!) {
    releaseOperationLease(input: $input) { __typename ... on Error { code message } }
  }
`;

const CLAIM = /* GraphQL */ `
  mutation Claim($input: ClaimOperationInput!) {
    claimOperation(input: $input) {
      __typename
      ... on ClaimOperationPayload { outcome }
      ... on InputValidationError { issues { path message } }
    }
  }
`;

describeGraphQL('graphql input edges', (suite) => {
  describe('every bad id is a NotFoundError in the result union', () => {
    const badIDs = () => ({
      'a malformed id': 'not-an-id',
      'an empty id': '',
      'base64 of garbage': Buffer.from('ProjectionWatch').toString('base64url'),
      'an id naming no type': Buffer.from('Nope:AAAAAAAAAAAAAAAAAAAAAA').toString('base64url'),
    });

    it('requestRepull, claimWatchAttempt: malformed ids, an operation id, an unknown watch id', async () => {
      const op = await seedClaim(suite);
      const ids = { ...badIDs(), 'an operation id': op.id, 'an unknown watch id': unknownNodeID('ProjectionWatch') };
      for (const [label, id] of Object.entries(ids)) {
        const repull = await suite.gql(REQUEST_REPULL, { input: { id } });
        expect(repull.errors, label).toBeUndefined();
        expect(repull.data.requestRepull, label).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
        const claim = await suite.gql(CLAIM_WATCH_ATTEMPT, { input: { id, version: 0, claimMs: 60_000 } });
        expect(claim.errors, label).toBeUndefined();
        expect(claim.data.claimWatchAttempt.__typename, label).toBe('NotFoundError');
      }
    });

    it('fenced writes and finalize: a watch id and malformed ids answer like an unknown operation id', async () => {
      const { watch } = await seedWatch(suite, { documentID: 'edge-doc-1' });
      const ids = { ...badIDs(), 'a watch id': nodeID('ProjectionWatch', watch.nodeKey), 'an unknown operation id': unknownNodeID('ConnectorOperation') };
      for (const [label, id] of Object.entries(ids)) {
        const release = await suite.gql(RELEASE, { input: { id, version: 0, leaseToken: 'token' } });
        expect(release.errors, label).toBeUndefined();
        expect(release.data.releaseOperationLease.__typename, label).toBe('NotFoundError');
        const finalize = await suite.gql(FINALIZE, { input: { id, version: 0, leaseToken: 'token', documentID: 'd', sourceID: 's' } });
        expect(finalize.errors, label).toBeUndefined();
        expect(finalize.data.finalizeOperation.__typename, label).toBe('NotFoundError');
      }
    });

    it('updateSyncProgress: an operation id is not a sync state', async () => {
      const op = await seedClaim(suite);
      await seedSyncState(suite, { connectorName: 'edge-connector' });
      const res = await suite.gql(UPDATE_SYNC_PROGRESS, {
        input: { id: op.id, expectedVersion: 0, expectedIncarnation: 'x', lastSyncedAt: 'now', entityCount: 0 },
      });
      expect(res.errors).toBeUndefined();
      expect(res.data.updateSyncProgress.__typename).toBe('NotFoundError');
    });

    it('node() keeps answering null for a malformed id', async () => {
      const res = await suite.gql('query($id: ID!) { node(id: $id) { id } }', { id: 'not-an-id' });
      expect(res).toEqual({ data: { node: null } });
    });
  });

  describe('every issue of an input is listed, each with its path', () => {
    it('a mutation input with three bad fields answers three issues, and nothing is written', async () => {
      const input = claimInput({ operationID: 'three-bad-fields', connectorName: 'bad\u0000name', target: 'bad\u0000target', leaseMs: 5 });
      const res = await suite.gql(CLAIM, { input });
      expect(res.errors).toBeUndefined();
      expect(res.data.claimOperation.__typename).toBe('InputValidationError');
      const paths = res.data.claimOperation.issues.map((issue: { path: string[] }) => issue.path.join('.')).sort();
      expect(paths).toEqual(['input.connectorName', 'input.leaseMs', 'input.target']);
      expect(await getOperationByKey(suite.store, { callerDID: suite.keys.alice.did, operationID: 'three-bad-fields' })).toBeNull();
    });

    it('a query argument with two bad fields names both in extensions.issues', async () => {
      const res = await suite.gql('query($f: OperationFilter) { operations(filter: $f) { totalCount } }', {
        f: { connectorName: 'bad\u0000name', minAttempts: -1 },
      });
      expect(res.data).toBeNull();
      expect(res.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
      const issues = res.errors?.[0]?.extensions?.issues as { path: string[] }[];
      expect(issues.map((issue) => issue.path.join('.')).sort()).toEqual(['filter.connectorName', 'filter.minAttempts']);
    });
  });

  describe('a NUL character in a string input', () => {
    it('is an InputValidationError naming the field, and nothing is written', async () => {
      for (const field of ['operationID', 'connectorName', 'target', 'payloadHash']) {
        const input = claimInput({ operationID: `nul-${field}`, [field]: `bad\u0000${field}` });
        const res = await suite.gql(CLAIM, { input });
        expect(res.errors, field).toBeUndefined();
        expect(res.data.claimOperation.__typename, field).toBe('InputValidationError');
        expect(res.data.claimOperation.issues, field).toContainEqual({ path: ['input', field], message: 'must not contain a NUL character (U+0000)' });
      }
      expect(await getOperationByKey(suite.store, { callerDID: suite.keys.alice.did, operationID: 'nul-connectorName' })).toBeNull();
      // The same input without the NUL is accepted: the rule is about the character only.
      const ok = await suite.gql(CLAIM, { input: claimInput({ operationID: 'nul-free' }) });
      expect(ok.data.claimOperation).toEqual({ __typename: 'ClaimOperationPayload', outcome: 'CLAIMED' });
    });

    it('in a list of strings, and in an optional string', async () => {
      const res = await suite.gql(
        `mutation($input: CreatePendingAuthorizationInput!) {
          createPendingAuthorization(input: $input) { __typename ... on InputValidationError { issues { path message } } }
        }`,
        {
          input: {
            state: 'state-with-a-nul-scope-0001',
            codeVerifier: 'v'.repeat(43),
            provider: 'google',
            redirectURL: 'https://example.test/callback',
            scopes: ['calendar', 'contacts\u0000'],
            expiresAt: new Date(suite.clock.now() + 60_000).toISOString(),
          },
        },
      );
      expect(res.data.createPendingAuthorization.__typename).toBe('InputValidationError');
      expect(res.data.createPendingAuthorization.issues[0].path).toEqual(['input', 'scopes']);
      const optional = await suite.gql(CLAIM, { input: claimInput({ operationID: 'nul-source', sourceID: 'src\u0000' }) });
      expect(optional.data.claimOperation.issues).toContainEqual({ path: ['input', 'sourceID'], message: 'must not contain a NUL character (U+0000)' });
    });

    it('in a query argument: a clear top-level error, not a masked one', async () => {
      const res = await suite.gql('query($d: String!) { document(documentID: $d) { documentID } }', { d: 'doc\u0000' });
      expect(res.data).toBeNull();
      expect(res.errors?.[0]?.message).toMatch(/NUL character/);
      expect(res.errors?.[0]?.message).not.toMatch(/Unexpected error/);
    });
  });
});

describeGraphQL('graphql JSON input bounds', (suite) => {
  const SET = `mutation($input: SetSyncStateInput!) { setSyncState(input: $input) { __typename ... on InputValidationError { issues { path message } } } }`;
  const nested = (depth: number) => {
    let value: unknown = 'leaf';
    for (let i = 0; i < depth; i++) value = [value];
    return value;
  };

  /** Posts a raw body: a value this deep is more than JSON.stringify on the client side can write. */
  const postRaw = async (body: string) =>
    suite.app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await suite.token('alice')}` },
      body,
    });

  it('JSON nested 10 000 levels deep (as a variable) is an InputValidationError, not a stack overflow or a masked error', async () => {
    const deep = `${'['.repeat(10_000)}1${']'.repeat(10_000)}`;
    const response = await postRaw(
      `{"query": ${JSON.stringify(SET)}, "variables": {"input": {"connectorName": "google", "lastSyncedAt": "now", "entityCount": 0, "status": "idle", "checkpoint": ${deep}}}}`,
    );
    expect(response.status).toBe(200);
    const res = (await response.json()) as { data: { setSyncState: unknown } };
    expect(res.data.setSyncState).toEqual({ __typename: 'InputValidationError', issues: [{ path: ['input', 'checkpoint'], message: 'must be nested at most 64 levels deep' }] });
    // Just inside the bounds is fine.
    const ok = await suite.gql(SET, { input: { connectorName: 'google', lastSyncedAt: 'now', entityCount: 0, status: 'idle', checkpoint: nested(60) } });
    expect(ok.data.setSyncState.__typename).toBe('SyncStatePayload');
  });

  it('JSON nested deep as a literal in the query is refused clearly (never "Unexpected error.")', async () => {
    const literal = `${'['.repeat(2_000)}1${']'.repeat(2_000)}`;
    const response = await suite.request(`mutation { setSyncState(input: { connectorName: "google", lastSyncedAt: "now", entityCount: 0, status: "idle", checkpoint: ${literal} }) { __typename } }`);
    const body = (await response.json()) as { errors?: { message: string }[] };
    expect(response.status).toBeLessThan(500);
    expect(body.errors?.[0]?.message).toBeDefined();
    expect(body.errors?.[0]?.message).not.toMatch(/Unexpected error/);
  });
});
