/**
 * Operator actions on `ConnectorOperation`s (SPEC §3.3): retry, requeue and
 * cancel one operation (a CAS on its `version` that fences out any lease
 * holder), and the same on every operation an `OperationFilter` matches, up
 * to a cap, all or nothing.
 */
import { InputValidationError } from '@pothos/plugin-validation';
import { z } from 'zod';
import { ForbiddenError, InvalidInputError, InvalidStateError, NotFoundError, StaleVersionError } from '../resolvers/errors.js';
import * as resolve from '../resolvers/operations.js';
import { loadNode } from './node-ids.js';
import { BULK_ACTION_LIST_ROWS, BULK_ROWS, bulkActionComplexity, bulkActionRows } from './complexity.js';
import { builder, mutation, type Types } from './builder.js';
import { directResult } from './errors.js';
import { textInput, versionInput } from './inputs.js';
import { ConnectorOperation, OperationFilter, OperationPayload } from './operation.js';

/** A bulk operator action: priced by the rows it may change (its cap), which also count toward MAX_BULK_ROWS_PER_REQUEST. */
const bulkAction = { ...mutation, complexity: bulkActionComplexity, extensions: { [BULK_ROWS]: bulkActionRows } } as const;

const actionFields = (t: PothosSchemaTypes.InputFieldBuilder<Types, 'InputObject'>) => ({
  id: t.globalID({ description: 'The operation.' }),
  version: t.int({ validate: versionInput, description: 'The operation’s `version` as you read it: the action applies only if nobody changed the lease since.' }),
});
const RetryOperationInput = builder.inputType('RetryOperationInput', { description: 'Retry a dead operation.', fields: (t) => actionFields(t) });
const RequeueOperationInput = builder.inputType('RequeueOperationInput', { description: 'Make a live operation due now.', fields: (t) => actionFields(t) });
const CancelOperationInput = builder.inputType('CancelOperationInput', {
  description: 'Give a live operation up.',
  fields: (t) => ({
    ...actionFields(t),
    reason: t.string({ validate: textInput, description: 'Why; recorded in the history and as `lastError` (“cancelled: …”).' }),
  }),
});
const bulkFields = (t: PothosSchemaTypes.InputFieldBuilder<Types, 'InputObject'>) => ({
  filter: t.field({ type: OperationFilter, required: true, description: 'Which operations; at least one condition (an empty filter is refused, never “all”).' }),
  cap: t.int({
    required: false,
    validate: z.number().int().min(1).max(1_000).optional().nullable(),
    description: 'At most this many, newest first (1 to 1 000, default 1 000); `more` says whether others matched.',
  }),
});
const RetryOperationsInput = builder.inputType('RetryOperationsInput', { description: 'Retry every matching DEAD operation.', fields: (t) => bulkFields(t) });
const RequeueOperationsInput = builder.inputType('RequeueOperationsInput', {
  description: 'Make every matching live operation due now, except those already due with no live lease (nothing to do), so running it again moves on to the rest.',
  fields: (t) => bulkFields(t),
});
const CancelOperationsInput = builder.inputType('CancelOperationsInput', {
  description: 'Give every matching live operation up.',
  fields: (t) => ({ ...bulkFields(t), reason: t.string({ validate: textInput, description: 'Why; recorded on each.' }) }),
});
const BulkOperationActionPayload = builder.objectRef<resolve.BulkActionPayload>('BulkOperationActionPayload').implement({
  description: 'What a bulk operator action changed: all of it in one transaction, or nothing.',
  fields: (t) => ({
    changed: t.exposeInt('changed', { description: 'How many operations changed.' }),
    more: t.exposeBoolean('more', {
      description: 'True when more operations matched than the cap: run it again, with the same input, for the rest (what this call changed no longer matches).',
    }),
    operations: t.field({
      type: [ConnectorOperation],
      complexity: { field: 1, multiplier: BULK_ACTION_LIST_ROWS },
      description: 'The changed operations as they are now, newest first.',
      resolve: (r) => r.operations,
    }),
  }),
});
const BULK_ERRORS = [InputValidationError, InvalidInputError, ForbiddenError];
const ACTION_ERRORS = [InputValidationError, InvalidInputError, NotFoundError, StaleVersionError, InvalidStateError, ForbiddenError];

