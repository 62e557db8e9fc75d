/**
 * `ProjectionWatch` (SPEC §3.5) with `watches`, `requestRepull`,
 * `claimWatchAttempt` and `recordVerification`. Visible to its owner and to
 * service principals.
 */
import { InputValidationError } from '@pothos/plugin-validation';
import { z } from 'zod';
import { ForbiddenError, InvalidInputError, InvalidStateError, NotFoundError, StaleVersionError } from '../resolvers/errors.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../resolvers/pagination.js';
import * as resolve from '../resolvers/watches.js';
import { PROJECTION_WATCH_VERIFICATION_STATUSES, type ArmWatchResult, type ProjectionWatch as WatchShape } from '../resolvers/watches.js';
import { loadNode } from './node-ids.js';
import { connectionComplexity, firstComplexity } from './complexity.js';
import { builder, mutation } from './builder.js';
import { resultUnion } from './errors.js';
import { DeferReason, enumValues } from './enums.js';
import { documentIDInput, nameInput, textInput, versionInput } from './inputs.js';

export const VerificationStatus = builder.enumType('VerificationStatus', {
  description: 'PENDING_VERIFICATION: a verification round is open. VERIFIED: the provider matches the local state. FAILED: gave up after the maximum mismatches.',
  values: enumValues(PROJECTION_WATCH_VERIFICATION_STATUSES, {
    pending_verification: 'A verification round is open, due at `nextAttemptAt`.',
    verified: 'The provider matched the local state (`verifiedStateDigest`); nothing is due.',
    failed: 'Given up after 5 mismatches in this generation; nothing is due until an arm opens a new one.',
  }),
});

