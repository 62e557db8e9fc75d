/** sweepDocument over GraphQL on both dialects: what goes, what stays, the refusal, and who may call it. */
import { expect, it } from 'vitest';
import { getEntityTrim } from '../../src/store/entity-trim/index.js';
import { getObservationRepair, listObservationRecords, putObservationRecord, upsertObservationRepair } from '../../src/store/observations/index.js';
import { getOperationByKey } from '../../src/store/operations/index.js';
import { getWatchByDocument } from '../../src/store/projection-watches/index.js';
import { getSweepCandidatesByDocumentIDs, recordSweepReceipt } from '../../src/store/sweeps/index.js';
import { describeGraphQL } from '../helpers/graphql.js';
import { seedFinalized, seedTrim } from '../helpers/graphql-seed.js';
import { insertOperationRow } from '../helpers/row-fixtures.js';
import { claimed, finalize, mutateOK } from '../helpers/operation-graphql.js';

const SWEEP = /* GraphQL */ `
  mutation Sweep($input: SweepDocumentInput!) {
    sweepDocument(input: $input) {
      __typename
      ... on SweepDocumentPayload { documentID deleted { observationRecords repairs trims watches sweepCandidates operations } }
      ... on Error { code message }
    }
  }
`;

describeGraphQL('graphql sweepDocument', (suite) => {
  /** Every kind of connector row for `documentID`: a committed operation and its watch, a trim, two signers' records, a repair, a candidate. */
  async function seedDocument(documentID: string) {
    const finalized = await seedFinalized(suite, { documentID, operationID: `op-${documentID}` });
    await seedTrim(suite, { documentID });
    for (const owner of [suite.keys.alice.did, suite.keys.bob.did]) {
      await putObservationRecord(suite.store, { type: 'connector.observation', owner, id: documentID, opHash: `h-${owner}`, hlc: '1', opJWT: 'jwt' });
    }
    await upsertObservationRepair(suite.store, { documentID, owner: suite.keys.alice.did, fetchHLC: '1', decisionHLC: '2', present: false });
    await recordSweepReceipt(suite.store, {
      key: { ownerDID: suite.keys.alice.did, connectorName: 'google', partition: 'p', provenance: `run-${documentID}` },
      sequence: 1, modelID: 'm', scope: 's', keep: 'k', sourceFetchHLC: 'h', kind: 'full', complete: true,
      candidates: [{ documentID, sourceID: 'src', modelID: 'm' }],
    });
    return finalized;
  }

  it('deletes every connector row of the document in one go and says how many; another document keeps its rows', async () => {
    const swept = await seedDocument('doc-gone');
    await seedDocument('doc-kept');
    const res = await suite.gql(SWEEP, { input: { documentID: 'doc-gone' } }, { as: 'worker' });
    expect(res.errors).toBeUndefined();
    expect(res.data.sweepDocument).toEqual({
      __typename: 'SweepDocumentPayload',
      documentID: 'doc-gone',
      deleted: { observationRecords: 2, repairs: 1, trims: 1, watches: 1, sweepCandidates: 1, operations: 1 },
    });
    expect(await listObservationRecords(suite.store, { documentID: 'doc-gone' })).toEqual([]);
    expect(await getObservationRepair(suite.store, 'doc-gone')).toBeNull();
    expect(await getEntityTrim(suite.store, 'doc-gone')).toBeNull();
    expect(await getWatchByDocument(suite.store, 'doc-gone')).toBeNull();
    expect((await getSweepCandidatesByDocumentIDs(suite.store, ['doc-gone'])).get('doc-gone')).toEqual([]);
    expect(await getOperationByKey(suite.store, { callerDID: swept.operation.callerDID, operationID: swept.operation.operationID })).toBeNull();
    const kept = await suite.gql(`{ document(documentID: "doc-kept") { hasConnectorWork observationRecords { opHash } } }`, {}, { as: 'worker' });
    expect(kept.data.document).toMatchObject({ hasConnectorWork: true, observationRecords: [{}, {}] });
    // Sweeping again finds nothing left.
    const again = await suite.gql(SWEEP, { input: { documentID: 'doc-gone' } }, { as: 'worker' });
    expect(again.data.sweepDocument.deleted).toEqual({ observationRecords: 0, repairs: 0, trims: 0, watches: 0, sweepCandidates: 0, operations: 0 });
  });

  it('is refused with a typed error while an unfinished operation names the document, and deletes nothing', async () => {
    await seedDocument('doc-busy');
    await insertOperationRow(suite.store, { document_id: 'doc-busy', state: 'reconcile_only' });
    const res = await suite.gql(SWEEP, { input: { documentID: 'doc-busy' } }, { as: 'worker' });
    expect(res.errors).toBeUndefined();
    expect(res.data.sweepDocument).toMatchObject({ __typename: 'DocumentSweepUnfinishedOperationError', code: 'CONNECTOR_SWEEP_UNFINISHED_OPERATION' });
    expect(await getEntityTrim(suite.store, 'doc-busy')).not.toBeNull();
    expect(await listObservationRecords(suite.store, { documentID: 'doc-busy' })).toHaveLength(2);
    expect(await getWatchByDocument(suite.store, 'doc-busy')).not.toBeNull();
  });

  it('a write claimed for a document holds it over the API: the sweep refuses it and hasConnectorWork says so while it is live; finalize must name the same document; once committed the sweep goes ahead', async () => {
    const { fence } = await claimed(suite, { operationID: 'update-doc-live', op: 'UPDATE', documentID: 'doc-live' });
    await mutateOK(suite, 'startOperationAttempt', fence);
    const work = await suite.gql('{ document(documentID: "doc-live") { hasConnectorWork operations { operationID state } } }', {}, { as: 'alice' });
    expect(work.data.document).toEqual({ hasConnectorWork: true, operations: [{ operationID: 'update-doc-live', state: 'ATTEMPTED' }] });
    const refused = await suite.gql(SWEEP, { input: { documentID: 'doc-live' } }, { as: 'worker' });
    expect(refused.data.sweepDocument).toMatchObject({ __typename: 'DocumentSweepUnfinishedOperationError', code: 'CONNECTOR_SWEEP_UNFINISHED_OPERATION' });
    // The claim named doc-live: a finalize for another document is refused, naming it, and nothing commits.
    const other = await suite.gql(
      'mutation F($input: FinalizeOperationInput!) { finalizeOperation(input: $input) { __typename ... on IdempotencyConflictError { fields } } }',
      { input: { ...fence, documentID: 'doc-other', sourceID: 'src-1' } },
    );
    expect(other.data.finalizeOperation).toEqual({ __typename: 'IdempotencyConflictError', fields: ['documentID'] });
    // Claiming the key again for another document is a conflict too.
    const reclaim = await suite.gql('mutation C($input: ClaimOperationInput!) { claimOperation(input: $input) { __typename ... on IdempotencyConflictError { fields } } }', {
      input: { operationID: 'update-doc-live', connectorName: 'google', model: 'contact', op: 'UPDATE', accountKey: 'account-1', target: 'contacts', deterministicEventID: 'event-1', payloadHash: 'hash-1', reissueIntent: 'none', leaseMs: 30_000, documentID: 'doc-other' },
    });
    expect(reclaim.data.claimOperation).toEqual({ __typename: 'IdempotencyConflictError', fields: ['documentID'] });
    await finalize(suite, fence, { documentID: 'doc-live' });
    const swept = await suite.gql(SWEEP, { input: { documentID: 'doc-live' } }, { as: 'worker' });
    expect(swept.data.sweepDocument).toMatchObject({ __typename: 'SweepDocumentPayload', deleted: { operations: 1, watches: 1 } });
  });

  it('is for service principals only: a user, even the owner, is refused and nothing is deleted', async () => {
    await seedDocument('doc-mine');
    const res = await suite.gql(SWEEP, { input: { documentID: 'doc-mine' } }, { as: 'alice' });
    expect(res.errors).toBeUndefined();
    expect(res.data.sweepDocument).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
    expect(await getEntityTrim(suite.store, 'doc-mine')).not.toBeNull();
  });
});
