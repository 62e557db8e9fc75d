/**
 * The `DID` scalar: validated on input (W3C DID syntax, at most 2048
 * characters), so a malformed DID never reaches a query. `DateTime` and
 * `JSON` come from graphql-scalars (see builder.ts).
 */
import { GraphQLError } from 'graphql';
import { isDID } from '../resolvers/viewer.js';

/** Parses and validates a DID from client input. */
export function parseDID(value: unknown): string {
  if (!isDID(value)) throw new GraphQLError('DID must look like did:method:identifier (at most 2048 characters)');
  return value;
}
