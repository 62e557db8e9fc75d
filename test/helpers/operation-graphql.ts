/**
 * Operations through GraphQL, for the operation API tests and any test whose
 * set-up must go through the API (subscriptions, e2e): every operation field,
 * the claim, finalize and fenced-write mutations with all their result types,
 * the one GraphQL claim input, and small wrappers that fail loudly on an
 * unexpected result. Set-up through the store instead: graphql-seed.ts.
 */
import { expect } from 'vitest';
import type { GraphQLSuite, Principal } from './graphql.js';
import { LEASE_MS } from './operation-claim-fixtures.js';

/** Every readable field of `ConnectorOperation`. */
export const OPERATION_FIELDS = `
  id operationID callerDID ownerDID connectorName model op accountKey target sourceID
  deterministicEventID payloadHash reissueIntent providerEtag documentID resultEntity state
  attempts nextAttemptAt deferReason sendMarkerSet lastKind lastHTTPStatus version
  leaseExpiresAt createdAt updatedAt`;

/** Selections of a result union's errors; `withField` lists the error types (of the union) that have a `field`. */
const errorFields = (...withField: ('IdempotencyConflictError' | 'InvalidInputError')[]) => `
  __typename
  ... on Error { code message }
  ${withField.map((type) => `... on ${type} { field${type === 'IdempotencyConflictError' ? ' fields' : ''} }`).join('\n  ')}
  ... on InputValidationError { issues { path message } }`;

/** The GraphQL shape of an operation. */
export interface GqlOperation {
  id: string;
  operationID: string;
  callerDID: string;
  ownerDID: string;
  connectorName: string;
  model: string;
  op: string;
  accountKey: string;
  target: string;
  sourceID: string | null;
  deterministicEventID: string;
  payloadHash: string;
  reissueIntent: string;
  providerEtag: string | null;
  documentID: string | null;
  resultEntity: unknown;
  state: string;
  attempts: number;
  nextAttemptAt: string | null;
  deferReason: string | null;
  sendMarkerSet: boolean;
  lastKind: string | null;
  lastHTTPStatus: number | null;
  version: number;
  leaseExpiresAt: string | null;
  createdAt: string;
  updatedAt: string;
}

/** The GraphQL shape of a lease. */
export interface GqlLease {
  token: string;
  version: number;
  expiresAt: string;
}

/** A mutation result: a payload or a typed error (fields per `__typename`). */
export type GqlResult = Record<string, any> & { __typename: string };

/** `claimOperation` with every result type. */
export const CLAIM = `mutation Claim($input: ClaimOperationInput!) {
  claimOperation(input: $input) {
    ${errorFields('IdempotencyConflictError', 'InvalidInputError')}
    ... on ClaimOperationPayload {
      outcome
      operation { ${OPERATION_FIELDS} }
      lease { token version expiresAt }
      replay { documentID resultEntity }
      replayed
    }
  }
}`;

/** A claim input with defaults (`op` CREATE, {@link LEASE_MS} lease); `overrides` replace fields, `undefined` removes one. */
export function claimInput(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const input: Record<string, unknown> = {
    operationID: 'op-1',
    connectorName: 'google',
    model: 'contact',
    op: 'CREATE',
    accountKey: 'account-1',
    target: 'contacts',
    deterministicEventID: 'event-1',
    payloadHash: 'hash-1',
    reissueIntent: 'none',
    leaseMs: LEASE_MS,
    ...overrides,
  };
  for (const [key, value] of Object.entries(input)) if (value === undefined) delete input[key];
  return input;
}

/** Runs `claimOperation` and returns its result (fails the test on a top-level error). */
export async function claim(suite: GraphQLSuite, overrides: Record<string, unknown> = {}, as: Principal = 'alice'): Promise<GqlResult> {
  const res = await suite.gql(CLAIM, { input: claimInput(overrides) }, { as });
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return res.data.claimOperation as GqlResult;
}

/** A fresh CLAIMED operation with its lease. */
export async function claimed(
  suite: GraphQLSuite,
  overrides: Record<string, unknown> = {},
  as: Principal = 'alice',
): Promise<{ operation: GqlOperation; lease: GqlLease; fence: { id: string; version: number; leaseToken: string } }> {
  const result = await claim(suite, overrides, as);
  expect(result.__typename, JSON.stringify(result)).toBe('ClaimOperationPayload');
  expect(result.outcome).toBe('CLAIMED');
  const { operation, lease } = result as unknown as { operation: GqlOperation; lease: GqlLease };
  return { operation, lease, fence: { id: operation.id, version: lease.version, leaseToken: lease.token } };
}

