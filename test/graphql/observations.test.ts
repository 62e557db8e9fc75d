/**
 * Observation records and repair obligations over GraphQL on both dialects:
 * put (idempotent, typed error for another type, base64 payloads), reads and
 * their access rules, repair upsert / delete, and the "written since" feed.
 */
import { describe, expect, it } from 'vitest';
import { getObservationRepair, listObservationRecords } from '../../src/store/observations/index.js';
import { describeGraphQL, type Principal } from '../helpers/graphql.js';
import { iso } from '../helpers/graphql-seed.js';

const PUT = /* GraphQL */ `
  mutation Put($input: PutObservationRecordInput!) {
    putObservationRecord(input: $input) {
      __typename
      ... on PutObservationRecordPayload { inserted }
      ... on Error { code message }
      ... on InputValidationError { issues { path message } }
    }
  }
`;
const RECORDS = /* GraphQL */ `
  query Records($documentID: String!, $owner: DID) {
    observationRecords(documentID: $documentID, owner: $owner) { type owner documentID opHash hlc opJWT payload }
  }
`;
const UPSERT_REPAIR = /* GraphQL */ `
  mutation Repair($input: UpsertObservationRepairInput!) {
    upsertObservationRepair(input: $input) {
      __typename
      ... on ObservationRepairPayload { repair { documentID owner fetchHLC decisionHLC present valueDigest writtenAt } }
      ... on Error { code }
    }
  }
`;
const DELETE_REPAIR = /* GraphQL */ `
  mutation Done($input: DeleteObservationRepairInput!) {
    deleteObservationRepair(input: $input) { __typename ... on DeleteObservationRepairPayload { deleted } }
  }
`;
const FEED = /* GraphQL */ `
  query Feed($first: Int, $after: String) {
    repairsWrittenSince(first: $first, after: $after) {
      totalCount
      edges { cursor node { documentID writtenAt } }
      pageInfo { hasNextPage endCursor }
    }
  }
`;
const DOCUMENT = /* GraphQL */ `
  query($id: String!) { document(documentID: $id) { observationRecords { owner opHash payload } repair { owner present } hasConnectorWork } }
`;

