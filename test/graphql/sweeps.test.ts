/**
 * Deletion sweeps over GraphQL on both dialects: record a receipt with its
 * candidates, resolve them (outcomes, failures up to the maximum), commit
 * (never moving the checkpoint back), the dashboard reads, the workers' due
 * list, access, and live progress per partition.
 */
import type { GraphQLInputObjectType } from 'graphql';
import { afterEach, describe, expect, it } from 'vitest';
import { schema } from '../../schema/index.js';
import { getSweepCheckpoint, getSweepReceipt, listSweepCandidatesOfReceipt, MAX_SWEEP_APPLY_ATTEMPTS } from '../../src/store/sweeps/index.js';
import { countRows } from '../helpers/row-fixtures.js';
import { describeGraphQL, type Principal } from '../helpers/graphql.js';
import { iso, unknownNodeID } from '../helpers/graphql-seed.js';
import { subscribeSSE, type SSESubscription } from '../helpers/sse.js';

const ERRORS = `... on Error { code message } ... on InputValidationError { issues { path message } }`;
const RECEIPT_FIELDS = `id ownerDID connectorName partition provenance sequence modelID scope keep sourceFetchHLC predicate kind complete createdAt committedAt
  candidateCounts { state count } checkpoint { receiptSequence provenance }`;
const RECORD = `mutation($input: RecordSweepReceiptInput!) {
  recordSweepReceipt(input: $input) {
    __typename ... on RecordSweepReceiptPayload { created receipt { ${RECEIPT_FIELDS} } } ${ERRORS}
    ... on IdempotencyConflictError { field fields } ... on InvalidInputError { field }
  }
}`;
const CANDIDATE_FIELDS = 'documentID sourceID modelID state attempts applyFailures lastError nextAttemptAt updatedAt';
const OUTCOME = `mutation($input: RecordSweepOutcomeInput!) {
  recordSweepOutcome(input: $input) { __typename ... on SweepCandidatePayload { candidate { ${CANDIDATE_FIELDS} } } ${ERRORS} }
}`;
const FAILURE = `mutation($input: RecordSweepApplyFailureInput!) {
  recordSweepApplyFailure(input: $input) { __typename ... on SweepCandidatePayload { candidate { ${CANDIDATE_FIELDS} } } ${ERRORS} }
}`;
const COMMIT = `mutation($input: CommitSweepReceiptInput!) {
  commitSweepReceipt(input: $input) {
    __typename
    ... on CommitSweepReceiptPayload { newlyCommitted checkpointAdvanced receipt { committedAt } checkpoint { receiptSequence provenance } }
    ${ERRORS}
  }
}`;
const RECEIPTS = `query($filter: SweepReceiptFilter, $first: Int, $after: String) {
  sweepReceipts(filter: $filter, first: $first, after: $after) {
    totalCount
    edges { node { provenance sequence committedAt candidateCounts { state count } candidates(first: 2) { totalCount edges { node { documentID state } } pageInfo { hasNextPage } } } }
    pageInfo { hasNextPage endCursor }
  }
}`;

