/** Input checks shared by the sweep functions. */
import { InvalidInputError } from '../errors.js';
import type { SweepCandidateKey, SweepReceiptKey } from './types.js';

const PARTITION_FIELDS = ['ownerDID', 'connectorName', 'partition'] as const;
const RECEIPT_FIELDS = [...PARTITION_FIELDS, 'provenance'] as const;
const CANDIDATE_FIELDS = [...RECEIPT_FIELDS, 'documentID'] as const;

function assertKeyParts(key: object, names: readonly string[], field: string): void {
  const parts = key as Record<string, unknown>;
  for (const name of names) {
    const value = parts[name];
    if (typeof value !== 'string' || value === '') throw new InvalidInputError(`${field}.${name}`, 'must be a non-empty string');
  }
}

/**
 * Throws unless every part of a receipt key is a non-empty string. Only key
 * fields are looked at, so a whole receipt can be passed as its key.
 */
export function assertReceiptKey(key: SweepReceiptKey, field = 'key'): void {
  assertKeyParts(key, RECEIPT_FIELDS, field);
}

/** As {@link assertReceiptKey}, for a candidate key (a whole candidate may be passed). */
export function assertCandidateKey(key: SweepCandidateKey, field = 'candidateKey'): void {
  assertKeyParts(key, CANDIDATE_FIELDS, field);
}

/** Throws unless `value` is a non-negative safe integer. */
export function assertNonNegativeInteger(value: number, field: string): void {
  if (!Number.isSafeInteger(value) || value < 0) throw new InvalidInputError(field, 'must be a non-negative integer');
}

/** Throws unless `value` is a positive safe integer. */
export function assertPositiveInteger(value: number, field: string): void {
  if (!Number.isSafeInteger(value) || value <= 0) throw new InvalidInputError(field, 'must be a positive integer');
}
