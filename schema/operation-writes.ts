/**
 * The lease holder's write path of a `ConnectorOperation` (SPEC §3.3, §3.4):
 * claim by idempotency key, acquire, renew and release a lease, start an
 * attempt, mark it sent, record its outcome or a reconcile's result,
 * finalize (commit and arm the watch), and resume deferred work. Every write
 * but claim, acquire and resume is fenced by version + lease token; all but
 * finalize through `fenced()`.
 */
import type { InputObjectRef } from '@pothos/core';
import { InputValidationError } from '@pothos/plugin-validation';
import { z } from 'zod';
import { ForbiddenError, IdempotencyConflictError, InvalidInputError, InvalidStateError, NotFoundError } from '../resolvers/errors.js';
import * as resolve from '../resolvers/operations.js';
import type {
  ClaimOperationResult,
  ConnectorOperation as ConnectorOperationShape,
  FenceArgs,
  LeasedOperation as LeasedOperationShape,
  OperationPayload as OperationPayloadShape,
} from '../resolvers/operations.js';
import { MAX_LEASE_DUE_BATCH } from '../resolvers/operations.js';
import { BULK_ROWS, leaseDueComplexity, leaseDueRows } from './complexity.js';
import type { ProjectionWatch as WatchShape } from '../resolvers/watches.js';
import { loadNode, nodeKeyOf, type DecodedNodeID } from './node-ids.js';
import { builder, mutation, type Types } from './builder.js';
import { DeferReason } from './enums.js';
import { directResult, FENCED_WRITE_ERRORS } from './errors.js';
import { documentIDInput, jsonInput, leaseMsInput, nameInput, textInput, versionInput } from './inputs.js';
import {
  ClaimOutcome,
  ConnectorOperation,
  ConnectorOperationOp,
  OperationLeaseType,
  OperationOutcomeKind,
  OperationPayload,
  OperationReplay,
} from './operation.js';
import { ProjectionWatch } from './watch.js';

/** The request key every write-back step may carry (issue 37). */
const requestKeyField = (t: PothosSchemaTypes.InputFieldBuilder<Types, 'InputObject'>) =>
  t.string({
    required: false,
    validate: z.string().min(1, 'must not be empty').max(200, 'must be at most 200 characters').optional().nullable(),
    description:
      'Your key for this request (e.g. a random UUID per step, at most 200 characters). Sent again after a lost answer, the same request gets the same answer (`replayed: true`) and writes nothing more; another request under the same key is an IdempotencyConflictError naming the fields that differ. A claim or acquire resent with its key gets its own lease back. Omitted: the request is not recognised when resent.',
  });

/** How long a send may take: chosen at claim or at mark-sent (issue 37). */
export const sendTimeoutField = (t: PothosSchemaTypes.InputFieldBuilder<Types, 'InputObject'>, when: string) =>
  t.int({
    required: false,
    validate: z.number().int().min(100).max(3_600_000).optional().nullable(),
    description: `The longest the provider request may take, in ms (100 ms to 1 h), ${when}. A takeover of a marked send with no recorded outcome waits until the mark plus this plus the server's margin before it may reconcile, so no reconcile races a request the provider is still applying.`,
  });

/**
 * The input fields of a new operation's write, shared by `ClaimOperationInput`
 * and `EnqueueOperationInput`: its idempotency key and every field a replay
 * of the key must repeat.
 */
