/**
 * Every expected failure the API returns: the store's typed errors, and the
 * ones that belong to the API itself. The schema maps these to GraphQL types.
 */
export {
  DocumentSweepUnfinishedOperationError,
  IdempotencyConflictError,
  InvalidInputError,
  InvalidStateError,
  NotFoundError,
  ObservationRecordTypeError,
  StaleLeaseError,
  StaleVersionError,
} from '../src/store/errors.js';

/** A non-service viewer tried to act as another DID. */
export class ForbiddenError extends Error {
  readonly code = 'FORBIDDEN';
  constructor(message: string) {
    super(message);
    this.name = 'ForbiddenError';
  }
}
