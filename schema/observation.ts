/**
 * Observation records and repair obligations (SPEC §3.6): `ObservationRecord`
 * and `ObservationRepair` with `observationRecords`, `repairsWrittenSince`,
 * `putObservationRecord`, `upsertObservationRepair` and
 * `deleteObservationRepair`. A document's own records and repair are also on
 * `document(id)`.
 */
import { InputValidationError } from '@pothos/plugin-validation';
import { ForbiddenError, IdempotencyConflictError, ObservationRecordTypeError } from '../resolvers/errors.js';
import * as resolve from '../resolvers/observations.js';
import type { ObservationRecord as RecordShape, ObservationRepair as RepairShape } from '../resolvers/observations.js';
import { connectionComplexity } from './complexity.js';
import { builder, mutation } from './builder.js';
import { resultUnion } from './errors.js';
import { base64Input, documentIDInput, hlcInput, textInput } from './inputs.js';

export const ObservationRecord = builder.objectRef<RecordShape>('ObservationRecord').implement({
  description: 'A signed observation op of a document, as its signer stored it.',
  fields: (t) => ({
    type: t.exposeString('type', { description: 'Always `connector.observation`.' }),
    owner: t.expose('owner', { type: 'DID', description: 'The signer of the op.' }),
    documentID: t.exposeString('id', { description: 'The document the op observes.' }),
    opHash: t.exposeString('opHash', { description: 'Hash of the op, as the signer sent it; with type, signer and document, the record’s key.' }),
    hlc: t.exposeString('hlc', { description: 'Hybrid logical clock stamp of the op.' }),
    opJWT: t.exposeString('opJWT', { description: 'The signed op.' }),
    payload: t.string({
      nullable: true,
      description: 'The op’s payload bytes, standard base64; null when it has none.',
      resolve: (record) => (record.payload === null ? null : Buffer.from(record.payload).toString('base64')),
    }),
  }),
});

export const ObservationRepair = builder.objectRef<RepairShape>('ObservationRepair').implement({
  description: 'A repair obligation for a document: what the provider held as of `fetchHLC`, and the decision taken.',
  fields: (t) => ({
    documentID: t.exposeString('documentID', { description: 'The document the obligation is for (one obligation per document).' }),
    owner: t.expose('owner', { type: 'DID', description: 'Who holds the obligation: its writer, or the owner a service named. They (and services) may see it.' }),
    fetchHLC: t.exposeString('fetchHLC', { description: 'Hybrid logical clock stamp of the provider fetch the obligation rests on, as recorded.' }),
    decisionHLC: t.exposeString('decisionHLC', { description: 'Hybrid logical clock stamp of the decision taken, as recorded.' }),
    present: t.exposeBoolean('present', { description: 'Whether the document is present at the provider as of `fetchHLC`.' }),
    valueDigest: t.exposeString('valueDigest', { nullable: true, description: 'Digest of the document’s value, as the worker recorded it; null when none was given.' }),
    writtenAt: t.expose('writtenAt', { type: 'DateTime', description: 'Set by the server on every upsert: the order of `repairsWrittenSince`.' }),
  }),
});

builder.queryFields((t) => ({
  observationRecords: t.field({
    type: [ObservationRecord],
    description: 'A document’s observation records by HLC (then signer, op hash). A user sees the records they signed; a service every signer’s, or one `owner`’s.',
    authScopes: { authenticated: true },
    args: {
      documentID: t.arg.string({ required: true, validate: documentIDInput, description: 'The local document.' }),
      owner: t.arg({
        type: 'DID',
        required: false,
        description: 'Only records this signer signed. A service may name anyone; a user naming someone else gets none.',
      }),
    },
    resolve: (_root, args, ctx) => resolve.listObservationRecords(args, ctx),
  }),
  repairsWrittenSince: t.connection(
    {
      complexity: connectionComplexity,
      type: ObservationRepair,
      description:
        'Workers’ feed (service principals only): repairs in the order they were written, after `after`. Keep the last endCursor and ask again; a rewritten repair comes round again. Pages forward only.',
      authScopes: { service: true },
      resolve: (_root, args, ctx) => resolve.repairsWrittenSince(args, ctx),
    },
    { name: 'ObservationRepairConnection', description: 'A page of `repairsWrittenSince`, in the order the repairs were written.' },
    { description: 'One repair obligation in a page of `repairsWrittenSince`, with its cursor.' },
  ),
}));

