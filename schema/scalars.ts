/**
 * The `DID` scalar: validated on input (W3C DID syntax, at most 2048
 * characters), so a malformed DID never reaches a query. `DateTime` is
 * graphql-scalars' with its answers as strings; `JSON` is graphql-scalars'
 * (see builder.ts).
 */
import { GraphQLError, GraphQLScalarType } from 'graphql';
import { DateTimeResolver } from 'graphql-scalars';
import { isDID } from '../resolvers/viewer.js';

/**
 * graphql-scalars' `DateTime` (its input parsing, description and RFC 3339
 * rules), answering the ISO 8601 string itself. Its own `serialize` answers
 * a `Date`, which JSON.stringify turns into that string only by calling
 * `toJSON` on it, from its slow path: in one measurement inside the running
 * server (issue 21), ~0.85 µs per value, and a page of 50 operations took 3×
 * as long to stringify as the same answer with strings. The text sent is
 * the same.
 */
export const DateTimeScalar = new GraphQLScalarType<Date, string>({
  ...DateTimeResolver.toConfig(),
  serialize(value) {
    // Our rows hold ms since the epoch: the common case, without graphql-scalars' checks of strings.
    const date = typeof value === 'number' ? new Date(value) : (DateTimeResolver.serialize(value) as Date);
    if (Number.isNaN(date.getTime())) throw new GraphQLError(`DateTime cannot represent an invalid time ${String(value)}`);
    return date.toISOString();
  },
});

/** Parses and validates a DID from client input. */
export function parseDID(value: unknown): string {
  if (!isDID(value)) throw new GraphQLError('DID must look like did:method:identifier (at most 2048 characters)');
  return value;
}