describeGraphQL('graphql sweeps', (suite) => {
  const receiptInput = (provenance: string, overrides: Record<string, unknown> = {}) => ({
    connectorName: 'google',
    partition: 'calendar:primary',
    provenance,
    sequence: 1,
    modelID: 'calendar.event',
    scope: 'calendar:primary',
    keep: 'listed-since-window-start',
    sourceFetchHLC: '0001917c2a4e8b000000',
    predicate: { updatedAfter: '2026-01-01' },
    kind: 'full',
    complete: true,
    candidates: [
      { documentID: 'doc-a', sourceID: 'evt-a', modelID: 'calendar.event' },
      { documentID: 'doc-b', sourceID: 'evt-b', modelID: 'calendar.event' },
      { documentID: 'doc-c', sourceID: 'evt-c', modelID: 'calendar.event' },
    ],
    ...overrides,
  });
  const record = (provenance: string, overrides: Record<string, unknown> = {}, as: Principal = 'alice') =>
    suite.gql(RECORD, { input: receiptInput(provenance, overrides) }, { as });
  async function recorded(provenance: string, overrides: Record<string, unknown> = {}, as: Principal = 'alice') {
    const res = await record(provenance, overrides, as);
    expect(res.errors).toBeUndefined();
    expect(res.data.recordSweepReceipt.__typename).toBe('RecordSweepReceiptPayload');
    return res.data.recordSweepReceipt.receipt as { id: string };
  }
  const outcome = (receipt: string, documentID: string, value: 'APPLIED' | 'KEPT', as: Principal = 'alice') =>
    suite.gql(OUTCOME, { input: { id: receipt, documentID, outcome: value } }, { as });
  const failure = (receipt: string, documentID: string, error = 'document is open', as: Principal = 'alice') =>
    suite.gql(FAILURE, { input: { id: receipt, documentID, error } }, { as });
  const commit = (id: string, as: Principal = 'alice') => suite.gql(COMMIT, { input: { id } }, { as });
  const counts = (pending: number, applied: number, kept: number, failed: number) => [
    { state: 'PENDING', count: pending },
    { state: 'APPLIED', count: applied },
    { state: 'KEPT', count: kept },
    { state: 'FAILED', count: failed },
  ];

  describe('recordSweepReceipt', () => {
    it('records the pass and its candidates, pending and due now; an identical replay writes nothing', async () => {
      const res = await record('run-1');
      expect(res.errors).toBeUndefined();
      expect(res.data.recordSweepReceipt).toEqual({
        __typename: 'RecordSweepReceiptPayload',
        created: true,
        receipt: {
          id: expect.any(String),
          ownerDID: suite.keys.alice.did,
          connectorName: 'google',
          partition: 'calendar:primary',
          provenance: 'run-1',
          sequence: 1,
          modelID: 'calendar.event',
          scope: 'calendar:primary',
          keep: 'listed-since-window-start',
          sourceFetchHLC: '0001917c2a4e8b000000',
          predicate: { updatedAfter: '2026-01-01' },
          kind: 'full',
          complete: true,
          createdAt: iso(suite.clock.now()),
          committedAt: null,
          candidateCounts: counts(3, 0, 0, 0),
          checkpoint: null,
        },
      });
      const replay = await record('run-1');
      expect(replay.data.recordSweepReceipt).toMatchObject({ created: false, receipt: { id: res.data.recordSweepReceipt.receipt.id } });
      const candidates = await listSweepCandidatesOfReceipt(suite.store, { ownerDID: suite.keys.alice.did, connectorName: 'google', partition: 'calendar:primary', provenance: 'run-1' });
      expect(candidates.map((c) => [c.documentID, c.state, c.nextAttemptAt])).toEqual([
        ['doc-a', 'pending', suite.clock.now()],
        ['doc-b', 'pending', suite.clock.now()],
        ['doc-c', 'pending', suite.clock.now()],
      ]);
    });

    it('a different receipt under the same key is an IdempotencyConflictError naming the field, and nothing changes', async () => {
      await recorded('run-1');
      const res = await record('run-1', { sequence: 2 });
      expect(res.data.recordSweepReceipt).toMatchObject({ __typename: 'IdempotencyConflictError', code: 'IDEMPOTENCY_CONFLICT', field: 'sequence' });
      const predicate = await record('run-1', { predicate: { updatedAfter: '2027-01-01' } });
      expect(predicate.data.recordSweepReceipt).toMatchObject({ __typename: 'IdempotencyConflictError', field: 'predicate' });
      // Other candidates under the same key are refused too (they used to be dropped silently with created: false).
      const candidates = await record('run-1', { candidates: [{ documentID: 'doc-z', sourceID: 'z', modelID: 'm' }] });
      expect(candidates.data.recordSweepReceipt).toMatchObject({ __typename: 'IdempotencyConflictError', fields: ['candidates'] });
      const both = await record('run-1', { sequence: 3, candidates: [{ documentID: 'doc-z', sourceID: 'z', modelID: 'm' }] });
      expect(both.data.recordSweepReceipt).toMatchObject({ __typename: 'IdempotencyConflictError', field: 'sequence', fields: ['sequence', 'candidates'] });
      expect(await countRows(suite.store, 'kubun_connector_sweep_candidate')).toBe(3);
      expect((await getSweepReceipt(suite.store, { ownerDID: suite.keys.alice.did, connectorName: 'google', partition: 'calendar:primary', provenance: 'run-1' }))?.sequence).toBe(1);
    });

    it('refuses a document listed twice (InvalidInputError) and bad input (InputValidationError), writing nothing', async () => {
      const twice = await record('run-2', { candidates: [{ documentID: 'doc-a', sourceID: 'a', modelID: 'm' }, { documentID: 'doc-a', sourceID: 'b', modelID: 'm' }] });
      expect(twice.data.recordSweepReceipt).toMatchObject({ __typename: 'InvalidInputError', field: 'candidates[1].documentID' });
      for (const overrides of [{ sequence: -1 }, { sourceFetchHLC: 'h'.repeat(500) }, { partition: '' }, { candidates: [{ documentID: '', sourceID: 'a', modelID: 'm' }] }]) {
        const res = await record('run-2', overrides);
        expect(res.data.recordSweepReceipt.__typename, JSON.stringify(overrides)).toBe('InputValidationError');
      }
      expect(await getSweepReceipt(suite.store, { ownerDID: suite.keys.alice.did, connectorName: 'google', partition: 'calendar:primary', provenance: 'run-2' })).toBeNull();
    });

    it('a user records only their own passes; a service records any owner’s', async () => {
      expect((await record('run-3', { ownerDID: suite.keys.bob.did })).data.recordSweepReceipt.__typename).toBe('ForbiddenError');
      const service = await record('run-3', { ownerDID: suite.keys.bob.did }, 'worker');
      expect(service.data.recordSweepReceipt.receipt.ownerDID).toBe(suite.keys.bob.did);
    });
  });

  describe('resolving candidates', () => {
    it('candidate writes name the receipt as `id`; the deprecated `receipt` still works; neither, or two different ones, is an InputValidationError', async () => {
      const { id } = await recorded('run-1');
      const old = await suite.gql(OUTCOME, { input: { receipt: id, documentID: 'doc-a', outcome: 'APPLIED' } });
      expect(old.data.recordSweepOutcome).toMatchObject({ __typename: 'SweepCandidatePayload', candidate: { documentID: 'doc-a', state: 'APPLIED' } });
      const both = await suite.gql(OUTCOME, { input: { id, receipt: id, documentID: 'doc-b', outcome: 'KEPT' } });
      expect(both.data.recordSweepOutcome).toMatchObject({ __typename: 'SweepCandidatePayload', candidate: { state: 'KEPT' } });
      const { id: other } = await recorded('run-2');
      const differ = await suite.gql(FAILURE, { input: { id, receipt: other, documentID: 'doc-c', error: 'x' } });
      expect(differ.data.recordSweepApplyFailure).toMatchObject({ __typename: 'InputValidationError', issues: [{ path: ['input', 'id'], message: expect.stringContaining('another receipt') }] });
      const neither = await suite.gql(FAILURE, { input: { documentID: 'doc-c', error: 'x' } });
      expect(neither.data.recordSweepApplyFailure).toMatchObject({ __typename: 'InputValidationError', issues: [{ path: ['input', 'id'] }] });
      const deprecated = schema.getType('RecordSweepOutcomeInput') as GraphQLInputObjectType;
      expect(deprecated.getFields().receipt?.deprecationReason).toMatch(/Use `id`.*removed in 0\.3\.0/);
    });

    it('outcomes: APPLIED and KEPT; the same outcome again is a no-op; another is InvalidStateError', async () => {
      const { id } = await recorded('run-1');
      suite.clock.advance(1_000);
      const applied = await outcome(id, 'doc-a', 'APPLIED');
      expect(applied.data.recordSweepOutcome).toEqual({
        __typename: 'SweepCandidatePayload',
        candidate: { documentID: 'doc-a', sourceID: 'evt-a', modelID: 'calendar.event', state: 'APPLIED', attempts: 1, applyFailures: 0, lastError: null, nextAttemptAt: iso(suite.clock.now() - 1_000), updatedAt: iso(suite.clock.now()) },
      });
      expect((await outcome(id, 'doc-a', 'APPLIED')).data.recordSweepOutcome.candidate.attempts).toBe(1);
      expect((await outcome(id, 'doc-a', 'KEPT')).data.recordSweepOutcome).toMatchObject({ __typename: 'InvalidStateError', code: 'INVALID_STATE' });
      expect((await outcome(id, 'doc-b', 'KEPT')).data.recordSweepOutcome.candidate.state).toBe('KEPT');
    });

    it(`apply failures back off, and the ${MAX_SWEEP_APPLY_ATTEMPTS}th makes the candidate FAILED (no longer due)`, async () => {
      const { id } = await recorded('run-1');
      const due = () => suite.gql(`query($o: DID!) { dueSweepCandidates(ownerDID: $o, connectorName: "google") { documentID } }`, { o: suite.keys.alice.did }, { as: 'worker' });
      expect((await due()).data.dueSweepCandidates.map((c: { documentID: string }) => c.documentID)).toEqual(['doc-a', 'doc-b', 'doc-c']);
      let last;
      for (let n = 1; n <= MAX_SWEEP_APPLY_ATTEMPTS; n++) {
        last = (await failure(id, 'doc-c', `failure ${n}`)).data.recordSweepApplyFailure;
        expect(last.candidate).toMatchObject({ applyFailures: n, lastError: `failure ${n}`, state: n < MAX_SWEEP_APPLY_ATTEMPTS ? 'PENDING' : 'FAILED' });
        if (n === 1) {
          expect(Date.parse(last.candidate.nextAttemptAt)).toBeGreaterThan(suite.clock.now());
          expect((await due()).data.dueSweepCandidates.map((c: { documentID: string }) => c.documentID)).toEqual(['doc-a', 'doc-b']);
        }
      }
      expect((await failure(id, 'doc-c')).data.recordSweepApplyFailure).toMatchObject({ __typename: 'InvalidStateError' });
      suite.clock.advance(24 * 3_600_000);
      expect((await due()).data.dueSweepCandidates.map((c: { documentID: string }) => c.documentID)).toEqual(['doc-a', 'doc-b']);
    });

    it('an unknown document, an unknown or malformed receipt id, another type’s id: NotFoundError', async () => {
      const { id } = await recorded('run-1');
      expect((await outcome(id, 'doc-zzz', 'APPLIED')).data.recordSweepOutcome.__typename).toBe('NotFoundError');
      for (const receipt of [unknownNodeID('SweepReceipt'), 'not-an-id', unknownNodeID('ProjectionWatch')]) {
        expect((await outcome(receipt, 'doc-a', 'APPLIED')).data.recordSweepOutcome.__typename).toBe('NotFoundError');
        expect((await failure(receipt, 'doc-a')).data.recordSweepApplyFailure.__typename).toBe('NotFoundError');
        expect((await commit(receipt)).data.commitSweepReceipt.__typename).toBe('NotFoundError');
      }
    });
  });

  describe('commitSweepReceipt', () => {
    it('is refused while a candidate is pending; then commits and advances the checkpoint; a replay is not newly committed', async () => {
      const { id } = await recorded('run-1', { sequence: 5 });
      expect((await commit(id)).data.commitSweepReceipt).toMatchObject({ __typename: 'InvalidStateError' });
      await outcome(id, 'doc-a', 'APPLIED');
      await outcome(id, 'doc-b', 'KEPT');
      for (let n = 0; n < MAX_SWEEP_APPLY_ATTEMPTS; n++) await failure(id, 'doc-c');
      const committed = await commit(id);
      expect(committed.data.commitSweepReceipt).toEqual({
        __typename: 'CommitSweepReceiptPayload',
        newlyCommitted: true,
        checkpointAdvanced: true,
        receipt: { committedAt: iso(suite.clock.now()) },
        checkpoint: { receiptSequence: 5, provenance: 'run-1' },
      });
      expect((await commit(id)).data.commitSweepReceipt).toMatchObject({ newlyCommitted: false, checkpointAdvanced: false, checkpoint: { receiptSequence: 5 } });
    });

    it('a later commit of an older pass never moves the checkpoint back', async () => {
      const newer = await recorded('run-new', { sequence: 9, candidates: [] });
      const older = await recorded('run-old', { sequence: 3, candidates: [] });
      expect((await commit(newer.id)).data.commitSweepReceipt).toMatchObject({ checkpointAdvanced: true, checkpoint: { receiptSequence: 9 } });
      expect((await commit(older.id)).data.commitSweepReceipt).toMatchObject({ newlyCommitted: true, checkpointAdvanced: false, checkpoint: { receiptSequence: 9, provenance: 'run-new' } });
      expect(await getSweepCheckpoint(suite.store, { ownerDID: suite.keys.alice.did, connectorName: 'google', partition: 'calendar:primary' })).toMatchObject({ receiptSequence: 9 });
    });
  });

  describe('reads', () => {
    it('sweepReceipts: newest first with counts and first candidates, filters, paging, totalCount', async () => {
      const first = await recorded('run-1');
      suite.clock.advance(1_000);
      await recorded('run-2', { sequence: 2 });
      suite.clock.advance(1_000);
      await recorded('run-other', { partition: 'contacts', sequence: 1 });
      await outcome(first.id, 'doc-a', 'APPLIED');
      const all = await suite.gql(RECEIPTS, { first: 10 });
      expect(all.errors).toBeUndefined();
      expect(all.data.sweepReceipts.totalCount).toBe(3);
      expect(all.data.sweepReceipts.edges.map((e: { node: { provenance: string } }) => e.node.provenance)).toEqual(['run-other', 'run-2', 'run-1']);
      const run1 = all.data.sweepReceipts.edges[2].node;
      expect(run1.candidateCounts).toEqual(counts(2, 1, 0, 0));
      expect(run1.candidates).toEqual({
        totalCount: 3,
        edges: [{ node: { documentID: 'doc-a', state: 'APPLIED' } }, { node: { documentID: 'doc-b', state: 'PENDING' } }],
        pageInfo: { hasNextPage: true },
      });
      const partition = await suite.gql(RECEIPTS, { first: 1, filter: { partition: 'calendar:primary' } });
      expect(partition.data.sweepReceipts).toMatchObject({ totalCount: 2, pageInfo: { hasNextPage: true } });
      const page2 = await suite.gql(RECEIPTS, { first: 1, filter: { partition: 'calendar:primary' }, after: partition.data.sweepReceipts.pageInfo.endCursor });
      expect(page2.data.sweepReceipts.edges.map((e: { node: { provenance: string } }) => e.node.provenance)).toEqual(['run-1']);
      const uncommitted = await suite.gql(RECEIPTS, { first: 10, filter: { committed: true } });
      expect(uncommitted.data.sweepReceipts.totalCount).toBe(0);
    });

    it('candidates by state, lookups by key, node(id), the checkpoint, and document(id).sweepCandidates', async () => {
      const { id } = await recorded('run-1');
      await outcome(id, 'doc-b', 'KEPT');
      const q = `query($id: ID!) {
        node(id: $id) { ... on SweepReceipt { provenance candidates(first: 10, states: [KEPT]) { totalCount edges { node { documentID receipt { id } } } } } }
        sweepReceipt(connectorName: "google", partition: "calendar:primary", provenance: "run-1") { id }
        sweepCheckpoint(connectorName: "google", partition: "calendar:primary") { receiptSequence }
        document(documentID: "doc-b") { sweepCandidates { state provenance } hasConnectorWork }
      }`;
      const res = await suite.gql(q, { id });
      expect(res.errors).toBeUndefined();
      expect(res.data).toEqual({
        node: { provenance: 'run-1', candidates: { totalCount: 1, edges: [{ node: { documentID: 'doc-b', receipt: { id } } }] } },
        sweepReceipt: { id },
        sweepCheckpoint: null,
        document: { sweepCandidates: [{ state: 'KEPT', provenance: 'run-1' }], hasConnectorWork: true },
      });
    });

    it('a stranger sees none of it, exactly as if it did not exist; dueSweepCandidates is for service principals', async () => {
      const { id } = await recorded('run-1');
      const probe = (receiptID: string) => `{
        node(id: "${receiptID}") { id }
        sweepReceipt(ownerDID: "${suite.keys.alice.did}", connectorName: "google", partition: "calendar:primary", provenance: "run-1") { id }
        sweepCheckpoint(ownerDID: "${suite.keys.alice.did}", connectorName: "google", partition: "calendar:primary") { receiptSequence }
        sweepReceipts(first: 5) { totalCount edges { node { id } } }
        document(documentID: "doc-a") { sweepCandidates { documentID } hasConnectorWork }
      }`;
      const stranger = await suite.gql(probe(id), {}, { as: 'mallory' });
      expect(stranger.data).toEqual({
        node: null,
        sweepReceipt: null,
        sweepCheckpoint: null,
        sweepReceipts: { totalCount: 0, edges: [] },
        document: { sweepCandidates: [], hasConnectorWork: false },
      });
      expect(await suite.gql(probe(unknownNodeID('SweepReceipt')), {}, { as: 'mallory' })).toEqual(stranger);
      const strangerWrite = await outcome(id, 'doc-a', 'APPLIED', 'mallory');
      const unknownWrite = await outcome(unknownNodeID('SweepReceipt'), 'doc-a', 'APPLIED', 'mallory');
      expect(strangerWrite).toEqual(unknownWrite);
      const due = await suite.gql(`query($o: DID!) { dueSweepCandidates(ownerDID: $o, connectorName: "google") { documentID } }`, { o: suite.keys.alice.did });
      expect(due.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    });
  });

  describe('live progress', () => {
    const open: SSESubscription[] = [];
    afterEach(async () => {
      await Promise.all(open.splice(0).map((s) => s.close()));
    });
    async function subscribe(query: string, variables: Record<string, unknown>, as: Exclude<Principal, 'anonymous'>) {
      const sub = await subscribeSSE(suite.app.yoga.fetch as never, 'http://localhost/graphql', query, variables, { authorization: `Bearer ${await suite.token(as)}` });
      open.push(sub);
      await new Promise((r) => setTimeout(r, 20));
      return sub;
    }
    const PROGRESS = `subscription($filter: SweepReceiptFilter) { sweepReceiptsChanged(filter: $filter) { provenance committedAt candidateCounts { state count } } }`;

    it('sweepReceiptsChanged streams a partition’s progress to its owner, and nothing to a stranger or another partition', async () => {
      const partition = await subscribe(PROGRESS, { filter: { partition: 'calendar:primary' } }, 'alice');
      const other = await subscribe(PROGRESS, { filter: { partition: 'contacts' } }, 'alice');
      const stranger = await subscribe(PROGRESS, {}, 'mallory');
      const { id } = await recorded('run-1', { candidates: [{ documentID: 'doc-a', sourceID: 'a', modelID: 'm' }] });
      await outcome(id, 'doc-a', 'APPLIED');
      await commit(id);
      await partition.waitFor(3);
      expect(partition.events.map((e) => [e.data.sweepReceiptsChanged.committedAt === null, e.data.sweepReceiptsChanged.candidateCounts[0].count])).toEqual([
        [true, 1],
        [true, 0],
        [false, 0],
      ]);
      await new Promise((r) => setTimeout(r, 150));
      expect(other.events).toEqual([]);
      expect(stranger.events).toEqual([]);
    });
  });
});