builder.mutationFields((t) => ({
  retryOperation: t.field({
    ...mutation,
    description:
      'Operators (a service, or the owner): retry a DEAD operation with a new attempt budget, as ATTEMPTED, or RECONCILE_ONLY when a provider request may have been sent (never a blind resend). A CAS on `version` that advances it and clears the lease, so a holder is fenced out.',
    type: OperationPayload,
    args: { input: t.arg({ type: RetryOperationInput, required: true, description: 'The operation and the `version` you read.' }) },
    errors: directResult('RetryOperationResult', ACTION_ERRORS),
    resolve: async (_root, { input }, ctx) => resolve.operatorAction('retry', await loadNode(ConnectorOperation, input.id, ctx), input, ctx),
  }),
  cancelOperation: t.field({
    ...mutation,
    description: 'Operators (a service, or the owner): give a live operation up (DEAD), with the reason. A CAS on `version` that fences out any lease holder.',
    type: OperationPayload,
    args: { input: t.arg({ type: CancelOperationInput, required: true, description: 'The operation, the `version` you read, and why.' }) },
    errors: directResult('CancelOperationResult', ACTION_ERRORS),
    resolve: async (_root, { input }, ctx) => resolve.operatorAction('cancel', await loadNode(ConnectorOperation, input.id, ctx), input, ctx),
  }),
  requeueOperation: t.field({
    ...mutation,
    description: 'Operators (a service, or the owner): make a live operation due now, deferral cleared. A CAS on `version` that fences out any lease holder.',
    type: OperationPayload,
    args: { input: t.arg({ type: RequeueOperationInput, required: true, description: 'The operation and the `version` you read.' }) },
    errors: directResult('RequeueOperationResult', ACTION_ERRORS),
    resolve: async (_root, { input }, ctx) => resolve.operatorAction('requeue', await loadNode(ConnectorOperation, input.id, ctx), input, ctx),
  }),
  retryOperations: t.field({
    ...bulkAction,
    description: 'Operators: `retryOperation` on every matching DEAD operation you may act on (a service: all; a user: their own), at most `cap`, all or nothing.',
    type: BulkOperationActionPayload,
    args: { input: t.arg({ type: RetryOperationsInput, required: true, description: 'Which operations (a non-empty filter) and at most how many.' }) },
    errors: directResult('RetryOperationsResult', BULK_ERRORS),
    resolve: (_root, { input }, ctx) => resolve.bulkOperatorAction('retry', input, ctx),
  }),
  cancelOperations: t.field({
    ...bulkAction,
    description: 'Operators: `cancelOperation` on every matching live operation you may act on, at most `cap`, all or nothing.',
    type: BulkOperationActionPayload,
    args: { input: t.arg({ type: CancelOperationsInput, required: true, description: 'Which operations (a non-empty filter), at most how many, and why.' }) },
    errors: directResult('CancelOperationsResult', BULK_ERRORS),
    resolve: (_root, { input }, ctx) => resolve.bulkOperatorAction('cancel', input, ctx),
  }),
  requeueOperations: t.field({
    ...bulkAction,
    description: 'Operators: `requeueOperation` on every matching live operation you may act on, at most `cap`, all or nothing.',
    type: BulkOperationActionPayload,
    args: { input: t.arg({ type: RequeueOperationsInput, required: true, description: 'Which operations (a non-empty filter) and at most how many.' }) },
    errors: directResult('RequeueOperationsResult', BULK_ERRORS),
    resolve: (_root, { input }, ctx) => resolve.bulkOperatorAction('requeue', input, ctx),
  }),
}));
