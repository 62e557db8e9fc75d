/** `SyncState` (SPEC §3.1) with `syncStates` and the single-shot `updateSyncProgress`. Visible to its owner and services. */
import { InputValidationError } from '@pothos/plugin-validation';
import { z } from 'zod';
import { ForbiddenError, NotFoundError } from '../resolvers/errors.js';
import * as resolve from '../resolvers/sync-states.js';
import type { SyncState as SyncStateShape } from '../resolvers/sync-states.js';
import { loadNode } from './node-ids.js';
import { connectionComplexity } from './complexity.js';
import { builder } from './builder.js';
import { encodeNodeID } from './global-id.js';
import { jsonInput, nameInput, textInput, versionInput } from './inputs.js';

export const SyncState = builder.loadableNode('SyncState', {
  description: 'One connector’s sync checkpoint for one owner.',
  id: { resolve: (state: SyncStateShape) => state.nodeKey },
  load: resolve.loadSyncStatesByNodeKeys,
  // Caps the IN list of one batch (a `nodes` call or a long page).
  loaderOptions: { maxBatchSize: 500 },
  fields: (t) => ({
    connectorName: t.exposeString('connectorName'),
    ownerDID: t.expose('ownerDID', { type: 'DID' }),
    checkpoint: t.expose('checkpoint', { type: 'JSON', nullable: true }),
    lastSyncedAt: t.exposeString('lastSyncedAt', { description: 'As the connector wrote it.' }),
    entityCount: t.exposeInt('entityCount'),
    status: t.exposeString('status', { description: 'Owned by the connector’s sync workflow.' }),
    error: t.exposeString('error', { nullable: true }),
    recovery: t.expose('recovery', { type: 'JSON', nullable: true }),
    progressedAt: t.expose('progressedAt', {
      type: 'DateTime',
      nullable: true,
      description: 'When the store last wrote this state’s progress (its own clock, unlike `lastSyncedAt`, which is the connector’s text).',
    }),
    version: t.exposeInt('version', { description: 'Advances by one on every progress write: send it back as expectedVersion.' }),
    incarnation: t.exposeString('incarnation', {
      nullable: true,
      description: 'Changes when the row is deleted and recreated: send it back as expectedIncarnation.',
    }),
  }),
});

const SyncStateFilter = builder.inputType('SyncStateFilter', {
  fields: (t) => ({
    connectorName: t.string({ required: false }),
    ownerDID: t.field({ type: 'DID', required: false }),
    status: t.string({ required: false }),
    staleForMs: t.int({
      required: false,
      validate: z.number().int().min(1_000).max(365 * 86_400_000).optional().nullable(),
      description:
        'Stale syncs only: no progress written for at least this many ms (see `progressedAt`), or a lease that expired. What a dashboard shows as stuck.',
    }),
  }),
});

builder.queryField('syncStates', (t) =>
  t.connection(
    {
      complexity: connectionComplexity,
      type: SyncState,
      description: 'The viewer’s sync states (a service sees all), by connector then owner.',
      authScopes: { authenticated: true },
      args: { filter: t.arg({ type: SyncStateFilter, required: false }) },
      resolve: (_root, args, ctx) => resolve.listSyncStates(args, ctx),
    },
    {
      name: 'SyncStateConnection',
    },
  ),
);

const UpdateSyncProgressInput = builder.inputType('UpdateSyncProgressInput', {
  description: 'One compare-and-swap round of sync progress. The status is never written by this path.',
  fields: (t) => ({
    id: t.globalID(),
    expectedVersion: t.int({ validate: versionInput }),
    expectedIncarnation: t.string({ validate: textInput }),
    checkpoint: t.field({ type: 'JSON', required: false, validate: jsonInput }),
    lastSyncedAt: t.string({ validate: nameInput }),
    entityCount: t.int({ validate: z.number().int().min(0) }),
    error: t.string({ required: false, validate: z.string().max(10_000).optional().nullable() }),
    recovery: t.field({ type: 'JSON', required: false, validate: jsonInput }),
  }),
});

