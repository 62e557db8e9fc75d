/**
 * `ConnectorOperation` (SPEC §3.3) with its queries and mutations: listing,
 * lookup by idempotency key, state counts, claim, fenced lease and attempt
 * writes, reconcile, finalize, resume. The lease token and send marker have
 * no field.
 */
import type { InputObjectRef } from '@pothos/core';
import { InputValidationError } from '@pothos/plugin-validation';
import { z } from 'zod';
import { ForbiddenError, IdempotencyConflictError, InvalidInputError, InvalidStateError, NotFoundError, StaleVersionError } from '../resolvers/errors.js';
import * as resolve from '../resolvers/operations.js';
import {
  OPERATION_OPS,
  OPERATION_OUTCOME_KINDS,
  OPERATION_STATES,
  type ClaimOperationResult,
  type ConnectorOperation as ConnectorOperationShape,
  type FenceArgs,
  type OperationLease,
  type OperationPayload as OperationPayloadShape,
} from '../resolvers/operations.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../resolvers/pagination.js';
import { watchOfDocument, type ProjectionWatch as WatchShape } from '../resolvers/watches.js';
import { loadNode, type DecodedNodeID } from './node-ids.js';
import { BULK_ACTION_LIST_ROWS, BULK_ROWS, bulkActionComplexity, bulkActionRows, connectionComplexity, firstComplexity } from './complexity.js';
import { builder, type Types } from './builder.js';
import { DeferReason, enumValues } from './enums.js';
import { FENCED_WRITE_ERRORS, resultUnion } from './errors.js';
import { documentIDInput, jsonInput, leaseMsInput, nameInput, textInput, versionInput } from './inputs.js';
import { ProjectionWatch } from './watch.js';

export const ConnectorOperationState = builder.enumType('ConnectorOperationState', {
  description:
    'ATTEMPTED: live, may be sent. RECONCILE_ONLY: a request may have reached the provider with its outcome unknown; the next holder must reconcile, never blindly resend. COMMITTED: landed, result recorded. DEAD: given up.',
  values: enumValues(OPERATION_STATES, {
    attempted: 'Live: the lease holder may start an attempt and send the provider request.',
    reconcile_only:
      'Live, but a request may have reached the provider with its outcome unknown: the holder must reconcile (`recordReconcileResult`) before anything is sent again.',
    committed: 'Terminal: the write landed and its result is recorded (`documentID`, `resultEntity`).',
    dead: 'Terminal: given up (a fatal outcome, attempts exhausted, or cancelled by an operator); `retryOperation` can revive it.',
  }),
});

export const ConnectorOperationOp = builder.enumType('ConnectorOperationOp', {
  description: 'The provider write an operation performs.',
  values: enumValues(OPERATION_OPS, {
    create: 'Creates a document at the provider.',
    update: 'Updates an existing document at the provider.',
  }),
});

export const OperationOutcomeKind = builder.enumType('OperationOutcomeKind', {
  description:
    'How an attempt ended short of success: RETRYABLE (backoff), UNKNOWN (may have reached the provider: reconcile next), FATAL (dead), OFFLINE and AUTH (deferred without spending the attempt).',
  values: enumValues(OPERATION_OUTCOME_KINDS, {
    retryable: 'A transient failure: due again after exponential backoff with jitter (or the provider’s retry-after, if longer); DEAD once the attempts are spent.',
    unknown: 'The request may have reached the provider: the operation becomes RECONCILE_ONLY, due after the same backoff.',
    fatal: 'The provider refused for good: the operation becomes DEAD.',
    offline: 'The device is offline: deferred (defer reason OFFLINE) and the attempt is given back.',
    auth: 'The owner’s authorization is missing or expired: deferred (defer reason AUTH) and the attempt is given back.',
  }),
});

export const ClaimOutcome = builder.enumType('ClaimOutcome', {
  description:
    'CLAIMED: you hold a lease (new operation or taken over). REPLAYED: it committed before; the result is in `replay`. DEAD: it was given up. IN_FLIGHT: another holder has a live lease.',
  values: {
    CLAIMED: { description: 'You hold a lease (`lease`): the operation is new, or you took over an absent or expired lease.' },
    REPLAYED: { description: 'The operation committed before: its recorded result is in `replay`; do not write again.' },
    DEAD: { description: 'The operation was given up; no lease. An operator may `retryOperation` it.' },
    IN_FLIGHT: { description: 'Another holder’s lease is live; no lease. Claim again after it lapses.' },
  } as const,
});

