/** `SyncState` (SPEC §3.1) with `syncStates` and the single-shot `updateSyncProgress`. Visible to its owner and services. */
import { InputValidationError } from '@pothos/plugin-validation';
import { z } from 'zod';
import { ForbiddenError, NotFoundError } from '../resolvers/errors.js';
import * as resolve from '../resolvers/sync-states.js';
import type { SyncState as SyncStateShape } from '../resolvers/sync-states.js';
import { loadNode } from './node-ids.js';
import { connectionComplexity } from './complexity.js';
import { builder } from './builder.js';
import { resultUnion } from './errors.js';
import { encodeNodeID } from './global-id.js';
import { jsonInput, nameInput, textInput, versionInput } from './inputs.js';

export const SyncState = builder.loadableNode('SyncState', {
  description: 'One connector’s sync checkpoint for one owner.',
  id: { resolve: (state: SyncStateShape) => state.nodeKey },
  load: resolve.loadSyncStatesByNodeKeys,
  // Caps the IN list of one batch (a `nodes` call or a long page).
  loaderOptions: { maxBatchSize: 500 },
  fields: (t) => ({
    connectorName: t.exposeString('connectorName', { description: 'The connector whose sync this is; with the owner, the row’s key.' }),
    ownerDID: t.expose('ownerDID', { type: 'DID', description: 'Whose data the connector syncs; they (and service principals) may see the row.' }),
    checkpoint: t.expose('checkpoint', {
      type: 'JSON',
      nullable: true,
      description: 'Where the sync stands, as the connector wrote it (any JSON, opaque to the server); null when none.',
    }),
    lastSyncedAt: t.exposeString('lastSyncedAt', { description: 'As the connector wrote it (free text, not a DateTime).' }),
    entityCount: t.exposeInt('entityCount', { description: 'How many entities the sync holds, as the connector wrote it (a count).' }),
    status: t.exposeString('status', { description: 'Owned by the connector’s sync workflow (free text); progress writes never change it.' }),
    error: t.exposeString('error', { nullable: true, description: 'The sync’s last error, as the connector wrote it; null when none.' }),
    recovery: t.expose('recovery', {
      type: 'JSON',
      nullable: true,
      description: 'Recovery data, as the connector wrote it (any JSON, opaque to the server); null when none.',
    }),
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
  description: 'Narrows `syncStates`; fields combine with AND.',
  fields: (t) => ({
    connectorName: t.string({ required: false, description: 'Only this connector’s sync states.' }),
    ownerDID: t.field({ type: 'DID', required: false, description: 'Only this owner’s sync states.' }),
    status: t.string({ required: false, description: 'Only sync states with exactly this status.' }),
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
      args: { filter: t.arg({ type: SyncStateFilter, required: false, description: 'Which sync states; omitted: all visible ones.' }) },
      resolve: (_root, args, ctx) => resolve.listSyncStates(args, ctx),
    },
    {
      name: 'SyncStateConnection',
      description: 'A page of `syncStates`, by connector, then owner.',
    },
    { description: 'One sync state in a page of `syncStates`, with its cursor.' },
  ),
);

const UpdateSyncProgressInput = builder.inputType('UpdateSyncProgressInput', {
  description: 'One compare-and-swap round of sync progress. The status is never written by this path.',
  fields: (t) => ({
    id: t.globalID({ description: 'The sync state.' }),
    expectedVersion: t.int({ validate: versionInput, description: 'The `version` you read: the write applies only if it is still current.' }),
    expectedIncarnation: t.string({
      required: false,
      validate: textInput.optional().nullable(),
      description:
        'The `incarnation` you read, null when it was null (a row written before incarnations existed): a row deleted and recreated since has another, so the write does not apply to it. Omitted: null.',
    }),
    checkpoint: t.field({ type: 'JSON', required: false, validate: jsonInput, description: 'The new checkpoint (any JSON, at most 256 KiB, 64 levels). Omitted: cleared.' }),
    lastSyncedAt: t.string({ validate: nameInput, description: 'When the sync last ran, as you record it (free text, at most 200 characters).' }),
    entityCount: t.int({ validate: z.number().int().min(0), description: 'How many entities the sync holds (0 or more).' }),
    error: t.string({
      required: false,
      validate: z.string().max(10_000).optional().nullable(),
      description: 'The sync’s error (at most 10 000 characters). Omitted: cleared.',
    }),
    recovery: t.field({ type: 'JSON', required: false, validate: jsonInput, description: 'Recovery data (any JSON, at most 256 KiB, 64 levels). Omitted: cleared.' }),
  }),
});

const UpdateSyncProgressPayload = builder.objectRef<{ applied: boolean; syncState: SyncStateShape }>('UpdateSyncProgressPayload').implement({
  description: 'The outcome of one compare-and-swap round.',
  fields: (t) => ({
    applied: t.exposeBoolean('applied', { description: 'False when another writer won: `syncState` is then the current row to rebase on.' }),
    syncState: t.field({ type: SyncState, description: 'The row as it is now: after your write, or as the winner left it.', resolve: (r) => r.syncState }),
  }),
});

const SetSyncStateInput = builder.inputType('SetSyncStateInput', {
  description: 'Create or overwrite a sync state. Version and incarnation are left alone on overwrite.',
  fields: (t) => ({
    connectorName: t.string({ validate: nameInput, description: 'The connector; with the owner, the row’s key.' }),
    ownerDID: t.field({ type: 'DID', required: false, description: 'Default: the viewer; only a service may name another owner.' }),
    checkpoint: t.field({ type: 'JSON', required: false, validate: jsonInput, description: 'The checkpoint (any JSON, at most 256 KiB, 64 levels). Omitted: null (an overwrite clears it).' }),
    lastSyncedAt: t.string({ validate: nameInput, description: 'When the sync last ran, as you record it (free text, at most 200 characters).' }),
    entityCount: t.int({ validate: z.number().int().min(0), description: 'How many entities the sync holds (0 or more).' }),
    status: t.string({ validate: nameInput, description: 'Where the sync workflow stands (free text the workflow owns).' }),
    error: t.string({
      required: false,
      validate: z.string().max(10_000).optional().nullable(),
      description: 'The sync’s error (at most 10 000 characters). Omitted: null (an overwrite clears it).',
    }),
    recovery: t.field({ type: 'JSON', required: false, validate: jsonInput, description: 'Recovery data (any JSON, at most 256 KiB, 64 levels). Omitted: null (an overwrite clears it).' }),
  }),
});

const SyncStatePayload = builder.objectRef<{ syncState: SyncStateShape }>('SyncStatePayload').implement({
  description: 'The sync state after the write.',
  fields: (t) => ({ syncState: t.field({ type: SyncState, description: 'The sync state as it is now.', resolve: (r) => r.syncState }) }),
});

builder.queryField('syncState', (t) =>
  t.field({
    type: SyncState,
    nullable: true,
    description: 'One sync state by its key; `ownerDID` defaults to the viewer. Null when missing or not visible.',
    authScopes: { authenticated: true },
    args: {
      connectorName: t.arg.string({ required: true, validate: nameInput, description: 'The connector.' }),
      ownerDID: t.arg({ type: 'DID', required: false, description: 'Whose sync state. Default: the viewer.' }),
    },
    resolve: (_root, args, ctx) => resolve.syncStateByKey(args, ctx),
  }),
);

const DeleteSyncStateInput = builder.inputType('DeleteSyncStateInput', {
  description: 'Delete a sync state. Setting it again later creates a new one: version 0, a new incarnation and a new id.',
  fields: (t) => ({ id: t.globalID({ description: 'The sync state.' }) }),
});

const DeleteSyncStatePayload = builder.objectRef<{ deletedNodeKey: string }>('DeleteSyncStatePayload').implement({
  description: 'Which sync state was deleted.',
  fields: (t) => ({
    deletedID: t.id({ description: 'The id of the deleted sync state.', resolve: (r) => encodeNodeID('SyncState', r.deletedNodeKey) }),
  }),
});

builder.mutationField('deleteSyncState', (t) =>
  t.field({
    authScopes: { authenticated: true },
    description: 'Delete a sync state you may see (its owner, or a service).',
    type: DeleteSyncStatePayload,
    args: { input: t.arg({ type: DeleteSyncStateInput, required: true, description: 'The sync state to delete.' }) },
    errors: { types: [InputValidationError, NotFoundError], directResult: true, union: resultUnion('DeleteSyncStateResult') },
    resolve: async (_root, { input }, ctx) => resolve.deleteSyncState(await loadNode(SyncState, input.id, ctx), ctx),
  }),
);

builder.mutationField('setSyncState', (t) =>
  t.field({
    authScopes: { authenticated: true },
    description: 'Create a sync state (version 0) or overwrite its fields; progress writes go through updateSyncProgress.',
    type: SyncStatePayload,
    args: { input: t.arg({ type: SetSyncStateInput, required: true, description: 'The sync state’s key and the fields to write.' }) },
    errors: { types: [InputValidationError, ForbiddenError], directResult: true, union: resultUnion('SetSyncStateResult') },
    resolve: (_root, { input }, ctx) => resolve.setSyncState(input, ctx),
  }),
);

builder.mutationField('updateSyncProgress', (t) =>
  t.field({
    authScopes: { authenticated: true },
    description: 'Write sync progress if the row is still at the expected version and incarnation.',
    type: UpdateSyncProgressPayload,
    args: { input: t.arg({ type: UpdateSyncProgressInput, required: true, description: 'The sync state, the version and incarnation you read, and the new progress.' }) },
    errors: { types: [InputValidationError, NotFoundError], directResult: true, union: resultUnion('UpdateSyncProgressResult') },
    resolve: async (_root, { input }, ctx) => {
      const state = await loadNode(SyncState, input.id, ctx);
      return resolve.updateSyncProgress(state, input, ctx);
    },
  }),
);
