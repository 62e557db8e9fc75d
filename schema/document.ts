/**
 * `document` / `documents`: a document's connector state (operations, watch,
 * trim, `hasConnectorWork`). Every per-document lookup goes through a
 * per-request DataLoader, so N documents cost one statement per table, not N.
 */
import { InputValidationError } from '@pothos/plugin-validation';
import { z } from 'zod';
import { DocumentSweepUnfinishedOperationError, ForbiddenError } from '../resolvers/errors.js';
import { documentLoaders, documentOperations, documentState, hasConnectorWork, sweepDocument } from '../resolvers/documents.js';
import { builder } from './builder.js';
import { resultUnion } from './errors.js';
import { listComplexity } from './complexity.js';
import { EntityTrim } from './entity-trim.js';
import { ObservationRecord, ObservationRepair } from './observation.js';
import { SweepCandidate } from './sweep.js';
import { documentIDInput } from './inputs.js';
import { ConnectorOperation } from './operation.js';
import { RESOLVES_NODES } from './resolved-nodes.js';
import { ProjectionWatch } from './watch.js';

/** Most documents one `documents` call may name. */
export const MAX_DOCUMENTS = 100;

const DocumentConnectorState = builder.objectRef<{ documentID: string }>('DocumentConnectorState').implement({
  description: 'What the connector store holds about one local document, as far as the viewer may see.',
  fields: (t) => ({
    documentID: t.exposeString('documentID', { description: 'The local document asked about.' }),
    operations: t.field({
      type: [ConnectorOperation],
      description: 'Write-back operations that produced or updated the document, newest first.',
      resolve: (doc, _args, ctx, info) => documentOperations(doc.documentID, ctx, info),
      extensions: { [RESOLVES_NODES]: true },
    }),
    watch: t.field({
      type: ProjectionWatch,
      nullable: true,
      description: 'The newest watch of the document the viewer may see; null when none.',
      resolve: (doc, _args, ctx) => documentLoaders(ctx).watch.load(doc.documentID),
      extensions: { [RESOLVES_NODES]: true },
    }),
    entityTrim: t.field({
      type: EntityTrim,
      nullable: true,
      description: 'What the document’s last write trimmed, if a record exists and is visible.',
      resolve: (doc, _args, ctx) => documentLoaders(ctx).trim.load(doc.documentID),
    }),
    sweepCandidates: t.field({
      type: [SweepCandidate],
      description: 'Deletion candidates naming the document (of any receipt the viewer may see).',
      resolve: (doc, _args, ctx) => documentLoaders(ctx).candidates.load(doc.documentID),
    }),
    observationRecords: t.field({
      type: [ObservationRecord],
      description: 'The document’s observation records the viewer may see (their own; a service every signer’s), by HLC.',
      resolve: (doc, _args, ctx) => documentLoaders(ctx).observationRecords.load(doc.documentID),
    }),
    repair: t.field({
      type: ObservationRepair,
      nullable: true,
      description: 'The document’s repair obligation, if any and visible.',
      resolve: (doc, _args, ctx) => documentLoaders(ctx).repair.load(doc.documentID),
    }),
    hasConnectorWork: t.boolean({
      description: 'True while a watch, a sweep candidate, a trim record or an unfinished operation names the document.',
      resolve: (doc, _args, ctx) => hasConnectorWork(doc.documentID, ctx),
    }),
  }),
});

builder.queryFields((t) => ({
  document: t.field({
    type: DocumentConnectorState,
    description: 'A document’s connector state. A document the store knows nothing about has empty state.',
    authScopes: { authenticated: true },
    args: { documentID: t.arg.string({ required: true, validate: documentIDInput, description: 'The local document id (at most 512 characters).' }) },
    resolve: (_root, args) => documentState(args.documentID),
  }),
  documents: t.field({
    type: [DocumentConnectorState],
    description: `Several documents’ connector state, in the order asked (at most ${MAX_DOCUMENTS}).`,
    complexity: (args) => listComplexity(args.documentIDs),
    authScopes: { authenticated: true },
    args: {
      documentIDs: t.arg.stringList({
        required: true,
        validate: z.array(documentIDInput).max(MAX_DOCUMENTS, `at most ${MAX_DOCUMENTS} documents`),
        description: `Local document ids, at most ${MAX_DOCUMENTS}; the answer has one entry per id, in the same order.`,
      }),
    },
    resolve: (_root, args) => args.documentIDs.map(documentState),
  }),
}));

const SweepDocumentInput = builder.inputType('SweepDocumentInput', {
  description: 'The local document was deleted: delete its connector rows.',
  fields: (t) => ({ documentID: t.string({ validate: documentIDInput, description: 'The deleted local document.' }) }),
});

const DocumentSweepCounts = builder.simpleObject('DocumentSweepCounts', {
  description: 'How many rows of each kind the sweep deleted.',
  fields: (t) => ({
    observationRecords: t.int({ description: 'Of every signer.' }),
    repairs: t.int({ description: 'Repair obligations (0 or 1).' }),
    trims: t.int({ description: 'Trim records (0 or 1).' }),
    watches: t.int({ description: 'Watches, of every owner.' }),
    sweepCandidates: t.int({ description: 'Sweep candidates, of every receipt.' }),
    operations: t.int({ description: 'Finished (COMMITTED or DEAD) operations only.' }),
  }),
});

const SweepDocumentPayload = builder.simpleObject('SweepDocumentPayload', {
  description: 'What the document sweep deleted.',
  fields: (t) => ({
    documentID: t.string({ description: 'The swept document.' }),
    deleted: t.field({ type: DocumentSweepCounts, description: 'How many rows of each kind were deleted.' }),
  }),
});

builder.mutationField('sweepDocument', (t) =>
  t.field({
    authScopes: { authenticated: true },
    description:
      'Service principals only (a document id names one document across owners; anyone else gets ForbiddenError): delete a deleted document’s observation records, repair, trim, watch, sweep candidates and finished operations, in one transaction (SPEC §3.6). Refused while an unfinished operation names it.',
    type: SweepDocumentPayload,
    args: { input: t.arg({ type: SweepDocumentInput, required: true, description: 'The deleted local document.' }) },
    errors: { types: [InputValidationError, DocumentSweepUnfinishedOperationError, ForbiddenError], directResult: true, union: resultUnion('SweepDocumentResult') },
    resolve: async (_root, { input }, ctx) => ({ documentID: input.documentID, deleted: await sweepDocument(input.documentID, ctx) }),
  }),
);