export const ConnectorOperation = builder.loadableNode('ConnectorOperation', {
  description: 'One write-back create or update, keyed by its caller’s idempotency key. Visible to its caller and its owner.',
  id: { resolve: (op: ConnectorOperationShape) => op.nodeKey },
  load: resolve.loadOperationsByNodeKeys,
  // Caps the IN list of one batch (a `nodes` call or a long page).
  loaderOptions: { maxBatchSize: 500 },
  fields: (t) => ({
    operationID: t.exposeString('operationID', {
      description: 'The caller’s idempotency key (set by the caller at claim, unique per caller). It says nothing about who may see the operation.',
    }),
    callerDID: t.expose('callerDID', { type: 'DID', description: 'Who claimed the operation: the viewer of its first `claimOperation`. With `operationID`, its idempotency key.' }),
    ownerDID: t.expose('ownerDID', {
      type: 'DID',
      description: 'Whose data the write changes: the caller, unless a service principal named another owner at claim. The owner may see and operate on it.',
    }),
    connectorName: t.exposeString('connectorName', { description: 'The connector that performs the write (e.g. `google`), as given at claim.' }),
    model: t.exposeString('model', { description: 'The model of the written document (e.g. `calendar.event`), as given at claim.' }),
    op: t.expose('op', { type: ConnectorOperationOp, description: 'Whether the write creates or updates the provider document.' }),
    accountKey: t.exposeString('accountKey', {
      description: 'Which of the owner’s accounts at the provider the write goes to, as given at the first claim. Finalize arms the watch of this account.',
    }),
    target: t.exposeString('target', {
      description: 'Where at the provider the write goes (e.g. a calendar), as the caller named it. Part of the write’s identity: claiming the key with another target is an `IdempotencyConflictError`.',
    }),
    sourceID: t.exposeString('sourceID', {
      nullable: true,
      description: 'The provider’s id of the target document when the caller knew it at the first claim; null otherwise. Finalize’s `sourceID` goes to the watch, not here.',
    }),
    deterministicEventID: t.exposeString('deterministicEventID', {
      description: 'An id the caller derived for this write, as given at the first claim: a reconcile can look the write up at the provider by it. Opaque to the server.',
    }),
    payloadHash: t.exposeString('payloadHash', {
      description: 'The caller’s hash of the write’s payload, as given at claim. Part of the write’s identity: claiming the key with another hash is an `IdempotencyConflictError`.',
    }),
    reissueIntent: t.exposeString('reissueIntent', {
      description: 'The caller’s stated intent for reissuing the write, as given at the first claim. Stored and returned; the server does not interpret it.',
    }),
    providerEtag: t.exposeString('providerEtag', {
      nullable: true,
      description: 'The provider’s etag as the holder last recorded it (`recordOperationAttempt`, `recordReconcileResult`); null until one is recorded.',
    }),
    documentID: t.exposeString('documentID', { nullable: true, description: 'The local document the write produced or updated; named at claim (`ClaimOperationInput.documentID`) or set by finalize; null before either.' }),
    resultEntity: t.expose('resultEntity', {
      type: 'JSON',
      nullable: true,
      description: 'The result the holder recorded at finalize (any JSON); null before finalize or when none was given.',
    }),
    state: t.expose('state', { type: ConnectorOperationState, description: 'Where the operation stands, set by the server as the holder and operators act.' }),
    attempts: t.exposeInt('attempts', {
      description:
        'Attempts started (a count; an OFFLINE or AUTH outcome gives its attempt back). A RETRYABLE outcome of the 8th attempt makes the operation DEAD; `retryOperation` starts again from 0.',
    }),
    nextAttemptAt: t.expose('nextAttemptAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When the operation is next due, set by the server (backoff, deferral, requeue); null once DEAD. Workers read due work from `dueOperations`.',
    }),
    deferReason: t.expose('deferReason', {
      type: DeferReason,
      nullable: true,
      description:
        'Set by an OFFLINE or AUTH outcome: while set, `dueOperations` leaves the operation out whatever `nextAttemptAt` says. Cleared by `resumeDeferred`, a requeue or retry, or the next outcome; null when not deferred.',
    }),
    sendMarkerSet: t.exposeBoolean('sendMarkerSet', { description: 'Whether the current attempt marked a provider request as sent (the marker itself is secret).' }),
    lastKind: t.expose('lastKind', {
      type: OperationOutcomeKind,
      nullable: true,
      description: 'The kind of the latest recorded outcome; null before the first and while an attempt is open (`startOperationAttempt` clears it).',
    }),
    lastHTTPStatus: t.exposeInt('lastHTTPStatus', {
      nullable: true,
      description: 'The provider’s HTTP status recorded with the latest outcome; null when none was given, and while an attempt is open.',
    }),
    lastError: t.exposeString('lastError', {
      nullable: true,
      description:
        'The message the client recorded with the latest outcome (`recordOperationAttempt.message`), or `cancelled: <reason>` after `cancelOperation`; at most 2 000 characters, secrets replaced by `[redacted]`. Null when none was given, and once committed.',
    }),
    version: t.exposeInt('version', {
      description:
        'Lease epoch, advanced by the server when a lease is acquired or taken over and by every operator action (retry, cancel, requeue); the holder’s own writes leave it alone. Send it with fenced writes and operator actions.',
    }),
    leaseExpiresAt: t.expose('leaseExpiresAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When the current lease lapses (now + the holder’s `leaseMs` at claim, acquire or renew); null when no lease is held.',
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime', description: 'When the first claim created the operation (server clock).' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime', description: 'When the operation last changed (server clock).' }),
  }),
});

