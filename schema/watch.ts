/**
 * `ProjectionWatch` (SPEC §3.5) with `watches`, `requestRepull`,
 * `claimWatchAttempt` and `recordVerification`. Visible to its owner and to
 * service principals.
 */
import { InputValidationError } from '@pothos/plugin-validation';
import { z } from 'zod';
import { ForbiddenError, InvalidInputError, InvalidStateError, NotFoundError, StaleVersionError } from '../resolvers/errors.js';
import { MAX_PAGE_SIZE } from '../resolvers/pagination.js';
import * as resolve from '../resolvers/watches.js';
import { PROJECTION_WATCH_VERIFICATION_STATUSES, type ArmWatchResult, type ProjectionWatch as WatchShape } from '../resolvers/watches.js';
import { loadNode } from './node-ids.js';
import { connectionComplexity, firstComplexity } from './complexity.js';
import { builder } from './builder.js';
import { DeferReason, enumValues } from './enums.js';
import { documentIDInput, nameInput, textInput, versionInput } from './inputs.js';

export const VerificationStatus = builder.enumType('VerificationStatus', {
  description: 'PENDING_VERIFICATION: a verification round is open. VERIFIED: the provider matches the local state. FAILED: gave up after the maximum mismatches.',
  values: enumValues(PROJECTION_WATCH_VERIFICATION_STATUSES),
});

