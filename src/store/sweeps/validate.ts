/** Key checks shared by the sweep functions. */
import { requireNonEmptyString } from '../validate.js';
import type { SweepCandidateKey, SweepReceiptKey } from './types.js';

const PARTITION_FIELDS = ['ownerDID', 'connectorName', 'partition'] as const;
const RECEIPT_FIELDS = [...PARTITION_FIELDS, 'provenance'] as const;
const CANDIDATE_FIELDS = [...RECEIPT_FIELDS, 'documentID'] as const;

function requireKeyParts(field: string, key: object, names: readonly string[]): void {
  const parts = key as Record<string, unknown>;
  for (const name of names) requireNonEmptyString(`${field}.${name}`, parts[name]);
}

/**
 * Throws unless every part of a receipt key is a non-empty string. Only key
 * fields are looked at, so a whole receipt can be passed as its key.
 */
export function requireReceiptKey(field: string, key: SweepReceiptKey): void {
  requireKeyParts(field, key, RECEIPT_FIELDS);
}

/** As {@link requireReceiptKey}, for a candidate key (a whole candidate may be passed). */
export function requireCandidateKey(field: string, key: SweepCandidateKey): void {
  requireKeyParts(field, key, CANDIDATE_FIELDS);
}