const OperationHistoryKind = builder.enumType('OperationHistoryKind', {
  description: 'What an `attemptHistory` entry records.',
  values: {
    ATTEMPT: { value: 'attempt', description: 'An attempt by a lease holder.' },
    RETRY: { value: 'retry', description: '`retryOperation` by an operator.' },
    CANCEL: { value: 'cancel', description: '`cancelOperation` by an operator.' },
    REQUEUE: { value: 'requeue', description: '`requeueOperation` by an operator.' },
  } as const,
});

const OperationAttempt = builder.objectRef<resolve.OperationAttempt>('OperationAttempt').implement({
  description: 'One attempt of an operation: opened by `startOperationAttempt`, stamped by `markOperationSent`, closed by `recordOperationAttempt` (or by the commit).',
  fields: (t) => ({
    seq: t.exposeInt('seq', { description: 'Position in the operation’s history, from 1; newer attempts have higher numbers.' }),
    kind: t.field({
      type: OperationHistoryKind,
      description: 'ATTEMPT for a holder’s attempt; RETRY, CANCEL or REQUEUE for an operator action (see `actorDID`, and `message` for a cancel’s reason).',
      resolve: (a) => a.kind,
    }),
    actorDID: t.expose('actorDID', { type: 'DID', nullable: true, description: 'Who took the operator action; null for attempts.' }),
    attempt: t.exposeInt('attempt', {
      description: 'The operation’s attempt counter when it started (an attempt given back by an OFFLINE or AUTH deferral repeats its number).',
    }),
    startedAt: t.expose('startedAt', { type: 'DateTime', description: 'When the attempt was opened, or when the operator acted (server clock).' }),
    sentAt: t.expose('sentAt', { type: 'DateTime', nullable: true, description: 'When the holder marked the provider request sent; null if it never did.' }),
    endedAt: t.expose('endedAt', { type: 'DateTime', nullable: true, description: 'When its outcome was recorded (or it committed); null while open.' }),
    outcome: t.expose('outcome', { type: OperationOutcomeKind, nullable: true, description: 'The recorded outcome; null while open and when it committed.' }),
    committed: t.exposeBoolean('committed', { description: 'True for the attempt that committed the operation.' }),
    httpStatus: t.exposeInt('httpStatus', { nullable: true, description: 'The provider’s HTTP status, as recorded.' }),
    retryAfterMs: t.exposeInt('retryAfterMs', { nullable: true, description: 'The provider’s retry-after, in ms, as recorded.' }),
    deferReason: t.expose('deferReason', { type: DeferReason, nullable: true, description: 'OFFLINE or AUTH when the outcome deferred the operation; null otherwise.' }),
    message: t.exposeString('message', {
      nullable: true,
      description: 'What went wrong, as the client recorded it: at most 2 000 characters, lease token, send marker and bearer tokens replaced by `[redacted]`.',
    }),
  }),
});

builder.objectField(ConnectorOperation, 'attemptHistory', (t) =>
  t.connection(
    {
      type: OperationAttempt,
      complexity: connectionComplexity,
      description: 'The operation’s attempts and operator actions, newest first (loaded for every operation of a page in one statement). Pages forward only.',
      resolve: (op, args, ctx) => resolve.attemptHistory(op, args, ctx),
    },
    { name: 'OperationAttemptConnection', description: 'A page of an operation’s `attemptHistory`.' },
    { name: 'OperationAttemptEdge', description: 'One entry of an operation’s `attemptHistory`, with its cursor.' },
  ),
);

