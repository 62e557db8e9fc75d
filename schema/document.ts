/**
 * `document` / `documents`: a document's connector state (operations, watch,
 * trim, `hasConnectorWork`), and `finalizeOperation`. Every per-document
 * lookup goes through a per-request DataLoader, so N documents cost one
 * statement per table, not N.
 */
import { createContextCache } from '@pothos/core';
import { InputValidationError } from '@pothos/plugin-validation';
import DataLoader from 'dataloader';
import { z } from 'zod';
import * as resolve from '../resolvers/documents.js';
import { loadOperationsByDocumentIDs } from '../resolvers/operations.js';
import { canSeeOwned } from '../resolvers/viewer.js';
import { loadWatchesByDocumentIDs } from '../resolvers/watches.js';
import type { EntityTrimRecord } from '../src/store/entity-trim/index.js';
import { NotFoundError } from '../src/store/errors.js';
import type { ProjectionWatch as WatchShape } from '../src/store/projection-watches/index.js';
import { builder } from './builder.js';
import type { GraphQLContext } from './context.js';
import { textInput, versionInput } from './inputs.js';
import { ConnectorOperation } from './operation.js';
import { ProjectionWatch } from './watch.js';

/** Most documents one `documents` call may name. */
export const MAX_DOCUMENTS = 100;

const documentIDInput = z.string().min(1, 'must not be empty').max(512, 'must be at most 512 characters');

/** Per-request loaders keyed by document id; `hasConnectorWork` reuses their cached results. */
const documentLoaders = createContextCache((ctx: GraphQLContext) => {
  const options = { maxBatchSize: 500 };
  return {
    operations: new DataLoader((ids: readonly string[]) => loadOperationsByDocumentIDs(ids, ctx), options),
    watch: new DataLoader((ids: readonly string[]) => loadWatchesByDocumentIDs(ids, ctx), options),
    trim: new DataLoader((ids: readonly string[]) => resolve.loadEntityTrimsByDocumentIDs(ids, ctx), options),
    candidates: new DataLoader((ids: readonly string[]) => resolve.loadSweepCandidatesByDocumentIDs(ids, ctx), options),
  };
});

const EntityTrim = builder.objectRef<EntityTrimRecord>('EntityTrim').implement({
  description: 'The source values trimmed to fit a model’s caps at the document’s last write.',
  fields: (t) => ({
    documentID: t.exposeString('documentID'),
    ownerDID: t.expose('ownerDID', { type: 'DID' }),
    connectorName: t.exposeString('connectorName'),
    trimmedFields: t.expose('trimmedFields', { type: 'JSON' }),
    updatedAt: t.expose('updatedAt', { type: 'DateTime' }),
  }),
});

const DocumentConnectorState = builder.objectRef<{ documentID: string }>('DocumentConnectorState').implement({
  description: 'What the connector store holds about one local document, as far as the viewer may see.',
  fields: (t) => ({
    documentID: t.exposeString('documentID'),
    operations: t.field({
      type: [ConnectorOperation],
      description: 'Write-back operations that produced or updated the document, newest first.',
      resolve: (doc, _args, ctx) => documentLoaders(ctx).operations.load(doc.documentID),
    }),
    watch: t.field({
      type: ProjectionWatch,
      nullable: true,
      resolve: (doc, _args, ctx) => documentLoaders(ctx).watch.load(doc.documentID),
    }),
    entityTrim: t.field({
      type: EntityTrim,
      nullable: true,
      resolve: (doc, _args, ctx) => documentLoaders(ctx).trim.load(doc.documentID),
    }),
    hasConnectorWork: t.boolean({
      description: 'True while a watch, a sweep candidate, a trim record or an unfinished operation names the document.',
      resolve: async (doc, _args, ctx) => {
        const loaders = documentLoaders(ctx);
        const [operations, watch, trim, candidates] = await Promise.all([
          loaders.operations.load(doc.documentID),
          loaders.watch.load(doc.documentID),
          loaders.trim.load(doc.documentID),
          loaders.candidates.load(doc.documentID),
        ]);
        return resolve.hasConnectorWork({ operations, watch, trim, candidates });
      },
    }),
  }),
});

builder.queryFields((t) => ({
  document: t.field({
    type: DocumentConnectorState,
    description: 'A document’s connector state. A document the store knows nothing about has empty state.',
    authScopes: { authenticated: true },
    args: { documentID: t.arg.string({ required: true, validate: documentIDInput }) },
    resolve: (_root, args) => ({ documentID: args.documentID }),
  }),
  documents: t.field({
    type: [DocumentConnectorState],
    description: `Several documents’ connector state, in the order asked (at most ${MAX_DOCUMENTS}).`,
    authScopes: { authenticated: true },
    args: {
      documentIDs: t.arg.stringList({ required: true, validate: z.array(documentIDInput).max(MAX_DOCUMENTS, `at most ${MAX_DOCUMENTS} documents`) }),
    },
    resolve: (_root, args) => args.documentIDs.map((documentID) => ({ documentID })),
  }),
}));

const FinalizeOperationInput = builder.inputType('FinalizeOperationInput', {
  description:
    'Commit the operation and arm the watch of its owner, connector, model and account with `sourceID`, in one transaction (SPEC §3.4).',
  fields: (t) => ({
    id: t.globalID({ for: [ConnectorOperation] }),
    version: t.int({ validate: versionInput }),
    leaseToken: t.string({ validate: textInput }),
    documentID: t.string({ validate: documentIDInput, description: 'The local document the write produced or updated.' }),
    sourceID: t.string({ validate: textInput, description: 'The provider’s id of the written document.' }),
    resultEntity: t.field({ type: 'JSON', required: false }),
    currentWinnerDigest: t.string({ required: false, validate: textInput.optional().nullable() }),
  }),
});

const FinalizeOperationPayload = builder.objectRef<{ finalized: boolean; operationNodeKey: string; watch: WatchShape | null }>('FinalizeOperationPayload').implement({
  fields: (t) => ({
    finalized: t.exposeBoolean('finalized', {
      description: 'False when the version or lease token was stale (or the operation already finalized): nothing was written.',
    }),
    operation: t.field({
      type: ConnectorOperation,
      nullable: true,
      description: 'The operation as it is now.',
      resolve: (r, _args, ctx) => ConnectorOperation.getDataloader(ctx).clear(r.operationNodeKey).load(r.operationNodeKey),
    }),
    watch: t.field({
      type: ProjectionWatch,
      nullable: true,
      description: 'The watch armed by this finalize; null when the viewer is not its owner (or a service).',
      // The watch is the owner's: a caller who is not the owner may finalize but not see it.
      resolve: (r, _args, ctx) => (r.watch !== null && canSeeOwned(ctx.viewer, r.watch) ? r.watch : null),
    }),
  }),
});

builder.mutationField('finalizeOperation', (t) =>
  t.field({
    authScopes: { authenticated: true },
    description: 'Commit an operation you hold the lease of and arm its document’s watch, atomically.',
    type: FinalizeOperationPayload,
    args: { input: t.arg({ type: FinalizeOperationInput, required: true }) },
    errors: { types: [InputValidationError, NotFoundError], directResult: true, union: { name: 'FinalizeOperationResult' } },
    resolve: async (_root, { input }, ctx) => {
      const operation = await ConnectorOperation.getDataloader(ctx).load(input.id.id);
      const result = await resolve.finalizeOperation(operation, input, ctx);
      return { ...result, operationNodeKey: input.id.id };
    },
  }),
);