export const operationWriteFields = (t: PothosSchemaTypes.InputFieldBuilder<Types, 'InputObject'>) => ({
  operationID: t.string({ validate: textInput, description: 'Idempotency key, unique per caller.' }),
  ownerDID: t.field({ type: 'DID', required: false, description: 'Whose data this writes. Default: the viewer; only a service may name another owner.' }),
  connectorName: t.string({ validate: nameInput, description: 'The connector that performs the write. Part of the write’s identity.' }),
  model: t.string({ validate: nameInput, description: 'The model of the written document. Part of the write’s identity.' }),
  op: t.field({ type: ConnectorOperationOp, description: 'Create or update. Part of the write’s identity.' }),
  accountKey: t.string({ validate: textInput, description: 'Which of the owner’s provider accounts the write goes to. Part of the write’s identity: a replay naming another is an IdempotencyConflictError.' }),
  target: t.string({ validate: textInput, description: 'Where at the provider the write goes (e.g. a calendar). Part of the write’s identity.' }),
  sourceID: t.string({
    required: false,
    validate: textInput.optional().nullable(),
    description: 'The provider’s id of the target document, when known. Part of the write’s identity (omitted and null are the same): a replay naming another is an IdempotencyConflictError.',
  }),
  documentID: t.string({
    required: false,
    validate: documentIDInput.optional().nullable(),
    description:
      'The local document the write comes from, when known up front (an update always knows it; a create learns it at finalize). Stored with the operation (at claim or enqueue), so `sweepDocument` refuses the document and `hasConnectorWork` is true while the write is live; `finalizeOperation` must then name the same document. Part of the write’s identity when given.',
  }),
  deterministicEventID: t.string({
    validate: textInput,
    description: 'An id derived from the write, by which a reconcile can find it at the provider (send it as the provider’s idempotency key). Part of the write’s identity; opaque to the server.',
  }),
  payloadHash: t.string({ validate: textInput, description: 'Your hash of the write’s payload. Part of the write’s identity.' }),
  reissueIntent: t.string({ validate: textInput, description: 'Your intent for reissuing the write. Part of the write’s identity; not interpreted by the server.' }),
});

const ClaimOperationInput = builder.inputType('ClaimOperationInput', {
  description: 'Claim (create or replay) the operation with this idempotency key. The caller is always the viewer.',
  fields: (t) => ({
    requestKey: requestKeyField(t),
    sendTimeoutMs: sendTimeoutField(t, 'for every send of this operation unless a mark names another; default: 30 s'),
    ...operationWriteFields(t),
    leaseMs: t.int({ validate: leaseMsInput, description: 'Lease length in ms (1 s to 1 h).' }),
  }),
});

const ClaimOperationPayload = builder.objectRef<ClaimOperationResult & { replayed: boolean }>('ClaimOperationPayload').implement({
  description: 'What a claim found or did.',
  fields: (t) => ({
    outcome: t.expose('outcome', { type: ClaimOutcome, description: 'Whether you now hold a lease, and if not, why.' }),
    operation: t.field({ type: ConnectorOperation, description: 'The operation as it is after the claim.', resolve: (r) => r.operation }),
    lease: t.field({ type: OperationLeaseType, nullable: true, description: 'Only with CLAIMED.', resolve: (r) => r.lease ?? null }),
    replay: t.field({ type: OperationReplay, nullable: true, description: 'Only with REPLAYED.', resolve: (r) => r.replay ?? null }),
    replayed: t.boolean({
      description: 'True when this answered a claim already recorded under its `requestKey` (its answer was lost): nothing was written, and a CLAIMED lease is yours again.',
      resolve: (r) => r.replayed,
    }),
  }),
});

const ResumeDeferredPayload = builder.simpleObject('ResumeDeferredPayload', {
  description: 'How much deferred work was made due now.',
  fields: (t) => ({
    operations: t.int({ description: 'Operations made due now (a count).' }),
    watches: t.int({ description: 'Offline-deferred watches made due now (a count; always 0 for AUTH).' }),
    more: t.boolean({
      description: 'True when more deferred work matched than one call resumes (1 000 operations and 1 000 watches, as the bulk actions): run it again for the rest (what this call resumed no longer matches).',
    }),
  }),
});

/** Input fields every fenced write carries. */
const fenceFields = (t: PothosSchemaTypes.InputFieldBuilder<Types, 'InputObject'>) => ({
  id: t.globalID({ description: 'The operation.' }),
  version: t.int({ validate: versionInput, description: 'The lease epoch your lease was granted at.' }),
  leaseToken: t.string({ validate: textInput, description: 'Your lease token.' }),
  requestKey: requestKeyField(t),
});