/** The input type of each operation mutation. */
const INPUT_TYPES = {
  acquireOperationLease: 'AcquireOperationLeaseInput',
  renewOperationLease: 'RenewOperationLeaseInput',
  releaseOperationLease: 'ReleaseOperationLeaseInput',
  startOperationAttempt: 'StartOperationAttemptInput',
  markOperationSent: 'MarkOperationSentInput',
  recordOperationAttempt: 'RecordOperationAttemptInput',
  recordReconcileResult: 'RecordReconcileResultInput',
} as const;

export type OperationMutation = keyof typeof INPUT_TYPES;

/** The document of one lease or attempt mutation: every operation field, the lease, every error. */
export function operationMutationDocument(name: OperationMutation): string {
  return `mutation M($input: ${INPUT_TYPES[name]}!) {
    ${name}(input: $input) {
      ${errorFields('IdempotencyConflictError', 'InvalidInputError')}
      ... on OperationPayload { replayed operation { ${OPERATION_FIELDS} } lease { token version expiresAt } }
    }
  }`;
}

/** Runs one lease or attempt mutation and returns its result (payload or typed error). */
export async function mutate(suite: GraphQLSuite, name: OperationMutation, input: Record<string, unknown>, as: Principal = 'alice'): Promise<GqlResult> {
  const res = await suite.gql(operationMutationDocument(name), { input }, { as });
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return res.data[name] as GqlResult;
}

/** Like {@link mutate}, asserting an `OperationPayload`; returns it. */
export async function mutateOK(
  suite: GraphQLSuite,
  name: OperationMutation,
  input: Record<string, unknown>,
  as: Principal = 'alice',
): Promise<{ operation: GqlOperation; lease: GqlLease | null }> {
  const result = await mutate(suite, name, input, as);
  expect(result.__typename, JSON.stringify(result)).toBe('OperationPayload');
  return result as unknown as { operation: GqlOperation; lease: GqlLease | null };
}

/** `finalizeOperation` with the whole operation and the armed watch's id. */
export const FINALIZE = `mutation F($input: FinalizeOperationInput!) {
  finalizeOperation(input: $input) {
    ${errorFields()}
    ... on FinalizeOperationPayload { finalized operation { ${OPERATION_FIELDS} } watch { id } }
  }
}`;

/** Finalizes with `fence` (documentID `doc-1`, sourceID `src-1` by default) and asserts it committed. */
export async function finalize(
  suite: GraphQLSuite,
  fence: { id: string; version: number; leaseToken: string },
  extra: Record<string, unknown> = {},
  as: Principal = 'alice',
): Promise<GqlOperation> {
  const res = await suite.gql(FINALIZE, { input: { ...fence, documentID: 'doc-1', sourceID: 'src-1', ...extra } }, { as });
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  expect(res.data.finalizeOperation).toMatchObject({ __typename: 'FinalizeOperationPayload', finalized: true });
  return res.data.finalizeOperation.operation as GqlOperation;
}

/** `resumeDeferred` with its counts. */
export const RESUME = `mutation R($input: ResumeDeferredInput!) {
  resumeDeferred(input: $input) { ${errorFields('InvalidInputError')} ... on ResumeDeferredPayload { operations watches } }
}`;

/** The operation behind `id` as `as` sees it through `node` (null when not visible). */
export async function readOperation(suite: GraphQLSuite, id: string, as: Principal = 'worker'): Promise<GqlOperation | null> {
  const res = await suite.gql(`query N($id: ID!) { node(id: $id) { ... on ConnectorOperation { ${OPERATION_FIELDS} } } }`, { id }, { as });
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return res.data.node as GqlOperation | null;
}

/** `operations { totalCount }` as `as` (the worker sees every row). */
export async function operationCount(suite: GraphQLSuite, as: Principal = 'worker'): Promise<number> {
  const res = await suite.gql('{ operations(first: 1) { totalCount } }', {}, { as });
  expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
  return res.data.operations.totalCount as number;
}
