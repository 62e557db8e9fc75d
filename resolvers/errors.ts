/** Expected failures that belong to the API rather than the store. */

/** A non-service viewer tried to act as another DID. */
export class ForbiddenError extends Error {
  readonly code = 'FORBIDDEN';
  constructor(message: string) {
    super(message);
    this.name = 'ForbiddenError';
  }
}
