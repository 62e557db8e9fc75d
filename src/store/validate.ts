/**
 * The store's input checks, one place for every area: each `require*(field,
 * value)` throws {@link InvalidInputError} naming `field` unless `value` has
 * the shape, and narrows it when it does. Area files (`<area>/validate.ts`)
 * build their key checks from these.
 */
import { InvalidInputError } from './errors.js';

/** A string with at least one character. */
export function requireNonEmptyString(field: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value === '') throw new InvalidInputError(field, 'must be a non-empty string');
}

/** A string, or null / absent. */
export function requireOptionalString(field: string, value: unknown): asserts value is string | null | undefined {
  if (value !== undefined && value !== null && typeof value !== 'string') throw new InvalidInputError(field, 'must be a string or null');
}

/** An array of strings. */
export function requireStringArray(field: string, value: unknown): asserts value is string[] {
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) throw new InvalidInputError(field, 'must be an array of strings');
}

/** true or false. */
export function requireBoolean(field: string, value: unknown): asserts value is boolean {
  if (typeof value !== 'boolean') throw new InvalidInputError(field, 'must be a boolean');
}

/** A safe integer ≥ 0: counts, versions, delays that may be zero. */
export function requireNonNegativeInteger(field: string, value: unknown): asserts value is number {
  if (!Number.isSafeInteger(value) || (value as number) < 0) throw new InvalidInputError(field, 'must be a non-negative integer');
}

/** A safe integer ≥ 1: limits, batch sizes, attempt budgets. */
export function requirePositiveInteger(field: string, value: unknown): asserts value is number {
  if (!Number.isSafeInteger(value) || (value as number) < 1) throw new InvalidInputError(field, 'must be a positive integer');
}

/** A duration in ms: a positive safe integer. */
export function requirePositiveMs(field: string, value: unknown): asserts value is number {
  if (!Number.isSafeInteger(value) || (value as number) <= 0) throw new InvalidInputError(field, 'must be a positive integer number of milliseconds');
}

/** A safe integer ≥ `min`. */
export function requireIntegerAtLeast(field: string, value: unknown, min: number): asserts value is number {
  if (!Number.isSafeInteger(value) || (value as number) < min) throw new InvalidInputError(field, `must be an integer of at least ${min}`);
}

/** A safe integer from `min` to `max`, both included. */
export function requireIntegerInRange(field: string, value: unknown, min: number, max: number): asserts value is number {
  if (!Number.isSafeInteger(value) || (value as number) < min || (value as number) > max) throw new InvalidInputError(field, `must be an integer from ${min} to ${max}`);
}

/** A point in time as integer ms since the epoch. */
export function requireMsEpoch(field: string, value: unknown): asserts value is number {
  if (!Number.isSafeInteger(value)) throw new InvalidInputError(field, 'must be an integer ms-epoch time');
}

/** One of `allowed`. */
export function requireOneOf<T extends string>(field: string, value: unknown, allowed: readonly T[]): asserts value is T {
  if (!(allowed as readonly unknown[]).includes(value)) throw new InvalidInputError(field, `must be one of ${allowed.join(', ')}`);
}
