/**
 * `EntityTrim` (SPEC §3.6): what a write trimmed from a document to fit a
 * model's caps, with `setEntityTrim` and `clearEntityTrim`. Visible to its
 * owner and to service principals; read through `document(id).entityTrim`.
 */
import { InputValidationError } from '@pothos/plugin-validation';
import * as resolve from '../resolvers/entity-trim.js';
import type { EntityTrimRecord } from '../resolvers/entity-trim.js';
import { ForbiddenError } from '../resolvers/errors.js';
import { builder } from './builder.js';
import { resultUnion } from './errors.js';
import { documentIDInput, jsonObjectInput, nameInput } from './inputs.js';

export const EntityTrim = builder.objectRef<EntityTrimRecord>('EntityTrim').implement({
  description: 'The source values trimmed to fit a model’s caps at the document’s last write.',
  fields: (t) => ({
    documentID: t.exposeString('documentID', { description: 'The document the record is for (one record per document).' }),
    ownerDID: t.expose('ownerDID', { type: 'DID', description: 'Whose document it is; they (and service principals) may see the record.' }),
    connectorName: t.exposeString('connectorName', { description: 'The connector whose write trimmed the document, as first recorded.' }),
    trimmedFields: t.expose('trimmedFields', { type: 'JSON', description: 'Field name → the value (or a summary of it) that was cut.' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime', description: 'When `setEntityTrim` last wrote the record (server clock).' }),
  }),
});

const SetEntityTrimInput = builder.inputType('SetEntityTrimInput', {
  description: 'Record what the document’s last write trimmed, replacing any earlier record.',
  fields: (t) => ({
    documentID: t.string({ validate: documentIDInput, description: 'The document the write trimmed.' }),
    ownerDID: t.field({ type: 'DID', required: false, description: 'Default: the viewer; only a service may name another owner.' }),
    connectorName: t.string({ validate: nameInput, description: 'Kept as first recorded when the record is replaced.' }),
    trimmedFields: t.field({ type: 'JSON', validate: jsonObjectInput, description: 'A JSON object: field name → what was trimmed (at most 256 KiB, 64 levels).' }),
  }),
});

const ClearEntityTrimInput = builder.inputType('ClearEntityTrimInput', {
  description: 'The document’s last write trimmed nothing: remove its record.',
  fields: (t) => ({ documentID: t.string({ validate: documentIDInput, description: 'The document whose record to remove.' }) }),
});

const EntityTrimPayload = builder.objectRef<{ entityTrim: EntityTrimRecord }>('EntityTrimPayload').implement({
  description: 'The trim record after the write.',
  fields: (t) => ({ entityTrim: t.field({ type: EntityTrim, description: 'The record as stored.', resolve: (r) => r.entityTrim }) }),
});

const ClearEntityTrimPayload = builder.simpleObject('ClearEntityTrimPayload', {
  description: 'Whether a trim record was removed.',
  fields: (t) => ({ cleared: t.boolean({ description: 'False when the document had no record the viewer may see.' }) }),
});

builder.mutationFields((t) => ({
  setEntityTrim: t.field({
    authScopes: { authenticated: true },
    description: 'Record (replace) what a write trimmed from a document. A user may not replace another owner’s record.',
    type: EntityTrimPayload,
    args: { input: t.arg({ type: SetEntityTrimInput, required: true, description: 'The document and what its last write trimmed.' }) },
    errors: { types: [InputValidationError, ForbiddenError], directResult: true, union: resultUnion('SetEntityTrimResult') },
    // jsonObjectInput has checked trimmedFields is an object.
    resolve: (_root, { input }, ctx) => resolve.setEntityTrim({ ...input, trimmedFields: input.trimmedFields as Record<string, unknown> }, ctx),
  }),
  clearEntityTrim: t.field({
    authScopes: { authenticated: true },
    description: 'Remove a document’s trim record.',
    type: ClearEntityTrimPayload,
    args: { input: t.arg({ type: ClearEntityTrimInput, required: true, description: 'The document whose trim record to remove.' }) },
    errors: { types: [InputValidationError], directResult: true, union: resultUnion('ClearEntityTrimResult') },
    resolve: (_root, { input }, ctx) => resolve.clearEntityTrim(input.documentID, ctx),
  }),
}));