const UpdateSyncProgressPayload = builder.objectRef<{ applied: boolean; syncState: SyncStateShape }>('UpdateSyncProgressPayload').implement({
  fields: (t) => ({
    applied: t.exposeBoolean('applied', { description: 'False when another writer won: `syncState` is then the current row to rebase on.' }),
    syncState: t.field({ type: SyncState, resolve: (r) => r.syncState }),
  }),
});

const SetSyncStateInput = builder.inputType('SetSyncStateInput', {
  description: 'Create or overwrite a sync state. Version and incarnation are left alone on overwrite.',
  fields: (t) => ({
    connectorName: t.string({ validate: nameInput }),
    ownerDID: t.field({ type: 'DID', required: false, description: 'Default: the viewer; only a service may name another owner.' }),
    checkpoint: t.field({ type: 'JSON', required: false, validate: jsonInput }),
    lastSyncedAt: t.string({ validate: nameInput }),
    entityCount: t.int({ validate: z.number().int().min(0) }),
    status: t.string({ validate: nameInput }),
    error: t.string({ required: false, validate: z.string().max(10_000).optional().nullable() }),
    recovery: t.field({ type: 'JSON', required: false, validate: jsonInput }),
  }),
});

const SyncStatePayload = builder.objectRef<{ syncState: SyncStateShape }>('SyncStatePayload').implement({
  fields: (t) => ({ syncState: t.field({ type: SyncState, resolve: (r) => r.syncState }) }),
});

builder.queryField('syncState', (t) =>
  t.field({
    type: SyncState,
    nullable: true,
    description: 'One sync state by its key; `ownerDID` defaults to the viewer. Null when missing or not visible.',
    authScopes: { authenticated: true },
    args: {
      connectorName: t.arg.string({ required: true, validate: nameInput }),
      ownerDID: t.arg({ type: 'DID', required: false }),
    },
    resolve: (_root, args, ctx) => resolve.syncStateByKey(args, ctx),
  }),
);

const DeleteSyncStateInput = builder.inputType('DeleteSyncStateInput', {
  description: 'Delete a sync state. Setting it again later creates a new one: version 0, a new incarnation and a new id.',
  fields: (t) => ({ id: t.globalID() }),
});

const DeleteSyncStatePayload = builder.objectRef<{ deletedNodeKey: string }>('DeleteSyncStatePayload').implement({
  fields: (t) => ({
    deletedID: t.id({ description: 'The id of the deleted sync state.', resolve: (r) => encodeNodeID('SyncState', r.deletedNodeKey) }),
  }),
});

builder.mutationField('deleteSyncState', (t) =>
  t.field({
    authScopes: { authenticated: true },
    description: 'Delete a sync state you may see (its owner, or a service).',
    type: DeleteSyncStatePayload,
    args: { input: t.arg({ type: DeleteSyncStateInput, required: true }) },
    errors: { types: [InputValidationError, NotFoundError], directResult: true, union: { name: 'DeleteSyncStateResult' } },
    resolve: async (_root, { input }, ctx) => resolve.deleteSyncState(await loadNode(SyncState, input.id, ctx), ctx),
  }),
);

builder.mutationField('setSyncState', (t) =>
  t.field({
    authScopes: { authenticated: true },
    description: 'Create a sync state (version 0) or overwrite its fields; progress writes go through updateSyncProgress.',
    type: SyncStatePayload,
    args: { input: t.arg({ type: SetSyncStateInput, required: true }) },
    errors: { types: [InputValidationError, ForbiddenError], directResult: true, union: { name: 'SetSyncStateResult' } },
    resolve: (_root, { input }, ctx) => resolve.setSyncState(input, ctx),
  }),
);

builder.mutationField('updateSyncProgress', (t) =>
  t.field({
    authScopes: { authenticated: true },
    description: 'Write sync progress if the row is still at the expected version and incarnation.',
    type: UpdateSyncProgressPayload,
    args: { input: t.arg({ type: UpdateSyncProgressInput, required: true }) },
    errors: { types: [InputValidationError, NotFoundError], directResult: true, union: { name: 'UpdateSyncProgressResult' } },
    resolve: async (_root, { input }, ctx) => {
      const state = await loadNode(SyncState, input.id, ctx);
      return resolve.updateSyncProgress(state, input, ctx);
    },
  }),
);
