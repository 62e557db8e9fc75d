/**
 * Deletion sweeps (SPEC §3.6): `SweepReceipt` (a listing pass, a node),
 * its `SweepCandidate`s and the partition's `SweepCheckpoint`, with the
 * receipt listing, lookups, the workers' due list and the four writes of a
 * sweep: record the receipt, record each candidate's outcome or apply
 * failure, commit. Visible to the receipt's owner and to service principals.
 */
import { InputValidationError } from '@pothos/plugin-validation';
import { z } from 'zod';
import { ForbiddenError, IdempotencyConflictError, InvalidInputError, InvalidStateError, NotFoundError, StaleVersionError } from '../resolvers/errors.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../resolvers/pagination.js';
import * as resolve from '../resolvers/sweeps.js';
import {
  MAX_CANDIDATES_PER_RECEIPT,
  MAX_SWEEP_APPLY_ATTEMPTS,
  SWEEP_CANDIDATE_STATES,
  SWEEP_OUTCOMES,
  type SweepCandidate as CandidateShape,
  type SweepCheckpoint as CheckpointShape,
  type SweepReceipt as ReceiptShape,
} from '../resolvers/sweeps.js';
import { BULK_ROWS, connectionComplexity, firstComplexity, sweepReceiptComplexity, sweepReceiptRows } from './complexity.js';
import { builder, mutation } from './builder.js';
import { resultUnion } from './errors.js';
import { enumValues } from './enums.js';
import { documentIDInput, hlcInput, jsonInput, nameInput, textInput, versionInput } from './inputs.js';
import { loadNode } from './node-ids.js';

export const SweepCandidateState = builder.enumType('SweepCandidateState', {
  description: `PENDING: not yet resolved, due at nextAttemptAt. APPLIED: deleted locally. KEPT: checked and kept. FAILED: applying it failed ${MAX_SWEEP_APPLY_ATTEMPTS} times; given up.`,
  values: enumValues(SWEEP_CANDIDATE_STATES, {
    pending: 'Not yet resolved: due at `nextAttemptAt`.',
    applied: 'The worker deleted the local document (terminal).',
    kept: 'The worker checked the document and kept it (terminal).',
    failed: `Applying it failed ${MAX_SWEEP_APPLY_ATTEMPTS} times; given up (terminal).`,
  }),
});

const SweepOutcome = builder.enumType('SweepOutcome', {
  description: 'APPLIED: the document was deleted locally. KEPT: it was checked and stays.',
  values: enumValues(SWEEP_OUTCOMES, {
    applied: 'The worker deleted the local document.',
    kept: 'The worker checked the document and it stays.',
  }),
});

const SweepCandidateStateCount = builder.simpleObject('SweepCandidateStateCount', {
  description: 'How many of a receipt’s candidates are in one state.',
  fields: (t) => ({
    state: t.field({ type: SweepCandidateState, description: 'A candidate state.' }),
    count: t.int({ description: 'How many of the receipt’s candidates are in that state.' }),
  }),
});

