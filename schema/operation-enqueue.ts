/**
 * How write-back work comes to exist without a lease (issue 39):
 * `enqueueOperation` records one intent by its idempotency key, due now or at
 * `notBefore`; `enqueueOperations` records up to {@link MAX_ENQUEUE_BATCH} in
 * one transaction. Workers take them through `dueOperations` and
 * `acquireOperationLease`, as they take a released operation.
 */
import { InputValidationError } from '@pothos/plugin-validation';
import { z } from 'zod';
import { ForbiddenError, IdempotencyConflictError, InvalidInputError } from '../resolvers/errors.js';
import * as resolve from '../resolvers/operations.js';
import { MAX_ENQUEUE_BATCH, type EnqueueOperationResult } from '../resolvers/operations.js';
import { builder, mutation } from './builder.js';
import { BULK_ROWS, enqueueBatchComplexity, enqueueBatchRows } from './complexity.js';
import { enumValues } from './enums.js';
import { directResult } from './errors.js';
import { ConnectorOperation } from './operation.js';
import { operationWriteFields, sendTimeoutField } from './operation-writes.js';

const EnqueueOutcome = builder.enumType('EnqueueOutcome', {
  description: 'What an enqueue did with its idempotency key.',
  values: enumValues(['created', 'replayed'] as const, {
    created: 'The operation is new: recorded now, with no lease, due at `notBefore` (or now).',
    replayed:
      'The key already held this same write: nothing was written. After an earlier enqueue the operation is exactly as that enqueue answered it (read it to see where it is now); after a claim of the key, as it is now.',
  }),
});

const EnqueueOperationInput = builder.inputType('EnqueueOperationInput', {
  description:
    'A write-back intent: the idempotency key and the write it stands for, recorded with no lease for a worker to take. The caller is always the viewer. The same key with the same fields again is a replay; with any other field (`notBefore` included) an IdempotencyConflictError.',
  fields: (t) => ({
    ...operationWriteFields(t),
    sendTimeoutMs: sendTimeoutField(t, 'for every send of this operation unless a mark names another; default: 30 s'),
    notBefore: t.field({
      type: 'DateTime',
      required: false,
      description: 'When the operation may first be sent. Omitted, or an instant already past: due now.',
    }),
  }),
});

const EnqueueOperationPayload = builder.objectRef<EnqueueOperationResult>('EnqueueOperationPayload').implement({
  description: 'What an enqueue found or did.',
  fields: (t) => ({
    outcome: t.expose('outcome', { type: EnqueueOutcome, description: 'Whether this call recorded the operation, or its key already held the same write.' }),
    operation: t.field({
      type: ConnectorOperation,
      description: 'The operation as the first enqueue of its key answered it (ATTEMPTED, no lease, due at `nextAttemptAt`), field for field on every replay.',
      resolve: (r) => r.operation,
    }),
  }),
});

const EnqueueOperationsInput = builder.inputType('EnqueueOperationsInput', {
  description: `Up to ${MAX_ENQUEUE_BATCH} write-back intents, recorded in one transaction.`,
  fields: (t) => ({
    operations: t.field({
      type: [EnqueueOperationInput],
      description: `The intents (1 to ${MAX_ENQUEUE_BATCH}, each idempotency key once); \`results\` answers them in this order.`,
      validate: z
        .array(z.unknown())
        .min(1, 'must name at least one operation')
        .max(MAX_ENQUEUE_BATCH, `at most ${MAX_ENQUEUE_BATCH} operations: send more in further batches`),
    }),
  }),
});

const EnqueueOperationsPayload = builder.objectRef<resolve.EnqueueOperationsPayload>('EnqueueOperationsPayload').implement({
  description: 'What a batch enqueue did: one result per item, in input order, all written in one transaction.',
  fields: (t) => ({
    results: t.field({
      type: [EnqueueOperationPayload],
      // Each item is its payload or the conflict that left it unwritten (the other items were written).
      itemErrors: {
        types: [IdempotencyConflictError],
        directResult: true,
        union: {
          name: 'EnqueueOperationsItemResult',
          description: 'One item of `enqueueOperations`: its payload, or the IdempotencyConflictError that left it unwritten (the other items were written).',
        },
      },
      complexity: { field: 1, multiplier: MAX_ENQUEUE_BATCH },
      description: '`results[i]` answers `operations[i]`: CREATED, REPLAYED, or an IdempotencyConflictError.',
      // A conflict is returned as its error: itemErrors turns it into its union member.
      resolve: (r) => r.results as EnqueueOperationResult[],
    }),
    created: t.exposeInt('created', { description: 'How many items were recorded now.' }),
    replayed: t.exposeInt('replayed', { description: 'How many items’ keys already held the same write (nothing written for them).' }),
    conflicts: t.exposeInt('conflicts', { description: 'How many items were refused as IdempotencyConflictError (nothing written for them).' }),
  }),
});

const ENQUEUE_ERRORS = [InputValidationError, IdempotencyConflictError, InvalidInputError, ForbiddenError];

builder.mutationFields((t) => ({
  enqueueOperation: t.field({
    ...mutation,
    description:
      'Record a write-back intent by its idempotency key, with no lease: ATTEMPTED, due now or at `notBefore`, for a worker to take (`dueOperations`, `acquireOperationLease`). A device enqueues for itself; a service for any owner. The change is published at once, so a subscribed worker starts within a second.',
    type: EnqueueOperationPayload,
    args: { input: t.arg({ type: EnqueueOperationInput, required: true, description: 'The idempotency key, the write it stands for, and when it may first be sent.' }) },
    errors: directResult('EnqueueOperationResult', ENQUEUE_ERRORS),
    resolve: (_root, { input }, ctx) => resolve.enqueueOperation(input, ctx),
  }),
  enqueueOperations: t.field({
    ...mutation,
    // Priced by its items (rows it writes), which also count toward MAX_BULK_ROWS_PER_REQUEST.
    complexity: enqueueBatchComplexity,
    extensions: { [BULK_ROWS]: enqueueBatchRows },
    description: `\`enqueueOperation\` for up to ${MAX_ENQUEUE_BATCH} intents in one transaction, one result per item. A conflict is that item's result; input refused for any item (validation, an owner you may not act for, a key named twice) refuses the whole batch, nothing written.`,
    type: EnqueueOperationsPayload,
    args: { input: t.arg({ type: EnqueueOperationsInput, required: true, description: 'The intents.' }) },
    errors: directResult('EnqueueOperationsResult', [InputValidationError, InvalidInputError, ForbiddenError]),
    resolve: (_root, { input }, ctx) => resolve.enqueueOperations(input, ctx),
  }),
}));
