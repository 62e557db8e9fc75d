/**
 * Who may see and do what (SPEC §5), as a table: every query and mutation,
 * against rows owned by alice, for five viewers:
 *
 * - owner: alice;
 * - caller: bob, the caller (idempotency-key holder) of alice's operations but
 *   not their owner. Through the API only a service may claim for another
 *   owner, so these rows are written through the store: they are what a DID
 *   leaves behind when it claimed as a service and was later removed from
 *   SERVICE_DIDS, and the only way to test the caller rule for a non-service;
 * - stranger: mallory;
 * - service: worker (in SERVICE_DIDS);
 * - anonymous: no token.
 *
 * Owner, caller and service succeed as §5 says (operations: caller or owner;
 * watches, sync states, trims: owner; service: all). A viewer who may not see
 * a row gets exactly what a random unknown id gets (the two responses are
 * compared byte for byte, the unknown value swapped back for the real one),
 * and nothing changes. Anonymous gets UNAUTHENTICATED and no data.
 */
import { expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import type { Database } from '../../src/db/tables.js';
import { describeGraphQL, type GraphQLResponse, type GraphQLSuite, type Principal } from '../helpers/graphql.js';
import {
  CLAIM_WATCH_ATTEMPT,
  FINALIZE,
  RECORD_VERIFICATION,
  REQUEST_REPULL,
  UPDATE_SYNC_PROGRESS,
} from '../helpers/graphql-documents.js';
import { recordSweepReceipt } from '../../src/store/sweeps/index.js';
import {
  nodeID,
  seedClaim,
  seedFinalized,
  seedSyncState,
  seedTrim,
  unknownNodeID,
  type SeededFinalized,
  type SeededOperation,
} from '../helpers/graphql-seed.js';
import { setColumns } from '../helpers/operation-claim-fixtures.js';
import { insertCandidateRow } from '../helpers/row-fixtures.js';

type Who = 'owner' | 'caller' | 'stranger' | 'service' | 'anonymous';
const PRINCIPAL: Record<Who, Principal> = { owner: 'alice', caller: 'bob', stranger: 'mallory', service: 'worker', anonymous: 'anonymous' };
const VIEWERS: Who[] = ['owner', 'caller', 'stranger', 'service', 'anonymous'];

/** What every case runs against. */
interface World {
  /** A live, leased operation: caller bob, owner alice. */
  live: SeededOperation;
  /** A committed operation of document doc-1 (caller bob, owner alice) and alice's watch it armed. */
  committed: SeededFinalized;
  /** Alice's google sync state. */
  sync: { id: string; incarnation: string | null };
  /** Alice's uncommitted sweep receipt with one pending candidate, doc-swept. */
  receipt: { id: string };
  dids: { alice: string; bob: string; worker: string };
}

type Vars = Record<string, unknown>;

interface Case {
  name: string;
  query: string;
  /** Variables naming the real rows. */
  variables(w: World): Vars;
  /** The same variables with the target swapped for one that names nothing. */
  unknown(w: World): Vars;
  /** Who gets through; everyone else (but anonymous) must get the unknown-target answer. */
  allowed: Who[];
  /** Checks the answer of an allowed viewer. */
  ok(data: any, who: Who, w: World): void;
  /** Checks the answer a refused viewer gets (the same as for the unknown target). */
  refused(data: any): void;
  /** Set-up beyond the world (e.g. let the lease expire). */
  prepare?(w: World, suite: GraphQLSuite): Promise<void>;
}

const ERROR = '... on Error { __typename code message }';
const opMutation = (field: string, inputType: string) => /* GraphQL */ `
  mutation($input: ${inputType}!) {
    result: ${field}(input: $input) {
      __typename
      ... on OperationPayload { operation { id state ownerDID callerDID } lease { version } }
      ${ERROR}
    }
  }
`;
const fence = (w: World) => ({ id: w.live.id, version: w.live.lease.version, leaseToken: w.live.lease.token });
const unknownFence = (w: World) => ({ ...fence(w), id: unknownNodeID('ConnectorOperation') });
const notFound = (data: any) => expect(data.result).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
const forbidden = (data: any) => expect(data.result).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
const emptyConnection = (data: any) =>
  expect(data.result).toEqual({ totalCount: 0, edges: [], pageInfo: { hasNextPage: false, hasPreviousPage: false, startCursor: null, endCursor: null } });
const EMPTY_DOCUMENT = { operations: [], watch: null, entityTrim: null, hasConnectorWork: false };
const CONNECTION_FIELDS = 'totalCount edges { node { id } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor }';
const DOCUMENT_FIELDS = 'documentID operations { id } watch { id } entityTrim { documentID } hasConnectorWork';
const randomDID = () => `did:key:z6Mk${randomBytes(16).toString('hex')}`;

/** A fenced operation write that owner, caller and service may make with the lease. */
function fencedCase(name: string, field: string, inputType: string, extra: Vars, expectState = 'ATTEMPTED', prepare?: Case['prepare']): Case {
  return {
    name,
    query: opMutation(field, inputType),
    variables: (w) => ({ input: { ...fence(w), ...extra } }),
    unknown: (w) => ({ input: { ...unknownFence(w), ...extra } }),
    allowed: ['owner', 'caller', 'service'],
    ok: (data, _who, w) => expect(data.result).toMatchObject({ __typename: 'OperationPayload', operation: { id: w.live.id, state: expectState } }),
    refused: notFound,
    ...(prepare && { prepare }),
  };
}

const CASES: Case[] = [
  // ---- queries ----
  ...(['live', 'watch', 'sync'] as const).map(
    (target): Case => ({
      name: `node(${target === 'live' ? 'ConnectorOperation' : target === 'watch' ? 'ProjectionWatch' : 'SyncState'})`,
      query: 'query($id: ID!) { result: node(id: $id) { __typename id } }',
      variables: (w) => ({ id: target === 'live' ? w.live.id : target === 'watch' ? w.committed.watchID : w.sync.id }),
      unknown: () => ({ id: unknownNodeID(target === 'live' ? 'ConnectorOperation' : target === 'watch' ? 'ProjectionWatch' : 'SyncState') }),
      allowed: target === 'live' ? ['owner', 'caller', 'service'] : ['owner', 'service'],
      ok: (data, _who, w) => expect(data.result?.id).toBe(target === 'live' ? w.live.id : target === 'watch' ? w.committed.watchID : w.sync.id),
      refused: (data) => expect(data.result).toBeNull(),
    }),
  ),
  {
    name: 'nodes([operation, watch, sync state])',
    query: 'query($ids: [ID!]!) { result: nodes(ids: $ids) { __typename id } }',
    variables: (w) => ({ ids: [w.live.id, w.committed.watchID, w.sync.id] }),
    unknown: () => ({ ids: [unknownNodeID('ConnectorOperation'), unknownNodeID('ProjectionWatch'), unknownNodeID('SyncState')] }),
    allowed: ['owner', 'caller', 'service'],
    ok: (data, who, w) =>
      // The caller sees the operation only: watches and sync states are the owner's.
      expect(data.result.map((n: { id: string } | null) => n?.id ?? null)).toEqual(
        who === 'caller' ? [w.live.id, null, null] : [w.live.id, w.committed.watchID, w.sync.id],
      ),
    refused: (data) => expect(data.result).toEqual([null, null, null]),
  },
  {
    name: 'operations',
    query: `query($filter: OperationFilter) { result: operations(first: 10, filter: $filter) { ${CONNECTION_FIELDS} } }`,
    variables: () => ({ filter: { connectorName: 'google' } }),
    unknown: () => ({ filter: { connectorName: `unknown-${randomBytes(4).toString('hex')}` } }),
    allowed: ['owner', 'caller', 'service'],
    ok: (data, _who, w) => {
      expect(data.result.totalCount).toBe(2);
      expect(data.result.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual([w.live.id, w.committed.id]);
    },
    refused: emptyConnection,
  },
  {
    name: 'operationCounts',
    query: 'query($filter: OperationFilter) { result: operationCounts(filter: $filter) { state count } }',
    variables: () => ({ filter: { connectorName: 'google' } }),
    unknown: () => ({ filter: { connectorName: `unknown-${randomBytes(4).toString('hex')}` } }),
    allowed: ['owner', 'caller', 'service'],
    ok: (data) =>
      expect(Object.fromEntries(data.result.map((c: { state: string; count: number }) => [c.state, c.count]))).toEqual({
        ATTEMPTED: 1,
        RECONCILE_ONLY: 0,
        COMMITTED: 1,
        DEAD: 0,
      }),
    refused: (data) => expect(data.result.every((c: { count: number }) => c.count === 0)).toBe(true),
  },
  {
    name: 'operationActivity',
    query: 'query($connectorName: String) { result: operationActivity(connectorName: $connectorName) { buckets { start committed retryable } } }',
    variables: () => ({ connectorName: 'google' }),
    unknown: () => ({ connectorName: `unknown-${randomBytes(4).toString('hex')}` }),
    allowed: ['owner', 'caller', 'service'],
    // The committed operation was finalized in the current hour.
    ok: (data) => expect(data.result.buckets.at(-1).committed).toBe(1),
    refused: (data) => expect(data.result.buckets.every((b: { committed: number; retryable: number }) => b.committed === 0 && b.retryable === 0)).toBe(true),
  },
  {
    name: 'operationByKey',
    query: 'query($operationID: String!, $callerDID: DID) { result: operationByKey(operationID: $operationID, callerDID: $callerDID) { id } }',
    variables: (w) => ({ operationID: w.live.operation.operationID, callerDID: w.dids.bob }),
    unknown: (w) => ({ operationID: `unknown-${randomBytes(8).toString('hex')}`, callerDID: w.dids.bob }),
    allowed: ['owner', 'caller', 'service'],
    ok: (data, _who, w) => expect(data.result).toEqual({ id: w.live.id }),
    refused: (data) => expect(data.result).toBeNull(),
  },
  {
    name: 'watches',
    query: `query($filter: WatchFilter) { result: watches(first: 10, filter: $filter) { ${CONNECTION_FIELDS} } }`,
    variables: () => ({ filter: { documentID: 'doc-1' } }),
    unknown: () => ({ filter: { documentID: `doc-${randomBytes(4).toString('hex')}` } }),
    allowed: ['owner', 'service'],
    ok: (data, _who, w) => expect(data.result).toMatchObject({ totalCount: 1, edges: [{ node: { id: w.committed.watchID } }] }),
    refused: emptyConnection,
  },
  {
    name: 'syncStates',
    query: `query($filter: SyncStateFilter) { result: syncStates(first: 10, filter: $filter) { ${CONNECTION_FIELDS} } }`,
    variables: () => ({ filter: { connectorName: 'google' } }),
    unknown: () => ({ filter: { connectorName: `unknown-${randomBytes(4).toString('hex')}` } }),
    allowed: ['owner', 'service'],
    ok: (data, _who, w) => expect(data.result).toMatchObject({ totalCount: 1, edges: [{ node: { id: w.sync.id } }] }),
    refused: emptyConnection,
  },
  ...(['document', 'documents'] as const).map(
    (field): Case => ({
      name: field,
      query:
        field === 'document'
          ? `query($documentID: String!) { result: document(documentID: $documentID) { ${DOCUMENT_FIELDS} } }`
          : `query($documentIDs: [String!]!) { result: documents(documentIDs: $documentIDs) { ${DOCUMENT_FIELDS} } }`,
      variables: () => (field === 'document' ? { documentID: 'doc-1' } : { documentIDs: ['doc-1'] }),
      unknown: () => {
        const id = `doc-${randomBytes(4).toString('hex')}`;
        return field === 'document' ? { documentID: id } : { documentIDs: [id] };
      },
      allowed: ['owner', 'caller', 'service'],
      ok: (data, who, w) => {
        const doc = field === 'document' ? data.result : data.result[0];
        expect(doc).toEqual(
          who === 'caller'
            ? // The caller sees the operation it called, not the owner's watch, trim or candidates.
              { documentID: 'doc-1', operations: [{ id: w.committed.id }], watch: null, entityTrim: null, hasConnectorWork: false }
            : { documentID: 'doc-1', operations: [{ id: w.committed.id }], watch: { id: w.committed.watchID }, entityTrim: { documentID: 'doc-1' }, hasConnectorWork: true },
        );
      },
      refused: (data) => expect(field === 'document' ? data.result : data.result[0]).toMatchObject(EMPTY_DOCUMENT),
    }),
  ),

  // ---- operation mutations ----
  {
    name: 'claimOperation for the owner, with the key of an existing operation',
    query: /* GraphQL */ `
      mutation($input: ClaimOperationInput!) {
        result: claimOperation(input: $input) { __typename ... on ClaimOperationPayload { outcome operation { ownerDID callerDID } } ${ERROR} }
      }
    `,
    variables: (w) => ({ input: claimInput(w.live.operation.operationID, w.dids.alice) }),
    // A stranger naming an owner that does not exist is refused the same way: no inference.
    unknown: () => ({ input: claimInput(`unknown-${randomBytes(8).toString('hex')}`, randomDID()) }),
    allowed: ['owner', 'service'],
    ok: (data, who, w) =>
      // The viewer is always the caller: a new operation under the viewer's own key.
      expect(data.result).toMatchObject({
        __typename: 'ClaimOperationPayload',
        outcome: 'CLAIMED',
        operation: { ownerDID: w.dids.alice, callerDID: who === 'owner' ? w.dids.alice : w.dids.worker },
      }),
    refused: forbidden,
  },
  {
    name: 'enqueueOperation for the owner, with the key of an existing operation',
    query: /* GraphQL */ `
      mutation($input: EnqueueOperationInput!) {
        result: enqueueOperation(input: $input) { __typename ... on EnqueueOperationPayload { outcome operation { ownerDID callerDID leaseExpiresAt } } ${ERROR} }
      }
    `,
    variables: (w) => ({ input: enqueueInput(w.live.operation.operationID, w.dids.alice) }),
    // As for a claim: a stranger naming an owner that does not exist is refused the same way.
    unknown: () => ({ input: enqueueInput(`unknown-${randomBytes(8).toString('hex')}`, randomDID()) }),
    allowed: ['owner', 'service'],
    ok: (data, who, w) =>
      // The viewer is always the caller: a new operation under the viewer's own key, with no lease.
      expect(data.result).toMatchObject({
        __typename: 'EnqueueOperationPayload',
        outcome: 'CREATED',
        operation: { ownerDID: w.dids.alice, callerDID: who === 'owner' ? w.dids.alice : w.dids.worker, leaseExpiresAt: null },
      }),
    refused: forbidden,
  },
  {
    name: 'acquireOperationLease (lease expired)',
    query: opMutation('acquireOperationLease', 'AcquireOperationLeaseInput'),
    variables: (w) => ({ input: { id: w.live.id, leaseMs: 30_000 } }),
    unknown: () => ({ input: { id: unknownNodeID('ConnectorOperation'), leaseMs: 30_000 } }),
    allowed: ['owner', 'caller', 'service'],
    ok: (data, _who, w) =>
      expect(data.result).toMatchObject({ __typename: 'OperationPayload', operation: { id: w.live.id }, lease: { version: w.live.lease.version + 1 } }),
    refused: notFound,
    prepare: async (_w, suite) => {
      suite.clock.advance(61_000);
    },
  },
  fencedCase('renewOperationLease', 'renewOperationLease', 'RenewOperationLeaseInput', { leaseMs: 30_000 }),
  fencedCase('releaseOperationLease', 'releaseOperationLease', 'ReleaseOperationLeaseInput', {}),
  fencedCase('startOperationAttempt', 'startOperationAttempt', 'StartOperationAttemptInput', {}),
  fencedCase('markOperationSent', 'markOperationSent', 'MarkOperationSentInput', { sendMarker: 'marker-1' }),
  fencedCase('recordOperationAttempt', 'recordOperationAttempt', 'RecordOperationAttemptInput', { kind: 'RETRYABLE', lastHTTPStatus: 503 }),
  fencedCase('recordReconcileResult', 'recordReconcileResult', 'RecordReconcileResultInput', { landed: false }, 'ATTEMPTED', async (w, suite) => {
    await setColumns(suite.store, { callerDID: w.live.operation.callerDID, operationID: w.live.operation.operationID }, { state: 'reconcile_only', send_marker: 'm' });
  }),
  {
    name: 'finalizeOperation',
    query: FINALIZE.replace('finalizeOperation(input: $input)', 'result: finalizeOperation(input: $input)'),
    variables: (w) => ({ input: { ...fence(w), documentID: 'doc-2', sourceID: 'provider-doc-2' } }),
    unknown: (w) => ({ input: { ...unknownFence(w), documentID: 'doc-2', sourceID: 'provider-doc-2' } }),
    allowed: ['owner', 'caller', 'service'],
    ok: (data, who, w) =>
      expect(data.result).toMatchObject({
        __typename: 'FinalizeOperationPayload',
        finalized: true,
        operation: { id: w.live.id, state: 'COMMITTED' },
        // The armed watch is alice's: the caller may finalize but not see it.
        watch: who === 'caller' ? null : { ownerDID: w.dids.alice, documentID: 'doc-2' },
      }),
    refused: notFound,
  },
  {
    name: 'resumeDeferred (OFFLINE, for the owner)',
    query: /* GraphQL */ `
      mutation($input: ResumeDeferredInput!) {
        result: resumeDeferred(input: $input) { __typename ... on ResumeDeferredPayload { operations watches } ${ERROR} }
      }
    `,
    variables: (w) => ({ input: { reason: 'OFFLINE', ownerDID: w.dids.alice } }),
    unknown: () => ({ input: { reason: 'OFFLINE', ownerDID: randomDID() } }),
    allowed: ['owner', 'service'],
    ok: (data) => expect(data.result).toMatchObject({ __typename: 'ResumeDeferredPayload', operations: 1, watches: 0 }),
    refused: forbidden,
    prepare: async (w, suite) => {
      await setColumns(suite.store, { callerDID: w.live.operation.callerDID, operationID: w.live.operation.operationID }, { defer_reason: 'offline' });
    },
  },

  // ---- watch and sync state mutations ----
  {
    name: 'requestRepull',
    query: REQUEST_REPULL.replace('requestRepull(input: $input)', 'result: requestRepull(input: $input)'),
    variables: (w) => ({ input: { id: w.committed.watchID } }),
    unknown: () => ({ input: { id: unknownNodeID('ProjectionWatch') } }),
    allowed: ['owner', 'service'],
    ok: (data, _who, w) => expect(data.result).toMatchObject({ __typename: 'WatchPayload', watch: { id: w.committed.watchID, repairGeneration: 1 } }),
    refused: notFound,
  },
  {
    name: 'claimWatchAttempt',
    query: CLAIM_WATCH_ATTEMPT.replace('claimWatchAttempt(input: $input)', 'result: claimWatchAttempt(input: $input)'),
    variables: (w) => ({ input: { id: w.committed.watchID, version: w.committed.watch.version, claimMs: 60_000 } }),
    unknown: (w) => ({ input: { id: unknownNodeID('ProjectionWatch'), version: w.committed.watch.version, claimMs: 60_000 } }),
    allowed: ['owner', 'service'],
    ok: (data, _who, w) => expect(data.result).toMatchObject({ __typename: 'WatchPayload', watch: { id: w.committed.watchID, version: w.committed.watch.version + 1 } }),
    refused: notFound,
  },
  {
    name: 'recordVerification',
    query: RECORD_VERIFICATION.replace('recordVerification(input: $input)', 'result: recordVerification(input: $input)'),
    variables: (w) => ({ input: { id: w.committed.watchID, version: w.committed.watch.version, repairGeneration: 0, result: 'MATCH', digest: 'd' } }),
    unknown: (w) => ({ input: { id: unknownNodeID('ProjectionWatch'), version: w.committed.watch.version, repairGeneration: 0, result: 'MATCH', digest: 'd' } }),
    allowed: ['owner', 'service'],
    ok: (data) => expect(data.result).toMatchObject({ __typename: 'RecordVerificationPayload', stale: false, watch: { verificationStatus: 'VERIFIED' } }),
    refused: notFound,
  },
  {
    name: 'updateSyncProgress',
    query: UPDATE_SYNC_PROGRESS.replace('updateSyncProgress(input: $input)', 'result: updateSyncProgress(input: $input)'),
    variables: (w) => ({ input: progressInput(w.sync.id, w.sync.incarnation) }),
    unknown: (w) => ({ input: progressInput(unknownNodeID('SyncState'), w.sync.incarnation) }),
    allowed: ['owner', 'service'],
    ok: (data, _who, w) => expect(data.result).toMatchObject({ __typename: 'UpdateSyncProgressPayload', applied: true, syncState: { id: w.sync.id, version: 1 } }),
    refused: notFound,
  },
  // ---- the ingest side ----
  {
    name: 'node(SweepReceipt)',
    query: 'query($id: ID!) { result: node(id: $id) { __typename id ... on SweepReceipt { candidateCounts { state count } } } }',
    variables: (w) => ({ id: w.receipt.id }),
    unknown: () => ({ id: unknownNodeID('SweepReceipt') }),
    allowed: ['owner', 'service'],
    ok: (data, _who, w) => expect(data.result).toMatchObject({ id: w.receipt.id, candidateCounts: [{ state: 'PENDING', count: 1 }, {}, {}, {}] }),
    refused: (data) => expect(data.result).toBeNull(),
  },
  {
    name: 'recordSweepOutcome',
    query: `mutation($input: RecordSweepOutcomeInput!) { result: recordSweepOutcome(input: $input) { __typename ... on SweepCandidatePayload { candidate { documentID state } } ${ERROR} } }`,
    variables: (w) => ({ input: { id: w.receipt.id, documentID: 'doc-swept', outcome: 'APPLIED' } }),
    unknown: () => ({ input: { id: unknownNodeID('SweepReceipt'), documentID: 'doc-swept', outcome: 'APPLIED' } }),
    allowed: ['owner', 'service'],
    ok: (data) => expect(data.result).toEqual({ __typename: 'SweepCandidatePayload', candidate: { documentID: 'doc-swept', state: 'APPLIED' } }),
    refused: notFound,
  },
  {
    name: 'deleteSyncState',
    query: `mutation($input: DeleteSyncStateInput!) { result: deleteSyncState(input: $input) { __typename ... on DeleteSyncStatePayload { deletedID } ${ERROR} } }`,
    variables: (w) => ({ input: { id: w.sync.id } }),
    unknown: () => ({ input: { id: unknownNodeID('SyncState') } }),
    allowed: ['owner', 'service'],
    ok: (data, _who, w) => expect(data.result).toEqual({ __typename: 'DeleteSyncStatePayload', deletedID: w.sync.id }),
    refused: notFound,
  },
];

/** A claim's write without its lease length: what an enqueue takes. */
function enqueueInput(operationID: string, ownerDID: string) {
  const { leaseMs: _lease, ...input } = claimInput(operationID, ownerDID);
  return input;
}

function claimInput(operationID: string, ownerDID: string) {
  return {
    operationID,
    ownerDID,
    connectorName: 'google',
    model: 'calendar.event',
    op: 'CREATE',
    accountKey: 'account-1',
    target: 'primary',
    deterministicEventID: 'event-x',
    payloadHash: 'hash-x',
    reissueIntent: 'none',
    leaseMs: 30_000,
  };
}

function progressInput(id: string, incarnation: string | null) {
  return { id, expectedVersion: 0, expectedIncarnation: incarnation, lastSyncedAt: '2026-01-02T00:00:00Z', entityCount: 3, checkpoint: { c: 1 } };
}

/** String leaves that differ between two variable objects: [unknown value, real value]. */
function swaps(real: unknown, unknown: unknown, out: [string, string][] = []): [string, string][] {
  if (typeof real === 'string' && typeof unknown === 'string') {
    if (real !== unknown) out.push([unknown, real]);
  } else if (real !== null && unknown !== null && typeof real === 'object' && typeof unknown === 'object') {
    for (const key of Object.keys(real)) swaps((real as Vars)[key], (unknown as Vars)[key], out);
  }
  return out;
}

const TABLES: (keyof Database)[] = [
  'kubun_connector_operation',
  'kubun_connector_projection_watch',
  'kubun_connector_sync_state',
  'kubun_connector_entity_trim',
  'kubun_connector_sweep_candidate',
  'kubun_connector_sweep_receipt',
];

describeGraphQL('graphql access matrix', (s) => {
  async function seedWorld(): Promise<World> {
    const dids = { alice: s.keys.alice.did, bob: s.keys.bob.did, worker: s.keys.worker.did };
    const committed = await seedFinalized(s, { callerDID: dids.bob, ownerDID: dids.alice, documentID: 'doc-1' });
    s.clock.advance(1_000);
    const live = await seedClaim(s, { callerDID: dids.bob, ownerDID: dids.alice });
    await seedTrim(s, { documentID: 'doc-1' });
    await insertCandidateRow(s.store, { document_id: 'doc-1', owner_did: dids.alice });
    const sync = await seedSyncState(s, { connectorName: 'google' });
    const { receipt } = await recordSweepReceipt(s.store, {
      key: { ownerDID: dids.alice, connectorName: 'google', partition: 'p', provenance: 'run-1' },
      sequence: 1, modelID: 'm', scope: 's', keep: 'k', sourceFetchHLC: 'h', kind: 'full', complete: true,
      candidates: [{ documentID: 'doc-swept', sourceID: 'src', modelID: 'm' }],
    });
    return { live, committed, sync: { id: sync.id, incarnation: sync.syncState.incarnation }, receipt: { id: nodeID('SweepReceipt', receipt.nodeKey) }, dids };
  }

  /** Every row of every table the API touches, for "nothing changed". */
  async function snapshot() {
    const all: Record<string, unknown[]> = {};
    for (const table of TABLES) {
      const rows = await s.store.db.selectFrom(table).selectAll().execute();
      all[table] = rows.map((r) => JSON.stringify(r)).sort();
    }
    return all;
  }

  for (const c of CASES) {
    for (const who of VIEWERS) {
      const expected = who === 'anonymous' ? 'UNAUTHENTICATED' : c.allowed.includes(who) ? 'allowed' : 'as unknown';
      it(`${c.name} · ${who} · ${expected}`, async () => {
        const w = await seedWorld();
        await c.prepare?.(w, s);
        const as = PRINCIPAL[who];
        if (who === 'anonymous') {
          const before = await snapshot();
          const res = await s.gql(c.query, c.variables(w), { as });
          expect(res.errors?.map((e) => e.extensions?.code)).toEqual(['UNAUTHENTICATED']);
          expect(res.data == null || Object.values(res.data).every((v) => v === null)).toBe(true);
          expect(await snapshot()).toEqual(before);
          return;
        }
        if (c.allowed.includes(who)) {
          const res = await s.gql(c.query, c.variables(w), { as });
          expect(res.errors).toBeUndefined();
          c.ok(res.data, who, w);
          return;
        }
        const before = await snapshot();
        const variables = c.variables(w);
        const unknownVariables = c.unknown(w);
        const real = await s.gql(c.query, variables, { as });
        const unknown = await s.gql(c.query, unknownVariables, { as });
        expect(real.errors).toBeUndefined();
        c.refused(real.data);
        let unknownText = JSON.stringify(unknown);
        for (const [from, to] of swaps(variables, unknownVariables)) unknownText = unknownText.split(from).join(to);
        expect(JSON.stringify(real)).toBe(unknownText);
        // Nothing of the hidden rows leaks into the answer.
        for (const secret of [w.committed.watchID, w.sync.id, w.receipt.id, w.live.lease.token, ...(who === 'stranger' ? [w.live.id, w.committed.id] : [])]) {
          if (!JSON.stringify(variables).includes(secret)) expect(JSON.stringify(real)).not.toContain(secret);
        }
        expect(await snapshot()).toEqual(before);
      });
    }
  }

  it('a stranger paging with the owner’s cursor learns nothing: same answer as a forged cursor', async () => {
    await seedWorld();
    const query = `query($after: String) { result: operations(first: 1, after: $after) { ${CONNECTION_FIELDS} } }`;
    const owner = await s.gql(query, {}, { as: 'alice' });
    const cursor: string = owner.data.result.pageInfo.endCursor;
    const [connection, position] = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
    const forged = Buffer.from(JSON.stringify([connection, { ...position, nodeKey: randomBytes(16).toString('base64url') }]), 'utf8').toString('base64url');
    const withReal: GraphQLResponse = await s.gql(query, { after: cursor }, { as: 'mallory' });
    const withForged: GraphQLResponse = await s.gql(query, { after: forged }, { as: 'mallory' });
    expect(withReal.data.result).toMatchObject({ totalCount: 0, edges: [] });
    expect(JSON.stringify(withReal).split(cursor).join('')).toBe(JSON.stringify(withForged).split(forged).join(''));
  });
});