export const SweepCheckpoint = builder.objectRef<CheckpointShape>('SweepCheckpoint').implement({
  description: 'The last receipt of a partition fully applied and committed. It never moves backwards.',
  fields: (t) => ({
    ownerDID: t.expose('ownerDID', { type: 'DID', description: 'Whose partition it is.' }),
    connectorName: t.exposeString('connectorName', { description: 'The connector whose partition it is.' }),
    partition: t.exposeString('partition', { description: 'The partition, as the worker names it.' }),
    provenance: t.exposeString('provenance', { description: 'The listing pass that last advanced it.' }),
    receiptSequence: t.exposeInt('receiptSequence', { description: 'The `sequence` of the receipt that last advanced it.' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime', description: 'When a commit last wrote it (server clock).' }),
  }),
});

export const SweepReceipt = builder.loadableNode('SweepReceipt', {
  description: 'One listing pass over a partition of an owner’s connector, and the local documents it did not keep (its candidates).',
  id: { resolve: (receipt: ReceiptShape) => receipt.nodeKey },
  load: resolve.loadSweepReceiptsByNodeKeys,
  loaderOptions: { maxBatchSize: 500 },
  fields: (t) => ({
    ownerDID: t.expose('ownerDID', { type: 'DID', description: 'Whose data the pass listed.' }),
    connectorName: t.exposeString('connectorName', { description: 'The connector that listed the partition.' }),
    partition: t.exposeString('partition', { description: 'The partition listed, as the worker names it.' }),
    provenance: t.exposeString('provenance', { description: 'Names the pass (e.g. its run id); the receipt key within the partition.' }),
    sequence: t.exposeInt('sequence', { description: 'The pass’s place in the partition’s order; the checkpoint never moves back past it.' }),
    modelID: t.exposeString('modelID', { description: 'The model of the listed documents, as the worker recorded it.' }),
    scope: t.exposeString('scope', { description: 'The pass’s scope, as the worker recorded it (opaque to the server).' }),
    keep: t.exposeString('keep', { description: 'The pass’s `keep`, as the worker recorded it (opaque to the server).' }),
    sourceFetchHLC: t.exposeString('sourceFetchHLC', { description: 'Hybrid logical clock stamp of the provider fetch the listing came from, as recorded.' }),
    predicate: t.field({
      type: 'JSON',
      nullable: true,
      description: 'What the pass listed by (any JSON, as the worker recorded it); null when none was given.',
      resolve: (r) => resolve.predicateOf(r),
    }),
    kind: t.exposeString('kind', { description: 'The kind of pass, as the worker recorded it (opaque to the server).' }),
    complete: t.exposeBoolean('complete', { description: 'Whether the pass listed the whole partition.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime', description: 'When the receipt was recorded (server clock).' }),
    committedAt: t.expose('committedAt', { type: 'DateTime', nullable: true, description: 'When `commitSweepReceipt` closed it (server clock); null while its candidates are being applied.' }),
    candidateCounts: t.field({
      type: [SweepCandidateStateCount],
      description: 'How many candidates are in each state; every state is listed, zeros included.',
      resolve: (r, _args, ctx) => resolve.candidateCounts(r, ctx),
    }),
    checkpoint: t.field({
      type: SweepCheckpoint,
      nullable: true,
      description: 'The partition’s checkpoint now (null before its first commit).',
      resolve: (r, _args, ctx) => resolve.partitionCheckpoint(r, ctx),
    }),
  }),
});

export const SweepCandidate = builder.objectRef<CandidateShape>('SweepCandidate').implement({
  description: 'A local document a listing pass did not keep: deleted (APPLIED), kept, or given up after repeated failures.',
  fields: (t) => ({
    ownerDID: t.expose('ownerDID', { type: 'DID', description: 'Whose document it is (the receipt’s owner).' }),
    connectorName: t.exposeString('connectorName', { description: 'The receipt’s connector.' }),
    partition: t.exposeString('partition', { description: 'The receipt’s partition.' }),
    provenance: t.exposeString('provenance', { description: 'The receipt’s provenance: the pass that did not keep the document.' }),
    documentID: t.exposeString('documentID', { description: 'The local document the pass did not keep.' }),
    sourceID: t.exposeString('sourceID', { description: 'The provider’s id of the document, as the worker recorded it.' }),
    modelID: t.exposeString('modelID', { description: 'The document’s model, as the worker recorded it.' }),
    state: t.expose('state', { type: SweepCandidateState, description: 'Where the candidate stands, set by the server from the recorded results.' }),
    attempts: t.exposeInt('attempts', { description: 'Results recorded so far (outcomes and failures).' }),
    applyFailures: t.exposeInt('applyFailures', {
      description: `Failed apply attempts so far (a count); the ${MAX_SWEEP_APPLY_ATTEMPTS}th makes the candidate FAILED.`,
    }),
    lastError: t.exposeString('lastError', {
      nullable: true,
      description: 'Why the last apply failed (`recordSweepApplyFailure.error`, cut to 2 000 characters); null before any failure.',
    }),
    nextAttemptAt: t.expose('nextAttemptAt', {
      type: 'DateTime',
      description: 'When the candidate is due, set by the server: when recorded, then after each failure’s backoff (30 s, doubling, at most 30 min).',
    }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime', description: 'When the candidate last changed (server clock).' }),
    receipt: t.field({
      type: SweepReceipt,
      nullable: true,
      description: 'The receipt that listed it; null when that receipt no longer exists.',
      resolve: (c, _args, ctx) => resolve.candidateReceipt(c, ctx),
    }),
  }),
});

builder.objectField(SweepReceipt, 'candidates', (t) =>
  t.connection(
    {
      complexity: connectionComplexity,
      type: SweepCandidate,
      description: 'The receipt’s candidates by document id, optionally in some states. Pages forward only.',
      args: { states: t.arg({ type: [SweepCandidateState], required: false, description: 'Only candidates in any of these states. Omitted: all.' }) },
      resolve: (receipt, args, ctx) => resolve.receiptCandidates(receipt, args, ctx),
    },
    { name: 'SweepCandidateConnection', description: 'A page of a receipt’s `candidates`, by document id.' },
    { description: 'One candidate in a page of a receipt’s `candidates`, with its cursor.' },
  ),
);

export const SweepReceiptFilter = builder.inputType('SweepReceiptFilter', {
  description: 'Narrows `sweepReceipts` and `sweepReceiptsChanged`; fields combine with AND.',
  fields: (t) => ({
    ownerDID: t.field({ type: 'DID', required: false, description: 'Only this owner’s receipts.' }),
    connectorName: t.string({ required: false, description: 'Only this connector’s receipts.' }),
    partition: t.string({ required: false, description: 'Only receipts of this partition.' }),
    committed: t.boolean({ required: false, description: 'true: committed passes; false: passes still being applied.' }),
  }),
});

builder.queryFields((t) => ({
  sweepReceipts: t.connection(
    {
      complexity: connectionComplexity,
      type: SweepReceipt,
      description: 'The viewer’s sweep receipts (a service sees all), newest first. Pages forward only.',
      authScopes: { authenticated: true },
      args: { filter: t.arg({ type: SweepReceiptFilter, required: false, description: 'Which receipts; omitted: all visible ones.' }) },
      resolve: (_root, args, ctx) => resolve.listSweepReceipts(args, ctx),
    },
    { name: 'SweepReceiptConnection', description: 'A page of `sweepReceipts`, newest first.' },
    { description: 'One receipt in a page of `sweepReceipts`, with its cursor.' },
  ),
  sweepReceipt: t.field({
    type: SweepReceipt,
    nullable: true,
    description: 'A receipt by its key; `ownerDID` defaults to the viewer. Null when missing or not visible.',
    authScopes: { authenticated: true },
    args: {
      ownerDID: t.arg({ type: 'DID', required: false, description: 'Whose receipt. Default: the viewer.' }),
      connectorName: t.arg.string({ required: true, validate: nameInput, description: 'The connector that listed.' }),
      partition: t.arg.string({ required: true, validate: textInput, description: 'The partition listed.' }),
      provenance: t.arg.string({ required: true, validate: textInput, description: 'The pass’s name (e.g. its run id).' }),
    },
    resolve: (_root, args, ctx) => resolve.sweepReceiptByKey(args, ctx),
  }),
  sweepCheckpoint: t.field({
    type: SweepCheckpoint,
    nullable: true,
    description: 'A partition’s checkpoint; `ownerDID` defaults to the viewer. Null before its first commit or when not visible.',
    authScopes: { authenticated: true },
    args: {
      ownerDID: t.arg({ type: 'DID', required: false, description: 'Whose partition. Default: the viewer.' }),
      connectorName: t.arg.string({ required: true, validate: nameInput, description: 'The connector.' }),
      partition: t.arg.string({ required: true, validate: textInput, description: 'The partition.' }),
    },
    resolve: (_root, args, ctx) => resolve.sweepCheckpoint(args, ctx),
  }),
  dueSweepCandidates: t.field({
    type: [SweepCandidate],
    description: 'Work for connector workers (service principals only): one owner’s connector’s pending candidates due now, earliest first.',
    authScopes: { service: true },
    args: {
      ownerDID: t.arg({ type: 'DID', required: true, description: 'Whose candidates.' }),
      connectorName: t.arg.string({ required: true, validate: nameInput, description: 'Which connector’s candidates.' }),
      first: t.arg.int({
        required: false,
        defaultValue: DEFAULT_PAGE_SIZE,
        validate: z.number().int().min(1).max(MAX_PAGE_SIZE),
        description: `At most this many candidates (1 to ${MAX_PAGE_SIZE}).`,
      }),
    },
    complexity: firstComplexity,
    resolve: (_root, args, ctx) => resolve.listDueSweepCandidates({ ownerDID: args.ownerDID, connectorName: args.connectorName, first: args.first ?? DEFAULT_PAGE_SIZE }, ctx),
  }),
}));

const SweepCandidateInput = builder.inputType('SweepCandidateInput', {
  description: 'A local document the listing pass did not keep.',
  fields: (t) => ({
    documentID: t.string({ validate: documentIDInput, description: 'The local document; at most once per receipt.' }),
    sourceID: t.string({ validate: textInput, description: 'The provider’s id of the document.' }),
    modelID: t.string({ validate: nameInput, description: 'The document’s model.' }),
  }),
});

const RecordSweepReceiptInput = builder.inputType('RecordSweepReceiptInput', {
  description: 'Record one listing pass and its deletion candidates (each PENDING, due now), in one transaction. Replaying an identical receipt writes nothing.',
  fields: (t) => ({
    ownerDID: t.field({ type: 'DID', required: false, description: 'Default: the viewer; only a service may name another owner.' }),
    connectorName: t.string({ validate: nameInput, description: 'The connector that listed the partition.' }),
    partition: t.string({ validate: textInput, description: 'The partition listed (a name of your choosing).' }),
    provenance: t.string({ validate: textInput, description: 'Names the pass, e.g. its run id.' }),
    sequence: t.int({ validate: versionInput, description: 'The pass’s place in the partition’s order (0 or more); the checkpoint never moves back past it.' }),
    modelID: t.string({ validate: nameInput, description: 'The model of the listed documents.' }),
    scope: t.string({ validate: textInput, description: 'The pass’s scope; stored as given (opaque to the server).' }),
    keep: t.string({ validate: textInput, description: 'The pass’s `keep`; stored as given (opaque to the server).' }),
    sourceFetchHLC: t.string({ validate: hlcInput, description: 'Hybrid logical clock stamp of the provider fetch the listing came from.' }),
    predicate: t.field({ type: 'JSON', required: false, validate: jsonInput, description: 'What the pass listed by (any JSON, at most 256 KiB).' }),
    kind: t.string({ validate: nameInput, description: 'The kind of pass; stored as given (opaque to the server).' }),
    complete: t.boolean({ description: 'Whether the pass listed the whole partition.' }),
    candidates: t.field({
      type: [SweepCandidateInput],
      description: `The partition’s local documents the pass did not keep (at most ${MAX_CANDIDATES_PER_RECEIPT}); each becomes PENDING, due now.`,
      validate: z.array(z.unknown()).max(MAX_CANDIDATES_PER_RECEIPT, `at most ${MAX_CANDIDATES_PER_RECEIPT} candidates`),
    }),
  }),
});

const RecordSweepReceiptPayload = builder.objectRef<{ created: boolean; receipt: ReceiptShape }>('RecordSweepReceiptPayload').implement({
  description: 'What recording a receipt did.',
  fields: (t) => ({
    created: t.exposeBoolean('created', { description: 'False when the identical receipt was already recorded (nothing written).' }),
    receipt: t.field({ type: SweepReceipt, description: 'The receipt as stored.', resolve: (r) => r.receipt }),
  }),
});

const RecordSweepOutcomeInput = builder.inputType('RecordSweepOutcomeInput', {
  description: 'Resolve a pending candidate. Recording the outcome it already has changes nothing.',
  fields: (t) => ({
    id: t.globalID({ required: false, description: 'The receipt the candidate belongs to (required unless the deprecated `receipt` is given).' }),
    receipt: t.globalID({
      required: false,
      description: 'The receipt the candidate belongs to: the old name of `id`.',
      deprecationReason: 'Use `id`, as every other mutation does; `receipt` is removed in 0.3.0.',
    }),
    documentID: t.string({ validate: documentIDInput, description: 'The candidate’s local document.' }),
    outcome: t.field({ type: SweepOutcome, description: 'Whether the document was deleted or kept.' }),
  }),
});

const RecordSweepApplyFailureInput = builder.inputType('RecordSweepApplyFailureInput', {
  description: `Applying a pending candidate failed: backoff, and FAILED after ${MAX_SWEEP_APPLY_ATTEMPTS} failures.`,
  fields: (t) => ({
    id: t.globalID({ required: false, description: 'The receipt the candidate belongs to (required unless the deprecated `receipt` is given).' }),
    receipt: t.globalID({
      required: false,
      description: 'The receipt the candidate belongs to: the old name of `id`.',
      deprecationReason: 'Use `id`, as every other mutation does; `receipt` is removed in 0.3.0.',
    }),
    documentID: t.string({ validate: documentIDInput, description: 'The candidate’s local document.' }),
    error: t.string({ validate: z.string().min(1, 'must not be empty').max(10_000), description: 'Why it failed; kept as lastError (cut to 2 000 characters).' }),
  }),
});

const SweepCandidatePayload = builder.objectRef<{ candidate: CandidateShape }>('SweepCandidatePayload').implement({
  description: 'The candidate after the write.',
  fields: (t) => ({ candidate: t.field({ type: SweepCandidate, description: 'The candidate as it is now.', resolve: (r) => r.candidate }) }),
});

const CommitSweepReceiptInput = builder.inputType('CommitSweepReceiptInput', {
  description: 'Close a receipt whose candidates are all resolved, and advance its partition’s checkpoint (never backwards).',
  fields: (t) => ({ id: t.globalID({ description: 'The receipt.' }) }),
});

const CommitSweepReceiptPayload = builder
  .objectRef<{ receipt: ReceiptShape; checkpoint: CheckpointShape; newlyCommitted: boolean; checkpointAdvanced: boolean }>('CommitSweepReceiptPayload')
  .implement({
    description: 'What committing a receipt did.',
    fields: (t) => ({
      receipt: t.field({ type: SweepReceipt, description: 'The receipt, committed.', resolve: (r) => r.receipt }),
      checkpoint: t.field({ type: SweepCheckpoint, description: 'The partition’s checkpoint after the commit.', resolve: (r) => r.checkpoint }),
      newlyCommitted: t.exposeBoolean('newlyCommitted', { description: 'False when it was already committed (a replay).' }),
      checkpointAdvanced: t.exposeBoolean('checkpointAdvanced', { description: 'False when the checkpoint already stood at this sequence or later.' }),
    }),
  });


/** The receipt a candidate write names: `id`, or the deprecated `receipt`; one of them, and the same if both. */
function receiptOf<ID>(input: { id?: ID | null; receipt?: ID | null }): ID {
  const issue = (message: string) => new InputValidationError({ issues: [{ message, path: ['input', 'id'] }] });
  if (input.id != null && input.receipt != null && JSON.stringify(input.id) !== JSON.stringify(input.receipt)) throw issue('names another receipt than `receipt`: give `id` only');
  const id = input.id ?? input.receipt;
  if (id == null) throw issue('is required: the receipt’s id');
  return id;
}

builder.mutationFields((t) => ({
  recordSweepReceipt: t.field({
    ...mutation,
    // Priced by its candidates (rows it writes), which also count toward MAX_BULK_ROWS_PER_REQUEST.
    complexity: sweepReceiptComplexity,
    extensions: { [BULK_ROWS]: sweepReceiptRows },
    description: 'Record a listing pass with its deletion candidates (SPEC §3.6).',
    type: RecordSweepReceiptPayload,
    args: { input: t.arg({ type: RecordSweepReceiptInput, required: true, description: 'The listing pass and its candidates.' }) },
    errors: { types: [InputValidationError, IdempotencyConflictError, InvalidInputError, ForbiddenError], directResult: true, union: resultUnion('RecordSweepReceiptResult') },
    resolve: (_root, { input }, ctx) => resolve.recordSweepReceipt(input, ctx),
  }),
  recordSweepOutcome: t.field({
    ...mutation,
    description: 'Record that a candidate was applied (deleted locally) or kept.',
    type: SweepCandidatePayload,
    args: { input: t.arg({ type: RecordSweepOutcomeInput, required: true, description: 'The candidate (receipt and document) and how it was resolved.' }) },
    errors: { types: [InputValidationError, NotFoundError, InvalidStateError], directResult: true, union: resultUnion('RecordSweepOutcomeResult') },
    resolve: async (_root, { input }, ctx) => resolve.recordSweepOutcome(await loadNode(SweepReceipt, receiptOf(input), ctx), input, ctx),
  }),
  recordSweepApplyFailure: t.field({
    ...mutation,
    description: 'Record that applying a candidate failed.',
    type: SweepCandidatePayload,
    args: { input: t.arg({ type: RecordSweepApplyFailureInput, required: true, description: 'The candidate (receipt and document) and why applying it failed.' }) },
    errors: { types: [InputValidationError, NotFoundError, InvalidStateError, StaleVersionError], directResult: true, union: resultUnion('RecordSweepApplyFailureResult') },
    resolve: async (_root, { input }, ctx) => resolve.recordSweepApplyFailure(await loadNode(SweepReceipt, receiptOf(input), ctx), input, ctx),
  }),
  commitSweepReceipt: t.field({
    ...mutation,
    description: 'Commit a receipt: refused (InvalidStateError) while a candidate is still pending.',
    type: CommitSweepReceiptPayload,
    args: { input: t.arg({ type: CommitSweepReceiptInput, required: true, description: 'The receipt to commit.' }) },
    errors: { types: [InputValidationError, NotFoundError, InvalidStateError], directResult: true, union: resultUnion('CommitSweepReceiptResult') },
    resolve: async (_root, { input }, ctx) => resolve.commitSweepReceipt(await loadNode(SweepReceipt, input.id, ctx), ctx),
  }),
}));