export const StartOperationAttemptInput = builder.inputType('StartOperationAttemptInput', {
  description: 'Start the next attempt: attempts + 1, send marker cleared.',
  fields: (t) => fenceFields(t),
});
export const MarkOperationSentInput = builder.inputType('MarkOperationSentInput', {
  description: 'Record that this run is about to send the provider request.',
  fields: (t) => ({
    ...fenceFields(t),
    sendMarker: t.string({
      validate: textInput,
      description: 'This run’s marker (secret; never readable). The same marker again in this attempt is answered and writes nothing; another one is an IdempotencyConflictError.',
    }),
    sendTimeoutMs: sendTimeoutField(t, 'for this send; default: the claim’s, else 30 s'),
  }),
});
export const RecordOperationAttemptInput = builder.inputType('RecordOperationAttemptInput', {
  description: 'Record how the current attempt ended and reschedule.',
  fields: (t) => ({
    ...fenceFields(t),
    kind: t.field({ type: OperationOutcomeKind, description: 'How the attempt ended; decides the next state and when it is due.' }),
    lastHTTPStatus: t.int({
      required: false,
      validate: z.number().int().min(100).max(599).optional().nullable(),
      description: 'The provider’s HTTP status (100 to 599), if a response came back.',
    }),
    providerEtag: t.string({ required: false, validate: textInput.optional().nullable(), description: 'The provider’s etag, if it sent one. Omitted: the stored etag is kept.' }),
    retryAfterMs: t.int({
      required: false,
      validate: z.number().int().min(0).max(7 * 86_400_000).optional().nullable(),
      description: 'The provider’s retry-after, in ms (at most 7 days): after RETRYABLE or UNKNOWN the next attempt is due no sooner, even when the backoff is shorter.',
    }),
    message: t.string({
      required: false,
      validate: z.string().max(20_000, 'must be at most 20000 characters').optional().nullable(),
      description:
        'What went wrong (e.g. the provider’s error text). Kept on the attempt and as `lastError`: cut to 2 000 characters, lease token, send marker and anything shaped like a bearer token or JWT replaced by `[redacted]`.',
    }),
  }),
});
const RecordReconcileResultInput = builder.inputType('RecordReconcileResultInput', {
  description: 'Record what reconciling with the provider found.',
  fields: (t) => ({
    ...fenceFields(t),
    landed: t.boolean({ description: 'Whether the write is at the provider: then finalize; otherwise it is due again (DEAD if its attempts are spent).' }),
    providerEtag: t.string({
      required: false,
      validate: textInput.optional().nullable(),
      description: 'The provider’s etag of what was found. Omitted: the stored etag is kept.',
    }),
  }),
});
const RenewOperationLeaseInput = builder.inputType('RenewOperationLeaseInput', {
  description: 'Extend your live lease.',
  fields: (t) => ({ ...fenceFields(t), leaseMs: t.int({ validate: leaseMsInput, description: 'The new lease length in ms from now (1 s to 1 h).' }) }),
});
const ReleaseOperationLeaseInput = builder.inputType('ReleaseOperationLeaseInput', {
  description: 'Give up your lease.',
  fields: (t) => fenceFields(t),
});

const AcquireOperationLeaseInput = builder.inputType('AcquireOperationLeaseInput', {
  description: 'Take an absent or expired lease of a live operation (a new lease epoch).',
  fields: (t) => ({
    id: t.globalID({ description: 'The operation.' }),
    leaseMs: t.int({ validate: leaseMsInput, description: 'Lease length in ms (1 s to 1 h).' }),
    requestKey: requestKeyField(t),
  }),
});

