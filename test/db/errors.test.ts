import { describe, expect, it } from 'vitest';
import { classifyDatabaseError, isClientDeadline, isItemLevelFailure } from '../../src/db/errors.js';

function driverError(code: string, message = 'driver said no'): Error {
  return Object.assign(new Error(message), { code });
}

describe('classifyDatabaseError', () => {
  it.each([
    ['57014', 'DATABASE_TIMEOUT'],
    ['55P03', 'DATABASE_TIMEOUT'],
    ['57P01', 'DATABASE_UNAVAILABLE'],
    ['ECONNREFUSED', 'DATABASE_UNAVAILABLE'],
    ['40P01', 'OVERLOADED'],
    ['40001', 'OVERLOADED'],
    ['SQLITE_BUSY', 'OVERLOADED'],
  ])('%s is retryable as %s', (code, expected) => {
    expect(classifyDatabaseError(driverError(code))?.code).toBe(expected);
    // Also when wrapped, as Kysely and our own errors do.
    expect(classifyDatabaseError(new Error('wrapped', { cause: driverError(code) }))?.code).toBe(expected);
  });

  it('leaves defects alone: constraint violations, syntax errors, plain errors', () => {
    expect(classifyDatabaseError(driverError('23505'))).toBeNull();
    expect(classifyDatabaseError(driverError('42601'))).toBeNull();
    expect(classifyDatabaseError(new Error('boom'))).toBeNull();
    expect(classifyDatabaseError('not an error')).toBeNull();
  });

  it('never repeats the driver message to the client', () => {
    const failure = classifyDatabaseError(driverError('40P01', 'deadlock detected on kubun_connector_operation_count'));
    expect(failure?.message).not.toMatch(/kubun|deadlock detected/);
  });

  it('pg’s own deadlines: a statement past query_timeout is a timeout, a connection attempt past connectionTimeoutMillis a lost connection (issue 41)', () => {
    const readTimeout = new Error('Query read timeout');
    const connectTimeout = new Error('Connection terminated due to connection timeout', { cause: new Error('Connection terminated unexpectedly') });
    expect(classifyDatabaseError(readTimeout)?.code).toBe('DATABASE_TIMEOUT');
    expect(classifyDatabaseError(connectTimeout)?.code).toBe('DATABASE_UNAVAILABLE');
    for (const error of [readTimeout, connectTimeout, new Error('wrapped', { cause: readTimeout })]) expect(isClientDeadline(error)).toBe(true);
    for (const error of [driverError('57014', 'canceling statement due to statement timeout'), new Error('timeout exceeded when trying to connect'), 'Query read timeout']) {
      expect(isClientDeadline(error)).toBe(false);
    }
  });
});

describe('isItemLevelFailure: whether a failed batch statement runs its items again one by one', () => {
  it.each([
    ['23505', 'a key recorded already'],
    ['40P01', 'a deadlock with another writer'],
    ['40001', 'a serialization failure'],
    ['42601', 'a defect of the batch statement'],
  ])('%s (%s): yes, one item can have caused it', (code) => {
    expect(isItemLevelFailure(driverError(code))).toBe(true);
    expect(isItemLevelFailure(new Error('wrapped', { cause: driverError(code) }))).toBe(true);
  });

  it.each([
    ['57014', 'a statement past its timeout'],
    ['57P01', 'a terminated backend'],
    ['ECONNRESET', 'a lost connection'],
  ])('%s (%s): no, the database failed, and every item gets that failure', (code) => {
    expect(isItemLevelFailure(driverError(code))).toBe(false);
    expect(isItemLevelFailure(new Error('wrapped', { cause: driverError(code) }))).toBe(false);
  });

  it('no connection free, and pg’s own deadline: no', () => {
    expect(isItemLevelFailure(new Error('timeout exceeded when trying to connect'))).toBe(false);
    expect(isItemLevelFailure(new Error('Query read timeout'))).toBe(false);
  });
});
