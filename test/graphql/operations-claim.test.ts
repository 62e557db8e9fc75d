/**
 * `claimOperation` through yoga.fetch (SPEC §3.3 claim, §4, §5): every
 * outcome, the lease only in the claimer's payload, conflicts, who may name
 * an owner, and input that is refused before anything is written.
 */
import { describe, expect, it } from 'vitest';
import { describeGraphQL } from '../helpers/graphql.js';
import {
  CLAIM,
  claim,
  claimed,
  claimInput,
  finalize,
  mutateOK,
  OPERATION_FIELDS,
  operationCount,
  readOperation,
} from '../helpers/operation-graphql.js';
import { iso } from '../helpers/graphql-seed.js';
import { LEASE_MS, PAST_SEND_WINDOW_MS } from '../helpers/operation-claim-fixtures.js';
import { getOperationRow } from '../helpers/row-fixtures.js';


describeGraphQL('graphql operations: claimOperation', (suite) => {
  const keyOf = (operationID: string, who: 'alice' | 'bob' | 'worker' = 'alice') => ({ callerDID: suite.keys[who].did, operationID });

  describe('CLAIMED', () => {
    it('creates an attempted operation with a lease for the viewer as caller and owner', async () => {
      const now = suite.clock.now();
      const result = await claim(suite, { sourceID: 'src-9' });
      expect(result).toMatchObject({
        __typename: 'ClaimOperationPayload',
        outcome: 'CLAIMED',
        replay: null,
        lease: { version: 0, expiresAt: iso(now + LEASE_MS) },
        operation: {
          operationID: 'op-1',
          callerDID: suite.keys.alice.did,
          ownerDID: suite.keys.alice.did,
          connectorName: 'google',
          model: 'contact',
          op: 'CREATE',
          accountKey: 'account-1',
          target: 'contacts',
          sourceID: 'src-9',
          deterministicEventID: 'event-1',
          payloadHash: 'hash-1',
          reissueIntent: 'none',
          providerEtag: null,
          documentID: null,
          resultEntity: null,
          state: 'ATTEMPTED',
          attempts: 0,
          nextAttemptAt: iso(now),
          deferReason: null,
          sendMarkerSet: false,
          lastKind: null,
          lastHTTPStatus: null,
          version: 0,
          leaseExpiresAt: iso(now + LEASE_MS),
          createdAt: iso(now),
          updatedAt: iso(now),
        },
      });
      expect(typeof result.lease.token).toBe('string');
      expect(result.lease.token.length).toBeGreaterThanOrEqual(16);
      // The token is the one stored, so it fences writes (see the fenced-write tests).
      expect((await getOperationRow(suite.store, keyOf('op-1')))?.lease_token).toBe(result.lease.token);
    });

    it('takes over an expired lease: new token, version + 1, state unchanged without a send marker', async () => {
      const first = await claimed(suite);
      suite.clock.advance(LEASE_MS); // expired at exactly its expiry instant
      const now = suite.clock.now();
      const second = await claim(suite);
      expect(second).toMatchObject({
        outcome: 'CLAIMED',
        lease: { version: 1, expiresAt: iso(now + LEASE_MS) },
        operation: { id: first.operation.id, state: 'ATTEMPTED', version: 1, leaseExpiresAt: iso(now + LEASE_MS), sendMarkerSet: false },
      });
      expect(second.lease.token).not.toBe(first.lease.token);
      // The old holder is fenced out at once.
      const stale = await suite.gql(
        `mutation($input: StartOperationAttemptInput!) { startOperationAttempt(input: $input) { __typename ... on Error { code } } }`,
        { input: first.fence },
      );
      expect(stale.data.startOperationAttempt).toEqual({ __typename: 'StaleLeaseError', code: 'STALE_LEASE' });
    });

    it('takes over a released lease at once (no need to wait for expiry)', async () => {
      const first = await claimed(suite);
      await mutateOK(suite, 'releaseOperationLease', first.fence);
      const second = await claim(suite);
      expect(second).toMatchObject({ outcome: 'CLAIMED', lease: { version: 1 }, operation: { version: 1 } });
    });

    it('takes over an attempted operation whose send marker is set as RECONCILE_ONLY', async () => {
      const first = await claimed(suite);
      await mutateOK(suite, 'startOperationAttempt', first.fence);
      await mutateOK(suite, 'markOperationSent', { ...first.fence, sendMarker: 'run-1' });
      // Inside the send window (the lease lapsed, the send may still be applied): nobody takes it over.
      suite.clock.advance(LEASE_MS + 1);
      expect(await claim(suite)).toMatchObject({ outcome: 'IN_FLIGHT', lease: null });
      suite.clock.advance(PAST_SEND_WINDOW_MS - LEASE_MS - 1);
      const second = await claim(suite);
      expect(second).toMatchObject({
        outcome: 'CLAIMED',
        lease: { version: 1 },
        operation: { state: 'RECONCILE_ONLY', version: 1, attempts: 1, sendMarkerSet: true },
      });
      // The new holder must reconcile, not resend: starting an attempt is refused.
      const fence = { id: first.operation.id, version: 1, leaseToken: second.lease.token };
      const start = await suite.gql(
        `mutation($input: StartOperationAttemptInput!) { startOperationAttempt(input: $input) { __typename ... on Error { code } } }`,
        { input: fence },
      );
      expect(start.data.startOperationAttempt).toEqual({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });
    });

    it('lets a service principal claim for another owner; the caller is the service', async () => {
      const result = await claim(suite, { ownerDID: suite.keys.alice.did }, 'worker');
      expect(result).toMatchObject({
        outcome: 'CLAIMED',
        operation: { callerDID: suite.keys.worker.did, ownerDID: suite.keys.alice.did },
      });
    });

    it('lets a user name themselves as owner', async () => {
      const result = await claim(suite, { ownerDID: suite.keys.bob.did }, 'bob');
      expect(result).toMatchObject({ outcome: 'CLAIMED', operation: { callerDID: suite.keys.bob.did, ownerDID: suite.keys.bob.did } });
    });

    it('keys operations by caller: the same operationID of two callers is two operations', async () => {
      const a = await claimed(suite, {}, 'alice');
      const b = await claimed(suite, {}, 'bob');
      expect(b.operation.id).not.toBe(a.operation.id);
      expect(await operationCount(suite)).toBe(2);
    });
  });

  describe('REPLAYED, DEAD, IN_FLIGHT', () => {
    it('replays a finalized operation with its recorded documentID and resultEntity, and no lease', async () => {
      const first = await claimed(suite);
      const entity = { title: 'Dinner', attendees: ['a', 'b'], nested: { n: 1 } };
      await finalize(suite, first.fence, { documentID: 'doc-42', resultEntity: entity });
      suite.clock.advance(LEASE_MS * 10);
      const replay = await claim(suite);
      expect(replay).toMatchObject({
        outcome: 'REPLAYED',
        lease: null,
        replay: { documentID: 'doc-42', resultEntity: entity },
        operation: { id: first.operation.id, state: 'COMMITTED', documentID: 'doc-42', resultEntity: entity, version: 0 },
      });
      // Replaying writes nothing.
      expect((await readOperation(suite, first.operation.id))?.updatedAt).toBe(replay.operation.updatedAt);
    });

    it('reports a dead operation as DEAD with no lease', async () => {
      const first = await claimed(suite);
      await mutateOK(suite, 'startOperationAttempt', first.fence);
      await mutateOK(suite, 'recordOperationAttempt', { ...first.fence, kind: 'FATAL', lastHTTPStatus: 400 });
      suite.clock.advance(LEASE_MS + 1);
      const result = await claim(suite);
      expect(result).toMatchObject({ outcome: 'DEAD', lease: null, replay: null, operation: { state: 'DEAD', version: 0 } });
    });

    it('reports IN_FLIGHT while another holder’s lease is live, with no lease and nothing changed', async () => {
      const first = await claimed(suite);
      const before = await getOperationRow(suite.store, keyOf('op-1'));
      suite.clock.advance(LEASE_MS - 1);
      const result = await claim(suite);
      expect(result).toMatchObject({
        outcome: 'IN_FLIGHT',
        lease: null,
        replay: null,
        operation: { id: first.operation.id, version: 0, leaseExpiresAt: first.operation.leaseExpiresAt },
      });
      expect(await getOperationRow(suite.store, keyOf('op-1'))).toEqual(before);
    });

    it('reports IN_FLIGHT while a renewed lease is live past its first expiry', async () => {
      const first = await claimed(suite);
      suite.clock.advance(LEASE_MS - 1_000);
      await mutateOK(suite, 'renewOperationLease', { ...first.fence, leaseMs: LEASE_MS });
      suite.clock.advance(2_000); // past the first expiry, inside the renewed one
      expect(await claim(suite)).toMatchObject({ outcome: 'IN_FLIGHT', lease: null });
    });
  });

  describe('IdempotencyConflictError', () => {
    const cases: [string, Record<string, unknown>, 'alice' | 'worker'][] = [
      ['payloadHash', { payloadHash: 'hash-2' }, 'alice'],
      ['target', { target: 'other-list' }, 'alice'],
      ['op', { op: 'UPDATE' }, 'alice'],
      ['model', { model: 'calendar.event' }, 'alice'],
      ['connectorName', { connectorName: 'github' }, 'alice'],
    ];
    for (const [field, change] of cases) {
      it(`names ${field} when it differs, and leaves the row untouched`, async () => {
        await claimed(suite);
        const before = await getOperationRow(suite.store, keyOf('op-1'));
        suite.clock.advance(LEASE_MS * 2); // even with the lease expired, no takeover
        const result = await claim(suite, change);
        expect(result).toMatchObject({ __typename: 'IdempotencyConflictError', code: 'IDEMPOTENCY_CONFLICT', field });
        expect(result.message).toContain(field);
        expect(await getOperationRow(suite.store, keyOf('op-1'))).toEqual(before);
      });
    }

    it('names every field that differs, in one answer', async () => {
      await claimed(suite);
      const result = await claim(suite, { payloadHash: 'hash-2', target: 'other-list', model: 'calendar.event' });
      expect(result).toMatchObject({
        __typename: 'IdempotencyConflictError',
        field: 'model',
        fields: ['model', 'target', 'payloadHash'],
        message: 'idempotency key already used with a different model, target, payloadHash',
      });
    });

    it('names ownerDID when a service reuses its key for another owner', async () => {
      await claimed(suite, { ownerDID: suite.keys.alice.did }, 'worker');
      const before = await getOperationRow(suite.store, keyOf('op-1', 'worker'));
      const result = await claim(suite, { ownerDID: suite.keys.bob.did }, 'worker');
      expect(result).toMatchObject({ __typename: 'IdempotencyConflictError', field: 'ownerDID' });
      expect(await getOperationRow(suite.store, keyOf('op-1', 'worker'))).toEqual(before);
    });

    it('refuses a conflicting claim of a committed operation rather than replaying it', async () => {
      const first = await claimed(suite);
      await finalize(suite, first.fence);
      const result = await claim(suite, { payloadHash: 'hash-2' });
      expect(result).toMatchObject({ __typename: 'IdempotencyConflictError', field: 'payloadHash' });
    });
  });

  describe('who may claim', () => {
    it('refuses a user naming another owner with ForbiddenError, writing nothing', async () => {
      const result = await claim(suite, { ownerDID: suite.keys.bob.did }, 'alice');
      expect(result).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
      expect(await operationCount(suite)).toBe(0);
    });

    it('keeps anonymous callers out', async () => {
      const res = await suite.gql(CLAIM, { input: claimInput() }, { as: 'anonymous' });
      expect(res.data).toBeUndefined();
      expect(res.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
      expect(await operationCount(suite)).toBe(0);
    });
  });

  describe('invalid input writes nothing', () => {
    const invalid: [string, Record<string, unknown>, string][] = [
      ['an empty operationID', { operationID: '' }, 'operationID'],
      ['an empty connectorName', { connectorName: '' }, 'connectorName'],
      ['a blank connectorName', { connectorName: '   ' }, 'connectorName'],
      ['an empty model', { model: '' }, 'model'],
      ['an empty accountKey', { accountKey: '' }, 'accountKey'],
      ['an empty target', { target: '' }, 'target'],
      ['an empty sourceID', { sourceID: '' }, 'sourceID'],
      ['an empty deterministicEventID', { deterministicEventID: '' }, 'deterministicEventID'],
      ['an empty payloadHash', { payloadHash: '' }, 'payloadHash'],
      ['an empty reissueIntent', { reissueIntent: '' }, 'reissueIntent'],
      ['an over-long operationID', { operationID: 'x'.repeat(2049) }, 'operationID'],
      ['leaseMs below 1 s', { leaseMs: 999 }, 'leaseMs'],
      ['leaseMs of 0', { leaseMs: 0 }, 'leaseMs'],
      ['a negative leaseMs', { leaseMs: -1 }, 'leaseMs'],
      ['leaseMs above 1 h', { leaseMs: 3_600_001 }, 'leaseMs'],
    ];
    for (const [what, change, field] of invalid) {
      it(`refuses ${what} with InputValidationError naming input.${field}`, async () => {
        const result = await claim(suite, change);
        expect(result.__typename, JSON.stringify(result)).toBe('InputValidationError');
        expect(result.code).toBe('VALIDATION_FAILED');
        expect(result.issues).toEqual(expect.arrayContaining([expect.objectContaining({ path: ['input', field] })]));
        expect(await operationCount(suite)).toBe(0);
      });
    }

    it('accepts the leaseMs bounds (1 s and 1 h)', async () => {
      expect(await claim(suite, { operationID: 'short', leaseMs: 1_000 })).toMatchObject({ outcome: 'CLAIMED' });
      expect(await claim(suite, { operationID: 'long', leaseMs: 3_600_000 })).toMatchObject({ outcome: 'CLAIMED' });
    });

    it('refuses input with several invalid fields, naming one of them, and writes nothing', async () => {
      // The validation plugin stops at the first invalid field of an input object.
      const result = await claim(suite, { operationID: '', payloadHash: '', leaseMs: 5 });
      expect(result.__typename).toBe('InputValidationError');
      const paths = (result.issues as { path: string[] }[]).map((issue) => issue.path.join('.'));
      expect(paths.length).toBeGreaterThan(0);
      for (const path of paths) expect(['input.leaseMs', 'input.operationID', 'input.payloadHash']).toContain(path);
      expect(await operationCount(suite)).toBe(0);
    });

    const malformedDIDs = ['alice', 'did:key', 'did::abc', 'DID:key:abc', ''];
    for (const did of malformedDIDs) {
      it(`refuses a malformed ownerDID ${JSON.stringify(did)} as a GraphQL validation error`, async () => {
        const res = await suite.gql(CLAIM, { input: claimInput({ ownerDID: did }) }, { as: 'worker' });
        expect(res.data).toBeUndefined();
        expect(res.errors).toHaveLength(1);
        expect(res.errors?.[0]?.message).toMatch(/ownerDID/);
        expect(res.errors?.[0]?.message).toMatch(/DID must look like/);
        expect(await operationCount(suite)).toBe(0);
      });
    }

    it('refuses an unknown op and a missing required field as GraphQL validation errors', async () => {
      const badOp = await suite.gql(CLAIM, { input: claimInput({ op: 'DELETE' }) });
      expect(badOp.data).toBeUndefined();
      expect(badOp.errors?.[0]?.message).toMatch(/op/);
      const missing = await suite.gql(CLAIM, { input: claimInput({ payloadHash: undefined }) });
      expect(missing.data).toBeUndefined();
      expect(missing.errors?.[0]?.message).toMatch(/payloadHash/);
      const fractional = await suite.gql(CLAIM, { input: claimInput({ leaseMs: 1500.5 }) });
      expect(fractional.data).toBeUndefined();
      expect(await operationCount(suite)).toBe(0);
    });
  });

  describe('secrets', () => {
    it('has no readable field for a lease token, send marker or code verifier on any output type', async () => {
      const res = await suite.gql(`{
        __schema { types { name kind fields(includeDeprecated: true) { name } } }
        op: __type(name: "ConnectorOperation") { fields(includeDeprecated: true) { name } }
      }`);
      expect(res.errors).toBeUndefined();
      const opFields = (res.data.op.fields as { name: string }[]).map((f) => f.name);
      expect(opFields).toContain('sendMarkerSet');
      for (const secret of ['leaseToken', 'sendMarker', 'codeVerifier', 'lease', 'token', 'incarnation']) {
        expect(opFields).not.toContain(secret);
      }
      const secretName = /^(leaseToken|lease_token|sendMarker|send_marker|codeVerifier|code_verifier)$/i;
      const offenders = (res.data.__schema.types as { name: string; kind: string; fields: { name: string }[] | null }[])
        .filter((type) => type.kind === 'OBJECT' || type.kind === 'INTERFACE')
        .flatMap((type) => (type.fields ?? []).filter((f) => secretName.test(f.name)).map((f) => `${type.name}.${f.name}`));
      // The code verifier is readable only by a service consuming a pending authorization (schema-artifacts pins that path).
      expect(offenders).toEqual(['ConsumedPendingAuthorization.codeVerifier']);
      // The one place a token is readable is the holder's own lease.
      const tokenFields = (res.data.__schema.types as { name: string; kind: string; fields: { name: string }[] | null }[])
        .filter((type) => !type.name.startsWith('__') && (type.fields ?? []).some((f) => /token/i.test(f.name)))
        .map((type) => type.name);
      expect(tokenFields).toEqual(['OperationLease']);
    });

    it('never returns the lease token or send marker from any query, to the holder or anyone else', async () => {
      const first = await claimed(suite);
      await mutateOK(suite, 'startOperationAttempt', first.fence);
      await mutateOK(suite, 'markOperationSent', { ...first.fence, sendMarker: 'secret-send-marker-123' });
      const secrets = [first.lease.token, 'secret-send-marker-123'];
      // Each read path, as the holder and as a service (one query each: the cost limit forbids all at once).
      const reads = [
        `query { operations(first: 10) { edges { cursor node { ${OPERATION_FIELDS} } } } }`,
        `query Q($id: ID!) { node(id: $id) { ... on ConnectorOperation { ${OPERATION_FIELDS} } } }`,
        `query Q($id: ID!) { nodes(ids: [$id]) { ... on ConnectorOperation { ${OPERATION_FIELDS} } } }`,
        `query Q($caller: DID!) { operationByKey(operationID: "op-1", callerDID: $caller) { ${OPERATION_FIELDS} } }`,
        `query { document(documentID: "doc-1") { operations { ${OPERATION_FIELDS} } } }`,
        `query { operationCounts { state count } }`,
      ];
      for (const who of ['alice', 'worker'] as const) {
        for (const query of reads) {
          const res = await suite.gql(query, { id: first.operation.id, caller: suite.keys.alice.did }, { as: who });
          expect(res.errors, query).toBeUndefined();
          const text = JSON.stringify(res);
          if (!query.includes('document') && !query.includes('Counts')) expect(text).toContain(first.operation.id);
          for (const secret of secrets) expect(text).not.toContain(secret);
        }
      }
      // An IN_FLIGHT claim sees the operation but not the holder's lease.
      const inFlight = await claim(suite);
      expect(inFlight).toMatchObject({ outcome: 'IN_FLIGHT', lease: null });
      for (const secret of secrets) expect(JSON.stringify(inFlight)).not.toContain(secret);
    });

    it('keeps lease tokens out of failure messages', async () => {
      const first = await claimed(suite);
      const wrong = `wrong-${first.lease.token}`;
      const res = await suite.gql(
        `mutation($input: RenewOperationLeaseInput!) { renewOperationLease(input: $input) { __typename ... on Error { code message } } }`,
        { input: { ...first.fence, leaseToken: wrong, leaseMs: LEASE_MS } },
      );
      expect(res.data.renewOperationLease.code).toBe('STALE_LEASE');
      expect(JSON.stringify(res)).not.toContain(first.lease.token);
    });
  });
});