const LeaseDueOperationsInput = builder.inputType('LeaseDueOperationsInput', {
  description: 'Lease up to `limit` of a connector’s due operations at once (what `dueOperations` lists, oldest first).',
  fields: (t) => ({
    connectorName: t.string({ validate: nameInput, description: 'The connector whose operations to lease (the one the worker runs).' }),
    limit: t.int({
      validate: z.number().int().min(1, 'must be at least 1').max(MAX_LEASE_DUE_BATCH, `must be at most ${MAX_LEASE_DUE_BATCH}`),
      description: `At most this many operations (1 to ${MAX_LEASE_DUE_BATCH}).`,
    }),
    leaseMs: t.int({ validate: leaseMsInput, description: 'Each lease’s length in ms (1 s to 1 h).' }),
    ownerDID: t.field({
      type: 'DID',
      required: false,
      description: 'Only this owner’s operations. Omitted: for a service, every owner’s; for anyone else, the operations they are the caller or owner of (always the limit of what they may lease).',
    }),
  }),
});

const LeasedOperation = builder.objectRef<LeasedOperationShape>('LeasedOperation').implement({
  description: 'An operation `leaseDueOperations` leased to you, with its lease.',
  fields: (t) => ({
    operation: t.field({ type: ConnectorOperation, description: 'The operation as the lease left it (RECONCILE_ONLY when a lapsed holder had marked a send).', resolve: (r) => r.operation }),
    lease: t.field({ type: OperationLeaseType, description: 'Your lease: send its `version` and `token` with every fenced write.', resolve: (r) => r.lease }),
  }),
});

const LeaseDueOperationsPayload = builder.objectRef<resolve.LeaseDueOperationsPayload>('LeaseDueOperationsPayload').implement({
  description: 'The operations leased, oldest first: none when nothing is due.',
  fields: (t) => ({
    operations: t.field({
      type: [LeasedOperation],
      complexity: { field: 1, multiplier: MAX_LEASE_DUE_BATCH },
      description: 'Each leased operation with its lease, oldest first (fewer than `limit` when less is due, or other workers are leasing the rest right now).',
      resolve: (r) => r.operations,
    }),
  }),
});

const ResumeDeferredInput = builder.inputType('ResumeDeferredInput', {
  description: 'OFFLINE: the device reconnected, make offline-deferred work due. AUTH: the owner authorized the connector.',
  fields: (t) => ({
    reason: t.field({ type: DeferReason, description: 'Which deferred work to make due.' }),
    ownerDID: t.field({ type: 'DID', required: false, description: 'Default: the viewer (a service may omit it for every owner with OFFLINE).' }),
    connectorName: t.string({ required: false, validate: nameInput.optional().nullable(), description: 'Required with AUTH.' }),
  }),
});

export const FinalizeOperationInput = builder.inputType('FinalizeOperationInput', {
  description:
    'Commit the operation and arm the watch of its owner, connector, model and account with `sourceID`, in one transaction (SPEC §3.4).',
  fields: (t) => ({
    id: t.globalID({ description: 'The operation.' }),
    version: t.int({ validate: versionInput, description: 'The lease epoch your lease was granted at.' }),
    leaseToken: t.string({ validate: textInput, description: 'Your lease token.' }),
    requestKey: requestKeyField(t),
    documentID: t.string({ validate: documentIDInput, description: 'The local document the write produced or updated.' }),
    sourceID: t.string({ validate: textInput, description: 'The provider’s id of the written document.' }),
    resultEntity: t.field({
      type: 'JSON',
      required: false,
      validate: jsonInput,
      description: 'The result to record and replay to later claims (any JSON, at most 256 KiB, 64 levels).',
    }),
    currentWinnerDigest: t.string({
      required: false,
      validate: textInput.optional().nullable(),
      description: 'The digest of the document’s current winner, as you know it: stored as the armed watch’s `observedWinnerDigest`.',
    }),
  }),
});

