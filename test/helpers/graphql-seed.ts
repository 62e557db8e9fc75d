/**
 * Rows for GraphQL tests, written through the store (set-up only: the
 * behaviour under test always goes through `yoga.fetch`), the global ids that
 * name them, and the `DateTime` form of test-clock instants. Set-up that must
 * itself go through GraphQL (claim, finalize, lease and attempt mutations) is
 * in operation-graphql.ts.
 */
import { randomBytes } from 'node:crypto';
import { encodeNodeID } from '../../schema/global-id.js';
import { setEntityTrim } from '../../src/store/entity-trim/index.js';
import { finalizeOperationAndArmWatch } from '../../src/store/finalize/index.js';
import type { ClaimOperationInput, ConnectorOperation, OperationLease } from '../../src/store/operations/index.js';
import { armWatch, type ProjectionWatch, type ProjectionWatchIdentity } from '../../src/store/projection-watches/index.js';
import { setSyncState, type SyncState, type SyncStateInput } from '../../src/store/sync-state/index.js';
import type { GraphQLSuite } from './graphql.js';
import { claimFresh } from './operation-claim-fixtures.js';

/** The node types' names. */
export type NodeTypeName = 'ConnectorOperation' | 'ProjectionWatch' | 'SyncState' | 'SweepReceipt';

/** The global id of a row with `nodeKey`. */
export const nodeID = (typename: NodeTypeName, nodeKey: string): string => encodeNodeID(typename, nodeKey);

/** A well-formed global id of `typename` that names no row. */
export const unknownNodeID = (typename: NodeTypeName): string => encodeNodeID(typename, randomBytes(16).toString('base64url'));

let sequence = 0;
const next = (): number => ++sequence;

/** Defaults of {@link seedClaim}: alice claims for herself. */
export type SeedClaimOptions = Partial<Omit<ClaimOperationInput, 'callerDID' | 'ownerDID'>> & { callerDID?: string; ownerDID?: string };

/** A claimed (leased, `attempted`) operation, its lease and its global id. */
export interface SeededOperation {
  operation: ConnectorOperation;
  lease: OperationLease;
  id: string;
}

/** Claims a fresh operation through the store (caller and owner default to alice). */
export async function seedClaim(suite: GraphQLSuite, options: SeedClaimOptions = {}): Promise<SeededOperation> {
  const n = next();
  const callerDID = options.callerDID ?? suite.keys.alice.did;
  // A calendar event, not claimInput's contact, and a key of its own per call.
  const { operation, lease } = await claimFresh(suite.store, {
    operationID: `seeded-op-${n}`,
    model: 'calendar.event',
    target: 'primary',
    deterministicEventID: `event-${n}`,
    payloadHash: `hash-${n}`,
    leaseMs: 60_000,
    ...options,
    callerDID,
    ownerDID: options.ownerDID ?? callerDID,
  });
  return { operation, lease, id: nodeID('ConnectorOperation', operation.nodeKey) };
}

/** A finalized operation and the watch it armed. */
export interface SeededFinalized extends SeededOperation {
  watch: ProjectionWatch;
  watchID: string;
}

/** Claims and finalizes an operation for `documentID` through the store, arming its watch. */
export async function seedFinalized(
  suite: GraphQLSuite,
  options: SeedClaimOptions & { documentID: string; watchSourceID?: string; digest?: string },
): Promise<SeededFinalized> {
  const { documentID, watchSourceID, digest, ...claim } = options;
  const seeded = await seedClaim(suite, claim);
  const op = seeded.operation;
  const result = await finalizeOperationAndArmWatch(suite.store, {
    key: { callerDID: op.callerDID, operationID: op.operationID },
    version: seeded.lease.version,
    leaseToken: seeded.lease.token,
    documentID,
    resultEntity: { documentID },
    currentWinnerDigest: digest ?? null,
    watchIdentity: {
      ownerDID: op.ownerDID,
      connectorName: op.connectorName,
      model: op.model,
      accountKey: op.accountKey,
      sourceID: watchSourceID ?? `source-${documentID}`,
    },
  });
  if (!result.finalized || result.watch === null) throw new Error('seedFinalized: finalize lost');
  return { ...seeded, watch: result.watch, watchID: nodeID('ProjectionWatch', result.watch.nodeKey) };
}

/** Creates a watch (reason `ingest`) for `documentID`; the owner defaults to alice. */
export async function seedWatch(
  suite: GraphQLSuite,
  options: Partial<ProjectionWatchIdentity> & { documentID: string; dueAt?: number },
): Promise<{ watch: ProjectionWatch; id: string }> {
  const { documentID, dueAt, ...identity } = options;
  const { watch } = await armWatch(suite.store, {
    identity: {
      ownerDID: suite.keys.alice.did,
      connectorName: 'google',
      model: 'calendar.event',
      accountKey: 'account-1',
      sourceID: `source-${documentID}`,
      ...identity,
    },
    documentID,
    reason: 'ingest',
    ...(dueAt !== undefined && { dueAt }),
  });
  return { watch, id: nodeID('ProjectionWatch', watch.nodeKey) };
}

/** Creates (or replaces the data of) a sync state; the owner defaults to alice. */
export async function seedSyncState(
  suite: GraphQLSuite,
  options: Partial<SyncStateInput> & { connectorName: string; ownerDID?: string },
): Promise<{ syncState: SyncState; id: string }> {
  const { connectorName, ownerDID, ...data } = options;
  const syncState = await setSyncState(suite.store, connectorName, ownerDID ?? suite.keys.alice.did, {
    checkpoint: { cursor: 'c-0' },
    lastSyncedAt: '2026-01-01T00:00:00Z',
    entityCount: 0,
    status: 'idle',
    ...data,
  });
  return { syncState, id: nodeID('SyncState', syncState.nodeKey) };
}

/** Records a trim for `documentID`; the owner defaults to alice. */
export async function seedTrim(suite: GraphQLSuite, options: { documentID: string; ownerDID?: string; connectorName?: string }) {
  return setEntityTrim(suite.store, {
    documentID: options.documentID,
    ownerDID: options.ownerDID ?? suite.keys.alice.did,
    connectorName: options.connectorName ?? 'google',
    trimmedFields: { description: 'x'.repeat(10) },
  });
}

/** ISO 8601 of an ms-epoch time, as the `DateTime` scalar serializes it. */
export const iso = (ms: number): string => new Date(ms).toISOString();
