/**
 * `resumeDeferred` through yoga.fetch (SPEC §3.3 deferral, §5): OFFLINE makes
 * offline-deferred work due (a user's own, or everyone's for a service), AUTH
 * one owner's connector; a user cannot resume another owner's work.
 */
import { describe, expect, it } from 'vitest';
import { describeGraphQL, type Principal } from '../helpers/graphql.js';
import { iso } from '../helpers/graphql-seed.js';
import { claimed, finalize, mutateOK, readOperation, RESUME, type GqlOperation } from '../helpers/operation-graphql.js';
import { patchWatchRow } from '../helpers/row-fixtures.js';
import { overSeries } from '../helpers/query-plans.js';

const DEFERRAL_MS = 900_000;

describeGraphQL('graphql operations: resumeDeferred', (suite) => {
  /** An operation deferred by its holder with `kind` (OFFLINE or AUTH). */
  async function deferred(operationID: string, kind: 'OFFLINE' | 'AUTH', options: { as?: Principal; ownerDID?: string; connectorName?: string } = {}) {
    const overrides: Record<string, unknown> = { operationID };
    if (options.ownerDID !== undefined) overrides.ownerDID = options.ownerDID;
    if (options.connectorName !== undefined) overrides.connectorName = options.connectorName;
    const op = await claimed(suite, overrides, options.as ?? 'alice');
    await mutateOK(suite, 'startOperationAttempt', op.fence, options.as ?? 'alice');
    const { operation } = await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind }, options.as ?? 'alice');
    expect(operation).toMatchObject({ deferReason: kind, attempts: 0, nextAttemptAt: iso(suite.clock.now() + DEFERRAL_MS) });
    return operation;
  }

  async function resume(input: Record<string, unknown>, as: Principal = 'alice') {
    const res = await suite.gql(RESUME, { input }, { as });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    return res.data.resumeDeferred;
  }

  /** Asserts `op` is due now and no longer deferred, its lease and version untouched. */
  async function expectResumed(op: GqlOperation) {
    const now = await readOperation(suite, op.id);
    expect(now).toMatchObject({ deferReason: null, nextAttemptAt: iso(suite.clock.now()), version: op.version, leaseExpiresAt: op.leaseExpiresAt, attempts: op.attempts });
  }

  async function expectUntouched(op: GqlOperation) {
    expect(await readOperation(suite, op.id)).toEqual(op);
  }

  describe('OFFLINE', () => {
    it('a user resumes their own offline-deferred operations and watches, nobody else’s and no auth deferral', async () => {
      const mine = [await deferred('a-1', 'OFFLINE'), await deferred('a-2', 'OFFLINE')];
      const myAuth = await deferred('a-3', 'AUTH');
      const bobs = await deferred('b-1', 'OFFLINE', { as: 'bob' });
      // A watch of alice's, armed by finalize and then deferred offline.
      const committed = await claimed(suite, { operationID: 'a-4' });
      await finalize(suite, committed.fence, { sourceID: 'src-4' });
      await patchWatchRow(
        suite.store,
        { ownerDID: suite.keys.alice.did, connectorName: 'google', model: 'contact', accountKey: 'account-1', sourceID: 'src-4' },
        { defer_reason: 'offline', next_attempt_at: suite.clock.now() + DEFERRAL_MS },
      );
      suite.clock.advance(60_000);
      expect(await resume({ reason: 'OFFLINE' })).toEqual({ __typename: 'ResumeDeferredPayload', operations: 2, watches: 1 });
      for (const op of mine) await expectResumed(op);
      await expectUntouched(myAuth);
      await expectUntouched(bobs);
      // Nothing left to resume.
      expect(await resume({ reason: 'OFFLINE' })).toMatchObject({ operations: 0, watches: 0 });
    });

    it('a user may name themselves as owner', async () => {
      const mine = await deferred('a-1', 'OFFLINE');
      expect(await resume({ reason: 'OFFLINE', ownerDID: suite.keys.alice.did })).toMatchObject({ operations: 1 });
      await expectResumed(mine);
    });

    it('a service resumes every owner’s offline work, or one owner’s', async () => {
      const alices = await deferred('a-1', 'OFFLINE');
      const bobs = await deferred('b-1', 'OFFLINE', { as: 'bob' });
      const workers = await deferred('w-1', 'OFFLINE', { as: 'worker', ownerDID: suite.keys.bob.did });
      expect(await resume({ reason: 'OFFLINE', ownerDID: suite.keys.alice.did }, 'worker')).toMatchObject({ operations: 1 });
      await expectResumed(alices);
      await expectUntouched(bobs);
      expect(await resume({ reason: 'OFFLINE' }, 'worker')).toMatchObject({ operations: 2 });
      await expectResumed(bobs);
      await expectResumed(workers);
    });

    it('a user cannot resume another owner’s work: ForbiddenError, nothing changed', async () => {
      const bobs = await deferred('b-1', 'OFFLINE', { as: 'bob' });
      expect(await resume({ reason: 'OFFLINE', ownerDID: suite.keys.bob.did }, 'alice')).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
      await expectUntouched(bobs);
    });

    it('refuses a connectorName (it applies only to AUTH), changing nothing', async () => {
      const mine = await deferred('c-1', 'OFFLINE');
      expect(await resume({ reason: 'OFFLINE', connectorName: 'google' })).toMatchObject({ __typename: 'InvalidInputError', field: 'connectorName' });
      await expectUntouched(mine);
    });

    it('leaves finished operations alone', async () => {
      const op = await claimed(suite);
      await mutateOK(suite, 'startOperationAttempt', op.fence);
      await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind: 'OFFLINE' });
      await mutateOK(suite, 'recordOperationAttempt', { ...op.fence, kind: 'FATAL' });
      expect(await resume({ reason: 'OFFLINE' })).toMatchObject({ operations: 0 });
    });
  });

  describe('AUTH', () => {
    it('resumes one owner’s connector after they authorize', async () => {
      const google = await deferred('a-1', 'AUTH');
      const github = await deferred('a-2', 'AUTH', { connectorName: 'github' });
      const offline = await deferred('a-3', 'OFFLINE');
      const bobs = await deferred('b-1', 'AUTH', { as: 'bob' });
      expect(await resume({ reason: 'AUTH', connectorName: 'google' })).toEqual({ __typename: 'ResumeDeferredPayload', operations: 1, watches: 0 });
      await expectResumed(google);
      await expectUntouched(github);
      await expectUntouched(offline);
      await expectUntouched(bobs);
    });

    it('requires connectorName (InvalidInputError), changing nothing', async () => {
      const google = await deferred('a-1', 'AUTH');
      expect(await resume({ reason: 'AUTH' })).toMatchObject({ __typename: 'InvalidInputError', code: 'INVALID_INPUT', field: 'connectorName' });
      expect(await resume({ reason: 'AUTH', ownerDID: suite.keys.alice.did }, 'worker')).toMatchObject({ __typename: 'InvalidInputError', field: 'connectorName' });
      // A service must also say whose connector.
      expect(await resume({ reason: 'AUTH', connectorName: 'google' }, 'worker')).toMatchObject({ __typename: 'InvalidInputError' });
      await expectUntouched(google);
    });

    it('a user cannot resume another owner’s connector: ForbiddenError; a service can', async () => {
      const bobs = await deferred('b-1', 'AUTH', { as: 'bob' });
      expect(await resume({ reason: 'AUTH', ownerDID: suite.keys.bob.did, connectorName: 'google' }, 'alice')).toMatchObject({ __typename: 'ForbiddenError' });
      await expectUntouched(bobs);
      expect(await resume({ reason: 'AUTH', ownerDID: suite.keys.bob.did, connectorName: 'google' }, 'worker')).toMatchObject({ operations: 1 });
      await expectResumed(bobs);
    });
  });

  describe('bad input', () => {
    it('refuses an empty connectorName with InputValidationError and a malformed ownerDID as a GraphQL error', async () => {
      const google = await deferred('a-1', 'AUTH');
      expect(await resume({ reason: 'AUTH', connectorName: '' })).toMatchObject({
        __typename: 'InputValidationError',
        issues: [{ path: ['input', 'connectorName'] }],
      });
      const bad = await suite.gql(RESUME, { input: { reason: 'AUTH', ownerDID: 'not-a-did', connectorName: 'google' } }, { as: 'worker' });
      expect(bad.data).toBeUndefined();
      expect(bad.errors?.[0]?.message).toMatch(/DID must look like/);
      const badReason = await suite.gql(RESUME, { input: { reason: 'LATER' } });
      expect(badReason.data).toBeUndefined();
      await expectUntouched(google);
    });

    it('keeps anonymous callers out', async () => {
      const res = await suite.gql(RESUME, { input: { reason: 'OFFLINE' } }, { as: 'anonymous' });
      expect(res.data).toBeUndefined();
      expect(res.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    });
  });

  it('resumes at most 1 000 operations per call, as the bulk actions, and says when more are left (issue 41 item 3)', async () => {
    const owner = suite.keys.alice.did;
    const prefix = `deferred-${suite.dialect}-`;
    await suite.store.db.executeQuery(
      overSeries(
        suite.dialect,
        1_001,
        `insert into kubun_connector_operation
          (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
           payload_hash, reissue_intent, state, attempts, version, next_attempt_at, defer_reason, created_at, updated_at)
          select '${owner}', '${prefix}' || i, '${prefix}' || i, '${owner}', 'google', 'calendar.event', 'create', 'a', 't',
            'e-' || i, 'h', 'none', 'attempted', 0, 1, ${suite.clock.now() + DEFERRAL_MS}, 'offline', 1700000000000 + i, 1700000000000 + i`,
      ),
    );
    const RESUME_MORE = `mutation R($input: ResumeDeferredInput!) { resumeDeferred(input: $input) { ... on ResumeDeferredPayload { operations watches more } } }`;
    const first = await suite.gql(RESUME_MORE, { input: { reason: 'OFFLINE' } }, { as: 'alice' });
    expect(first.errors).toBeUndefined();
    expect(first.data.resumeDeferred).toEqual({ operations: 1_000, watches: 0, more: true });
    const second = await suite.gql(RESUME_MORE, { input: { reason: 'OFFLINE' } }, { as: 'alice' });
    expect(second.data.resumeDeferred).toEqual({ operations: 1, watches: 0, more: false });
    const left = await suite.store.db.selectFrom('kubun_connector_operation').select('node_key').where('defer_reason', '=', 'offline').where('owner_did', '=', owner).execute();
    expect(left).toEqual([]);
  });
});
