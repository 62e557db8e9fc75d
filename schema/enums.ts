/** Enum helpers and the enums more than one type uses. */
import { OPERATION_DEFER_REASONS } from '../resolvers/operations.js';
import { builder } from './builder.js';

/** GraphQL enum values (UPPER_CASE) for the store's lower-case values. */
export const enumValues = <T extends string>(values: readonly T[]) =>
  Object.fromEntries(values.map((v) => [v.toUpperCase(), { value: v }])) as Record<Uppercase<T>, { value: T }>;

export const DeferReason = builder.enumType('DeferReason', {
  description: 'Why work was pushed out without spending an attempt; each lapses on its own (resumeDeferred).',
  values: enumValues(OPERATION_DEFER_REASONS),
});
