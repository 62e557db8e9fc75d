/**
 * Expected failures as GraphQL types. Every one implements the `Error`
 * interface (`message`, `code`), so clients can match `... on Error` and
 * refine with the specific type. Anything else thrown by a resolver is
 * masked by yoga and logged with the request id.
 */
import { InputValidationError, type StandardSchemaV1 } from '@pothos/plugin-validation';
import {
  DocumentSweepUnfinishedOperationError,
  ForbiddenError,
  IdempotencyConflictError,
  InvalidInputError,
  InvalidStateError,
  NotFoundError,
  ObservationRecordTypeError,
  StaleLeaseError,
  StaleVersionError,
} from '../resolvers/errors.js';
import { builder } from './builder.js';

export const ErrorInterface = builder.interfaceRef<Error & { code?: string }>('Error').implement({
  description: 'An expected failure of a mutation: the write did not happen (or changed nothing).',
  fields: (t) => ({
    message: t.exposeString('message', { description: 'What went wrong, in words for people; match on `code` or the type, not on this text.' }),
    code: t.string({
      description: 'Stable machine-readable code, set by the server (e.g. `NOT_FOUND`, `STALE_LEASE`, `VALIDATION_FAILED`).',
      resolve: (error) => (error instanceof InputValidationError ? 'VALIDATION_FAILED' : (error.code ?? 'ERROR')),
    }),
  }),
});

builder.objectType(NotFoundError, {
  name: 'NotFoundError',
  description: 'The node does not exist, or the viewer may not see it (the two are indistinguishable).',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof NotFoundError,
  fields: () => ({}),
});

builder.objectType(StaleLeaseError, {
  name: 'StaleLeaseError',
  description: 'The version or lease token is no longer current: the lease was taken over, released, finalized or expired.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof StaleLeaseError,
  fields: () => ({}),
});

builder.objectType(StaleVersionError, {
  name: 'StaleVersionError',
  description: 'Another writer changed the row first (compare-and-swap lost).',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof StaleVersionError,
  fields: () => ({}),
});

builder.objectType(InvalidStateError, {
  name: 'InvalidStateError',
  description: 'The row is in a state that does not allow this transition.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof InvalidStateError,
  fields: () => ({}),
});

builder.objectType(IdempotencyConflictError, {
  name: 'IdempotencyConflictError',
  description:
    'The idempotency key (of an operation, a finalize, a sweep receipt or an observation record) was used before with different parameters: nothing was written and the stored row is untouched. Send the original parameters to replay, or a new key for a new write.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof IdempotencyConflictError,
  fields: (t) => ({
    field: t.exposeString('field', { description: 'The first of `fields`.' }),
    fields: t.stringList({ description: 'Every input field whose value differs from what the key was first used with.', resolve: (error) => [...error.fields] }),
  }),
});

builder.objectType(InvalidInputError, {
  name: 'InvalidInputError',
  description: 'The input is well-formed but cannot be acted on.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof InvalidInputError,
  fields: (t) => ({ field: t.exposeString('field', { description: 'The input field at fault.' }) }),
});

builder.objectType(ObservationRecordTypeError, {
  name: 'ObservationRecordTypeError',
  description: 'The store keeps observation records of type `connector.observation` only.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof ObservationRecordTypeError,
  fields: () => ({}),
});

builder.objectType(DocumentSweepUnfinishedOperationError, {
  name: 'DocumentSweepUnfinishedOperationError',
  description:
    'An unfinished (ATTEMPTED or RECONCILE_ONLY) operation names the document: its row is the idempotency record of a provider write, so nothing was deleted. Finish or give up the operation first.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof DocumentSweepUnfinishedOperationError,
  fields: () => ({}),
});

builder.objectType(ForbiddenError, {
  name: 'ForbiddenError',
  description:
    'The viewer may not do this: act as the DID named in the input, act as an operator on another owner’s operation, or replace a row another owner holds.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof ForbiddenError,
  fields: () => ({}),
});

const InputValidationIssue = builder.objectRef<StandardSchemaV1.Issue>('InputValidationIssue').implement({
  description: 'One invalid input field.',
  fields: (t) => ({
    message: t.exposeString('message', { description: 'What is wrong with the value, e.g. "must be at least 1000 ms".' }),
    path: t.stringList({
      description: 'Where the value is, e.g. ["input", "leaseMs"].',
      resolve: (issue) => issue.path?.map((part) => String(typeof part === 'object' ? part.key : part)) ?? [],
    }),
  }),
});

builder.objectType(InputValidationError, {
  name: 'InputValidationError',
  description: 'The input was rejected before anything was read or written.',
  interfaces: [ErrorInterface],
  isTypeOf: (value) => value instanceof InputValidationError,
  fields: (t) => ({
    issues: t.field({ type: [InputValidationIssue], description: 'One entry per problem found, each naming its input field.', resolve: (error) => error.issues }),
  }),
});

/**
 * The errors plugin's union of a mutation's payload and its expected errors,
 * named `<Mutation>Result` (the name is spelled out at each use), described.
 */
export function resultUnion(name: `${string}Result`): { name: string; description: string } {
  const mutation = `${name.charAt(0).toLowerCase()}${name.slice(1, -'Result'.length)}`;
  return { name, description: `What \`${mutation}\` returns: its payload, or one of its expected errors (each implements \`Error\`).` };
}

/** A mutation's `errors` option: its payload or one of `types`, as the union `name` (no payload wrapper). */
export const directResult = (name: `${string}Result`, types: unknown[]) => ({ types: types as never[], directResult: true, union: resultUnion(name) });

/** Every error a fenced operation write can return. */
export const FENCED_WRITE_ERRORS = [InputValidationError, InvalidInputError, NotFoundError, StaleLeaseError, InvalidStateError, IdempotencyConflictError];