export const ProjectionWatch = builder.loadableNode('ProjectionWatch', {
  description: 'A provider document tracked for verification against the local converged state. One per (owner, model, document).',
  id: { resolve: (watch: WatchShape) => watch.nodeKey },
  load: resolve.loadWatchesByNodeKeys,
  // Caps the IN list of one batch (a `nodes` call or a long page).
  loaderOptions: { maxBatchSize: 500 },
  fields: (t) => ({
    ownerDID: t.expose('ownerDID', { type: 'DID' }),
    connectorName: t.exposeString('connectorName'),
    model: t.exposeString('model'),
    accountKey: t.exposeString('accountKey'),
    sourceID: t.exposeString('sourceID', { description: 'The provider’s id of the document.' }),
    documentID: t.exposeString('documentID'),
    verifiedStateDigest: t.exposeString('verifiedStateDigest', { nullable: true }),
    observedWinnerDigest: t.exposeString('observedWinnerDigest', { nullable: true }),
    verificationStatus: t.expose('verificationStatus', { type: VerificationStatus }),
    verificationAttempts: t.exposeInt('verificationAttempts'),
    repairGeneration: t.exposeInt('repairGeneration', { description: 'Advances every time a new verification round opens.' }),
    nextAttemptAt: t.expose('nextAttemptAt', { type: 'DateTime', nullable: true }),
    claimedUntil: t.expose('claimedUntil', { type: 'DateTime', nullable: true }),
    deferReason: t.expose('deferReason', { type: DeferReason, nullable: true }),
    version: t.exposeInt('version', { description: 'CAS counter: send it back with claimWatchAttempt and recordVerification.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

export const WatchFilter = builder.inputType('WatchFilter', {
  description: 'Narrows `watches`; fields combine with AND.',
  fields: (t) => ({
    statuses: t.field({ type: [VerificationStatus], required: false }),
    connectorName: t.string({ required: false }),
    ownerDID: t.field({ type: 'DID', required: false }),
    documentID: t.string({ required: false }),
  }),
});

builder.queryField('watches', (t) =>
  t.connection(
    {
      complexity: connectionComplexity,
      type: ProjectionWatch,
      description: 'The viewer’s watches (a service sees all), newest first.',
      authScopes: { authenticated: true },
      args: { filter: t.arg({ type: WatchFilter, required: false }) },
      resolve: (_root, args, ctx) => resolve.listWatches(args, ctx),
    },
    {
      name: 'ProjectionWatchConnection',
    },
  ),
);

builder.queryField('dueWatches', (t) =>
  t.field({
    type: [ProjectionWatch],
    description:
      'Work for verifiers (service principals only): watches pending verification, due now, not claimed, oldest first. Claim one with claimWatchAttempt.',
    authScopes: { service: true },
    args: { first: t.arg.int({ required: false, defaultValue: 20, validate: z.number().int().min(1).max(MAX_PAGE_SIZE) }) },
    complexity: firstComplexity,
    resolve: (_root, args, ctx) => resolve.listDueWatches(args.first ?? 20, ctx),
  }),
);

const ArmWatchReason = builder.enumType('ArmWatchReason', {
  description:
    'INGEST: a sync saw the provider document change; coalesces on a watch already pending (only nextAttemptAt moves, the version stays). REPAIR: a repair obligation needs a fresh check. MANUAL: an operator asked. REPAIR and MANUAL always open a new generation.',
  values: enumValues(['ingest', 'repair', 'manual'] as const),
});

const ArmWatchOutcome = builder.enumType('ArmWatchOutcome', {
  description: 'CREATED: a new watch. REARMED: a new generation of an existing watch. COALESCED: an ingest on a pending watch only moved nextAttemptAt.',
  values: enumValues(['created', 'rearmed', 'coalesced'] as const),
});

const ArmWatchInput = builder.inputType('ArmWatchInput', {
  description: 'Arm the watch of a provider document for verification (SPEC §3.5).',
  fields: (t) => ({
    ownerDID: t.field({ type: 'DID', required: false, description: 'Default: the viewer; only a service may name another owner.' }),
    connectorName: t.string({ validate: nameInput }),
    model: t.string({ validate: nameInput }),
    accountKey: t.string({ validate: textInput }),
    sourceID: t.string({ validate: textInput, description: 'The provider’s id of the document.' }),
    documentID: t.string({
      required: false,
      validate: documentIDInput.optional().nullable(),
      description: 'The local document: needed to create the watch; an existing watch keeps its document.',
    }),
    reason: t.field({ type: ArmWatchReason }),
    dueAt: t.field({ type: 'DateTime', required: false, description: 'When the attempt is due. Default: now.' }),
    observedWinnerDigest: t.string({
      required: false,
      validate: textInput.optional().nullable(),
      description: 'Digest of the winner observed at the provider; kept as stored when omitted (a coalesce ignores it).',
    }),
  }),
});

const ArmWatchPayload = builder.objectRef<ArmWatchResult>('ArmWatchPayload').implement({
  fields: (t) => ({
    outcome: t.expose('outcome', { type: ArmWatchOutcome }),
    watch: t.field({ type: ProjectionWatch, resolve: (r) => r.watch }),
  }),
});

const RequestRepullInput = builder.inputType('RequestRepullInput', {
  description: 'Re-arm a watch: a new verification generation, due at `dueAt` (default now).',
  fields: (t) => ({
    id: t.globalID(),
    dueAt: t.field({ type: 'DateTime', required: false }),
  }),
});

const ClaimWatchAttemptInput = builder.inputType('ClaimWatchAttemptInput', {
  description: 'Hold the current verification attempt for `claimMs` (compare-and-swap on `version`).',
  fields: (t) => ({
    id: t.globalID(),
    version: t.int({ validate: versionInput }),
    claimMs: t.int({ validate: z.number().int().min(1_000).max(3_600_000) }),
  }),
});

const VerificationResult = builder.enumType('VerificationResult', {
  description: 'MATCH: the provider matches (send the digest). MISMATCH: it does not (backoff; FAILED after the maximum). OFFLINE: could not check; deferred without spending an attempt.',
  values: enumValues(['match', 'mismatch', 'offline'] as const),
});

const RecordVerificationInput = builder.inputType('RecordVerificationInput', {
  description: 'The verifier’s result for the generation and version it claimed.',
  fields: (t) => ({
    id: t.globalID(),
    version: t.int({ validate: versionInput }),
    repairGeneration: t.int({ validate: versionInput }),
    result: t.field({ type: VerificationResult }),
    digest: t.string({ required: false, validate: textInput.optional().nullable(), description: 'MATCH: the verified digest (required). MISMATCH: the observed digest.' }),
  }),
});

const WatchPayload = builder.objectRef<{ watch: WatchShape }>('WatchPayload').implement({
  fields: (t) => ({ watch: t.field({ type: ProjectionWatch, resolve: (r) => r.watch }) }),
});

const RecordVerificationPayload = builder.objectRef<{ stale: boolean; watch: WatchShape | null }>('RecordVerificationPayload').implement({
  fields: (t) => ({
    stale: t.exposeBoolean('stale', { description: 'The result was for an older generation or version and changed nothing.' }),
    watch: t.field({ type: ProjectionWatch, nullable: true, resolve: (r) => r.watch }),
  }),
});

const mutation = { authScopes: { authenticated: true } } as const;

builder.mutationFields((t) => ({
  armWatch: t.field({
    ...mutation,
    description: 'Create or re-arm a watch: INGEST (coalesces on a pending watch), REPAIR or MANUAL (a new generation).',
    type: ArmWatchPayload,
    args: { input: t.arg({ type: ArmWatchInput, required: true }) },
    errors: { types: [InputValidationError, NotFoundError, ForbiddenError, StaleVersionError], directResult: true, union: { name: 'ArmWatchResult' } },
    resolve: (_root, { input }, ctx) => resolve.armWatch(input, ctx),
  }),
  requestRepull: t.field({
    ...mutation,
    description: 'Re-arm a watch (a new generation). The worker’s sweep tick picks it up when due.',
    type: WatchPayload,
    args: { input: t.arg({ type: RequestRepullInput, required: true }) },
    errors: { types: [InputValidationError, NotFoundError], directResult: true, union: { name: 'RequestRepullResult' } },
    resolve: async (_root, { input }, ctx) => {
      const watch = await loadNode(ProjectionWatch, input.id, ctx);
      return { watch: await resolve.requestRepull(watch, input.dueAt, ctx) };
    },
  }),
  claimWatchAttempt: t.field({
    ...mutation,
    description: 'Hold the current verification attempt (CAS on version).',
    type: WatchPayload,
    args: { input: t.arg({ type: ClaimWatchAttemptInput, required: true }) },
    errors: {
      types: [InputValidationError, NotFoundError, StaleVersionError, InvalidStateError],
      directResult: true,
      union: { name: 'ClaimWatchAttemptResult' },
    },
    resolve: async (_root, { input }, ctx) => {
      const watch = await loadNode(ProjectionWatch, input.id, ctx);
      return { watch: await resolve.claimWatchAttempt(watch, input, ctx) };
    },
  }),
  recordVerification: t.field({
    ...mutation,
    description: 'Record a verification result; one for an older generation or version is reported stale and changes nothing.',
    type: RecordVerificationPayload,
    args: { input: t.arg({ type: RecordVerificationInput, required: true }) },
    errors: {
      types: [InputValidationError, InvalidInputError, NotFoundError, InvalidStateError],
      directResult: true,
      union: { name: 'RecordVerificationResult' },
    },
    resolve: async (_root, { input }, ctx) => {
      const watch = await loadNode(ProjectionWatch, input.id, ctx);
      return resolve.recordVerification(watch, input, ctx);
    },
  }),
}));