const PutObservationRecordInput = builder.inputType('PutObservationRecordInput', {
  description: 'Store a signed observation op; storing the same (type, owner, document, op hash) again changes nothing.',
  fields: (t) => ({
    type: t.string({ validate: textInput, description: 'Must be `connector.observation`.' }),
    owner: t.field({ type: 'DID', required: false, description: 'The signer. Default: the viewer; only a service may name another.' }),
    documentID: t.string({ validate: documentIDInput, description: 'The document the op observes.' }),
    opHash: t.string({ validate: hlcInput, description: 'Hash of the op (at most 128 characters); part of the record’s key.' }),
    hlc: t.string({ validate: hlcInput, description: 'Hybrid logical clock stamp of the op (at most 128 characters).' }),
    opJWT: t.string({ validate: textInput, description: 'The signed op (stored as given; the server does not verify it).' }),
    payload: t.string({ required: false, validate: base64Input.optional().nullable(), description: 'Payload bytes, standard base64 (at most 512 KiB decoded).' }),
  }),
});

const PutObservationRecordPayload = builder.simpleObject('PutObservationRecordPayload', {
  description: 'Whether the record was stored.',
  fields: (t) => ({ inserted: t.boolean({ description: 'False when the record was already stored (nothing changed).' }) }),
});

const UpsertObservationRepairInput = builder.inputType('UpsertObservationRepairInput', {
  description: 'Write a document’s repair obligation, replacing an earlier one; it moves to the end of `repairsWrittenSince`.',
  fields: (t) => ({
    documentID: t.string({ validate: documentIDInput, description: 'The document the obligation is for.' }),
    owner: t.field({ type: 'DID', required: false, description: 'Default: the viewer; only a service may name another owner.' }),
    fetchHLC: t.string({ validate: hlcInput, description: 'Hybrid logical clock stamp of the provider fetch the obligation rests on.' }),
    decisionHLC: t.string({ validate: hlcInput, description: 'Hybrid logical clock stamp of the decision taken.' }),
    present: t.boolean({ description: 'Whether the document is present at the provider as of `fetchHLC`.' }),
    valueDigest: t.string({ required: false, validate: textInput.optional().nullable(), description: 'Digest of the document’s value, if any.' }),
  }),
});

const ObservationRepairPayload = builder.objectRef<{ repair: RepairShape }>('ObservationRepairPayload').implement({
  description: 'The repair obligation after the write.',
  fields: (t) => ({ repair: t.field({ type: ObservationRepair, description: 'The obligation as stored (`writtenAt` is now).', resolve: (r) => r.repair }) }),
});

const DeleteObservationRepairInput = builder.inputType('DeleteObservationRepairInput', {
  description: 'The repair was carried out: remove the obligation.',
  fields: (t) => ({ documentID: t.string({ validate: documentIDInput, description: 'The document whose obligation to remove.' }) }),
});

const DeleteObservationRepairPayload = builder.simpleObject('DeleteObservationRepairPayload', {
  description: 'Whether an obligation was removed.',
  fields: (t) => ({ deleted: t.boolean({ description: 'False when the document had no obligation the viewer may see.' }) }),
});


builder.mutationFields((t) => ({
  putObservationRecord: t.field({
    ...mutation,
    description:
      'Store a signed observation op (idempotent: the same record again changes nothing). Another record type is an ObservationRecordTypeError; the same key (type, owner, id, opHash) with another hlc, opJWT or payload is an IdempotencyConflictError naming each.',
    type: PutObservationRecordPayload,
    args: { input: t.arg({ type: PutObservationRecordInput, required: true, description: 'The signed op to store.' }) },
    errors: { types: [InputValidationError, ObservationRecordTypeError, IdempotencyConflictError, ForbiddenError], directResult: true, union: resultUnion('PutObservationRecordResult') },
    resolve: (_root, { input }, ctx) =>
      resolve.putObservationRecord({ ...input, payload: input.payload == null ? null : new Uint8Array(Buffer.from(input.payload, 'base64')) }, ctx),
  }),
  upsertObservationRepair: t.field({
    ...mutation,
    description: 'Write a document’s repair obligation. A user may not replace another owner’s.',
    type: ObservationRepairPayload,
    args: { input: t.arg({ type: UpsertObservationRepairInput, required: true, description: 'The document’s repair obligation.' }) },
    errors: { types: [InputValidationError, ForbiddenError], directResult: true, union: resultUnion('UpsertObservationRepairResult') },
    resolve: (_root, { input }, ctx) => resolve.upsertObservationRepair(input, ctx),
  }),
  deleteObservationRepair: t.field({
    ...mutation,
    description: 'Remove a document’s repair obligation.',
    type: DeleteObservationRepairPayload,
    args: { input: t.arg({ type: DeleteObservationRepairInput, required: true, description: 'The document whose repair obligation to remove.' }) },
    errors: { types: [InputValidationError], directResult: true, union: resultUnion('DeleteObservationRepairResult') },
    resolve: (_root, { input }, ctx) => resolve.deleteObservationRepair(input.documentID, ctx),
  }),
}));
