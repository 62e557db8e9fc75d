/** Enum helpers and the enums more than one type uses. */
import { OPERATION_DEFER_REASONS } from '../resolvers/operations.js';
import { builder } from './builder.js';

/** GraphQL enum values (UPPER_CASE) for the store's lower-case values, each with its description (one per value, so none is left undescribed). */
export const enumValues = <T extends string>(values: readonly T[], descriptions: Record<T, string>) =>
  Object.fromEntries(values.map((v) => [v.toUpperCase(), { value: v, description: descriptions[v] }])) as Record<Uppercase<T>, { value: T; description: string }>;

export const DeferReason = builder.enumType('DeferReason', {
  description: 'Why work was pushed out without spending an attempt; each reason is lifted by its own `resumeDeferred`.',
  values: enumValues(OPERATION_DEFER_REASONS, {
    offline: 'The device was offline, so nothing reached the provider. `resumeDeferred(OFFLINE)` makes such work due when it reconnects.',
    auth: 'The owner must (re)authorize the connector. `resumeDeferred(AUTH)` makes that owner’s connector’s work due once they have.',
  }),
});
