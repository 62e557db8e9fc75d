/** armWatch with INGEST, REPAIR and MANUAL, through yoga.fetch on both dialects. */
import { expect, it } from 'vitest';
import { claimWatchAttempt, getWatch } from '../../src/store/projection-watches/index.js';
import { describeGraphQL, type Principal } from '../helpers/graphql.js';
import { iso, seedWatch } from '../helpers/graphql-seed.js';

const ARM = /* GraphQL */ `
  mutation Arm($input: ArmWatchInput!) {
    armWatch(input: $input) {
      __typename
      ... on ArmWatchPayload { outcome watch { id ownerDID documentID verificationStatus repairGeneration version nextAttemptAt claimedUntil observedWinnerDigest } }
      ... on Error { code message }
      ... on InputValidationError { issues { path message } }
    }
  }
`;

describeGraphQL('graphql armWatch', (suite) => {
  const identity = (overrides: Record<string, unknown> = {}) => ({
    connectorName: 'google',
    model: 'calendar.event',
    accountKey: 'account-1',
    sourceID: 'source-doc-arm',
    ...overrides,
  });
  const arm = (input: Record<string, unknown>, as: Principal = 'alice') => suite.gql(ARM, { input: { ...identity(), ...input } }, { as });
  const storeIdentity = (ownerDID = suite.keys.alice.did) => ({ ownerDID, ...identity() });

  it('INGEST creates a watch for a document, then coalesces on it while pending: only nextAttemptAt moves, the version stays', async () => {
    const created = await arm({ reason: 'INGEST', documentID: 'doc-arm', observedWinnerDigest: 'd-1' });
    expect(created.errors).toBeUndefined();
    expect(created.data.armWatch).toMatchObject({
      __typename: 'ArmWatchPayload',
      outcome: 'CREATED',
      watch: { ownerDID: suite.keys.alice.did, documentID: 'doc-arm', verificationStatus: 'PENDING_VERIFICATION', repairGeneration: 0, version: 0, observedWinnerDigest: 'd-1' },
    });
    // A verifier holds a claim at version 1; an ingest must not invalidate it.
    const claimed = await claimWatchAttempt(suite.store, { identity: storeIdentity(), version: 0, claimMs: 60_000 });
    const later = suite.clock.now() + 600_000;
    const coalesced = await arm({ reason: 'INGEST', dueAt: iso(later), observedWinnerDigest: 'ignored' });
    expect(coalesced.data.armWatch).toMatchObject({
      outcome: 'COALESCED',
      watch: { id: created.data.armWatch.watch.id, version: claimed.version, repairGeneration: 0, nextAttemptAt: iso(later), observedWinnerDigest: 'd-1' },
    });
    expect(coalesced.data.armWatch.watch.claimedUntil).not.toBeNull();
  });

  it('REPAIR and MANUAL open a new generation (version + 1, claim cleared) of an existing watch', async () => {
    const { watch } = await seedWatch(suite, { documentID: 'doc-arm', sourceID: 'source-doc-arm', accountKey: 'account-1' });
    for (const [reason, generation] of [['REPAIR', 1], ['MANUAL', 2]] as const) {
      const res = await arm({ reason });
      expect(res.data.armWatch).toMatchObject({ outcome: 'REARMED', watch: { repairGeneration: generation, version: watch.version + generation, claimedUntil: null } });
    }
  });

  it('a missing watch without documentID is NotFoundError, and nothing is created', async () => {
    const res = await arm({ reason: 'MANUAL' });
    expect(res.data.armWatch).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
    expect(await getWatch(suite.store, storeIdentity())).toBeNull();
  });

  it('a user arms only their own watches; a service arms any owner’s; WRITE is not a reason here', async () => {
    const forBob = await arm({ reason: 'INGEST', documentID: 'doc-arm', ownerDID: suite.keys.bob.did });
    expect(forBob.data.armWatch).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
    expect(await getWatch(suite.store, storeIdentity(suite.keys.bob.did))).toBeNull();
    const service = await arm({ reason: 'INGEST', documentID: 'doc-arm', ownerDID: suite.keys.bob.did }, 'worker');
    expect(service.data.armWatch).toMatchObject({ outcome: 'CREATED', watch: { ownerDID: suite.keys.bob.did } });
    const write = await arm({ reason: 'WRITE', documentID: 'doc-arm' });
    expect(write.errors?.[0]?.message).toMatch(/ArmWatchReason/);
  });

  it('refuses bad input before anything is written', async () => {
    const res = await arm({ reason: 'INGEST', documentID: '', sourceID: 'x'.repeat(3000) });
    expect(res.data.armWatch.__typename).toBe('InputValidationError');
    expect(await getWatch(suite.store, storeIdentity())).toBeNull();
  });
});