builder.objectField(ConnectorOperation, 'watch', (t) =>
  t.field({
    type: ProjectionWatch,
    nullable: true,
    description: 'The watch of the document this operation wrote, if any and visible.',
    // Batched per request (one statement per page); synchronous null when the operation has no document.
    resolve: (op, _args, ctx) => watchOfDocument(op.documentID, ctx),
  }),
);

const OperationLeaseType = builder.objectRef<OperationLease>('OperationLease').implement({
  description: 'A lease, returned only to its holder. Send `version` and `token` with every fenced write.',
  fields: (t) => ({
    token: t.exposeString('token', { description: 'The holder’s secret. Never listed anywhere else.' }),
    version: t.exposeInt('version', { description: 'The lease epoch (the operation’s `version`) this lease was granted at: send it with every fenced write.' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime', description: 'When the lease lapses unless renewed (server clock + `leaseMs`).' }),
  }),
});

const OperationReplay = builder.objectRef<NonNullable<ClaimOperationResult['replay']>>('OperationReplay').implement({
  description: 'The recorded result of a committed operation.',
  fields: (t) => ({
    documentID: t.exposeString('documentID', { nullable: true, description: 'The local document the committed write produced or updated.' }),
    resultEntity: t.expose('resultEntity', { type: 'JSON', nullable: true, description: 'The result recorded at finalize; null when none was given.' }),
  }),
});

const OperationCountDimension = builder.enumType('OperationCountDimension', {
  description: 'What `operationCounts` groups by.',
  values: {
    STATE: { description: 'The operation’s state.' },
    LAST_KIND: { description: 'The kind of its last recorded outcome (none: null).' },
    CONNECTOR: { description: 'Its connector name.' },
    DEFER_REASON: { description: 'Why it is deferred (none: null).' },
    OWNER: { description: 'Whose data it writes.' },
  } as const,
});

const OperationCount = builder.objectRef<resolve.OperationCountShape>('OperationCount').implement({
  description: 'How many visible operations fall in one group of `operationCounts`; the fields not grouped by are null.',
  fields: (t) => ({
    state: t.expose('state', { type: ConnectorOperationState, nullable: true, description: 'The group’s state, when grouped by STATE.' }),
    lastKind: t.expose('lastKind', {
      type: OperationOutcomeKind,
      nullable: true,
      description: 'The group’s last outcome kind, when grouped by LAST_KIND (null also for the group with none).',
    }),
    connectorName: t.exposeString('connectorName', { nullable: true, description: 'The group’s connector, when grouped by CONNECTOR.' }),
    deferReason: t.expose('deferReason', {
      type: DeferReason,
      nullable: true,
      description: 'The group’s defer reason, when grouped by DEFER_REASON (null also for the group not deferred).',
    }),
    ownerDID: t.expose('ownerDID', { type: 'DID', nullable: true, description: 'The group’s owner, when grouped by OWNER.' }),
    count: t.exposeInt('count', { description: 'Exact, from counters the database keeps, unless `capped`.' }),
    capped: t.exposeBoolean('capped', {
      description:
        'True when counting stopped at 10 000 rows: `count` is then a lower bound. Only filters the counters cannot answer (documentID, minAttempts, stuck, time ranges) count rows.',
    }),
  }),
});

export const OperationFilter = builder.inputType('OperationFilter', {
  description: 'Narrows `operations`, `operationCounts`, `operationsChanged` and the bulk operator actions; fields combine with AND.',
  fields: (t) => ({
    states: t.field({ type: [ConnectorOperationState], required: false, description: 'Any of these states.' }),
    connectorName: t.string({ required: false, description: 'Only this connector’s operations.' }),
    ownerDID: t.field({ type: 'DID', required: false, description: 'Only operations writing this owner’s data.' }),
    documentID: t.string({ required: false, description: 'Only operations finalized for this local document.' }),
    operationID: t.string({
      required: false,
      description: 'Only operations with this idempotency key, whoever called them (a key is unique per caller). What the console’s search looks up.',
    }),
    model: t.string({ required: false, description: 'Only operations writing this model.' }),
    lastKinds: t.field({ type: [OperationOutcomeKind], required: false, description: 'Any of these last outcome kinds (an operation with none never matches).' }),
    deferReasons: t.field({ type: [DeferReason], required: false, description: 'Any of these defer reasons.' }),
    minAttempts: t.int({ required: false, validate: z.number().int().min(0).optional().nullable(), description: 'At least this many attempts started.' }),
    stuck: t.boolean({
      required: false,
      description:
        'True: live operations nobody is moving — a lease that expired without a result, or due for more than 15 minutes with no live lease. False: all others.',
    }),
    dueBefore: t.field({ type: 'DateTime', required: false, description: 'Live, with the next attempt due strictly before this instant.' }),
    createdAfter: t.field({ type: 'DateTime', required: false, description: 'Created at or after this instant.' }),
    createdBefore: t.field({ type: 'DateTime', required: false, description: 'Created strictly before this instant.' }),
    updatedAfter: t.field({ type: 'DateTime', required: false, description: 'Last changed at or after this instant.' }),
    updatedBefore: t.field({ type: 'DateTime', required: false, description: 'Last changed strictly before this instant.' }),
  }),
});

builder.queryFields((t) => ({
  operations: t.connection(
    {
      complexity: connectionComplexity,
      type: ConnectorOperation,
      description: 'The viewer’s visible operations (as caller or owner; a service sees all), newest first.',
      authScopes: { authenticated: true },
      args: { filter: t.arg({ type: OperationFilter, required: false, description: 'Which operations; omitted: all visible ones.' }) },
      resolve: (_root, args, ctx) => resolve.listOperations(args, ctx),
    },
    {
      name: 'ConnectorOperationConnection',
      description: 'A page of `operations`, newest first (pages both ways).',
    },
    { description: 'One operation in a page of `operations`, with its cursor.' },
  ),
  operationCounts: t.field({
    type: [OperationCount],
    description:
      'How many visible operations match the filter, per group, for dashboards. Grouped by STATE alone (the default) every state is listed, zeros included; other groupings list the groups that have operations, largest first.',
    authScopes: { authenticated: true },
    args: {
      filter: t.arg({ type: OperationFilter, required: false, description: 'Which operations to count; omitted: all visible ones.' }),
      groupBy: t.arg({ type: [OperationCountDimension], required: false, description: 'Default [STATE]; [] gives one group, the total.' }),
    },
    resolve: (_root, args, ctx) => resolve.countOperations(args, ctx),
  }),
  dueOperations: t.field({
    type: [ConnectorOperation],
    description:
      'Work for connector workers (service principals only): live operations due now, not deferred, with no live lease, oldest first; with `connectorName`, only that connector’s. Claim one with acquireOperationLease.',
    authScopes: { service: true },
    args: {
      first: t.arg.int({
        required: false,
        defaultValue: DEFAULT_PAGE_SIZE,
        validate: z.number().int().min(1).max(MAX_PAGE_SIZE),
        description: `At most this many operations (1 to ${MAX_PAGE_SIZE}).`,
      }),
      connectorName: t.arg.string({
        required: false,
        validate: nameInput.optional().nullable(),
        description: 'Only this connector’s operations (e.g. the connector a worker runs). Omitted: every connector’s.',
      }),
    },
    complexity: firstComplexity,
    resolve: (_root, args, ctx) => resolve.listDueOperations({ first: args.first ?? DEFAULT_PAGE_SIZE, connectorName: args.connectorName }, ctx),
  }),
  operationByKey: t.field({
    type: ConnectorOperation,
    nullable: true,
    description: 'An operation by its idempotency key; `callerDID` defaults to the viewer. Null when missing or not visible.',
    authScopes: { authenticated: true },
    args: {
      operationID: t.arg.string({ required: true, validate: textInput, description: 'The caller’s idempotency key.' }),
      callerDID: t.arg({ type: 'DID', required: false, description: 'Who claimed it. Default: the viewer.' }),
    },
    resolve: (_root, args, ctx) => resolve.operationByKey(args, ctx),
  }),
}));

const ClaimOperationInput = builder.inputType('ClaimOperationInput', {
  description: 'Claim (create or replay) the operation with this idempotency key. The caller is always the viewer.',
  fields: (t) => ({
    operationID: t.string({ validate: textInput, description: 'Idempotency key, unique per caller.' }),
    ownerDID: t.field({ type: 'DID', required: false, description: 'Whose data this writes. Default: the viewer; only a service may name another owner.' }),
    connectorName: t.string({ validate: nameInput, description: 'The connector that performs the write. Part of the write’s identity.' }),
    model: t.string({ validate: nameInput, description: 'The model of the written document. Part of the write’s identity.' }),
    op: t.field({ type: ConnectorOperationOp, description: 'Create or update. Part of the write’s identity.' }),
    accountKey: t.string({ validate: textInput, description: 'Which of the owner’s provider accounts the write goes to. Kept from the first claim.' }),
    target: t.string({ validate: textInput, description: 'Where at the provider the write goes (e.g. a calendar). Part of the write’s identity.' }),
    sourceID: t.string({
      required: false,
      validate: textInput.optional().nullable(),
      description: 'The provider’s id of the target document, when known. Kept from the first claim.',
    }),
    documentID: t.string({
      required: false,
      validate: documentIDInput.optional().nullable(),
      description:
        'The local document the write comes from, when known up front (an update always knows it; a create learns it at finalize). Stored at claim, so `sweepDocument` refuses the document and `hasConnectorWork` is true while the write is live; `finalizeOperation` must then name the same document. Part of the write’s identity when given.',
    }),
    deterministicEventID: t.string({
      validate: textInput,
      description: 'An id derived from the write, by which a reconcile can find it at the provider. Kept from the first claim; opaque to the server.',
    }),
    payloadHash: t.string({ validate: textInput, description: 'Your hash of the write’s payload. Part of the write’s identity.' }),
    reissueIntent: t.string({ validate: textInput, description: 'Your intent for reissuing the write. Kept from the first claim; not interpreted by the server.' }),
    leaseMs: t.int({ validate: leaseMsInput, description: 'Lease length in ms (1 s to 1 h).' }),
  }),
});

const ClaimOperationPayload = builder.objectRef<ClaimOperationResult>('ClaimOperationPayload').implement({
  description: 'What a claim found or did.',
  fields: (t) => ({
    outcome: t.expose('outcome', { type: ClaimOutcome, description: 'Whether you now hold a lease, and if not, why.' }),
    operation: t.field({ type: ConnectorOperation, description: 'The operation as it is after the claim.', resolve: (r) => r.operation }),
    lease: t.field({ type: OperationLeaseType, nullable: true, description: 'Only with CLAIMED.', resolve: (r) => r.lease ?? null }),
    replay: t.field({ type: OperationReplay, nullable: true, description: 'Only with REPLAYED.', resolve: (r) => r.replay ?? null }),
  }),
});

const OperationPayload = builder.objectRef<OperationPayloadShape>('OperationPayload').implement({
  description: 'The operation after a fenced write.',
  fields: (t) => ({
    operation: t.field({ type: ConnectorOperation, description: 'The operation as it is after the write.', resolve: (r) => r.operation }),
    lease: t.field({ type: OperationLeaseType, nullable: true, description: 'Set by acquire and renew.', resolve: (r) => r.lease ?? null }),
  }),
});

const ResumeDeferredPayload = builder.simpleObject('ResumeDeferredPayload', {
  description: 'How much deferred work was made due now.',
  fields: (t) => ({
    operations: t.int({ description: 'Operations made due now (a count).' }),
    watches: t.int({ description: 'Offline-deferred watches made due now (a count; always 0 for AUTH).' }),
  }),
});

/** Input fields every fenced write carries. */
const fenceFields = (t: PothosSchemaTypes.InputFieldBuilder<Types, 'InputObject'>) => ({
  id: t.globalID({ description: 'The operation.' }),
  version: t.int({ validate: versionInput, description: 'The lease epoch your lease was granted at.' }),
  leaseToken: t.string({ validate: textInput, description: 'Your lease token.' }),
});

const StartOperationAttemptInput = builder.inputType('StartOperationAttemptInput', {
  description: 'Start the next attempt: attempts + 1, send marker cleared.',
  fields: (t) => fenceFields(t),
});
const MarkOperationSentInput = builder.inputType('MarkOperationSentInput', {
  description: 'Record that this run is about to send the provider request.',
  fields: (t) => ({
    ...fenceFields(t),
    sendMarker: t.string({ validate: textInput, description: 'This run’s marker (secret; never readable).' }),
  }),
});
const RecordOperationAttemptInput = builder.inputType('RecordOperationAttemptInput', {
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

const FinalizeOperationInput = builder.inputType('FinalizeOperationInput', {
  description:
    'Commit the operation and arm the watch of its owner, connector, model and account with `sourceID`, in one transaction (SPEC §3.4).',
  fields: (t) => ({
    id: t.globalID({ description: 'The operation.' }),
    version: t.int({ validate: versionInput, description: 'The lease epoch your lease was granted at.' }),
    leaseToken: t.string({ validate: textInput, description: 'Your lease token.' }),
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

const FinalizeOperationPayload = builder
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

const mutation = { authScopes: { authenticated: true } } as const;
/** A bulk operator action: priced by the rows it may change (its cap), which also count toward MAX_BULK_ROWS_PER_REQUEST. */
const bulkAction = { ...mutation, complexity: bulkActionComplexity, extensions: { [BULK_ROWS]: bulkActionRows } } as const;

const actionFields = (t: PothosSchemaTypes.InputFieldBuilder<Types, 'InputObject'>) => ({
  id: t.globalID({ description: 'The operation.' }),
  version: t.int({ validate: versionInput, description: 'The operation’s `version` as you read it: the action applies only if nobody changed the lease since.' }),
});
const RetryOperationInput = builder.inputType('RetryOperationInput', { description: 'Retry a dead operation.', fields: (t) => actionFields(t) });
const RequeueOperationInput = builder.inputType('RequeueOperationInput', { description: 'Make a live operation due now.', fields: (t) => actionFields(t) });
const CancelOperationInput = builder.inputType('CancelOperationInput', {
  description: 'Give a live operation up.',
  fields: (t) => ({
    ...actionFields(t),
    reason: t.string({ validate: textInput, description: 'Why; recorded in the history and as `lastError` (“cancelled: …”).' }),
  }),
});
const bulkFields = (t: PothosSchemaTypes.InputFieldBuilder<Types, 'InputObject'>) => ({
  filter: t.field({ type: OperationFilter, required: true, description: 'Which operations; at least one condition (an empty filter is refused, never “all”).' }),
  cap: t.int({
    required: false,
    validate: z.number().int().min(1).max(1_000).optional().nullable(),
    description: 'At most this many, newest first (1 to 1 000, default 1 000); `more` says whether others matched.',
  }),
});
const RetryOperationsInput = builder.inputType('RetryOperationsInput', { description: 'Retry every matching DEAD operation.', fields: (t) => bulkFields(t) });
const RequeueOperationsInput = builder.inputType('RequeueOperationsInput', {
  description: 'Make every matching live operation due now, except those already due with no live lease (nothing to do), so running it again moves on to the rest.',
  fields: (t) => bulkFields(t),
});
const CancelOperationsInput = builder.inputType('CancelOperationsInput', {
  description: 'Give every matching live operation up.',
  fields: (t) => ({ ...bulkFields(t), reason: t.string({ validate: textInput, description: 'Why; recorded on each.' }) }),
});
const BulkOperationActionPayload = builder.objectRef<resolve.BulkActionPayload>('BulkOperationActionPayload').implement({
  description: 'What a bulk operator action changed: all of it in one transaction, or nothing.',
  fields: (t) => ({
    changed: t.exposeInt('changed', { description: 'How many operations changed.' }),
    more: t.exposeBoolean('more', {
      description: 'True when more operations matched than the cap: run it again, with the same input, for the rest (what this call changed no longer matches).',
    }),
    operations: t.field({
      type: [ConnectorOperation],
      complexity: { field: 1, multiplier: BULK_ACTION_LIST_ROWS },
      description: 'The changed operations as they are now, newest first.',
      resolve: (r) => r.operations,
    }),
  }),
});
const BULK_ERRORS = [InputValidationError, InvalidInputError, ForbiddenError];
const ACTION_ERRORS = [InputValidationError, InvalidInputError, NotFoundError, StaleVersionError, InvalidStateError, ForbiddenError];
const directResult = (name: `${string}Result`, types: unknown[]) => ({ types: types as never[], directResult: true, union: resultUnion(name) });

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
    errors: directResult('AcquireOperationLeaseResult', [InputValidationError, InvalidInputError, NotFoundError, InvalidStateError]),
    resolve: async (_root, { input }, ctx) => resolve.acquireOperationLease(await loadNode(ConnectorOperation, input.id, ctx), input.leaseMs, ctx),
  }),
  renewOperationLease: fenced(t, 'renewOperationLease', RenewOperationLeaseInput, 'Extend your live lease.', resolve.renewOperationLease),
  releaseOperationLease: fenced(t, 'releaseOperationLease', ReleaseOperationLeaseInput, 'Give up your lease.', resolve.releaseOperationLease),
  startOperationAttempt: fenced(t, 'startOperationAttempt', StartOperationAttemptInput, 'Start the next attempt.', resolve.startOperationAttempt),
  markOperationSent: fenced(t, 'markOperationSent', MarkOperationSentInput, 'Mark the provider request as sent (before sending it).', resolve.markOperationSent),
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
  retryOperation: t.field({
    ...mutation,
    description:
      'Operators (a service, or the owner): retry a DEAD operation with a new attempt budget, as ATTEMPTED, or RECONCILE_ONLY when a provider request may have been sent (never a blind resend). A CAS on `version` that advances it and clears the lease, so a holder is fenced out.',
    type: OperationPayload,
    args: { input: t.arg({ type: RetryOperationInput, required: true, description: 'The operation and the `version` you read.' }) },
    errors: directResult('RetryOperationResult', ACTION_ERRORS),
    resolve: async (_root, { input }, ctx) => resolve.operatorAction('retry', await loadNode(ConnectorOperation, input.id, ctx), input, ctx),
  }),
  cancelOperation: t.field({
    ...mutation,
    description: 'Operators (a service, or the owner): give a live operation up (DEAD), with the reason. A CAS on `version` that fences out any lease holder.',
    type: OperationPayload,
    args: { input: t.arg({ type: CancelOperationInput, required: true, description: 'The operation, the `version` you read, and why.' }) },
    errors: directResult('CancelOperationResult', ACTION_ERRORS),
    resolve: async (_root, { input }, ctx) => resolve.operatorAction('cancel', await loadNode(ConnectorOperation, input.id, ctx), input, ctx),
  }),
  requeueOperation: t.field({
    ...mutation,
    description: 'Operators (a service, or the owner): make a live operation due now, deferral cleared. A CAS on `version` that fences out any lease holder.',
    type: OperationPayload,
    args: { input: t.arg({ type: RequeueOperationInput, required: true, description: 'The operation and the `version` you read.' }) },
    errors: directResult('RequeueOperationResult', ACTION_ERRORS),
    resolve: async (_root, { input }, ctx) => resolve.operatorAction('requeue', await loadNode(ConnectorOperation, input.id, ctx), input, ctx),
  }),
  retryOperations: t.field({
    ...bulkAction,
    description: 'Operators: `retryOperation` on every matching DEAD operation you may act on (a service: all; a user: their own), at most `cap`, all or nothing.',
    type: BulkOperationActionPayload,
    args: { input: t.arg({ type: RetryOperationsInput, required: true, description: 'Which operations (a non-empty filter) and at most how many.' }) },
    errors: directResult('RetryOperationsResult', BULK_ERRORS),
    resolve: (_root, { input }, ctx) => resolve.bulkOperatorAction('retry', input, ctx),
  }),
  cancelOperations: t.field({
    ...bulkAction,
    description: 'Operators: `cancelOperation` on every matching live operation you may act on, at most `cap`, all or nothing.',
    type: BulkOperationActionPayload,
    args: { input: t.arg({ type: CancelOperationsInput, required: true, description: 'Which operations (a non-empty filter), at most how many, and why.' }) },
    errors: directResult('CancelOperationsResult', BULK_ERRORS),
    resolve: (_root, { input }, ctx) => resolve.bulkOperatorAction('cancel', input, ctx),
  }),
  requeueOperations: t.field({
    ...bulkAction,
    description: 'Operators: `requeueOperation` on every matching live operation you may act on, at most `cap`, all or nothing.',
    type: BulkOperationActionPayload,
    args: { input: t.arg({ type: RequeueOperationsInput, required: true, description: 'Which operations (a non-empty filter) and at most how many.' }) },
    errors: directResult('RequeueOperationsResult', BULK_ERRORS),
    resolve: (_root, { input }, ctx) => resolve.bulkOperatorAction('requeue', input, ctx),
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

/** A fenced write mutation: load the (visible) operation, then the resolver's write guarded by version + token. */
function fenced<I extends FenceArgs & { id: DecodedNodeID }>(
  t: PothosSchemaTypes.MutationFieldBuilder<Types, {}>,
  name: string,
  inputType: InputObjectRef<Types, I>,
  description: string,
  write: (operation: ConnectorOperationShape | null, input: I, ctx: Types['Context']) => Promise<OperationPayloadShape>,
) {
  return t.field({
    ...mutation,
    description: `${description} Fenced: version + lease token must be current.`,
    type: OperationPayload,
    args: { input: t.arg({ type: inputType, required: true, description: 'The operation, your lease (`version`, `leaseToken`), and this write’s own fields.' }) },
    errors: directResult(`${name[0]!.toUpperCase()}${name.slice(1)}Result`, FENCED_WRITE_ERRORS),
    resolve: async (_root, args, ctx) => {
      // Generic over the input type, Pothos cannot narrow `args`; the arg above is required.
      const { input } = args as { input: I };
      return write(await loadNode(ConnectorOperation, input.id, ctx), input, ctx);
    },
  });
}