export const ProjectionWatch = builder.loadableNode('ProjectionWatch', {
  description: 'A provider document tracked for verification against the local converged state. One per (owner, model, document).',
  id: { resolve: (watch: WatchShape) => watch.nodeKey },
  load: resolve.loadWatchesByNodeKeys,
  // Caps the IN list of one batch (a `nodes` call or a long page).
  loaderOptions: { maxBatchSize: 500 },
  fields: (t) => ({
    ownerDID: t.expose('ownerDID', { type: 'DID', description: 'Whose document it is; they (and service principals) may see the watch.' }),
    connectorName: t.exposeString('connectorName', { description: 'The connector that syncs the document.' }),
    model: t.exposeString('model', { description: 'The document’s model (e.g. `calendar.event`).' }),
    accountKey: t.exposeString('accountKey', { description: 'Which of the owner’s accounts at the provider holds the document.' }),
    sourceID: t.exposeString('sourceID', { description: 'The provider’s id of the document.' }),
    documentID: t.exposeString('documentID', { description: 'The local document verified against the provider; one watch per (owner, model, document).' }),
    verifiedStateDigest: t.exposeString('verifiedStateDigest', {
      nullable: true,
      description: 'Digest of the local state the last MATCH confirmed, as the verifier sent it; null before, and cleared when a write (finalize) opens a new generation.',
    }),
    observedWinnerDigest: t.exposeString('observedWinnerDigest', {
      nullable: true,
      description: 'Digest of the winner last observed at the provider: from an arm, a finalize (`currentWinnerDigest`) or a MISMATCH; null when none was given.',
    }),
    verificationStatus: t.expose('verificationStatus', { type: VerificationStatus, description: 'Where verification stands, set by the server.' }),
    verificationAttempts: t.exposeInt('verificationAttempts', {
      description: 'Mismatches recorded in the current generation (a count); the 5th makes the watch FAILED. Back to 0 when a generation opens.',
    }),
    repairGeneration: t.exposeInt('repairGeneration', {
      description: 'Advances every time a new verification round opens (write, repull, repair, manual arm); send it back with recordVerification.',
    }),
    nextAttemptAt: t.expose('nextAttemptAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When the next verification attempt is due, set by the server; null when nothing is pending (VERIFIED or FAILED).',
    }),
    claimedUntil: t.expose('claimedUntil', {
      type: 'DateTime',
      nullable: true,
      description: 'Until when a verifier holds the current attempt (now + `claimMs` at `claimWatchAttempt`); null or past when unclaimed. Every result clears it.',
    }),
    deferReason: t.expose('deferReason', {
      type: DeferReason,
      nullable: true,
      description: 'OFFLINE after an OFFLINE result: the attempt was pushed out 5 minutes without spending one (`resumeDeferred(OFFLINE)` makes it due now). Null otherwise.',
    }),
    version: t.exposeInt('version', {
      description: 'CAS counter, advanced by the server on every generation-opening arm, claim and verification result: send it back with claimWatchAttempt and recordVerification.',
    }),
    createdAt: t.expose('createdAt', { type: 'DateTime', description: 'When the watch was created (server clock).' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime', description: 'When the watch last changed (server clock).' }),
  }),
});

export const WatchFilter = builder.inputType('WatchFilter', {
  description: 'Narrows `watches`; fields combine with AND.',
  fields: (t) => ({
    statuses: t.field({ type: [VerificationStatus], required: false, description: 'Any of these statuses.' }),
    connectorName: t.string({ required: false, description: 'Only this connector’s watches.' }),
    ownerDID: t.field({ type: 'DID', required: false, description: 'Only this owner’s watches.' }),
    documentID: t.string({ required: false, description: 'Only watches of this local document.' }),
  }),
});

builder.queryField('watches', (t) =>
  t.connection(
    {
      complexity: connectionComplexity,
      type: ProjectionWatch,
      description: 'The viewer’s watches (a service sees all), newest first.',
      authScopes: { authenticated: true },
      args: { filter: t.arg({ type: WatchFilter, required: false, description: 'Which watches; omitted: all visible ones.' }) },
      resolve: (_root, args, ctx) => resolve.listWatches(args, ctx),
    },
    {
      name: 'ProjectionWatchConnection',
      description: 'A page of `watches`, newest first.',
    },
    { description: 'One watch in a page of `watches`, with its cursor.' },
  ),
);

builder.queryField('dueWatches', (t) =>
  t.field({
    type: [ProjectionWatch],
    description:
      'Work for verifiers (service principals only): watches pending verification, due now, not claimed, oldest first. Claim one with claimWatchAttempt.',
    authScopes: { service: true },
    args: {
      first: t.arg.int({
        required: false,
        defaultValue: DEFAULT_PAGE_SIZE,
        validate: z.number().int().min(1).max(MAX_PAGE_SIZE),
        description: `At most this many watches (1 to ${MAX_PAGE_SIZE}).`,
      }),
    },
    complexity: firstComplexity,
    resolve: (_root, args, ctx) => resolve.listDueWatches(args.first ?? DEFAULT_PAGE_SIZE, ctx),
  }),
);

const ArmWatchReason = builder.enumType('ArmWatchReason', {
  description:
    'INGEST: a sync saw the provider document change; coalesces on a watch already pending (only nextAttemptAt moves, the version stays). REPAIR: a repair obligation needs a fresh check. MANUAL: an operator asked. REPAIR and MANUAL always open a new generation.',
  values: enumValues(['ingest', 'repair', 'manual'] as const, {
    ingest:
      'A sync saw the provider document change: creates the watch, opens a new generation on a VERIFIED or FAILED one, and on one already pending only moves `nextAttemptAt`.',
    repair: 'A repair obligation needs a fresh check: always opens a new generation.',
    manual: 'An operator asked: always opens a new generation.',
  }),
});

const ArmWatchOutcome = builder.enumType('ArmWatchOutcome', {
  description: 'CREATED: a new watch. REARMED: a new generation of an existing watch. COALESCED: an ingest on a pending watch only moved nextAttemptAt.',
  values: enumValues(['created', 'rearmed', 'coalesced'] as const, {
    created: 'A new watch (generation 0), pending verification.',
    rearmed: 'A new generation of the existing watch: attempts 0, PENDING_VERIFICATION, claim cleared, version + 1.',
    coalesced: 'An INGEST on a pending watch: only `nextAttemptAt` moved; the version, and so any claim in flight, stand.',
  }),
});

const ArmWatchInput = builder.inputType('ArmWatchInput', {
  description: 'Arm the watch of a provider document for verification (SPEC §3.5).',
  fields: (t) => ({
    ownerDID: t.field({ type: 'DID', required: false, description: 'Default: the viewer; only a service may name another owner.' }),
    connectorName: t.string({ validate: nameInput, description: 'The connector that syncs the document. Part of the watch’s identity.' }),
    model: t.string({ validate: nameInput, description: 'The document’s model. Part of the watch’s identity.' }),
    accountKey: t.string({ validate: textInput, description: 'Which of the owner’s provider accounts holds the document. Part of the watch’s identity.' }),
    sourceID: t.string({ validate: textInput, description: 'The provider’s id of the document. Part of the watch’s identity.' }),
    documentID: t.string({
      required: false,
      validate: documentIDInput.optional().nullable(),
      description: 'The local document: needed to create the watch; an existing watch keeps its document.',
    }),
    reason: t.field({ type: ArmWatchReason, description: 'Why: decides whether a pending watch coalesces or opens a new generation.' }),
    dueAt: t.field({ type: 'DateTime', required: false, description: 'When the attempt is due. Default: now.' }),
    observedWinnerDigest: t.string({
      required: false,
      validate: textInput.optional().nullable(),
      description: 'Digest of the winner observed at the provider; kept as stored when omitted (a coalesce ignores it).',
    }),
  }),
});

const ArmWatchPayload = builder.objectRef<ArmWatchResult>('ArmWatchPayload').implement({
  description: 'What an arm did, and the watch as it is now.',
  fields: (t) => ({
    outcome: t.expose('outcome', { type: ArmWatchOutcome, description: 'What the arm did.' }),
    watch: t.field({ type: ProjectionWatch, description: 'The watch after the arm.', resolve: (r) => r.watch }),
  }),
});

const RequestRepullInput = builder.inputType('RequestRepullInput', {
  description: 'Re-arm a watch: a new verification generation, due at `dueAt` (default now).',
  fields: (t) => ({
    id: t.globalID({ description: 'The watch.' }),
    dueAt: t.field({ type: 'DateTime', required: false, description: 'When the new round is due. Default: now.' }),
  }),
});

const ClaimWatchAttemptInput = builder.inputType('ClaimWatchAttemptInput', {
  description: 'Hold the current verification attempt for `claimMs` (compare-and-swap on `version`).',
  fields: (t) => ({
    id: t.globalID({ description: 'The watch.' }),
    version: t.int({ validate: versionInput, description: 'The watch’s `version` as you read it (e.g. from `dueWatches`).' }),
    claimMs: t.int({ validate: z.number().int().min(1_000).max(3_600_000), description: 'How long to hold the attempt, in ms (1 s to 1 h).' }),
  }),
});

const VerificationResult = builder.enumType('VerificationResult', {
  description: 'MATCH: the provider matches (send the digest). MISMATCH: it does not (backoff; FAILED after the maximum). OFFLINE: could not check; deferred without spending an attempt.',
  values: enumValues(['match', 'mismatch', 'offline'] as const, {
    match: 'The provider matches the local state: VERIFIED, with `digest` as the verified digest (required).',
    mismatch: 'It does not: attempts + 1 and due again after a backoff (30 s, doubling, at most 1 h); the 5th mismatch makes the watch FAILED.',
    offline: 'Could not check: pushed out 5 minutes (defer reason OFFLINE) without spending an attempt.',
  }),
});

const RecordVerificationInput = builder.inputType('RecordVerificationInput', {
  description: 'The verifier’s result for the generation and version it claimed.',
  fields: (t) => ({
    id: t.globalID({ description: 'The watch.' }),
    version: t.int({ validate: versionInput, description: 'The `version` your `claimWatchAttempt` returned.' }),
    repairGeneration: t.int({ validate: versionInput, description: 'The `repairGeneration` you checked.' }),
    result: t.field({ type: VerificationResult, description: 'What the check found.' }),
    digest: t.string({ required: false, validate: textInput.optional().nullable(), description: 'MATCH: the verified digest (required). MISMATCH: the observed digest.' }),
  }),
});

const WatchPayload = builder.objectRef<{ watch: WatchShape }>('WatchPayload').implement({
  description: 'The watch after a write.',
  fields: (t) => ({ watch: t.field({ type: ProjectionWatch, description: 'The watch as it is now.', resolve: (r) => r.watch }) }),
});

const RecordVerificationPayload = builder.objectRef<{ stale: boolean; watch: WatchShape | null }>('RecordVerificationPayload').implement({
  description: 'What a verification result did.',
  fields: (t) => ({
    stale: t.exposeBoolean('stale', { description: 'The result was for an older generation or version and changed nothing.' }),
    watch: t.field({ type: ProjectionWatch, nullable: true, description: 'The watch as it is now (also when stale); null when it no longer exists.', resolve: (r) => r.watch }),
  }),
});


builder.mutationFields((t) => ({
  armWatch: t.field({
    ...mutation,
    description: 'Create or re-arm a watch: INGEST (coalesces on a pending watch), REPAIR or MANUAL (a new generation).',
    type: ArmWatchPayload,
    args: { input: t.arg({ type: ArmWatchInput, required: true, description: 'The watch’s identity, why it is armed, and when it is due.' }) },
    errors: { types: [InputValidationError, NotFoundError, ForbiddenError, StaleVersionError], directResult: true, union: resultUnion('ArmWatchResult') },
    resolve: (_root, { input }, ctx) => resolve.armWatch(input, ctx),
  }),
  requestRepull: t.field({
    ...mutation,
    description: 'Re-arm a watch (a new generation). The worker’s sweep tick picks it up when due.',
    type: WatchPayload,
    args: { input: t.arg({ type: RequestRepullInput, required: true, description: 'The watch, and when the new round is due.' }) },
    errors: { types: [InputValidationError, NotFoundError], directResult: true, union: resultUnion('RequestRepullResult') },
    resolve: async (_root, { input }, ctx) => {
      const watch = await loadNode(ProjectionWatch, input.id, ctx);
      return { watch: await resolve.requestRepull(watch, input.dueAt, ctx) };
    },
  }),
  claimWatchAttempt: t.field({
    ...mutation,
    description: 'Hold the current verification attempt (CAS on version).',
    type: WatchPayload,
    args: { input: t.arg({ type: ClaimWatchAttemptInput, required: true, description: 'The watch, the `version` you read, and how long to hold the attempt.' }) },
    errors: {
      types: [InputValidationError, NotFoundError, StaleVersionError, InvalidStateError],
      directResult: true,
      union: resultUnion('ClaimWatchAttemptResult'),
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
    args: { input: t.arg({ type: RecordVerificationInput, required: true, description: 'The watch, the version and generation you checked, and what you found.' }) },
    errors: {
      types: [InputValidationError, InvalidInputError, NotFoundError, InvalidStateError],
      directResult: true,
      union: resultUnion('RecordVerificationResult'),
    },
    resolve: async (_root, { input }, ctx) => {
      const watch = await loadNode(ProjectionWatch, input.id, ctx);
      return resolve.recordVerification(watch, input, ctx);
    },
  }),
}));