export const FinalizeOperationPayload = builder
  .objectRef<{ finalized: boolean; replayed: boolean; operationNodeKey: string; operation: ConnectorOperationShape | null; watch: WatchShape | null }>(
    'FinalizeOperationPayload',
  )
  .implement({
  description: 'What a finalize did: whether it committed, and the operation and watch as they are now.',
  fields: (t) => ({
    finalized: t.exposeBoolean('finalized', {
      description:
        'True when the operation is committed by this holder: now, or by an earlier identical finalize (see `replayed`). False when the version or lease token was stale, or the operation was finalized by another holder or for another document: nothing was written.',
    }),
    replayed: t.exposeBoolean('replayed', {
      description: 'True when this repeated a finalize by the same holder (version, lease token) for the same document that had already committed: the recorded result is returned and nothing was written or armed again.',
    }),
    operation: t.field({
      type: ConnectorOperation,
      nullable: true,
      description: 'The operation as it is now.',
      // The committed row came back with the write; a lost finalize reads the operation as it is now.
      resolve: (r, _args, ctx) => {
        const loader = ConnectorOperation.getDataloader(ctx).clear(r.operationNodeKey);
        return r.operation !== null ? loader.prime(r.operationNodeKey, r.operation).load(r.operationNodeKey) : loader.load(r.operationNodeKey);
      },
    }),
    watch: t.field({
      type: ProjectionWatch,
      nullable: true,
      description: 'The watch armed by this finalize; null when the viewer is not its owner (or a service).',
      resolve: (r) => r.watch,
    }),
  }),
});

builder.mutationFields((t) => ({
  claimOperation: t.field({
    ...mutation,
    description: 'Claim an operation by idempotency key (SPEC §3.3): CLAIMED with a lease, REPLAYED, DEAD or IN_FLIGHT.',
    type: ClaimOperationPayload,
    args: { input: t.arg({ type: ClaimOperationInput, required: true, description: 'The idempotency key, the write it stands for, and the lease length.' }) },
    errors: directResult('ClaimOperationResult', [InputValidationError, IdempotencyConflictError, InvalidInputError, ForbiddenError]),
    resolve: (_root, { input }, ctx) => resolve.claimOperation(input, ctx),
  }),
  acquireOperationLease: t.field({
    ...mutation,
    description: 'Take an absent or expired lease: the lease epoch (version) advances. A live lease gives InvalidStateError.',
    type: OperationPayload,
    args: { input: t.arg({ type: AcquireOperationLeaseInput, required: true, description: 'The operation and the lease length.' }) },
    errors: directResult('AcquireOperationLeaseResult', [InputValidationError, InvalidInputError, NotFoundError, InvalidStateError, IdempotencyConflictError]),
    resolve: async (_root, { input }, ctx) => resolve.acquireOperationLease(await loadNode(ConnectorOperation, input.id, ctx), input, ctx),
  }),
  leaseDueOperations: t.field({
    ...mutation,
    complexity: leaseDueComplexity,
    extensions: { [BULK_ROWS]: leaseDueRows },
    description:
      'Lease up to `limit` of a connector’s due operations in one statement, oldest first, each as `acquireOperationLease` would (a new lease epoch; a lapsed lease whose send was marked comes back RECONCILE_ONLY). Concurrent workers lease disjoint operations: a row another worker is leasing at that moment is skipped, never fought over. A service leases any owner’s; anyone else only the operations they are the caller or owner of. Without a request key: a lost answer leaves its leases to lapse.',
    type: LeaseDueOperationsPayload,
    args: { input: t.arg({ type: LeaseDueOperationsInput, required: true, description: 'The connector, how many, and the lease length.' }) },
    errors: directResult('LeaseDueOperationsResult', [InputValidationError, InvalidInputError]),
    resolve: (_root, { input }, ctx) => resolve.leaseDueOperations(input, ctx),
  }),
  renewOperationLease: fencedByNodeKey(t, 'renewOperationLease', RenewOperationLeaseInput, 'Extend your live lease.', resolve.renewOperationLease),
  releaseOperationLease: fencedByNodeKey(t, 'releaseOperationLease', ReleaseOperationLeaseInput, 'Give up your lease.', resolve.releaseOperationLease),
  startOperationAttempt: fencedByNodeKey(t, 'startOperationAttempt', StartOperationAttemptInput, 'Start the next attempt.', resolve.startOperationAttempt),
  markOperationSent: fencedByNodeKey(t, 'markOperationSent', MarkOperationSentInput, 'Mark the provider request as sent (before sending it).', resolve.markOperationSent),
  recordOperationAttempt: fenced(
    t,
    'recordOperationAttempt',
    RecordOperationAttemptInput,
    'Record how the attempt ended: backoff, reconcile-only, dead or deferred.',
    resolve.recordOperationAttempt,
  ),
  recordReconcileResult: fenced(t, 'recordReconcileResult', RecordReconcileResultInput, 'Record whether a reconcile-only write landed.', resolve.recordReconcileResult),
  finalizeOperation: t.field({
    ...mutation,
    description: 'Commit an operation you hold the lease of and arm its document’s watch, atomically.',
    type: FinalizeOperationPayload,
    args: { input: t.arg({ type: FinalizeOperationInput, required: true, description: 'The operation, your lease, and the result to record.' }) },
    errors: directResult('FinalizeOperationResult', [InputValidationError, IdempotencyConflictError, NotFoundError]),
    resolve: async (_root, { input }, ctx) => resolve.finalizeOperation(await loadNode(ConnectorOperation, input.id, ctx), input, ctx),
  }),
  resumeDeferred: t.field({
    ...mutation,
    description: 'Make deferred work due now: OFFLINE (device reconnected) or AUTH (owner authorized a connector).',
    type: ResumeDeferredPayload,
    args: { input: t.arg({ type: ResumeDeferredInput, required: true, description: 'Which deferred work: the reason, and whose.' }) },
    errors: directResult('ResumeDeferredResult', [InputValidationError, InvalidInputError, ForbiddenError]),
    resolve: (_root, { input }, ctx) => resolve.resumeDeferred(input, ctx),
  }),
}));

