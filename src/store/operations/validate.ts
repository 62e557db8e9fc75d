/** Input checks shared by the operation functions. */
import { InvalidInputError } from '../errors.js';
import type { OperationFence, OperationKey } from './types.js';

export function requireNonEmpty(field: string, value: unknown): asserts value is string {
  if (typeof value !== 'string' || value === '') throw new InvalidInputError(field, 'must be a non-empty string');
}

/** A duration in ms: a positive safe integer. */
export function requirePositiveMs(field: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw new InvalidInputError(field, 'must be a positive integer number of milliseconds');
  }
}

/** A count or duration that may be zero. */
export function requireNonNegativeInteger(field: string, value: unknown): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new InvalidInputError(field, 'must be a non-negative integer');
  }
}

export function requireKey(key: OperationKey): void {
  requireNonEmpty('callerDID', key?.callerDID);
  requireNonEmpty('operationID', key?.operationID);
}

export function requireFence(fence: OperationFence): void {
  requireKey(fence.key);
  requireNonNegativeInteger('version', fence.version);
  requireNonEmpty('leaseToken', fence.leaseToken);
}
