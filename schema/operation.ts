/**
 * `ConnectorOperation` (SPEC §3.3) with its enums, its attempt history, lease,
 * replay and count types, `OperationFilter`, and the operation queries:
 * listing, counts, due work, lookup by idempotency key. Also what both
 * mutation files share: `OperationPayload` and the mutation helpers. The
 * worker's writes are in operation-writes.ts, the operator actions in
 * operation-actions.ts. The lease token and send marker have no field.
 */
import { z } from 'zod';
import * as resolve from '../resolvers/operations.js';
import {
  MAX_OPERATION_ID_PREFIX,
  OPERATION_OPS,
  OPERATION_OUTCOME_KINDS,
  OPERATION_STATES,
  type ClaimOperationResult,
  type ConnectorOperation as ConnectorOperationShape,
  type OperationLease,
  type OperationPayload as OperationPayloadShape,
} from '../resolvers/operations.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../resolvers/pagination.js';
import { watchOfDocument } from '../resolvers/watches.js';
import { connectionComplexity, firstComplexity } from './complexity.js';
import { builder } from './builder.js';
import { DeferReason, enumValues } from './enums.js';
import { nameInput, textInput } from './inputs.js';
import { RESOLVES_NODES } from './resolved-nodes.js';
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
    // It loads the watch itself: no id for the dataloader plugin to load (resolved-nodes.ts).
    extensions: { [RESOLVES_NODES]: true },
  }),
);

export const OperationLeaseType = builder.objectRef<OperationLease>('OperationLease').implement({
  description: 'A lease, returned only to its holder. Send `version` and `token` with every fenced write.',
  fields: (t) => ({
    token: t.exposeString('token', { description: 'The holder’s secret. Never listed anywhere else.' }),
    version: t.exposeInt('version', { description: 'The lease epoch (the operation’s `version`) this lease was granted at: send it with every fenced write.' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime', description: 'When the lease lapses unless renewed (server clock + `leaseMs`).' }),
  }),
});

export const OperationReplay = builder.objectRef<NonNullable<ClaimOperationResult['replay']>>('OperationReplay').implement({
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
      resolve: (_root, args, ctx, info) => resolve.listOperations(args, ctx, info),
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
      'Work for connector workers (service principals only): live operations due now, not deferred, with no live lease, oldest first; with `connectorName`, only that connector’s. Claim one with acquireOperationLease, or lease a batch at once with leaseDueOperations (workers side by side then never race for the same operation).',
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
  operationsByIDPrefix: t.field({
    type: [ConnectorOperation],
    description:
      'Operations whose idempotency key (`operationID`) starts with `prefix`, case-sensitive, every caller’s, in key order then caller (service principals only: the console’s search offers them as you type). Read as one range of an index in code-point order, however many operations there are.',
    authScopes: { service: true },
    args: {
      prefix: t.arg.string({
        required: true,
        validate: z.string().min(1).max(MAX_OPERATION_ID_PREFIX),
        description: `The start of the key: 1 to ${MAX_OPERATION_ID_PREFIX} characters.`,
      }),
      first: t.arg.int({
        required: false,
        defaultValue: 10,
        validate: z.number().int().min(1).max(MAX_PAGE_SIZE),
        description: `At most this many operations (1 to ${MAX_PAGE_SIZE}; default 10).`,
      }),
    },
    complexity: firstComplexity,
    resolve: (_root, args, ctx) => resolve.listOperationsByIDPrefix({ prefix: args.prefix, first: args.first ?? 10 }, ctx),
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

export const OperationPayload = builder.objectRef<OperationPayloadShape>('OperationPayload').implement({
  description: 'The operation after a fenced write.',
  fields: (t) => ({
    operation: t.field({ type: ConnectorOperation, description: 'The operation as it is after the write.', resolve: (r) => r.operation }),
    lease: t.field({ type: OperationLeaseType, nullable: true, description: 'Set by acquire and renew.', resolve: (r) => r.lease ?? null }),
    replayed: t.boolean({
      description: 'True when this answered a request already recorded under its `requestKey` (its answer was lost): nothing was written.',
      resolve: (r) => r.replayed ?? false,
    }),
  }),
});