/**
 * A fenced write the store finds by the id's node key itself, checking
 * visibility in the same statement (one statement per step on Postgres:
 * src/store/operations/fenced-step.ts), with no load before it.
 */
function fencedByNodeKey<I extends FenceArgs & { id: DecodedNodeID }>(
  t: PothosSchemaTypes.MutationFieldBuilder<Types, {}>,
  name: string,
  inputType: InputObjectRef<Types, I>,
  description: string,
  write: (nodeKey: string, input: I, ctx: Types['Context']) => Promise<OperationPayloadShape>,
) {
  return fencedField(t, name, inputType, description, (input, ctx) => write(nodeKeyOf(ConnectorOperation, input.id), input, ctx));
}

/** A fenced write mutation: load the (visible) operation, then the resolver's write guarded by version + token. */
function fenced<I extends FenceArgs & { id: DecodedNodeID }>(
  t: PothosSchemaTypes.MutationFieldBuilder<Types, {}>,
  name: string,
  inputType: InputObjectRef<Types, I>,
  description: string,
  write: (operation: ConnectorOperationShape | null, input: I, ctx: Types['Context']) => Promise<OperationPayloadShape>,
) {
  return fencedField(t, name, inputType, description, async (input, ctx) => write(await loadNode(ConnectorOperation, input.id, ctx), input, ctx));
}

/** The field of a fenced write mutation: its input, payload and errors, resolved by `run`. */
function fencedField<I extends FenceArgs & { id: DecodedNodeID }>(
  t: PothosSchemaTypes.MutationFieldBuilder<Types, {}>,
  name: string,
  inputType: InputObjectRef<Types, I>,
  description: string,
  run: (input: I, ctx: Types['Context']) => Promise<OperationPayloadShape>,
) {
  return t.field({
    ...mutation,
    description: `${description} Fenced: version + lease token must be current.`,
    type: OperationPayload,
    args: { input: t.arg({ type: inputType, required: true, description: 'The operation, your lease (`version`, `leaseToken`), and this write’s own fields.' }) },
    errors: directResult(`${name[0]!.toUpperCase()}${name.slice(1)}Result`, FENCED_WRITE_ERRORS),
    // Generic over the input type, Pothos cannot narrow `args`; the arg above is required.
    resolve: (_root, args, ctx) => run((args as { input: I }).input, ctx),
  });
}
