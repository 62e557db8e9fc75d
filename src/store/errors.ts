/**
 * Expected failures of the store. Each has a stable `code` that the API maps
 * to a typed GraphQL error; messages never carry lease tokens, send markers
 * or code verifiers.
 */

/** Base of every expected store failure. */
export abstract class StoreError extends Error {
  abstract readonly code: string;
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/**
 * The idempotency key was used before with different parameters (Stripe's
 * rule): nothing is written and the stored row is untouched. `fields` names
 * every input field that differs, `field` the first of them.
 */
export class IdempotencyConflictError extends StoreError {
  readonly code = 'IDEMPOTENCY_CONFLICT';
  readonly fields: readonly string[];
  readonly field: string;
  constructor(fields: string | readonly string[]) {
    const list = typeof fields === 'string' ? [fields] : [...fields];
    super(`idempotency key already used with a different ${list.join(', ')}`);
    this.fields = list;
    this.field = list[0] ?? '';
  }
}

/** The row the caller named does not exist (or is not visible to them). */
export class NotFoundError extends StoreError {
  readonly code = 'NOT_FOUND';
  constructor(readonly entity: string) {
    super(`${entity} not found`);
  }
}

/**
 * A fenced write lost: the version moved on or the lease token is not the
 * current one (the lease was taken over, released or expired).
 */
export class StaleLeaseError extends StoreError {
  readonly code = 'STALE_LEASE';
  constructor(entity = 'operation') {
    super(`${entity} lease is stale: version or lease token no longer current`);
  }
}

/** A CAS write on a watch or sync state lost to a concurrent writer. */
export class StaleVersionError extends StoreError {
  readonly code = 'STALE_VERSION';
  constructor(entity: string) {
    super(`${entity} version is stale: another writer changed it first`);
  }
}

/** The row is in a state that does not allow this transition. */
export class InvalidStateError extends StoreError {
  readonly code = 'INVALID_STATE';
  constructor(message: string) {
    super(message);
  }
}

/** `updateSyncProgress` lost every CAS round it was allowed. */
export class SyncProgressConflictError extends StoreError {
  readonly code = 'SYNC_PROGRESS_CONFLICT';
  constructor(readonly attempts: number) {
    super(`sync progress CAS failed after ${attempts} attempts`);
  }
}

/** An observation record of a type other than `connector.observation`. */
export class ObservationRecordTypeError extends StoreError {
  readonly code = 'OBSERVATION_RECORD_TYPE';
  constructor(readonly type: string) {
    super(`observation record type must be connector.observation, got ${JSON.stringify(type)}`);
  }
}

/** The document sweep refused: an unfinished operation still names the document. */
export class DocumentSweepUnfinishedOperationError extends StoreError {
  readonly code = 'CONNECTOR_SWEEP_UNFINISHED_OPERATION';
  constructor(readonly documentID: string) {
    super(`document ${documentID} has an unfinished connector operation`);
  }
}

/** Input the store cannot act on (negative limits, empty keys, …). */
export class InvalidInputError extends StoreError {
  readonly code = 'INVALID_INPUT';
  constructor(readonly field: string, message: string) {
    super(`${field}: ${message}`);
  }
}

/**
 * Which failures of a store call are retryable database failures (a lost
 * connection, a timeout, no free connection) rather than defects: the
 * database layer's rule, re-exported for the layers above the store.
 */
export { classifyDatabaseError, type DatabaseFailure } from '../db/errors.js';
