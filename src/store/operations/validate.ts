/** Key and fence checks shared by the operation functions. */
import { requireNonEmptyString, requireNonNegativeInteger } from '../validate.js';
import type { OperationFence, OperationKey } from './types.js';

/** An idempotency key: caller DID and operation id, both non-empty (reported by their own names). */
export function requireKey(key: OperationKey): void {
  requireNonEmptyString('callerDID', key?.callerDID);
  requireNonEmptyString('operationID', key?.operationID);
}

/** A fence: a key, the lease epoch and the holder's token. */
export function requireFence(fence: OperationFence): void {
  requireKey(fence.key);
  requireNonNegativeInteger('version', fence.version);
  requireNonEmptyString('leaseToken', fence.leaseToken);
}
