/**
 * Batch forms of the holder's fenced steps (issue 40 item 3):
 * `startOperationAttempts`, `markOperationsSent`, `recordOperationAttempts`
 * and `finalizeOperations` take up to {@link MAX_FENCED_BATCH} items, each the
 * input of the single step, and answer one typed result per item in input
 * order: the step's payload, or the error that refused that item.
 */
import type { InputObjectRef, ObjectRef } from '@pothos/core';
import { InputValidationError } from '@pothos/plugin-validation';
import { z } from 'zod';
import { IdempotencyConflictError, InvalidInputError, InvalidStateError, NotFoundError, StaleLeaseError } from '../resolvers/errors.js';
import { eachFencedItem, MAX_FENCED_BATCH, refuseRepeatedOperations } from '../resolvers/operation-batches.js';
import * as resolve from '../resolvers/operations.js';
import type { ConnectorOperation as ConnectorOperationShape, FenceArgs } from '../resolvers/operations.js';
import { builder, mutation, type Types } from './builder.js';
import { BULK_ROWS, fencedBatchComplexity, fencedBatchRows } from './complexity.js';
import { directResult } from './errors.js';
import { loadNode, nodeKeyOf, type DecodedNodeID } from './node-ids.js';
import { ConnectorOperation, OperationPayload } from './operation.js';
import { FinalizeOperationInput, FinalizeOperationPayload, MarkOperationSentInput, RecordOperationAttemptInput, StartOperationAttemptInput } from './operation-writes.js';

/** What refuses one item of a fenced batch (the single steps' errors but input validation, which refuses the whole batch). */
const FENCED_ITEM_ERRORS = [InvalidInputError, NotFoundError, StaleLeaseError, InvalidStateError, IdempotencyConflictError];
const FINALIZE_ITEM_ERRORS = [IdempotencyConflictError, NotFoundError, InvalidInputError];

/**
 * How a batch's step finds its operation, as its single step does: by the
 * node key its id names (the step's own statement applies what the viewer
 * may see: no read first), or loaded as the viewer sees it (null when not
 * visible; the node loader reads every item's in one statement).
 */
type BatchStep<I, P> =
  | { byNodeKey: (nodeKey: string, input: I, ctx: Types['Context']) => Promise<P> }
  | { byOperation: (operation: ConnectorOperationShape | null, input: I, ctx: Types['Context']) => Promise<P> };

/** Declares one batch mutation over the single step `single` (its input type, payload and resolver). */
function batch<I extends { id: DecodedNodeID }, P extends object>(
  t: PothosSchemaTypes.MutationFieldBuilder<Types, {}>,
  names: { field: string; type: string; single: string },
  itemType: InputObjectRef<Types, I>,
  payloadType: ObjectRef<Types, P>,
  itemErrors: (typeof FENCED_ITEM_ERRORS)[number][],
  step: BatchStep<I, P>,
) {
  const Input = builder.inputType(`${names.type}Input`, {
    description: `Up to ${MAX_FENCED_BATCH} \`${names.single}\` inputs, each naming another operation.`,
    fields: (f) => ({
      items: f.field({
        type: [itemType],
        description: `The steps (1 to ${MAX_FENCED_BATCH}, each operation once); \`results\` answers them in this order.`,
        validate: z
          .array(z.unknown())
          .min(1, 'must name at least one item')
          .max(MAX_FENCED_BATCH, `at most ${MAX_FENCED_BATCH} items: send more in further batches`),
      }),
    }),
  });
  const Payload = builder.objectRef<{ results: unknown[] }>(`${names.type}Payload`).implement({
    description: `What a batch of \`${names.single}\` did: one result per item, in input order.`,
    fields: (f) => ({
      results: f.field({
        type: [payloadType],
        itemErrors: {
          types: itemErrors,
          directResult: true,
          union: { name: `${names.type}ItemResult`, description: `One item of \`${names.field}\`: what \`${names.single}\` answers for it.` },
        },
        complexity: { field: 1, multiplier: MAX_FENCED_BATCH },
        description: `\`results[i]\` answers \`items[i]\`, exactly as \`${names.single}\` would (a refusal of one item leaves the others as they are).`,
        resolve: (r) => r.results as P[],
      }),
    }),
  });
  return t.field({
    ...mutation,
    complexity: fencedBatchComplexity,
    extensions: { [BULK_ROWS]: fencedBatchRows },
    description: `\`${names.single}\` for up to ${MAX_FENCED_BATCH} operations in one request, one result per item (each item is its own fenced write, with its own request key, replay and change event). Invalid input, or one operation named twice, refuses the whole batch.`,
    type: Payload,
    args: { input: t.arg({ type: Input, required: true, description: 'The items.' }) },
    errors: directResult(`${names.type}Result`, [InputValidationError, InvalidInputError]),
    resolve: async (_root, args, ctx) => {
      // Generic over the input type, Pothos cannot narrow `args`; the arg above is required.
      const { items } = (args as { input: { items: I[] } }).input;
      const nodeKeys = items.map((item) => nodeKeyOf(ConnectorOperation, item.id));
      refuseRepeatedOperations(nodeKeys);
      if ('byNodeKey' in step) return eachFencedItem(nodeKeys, items, ctx, itemErrors, step.byNodeKey);
      // One load for every item: the node loader batches them into one read.
      const operations = await Promise.all(items.map((item) => loadNode(ConnectorOperation, item.id, ctx)));
      return eachFencedItem(operations, items, ctx, itemErrors, step.byOperation);
    },
  });
}

builder.mutationFields((t) => ({
  startOperationAttempts: batch(
    t,
    { field: 'startOperationAttempts', type: 'StartOperationAttempts', single: 'startOperationAttempt' },
    StartOperationAttemptInput,
    OperationPayload,
    FENCED_ITEM_ERRORS,
    { byNodeKey: (nodeKey, input, ctx) => resolve.startOperationAttempt(nodeKey, input as FenceArgs, ctx) },
  ),
  markOperationsSent: batch(
    t,
    { field: 'markOperationsSent', type: 'MarkOperationsSent', single: 'markOperationSent' },
    MarkOperationSentInput,
    OperationPayload,
    FENCED_ITEM_ERRORS,
    { byNodeKey: (nodeKey, input, ctx) => resolve.markOperationSent(nodeKey, input as never, ctx) },
  ),
  recordOperationAttempts: batch(
    t,
    { field: 'recordOperationAttempts', type: 'RecordOperationAttempts', single: 'recordOperationAttempt' },
    RecordOperationAttemptInput,
    OperationPayload,
    FENCED_ITEM_ERRORS,
    { byOperation: (operation, input, ctx) => resolve.recordOperationAttempt(operation, input as never, ctx) },
  ),
  finalizeOperations: batch(
    t,
    { field: 'finalizeOperations', type: 'FinalizeOperations', single: 'finalizeOperation' },
    FinalizeOperationInput,
    FinalizeOperationPayload,
    FINALIZE_ITEM_ERRORS,
    { byOperation: (operation, input, ctx) => resolve.finalizeOperation(operation, input as never, ctx) },
  ),
}));