describeGraphQL('graphql observations', (suite) => {
  const record = (overrides: Record<string, unknown> = {}) => ({
    type: 'connector.observation',
    documentID: 'doc-obs-1',
    opHash: 'op-hash-1',
    hlc: '0001917c2a4e8b000001',
    opJWT: 'eyJhbGciOiJFZERTQSJ9.e30.c2ln',
    payload: Buffer.from([0, 1, 2, 250, 255]).toString('base64'),
    ...overrides,
  });
  const put = (overrides: Record<string, unknown> = {}, as: Principal = 'alice') => suite.gql(PUT, { input: record(overrides) }, { as });
  const repairInput = (overrides: Record<string, unknown> = {}) => ({
    documentID: 'doc-obs-1',
    fetchHLC: '0001917c2a4e8b000010',
    decisionHLC: '0001917c2a4e8b000011',
    present: true,
    valueDigest: 'sha256:abc',
    ...overrides,
  });

  describe('putObservationRecord', () => {
    it('stores a record once: the same put again is not inserted; the key with another hlc is an IdempotencyConflictError; nothing changes', async () => {
      expect((await put()).data.putObservationRecord).toEqual({ __typename: 'PutObservationRecordPayload', inserted: true });
      expect((await put()).data.putObservationRecord.inserted).toBe(false);
      const conflict = await suite.gql(
        'mutation P($input: PutObservationRecordInput!) { putObservationRecord(input: $input) { __typename ... on IdempotencyConflictError { code field fields message } } }',
        { input: record({ hlc: 'another-hlc' }) },
      );
      expect(conflict.data.putObservationRecord).toEqual({
        __typename: 'IdempotencyConflictError',
        code: 'IDEMPOTENCY_CONFLICT',
        field: 'hlc',
        fields: ['hlc'],
        message: 'idempotency key already used with a different hlc',
      });
      const stored = await listObservationRecords(suite.store, { documentID: 'doc-obs-1' });
      expect(stored).toHaveLength(1);
      expect(stored[0]).toMatchObject({ owner: suite.keys.alice.did, hlc: '0001917c2a4e8b000001', payload: new Uint8Array([0, 1, 2, 250, 255]) });
    });

    it('another record type is the store’s typed error, not a masked one; nothing is stored', async () => {
      const res = await put({ type: 'connector.something-else' });
      expect(res.errors).toBeUndefined();
      expect(res.data.putObservationRecord).toMatchObject({ __typename: 'ObservationRecordTypeError', code: 'OBSERVATION_RECORD_TYPE' });
      expect(await listObservationRecords(suite.store, { documentID: 'doc-obs-1' })).toEqual([]);
    });

    it('validates the payload as bounded base64 and the HLC and op hash as bounded strings', async () => {
      for (const [field, value] of [
        ['payload', 'not base64!'],
        ['payload', 'AAA'],
        ['payload', 'A'.repeat(800_000)],
        ['hlc', 'x'.repeat(200)],
        ['opHash', ''],
      ] as const) {
        const res = await put({ [field]: value });
        expect(res.data.putObservationRecord.__typename, `${field}=${value.slice(0, 20)}`).toBe('InputValidationError');
        expect(res.data.putObservationRecord.issues[0].path).toEqual(['input', field]);
      }
      expect((await put({ payload: null })).data.putObservationRecord.inserted).toBe(true);
    });

    it('a user signs only as themselves; a service stores any signer’s record', async () => {
      expect((await put({ owner: suite.keys.bob.did })).data.putObservationRecord.__typename).toBe('ForbiddenError');
      expect((await put({ owner: suite.keys.bob.did }, 'worker')).data.putObservationRecord.inserted).toBe(true);
      expect(await listObservationRecords(suite.store, { documentID: 'doc-obs-1' })).toHaveLength(1);
    });
  });

  describe('reading records', () => {
    it('a user sees the records they signed; naming another signer gives nothing; a service sees all, or one signer’s', async () => {
      await put();
      await put({ opHash: 'op-hash-2', hlc: '0001917c2a4e8b000002' }, 'bob');
      const alice = await suite.gql(RECORDS, { documentID: 'doc-obs-1' });
      expect(alice.data.observationRecords).toEqual([
        { type: 'connector.observation', owner: suite.keys.alice.did, documentID: 'doc-obs-1', opHash: 'op-hash-1', hlc: '0001917c2a4e8b000001', opJWT: record().opJWT, payload: record().payload },
      ]);
      expect((await suite.gql(RECORDS, { documentID: 'doc-obs-1', owner: suite.keys.bob.did })).data.observationRecords).toEqual([]);
      const all = await suite.gql(RECORDS, { documentID: 'doc-obs-1' }, { as: 'worker' });
      expect(all.data.observationRecords.map((r: { opHash: string }) => r.opHash)).toEqual(['op-hash-1', 'op-hash-2']);
      const bobs = await suite.gql(RECORDS, { documentID: 'doc-obs-1', owner: suite.keys.bob.did }, { as: 'worker' });
      expect(bobs.data.observationRecords.map((r: { owner: string }) => r.owner)).toEqual([suite.keys.bob.did]);
      const doc = await suite.gql(DOCUMENT, { id: 'doc-obs-1' }, { as: 'mallory' });
      expect(doc.data.document).toEqual({ observationRecords: [], repair: null, hasConnectorWork: false });
    });
  });

  describe('repairs', () => {
    it('upsert writes and replaces the obligation with writtenAt = now; delete removes it once', async () => {
      const first = await suite.gql(UPSERT_REPAIR, { input: repairInput() });
      expect(first.data.upsertObservationRepair.repair).toEqual({ ...repairInput(), owner: suite.keys.alice.did, writtenAt: iso(suite.clock.now()) });
      suite.clock.advance(5_000);
      const second = await suite.gql(UPSERT_REPAIR, { input: repairInput({ present: false, valueDigest: null }) });
      expect(second.data.upsertObservationRepair.repair).toMatchObject({ present: false, valueDigest: null, writtenAt: iso(suite.clock.now()) });
      expect((await suite.gql(DOCUMENT, { id: 'doc-obs-1' })).data.document.repair).toEqual({ owner: suite.keys.alice.did, present: false });
      expect((await suite.gql(DELETE_REPAIR, { input: { documentID: 'doc-obs-1' } })).data.deleteObservationRepair.deleted).toBe(true);
      expect((await suite.gql(DELETE_REPAIR, { input: { documentID: 'doc-obs-1' } })).data.deleteObservationRepair.deleted).toBe(false);
    });

    it('a stranger can neither replace nor delete another owner’s obligation; the answers match a missing one', async () => {
      await suite.gql(UPSERT_REPAIR, { input: repairInput() });
      const replace = await suite.gql(UPSERT_REPAIR, { input: repairInput({ present: false }) }, { as: 'mallory' });
      expect(replace.data.upsertObservationRepair).toMatchObject({ __typename: 'ForbiddenError' });
      const removeOthers = await suite.gql(DELETE_REPAIR, { input: { documentID: 'doc-obs-1' } }, { as: 'mallory' });
      const removeMissing = await suite.gql(DELETE_REPAIR, { input: { documentID: 'doc-none' } }, { as: 'mallory' });
      expect(removeOthers).toEqual(removeMissing);
      expect(await getObservationRepair(suite.store, 'doc-obs-1')).toMatchObject({ owner: suite.keys.alice.did, present: true });
    });

    it('repairsWrittenSince pages in written order for a service, and a rewritten repair comes round again', async () => {
      for (const id of ['doc-c', 'doc-a', 'doc-b']) {
        await suite.gql(UPSERT_REPAIR, { input: repairInput({ documentID: id }) }, { as: 'worker' });
        suite.clock.advance(1);
      }
      const page1 = await suite.gql(FEED, { first: 2 }, { as: 'worker' });
      expect(page1.data.repairsWrittenSince.edges.map((e: { node: { documentID: string } }) => e.node.documentID)).toEqual(['doc-c', 'doc-a']);
      expect(page1.data.repairsWrittenSince).toMatchObject({ totalCount: 3, pageInfo: { hasNextPage: true } });
      const after = page1.data.repairsWrittenSince.pageInfo.endCursor;
      const page2 = await suite.gql(FEED, { first: 2, after }, { as: 'worker' });
      expect(page2.data.repairsWrittenSince.edges.map((e: { node: { documentID: string } }) => e.node.documentID)).toEqual(['doc-b']);
      expect(page2.data.repairsWrittenSince.pageInfo.hasNextPage).toBe(false);
      // doc-c is rewritten: a reader resuming from the end of page 2 sees it again.
      await suite.gql(UPSERT_REPAIR, { input: repairInput({ documentID: 'doc-c', present: false }) }, { as: 'worker' });
      suite.clock.advance(1);
      const resumed = await suite.gql(FEED, { first: 10, after: page2.data.repairsWrittenSince.pageInfo.endCursor }, { as: 'worker' });
      expect(resumed.data.repairsWrittenSince.edges.map((e: { node: { documentID: string } }) => e.node.documentID)).toEqual(['doc-c']);
    });

    it('repairsWrittenSince is for service principals; a bad cursor is refused clearly', async () => {
      const user = await suite.gql(FEED, { first: 2 });
      expect(user.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      const bad = await suite.gql(FEED, { first: 2, after: 'garbage' }, { as: 'worker' });
      expect(bad.errors?.[0]).toMatchObject({ message: 'after is not a cursor of this connection', extensions: { code: 'BAD_USER_INPUT' } });
    });
  });
});
