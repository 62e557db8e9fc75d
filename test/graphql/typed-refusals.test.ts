/**
 * Every refusal is typed (issue 23), walked from the schema itself so a new
 * field cannot slip through:
 *
 * - every mutation returns its `<Mutation>Result` union: its payload and
 *   errors implementing `Error`, `InputValidationError` among them, so an
 *   expected failure never leaves the result;
 * - every query, mutation and subscription (over SSE), sent with a NUL
 *   character in each text argument (and the rest filled with plausible
 *   values), as a user and as a service, answers every top-level error with
 *   an `extensions.code`;
 * - the service-only mutations answer a user's call with a typed
 *   `ForbiddenError` in their result, an anonymous one with UNAUTHENTICATED.
 */
import {
  getNamedType,
  isCompositeType,
  isEnumType,
  isInputObjectType,
  isListType,
  isNonNullType,
  isScalarType,
  isUnionType,
  type GraphQLArgument,
  type GraphQLField,
  type GraphQLInputType,
} from 'graphql';
import { expect, it } from 'vitest';
import { schema } from '../../schema/index.js';
import { describeGraphQL } from '../helpers/graphql.js';

const NUL = 'x\u0000y';

/** A value of `type` for a request: text with a NUL, the rest plausible; optional fields are left out unless `all`. */
function sample(type: GraphQLInputType, all = true): unknown {
  if (isNonNullType(type)) return sample(type.ofType, all);
  if (isListType(type)) return [sample(type.ofType, all)];
  if (isEnumType(type)) return type.getValues()[0]!.name;
  if (isInputObjectType(type)) {
    const value: Record<string, unknown> = {};
    for (const field of Object.values(type.getFields())) if (all || isNonNullType(field.type)) value[field.name] = sample(field.type, all);
    return value;
  }
  if (isScalarType(type)) {
    switch (type.name) {
      case 'Int':
        return 1;
      case 'Float':
        return 1.5;
      case 'Boolean':
        return false;
      case 'JSON':
        return { text: NUL };
      default:
        // String, ID, DID, DateTime and every other text scalar.
        return NUL;
    }
  }
  return null;
}

/** A document for `field` of `root` with every argument as a variable, selecting `__typename`. */
function documentFor(root: 'query' | 'mutation' | 'subscription', field: GraphQLField<unknown, unknown>): string {
  const variables = field.args.map((arg: GraphQLArgument) => `$${arg.name}: ${String(arg.type)}`).join(', ');
  const args = field.args.map((arg) => `${arg.name}: $${arg.name}`).join(', ');
  const selection = isCompositeType(getNamedType(field.type)) ? ' { __typename }' : '';
  return `${root} Probe${variables === '' ? '' : `(${variables})`} { probe: ${field.name}${args === '' ? '' : `(${args})`}${selection} }`;
}

describeGraphQL('graphql: every refusal is typed', (suite) => {
  it('every mutation returns its result union of the payload and typed errors, InputValidationError among them', () => {
    for (const field of Object.values(schema.getMutationType()!.getFields())) {
      const type = getNamedType(field.type);
      expect(isUnionType(type), `${field.name} returns ${type.name}, not a result union`).toBe(true);
      if (!isUnionType(type)) continue;
      expect(type.name).toBe(`${field.name[0]!.toUpperCase()}${field.name.slice(1)}Result`);
      const members = type.getTypes();
      expect(members.map((m) => m.name), field.name).toContain('InputValidationError');
      const errors = members.filter((member) => member.getInterfaces().some((i) => i.name === 'Error'));
      expect(members.length - errors.length, `${field.name}: one payload besides its errors`).toBe(1);
    }
  });

  it('every query, mutation and subscription refuses a NUL in any text argument with a code, for a user and for a service', { timeout: 60_000 }, async () => {
    const untyped: string[] = [];
    for (const [root, type] of [
      ['query', schema.getQueryType()!],
      ['mutation', schema.getMutationType()!],
    ] as const) {
      for (const field of Object.values(type.getFields())) {
        if (field.args.length === 0) continue;
        const document = documentFor(root, field);
        const variables = Object.fromEntries(field.args.map((arg) => [arg.name, sample(arg.type)]));
        for (const as of ['alice', 'worker'] as const) {
          const res = await suite.gql(document, variables, { as });
          for (const error of res.errors ?? []) {
            if (typeof error.extensions?.code !== 'string') untyped.push(`${root} ${field.name} as ${as}: ${error.message}`);
          }
          if (root === 'mutation' && res.data?.probe != null) {
            // A mutation's refusal is in its result: an error type, never the payload with a NUL stored.
            expect(res.data.probe.__typename, `${field.name} as ${as}`).not.toMatch(/Payload$/);
          }
        }
      }
    }
    let subscriptionRefusals = 0;
    // Subscriptions over SSE: a refusal is the stream's one result (then it completes); a stream that opened is closed after a moment.
    for (const field of Object.values(schema.getSubscriptionType()!.getFields())) {
      if (field.args.length === 0) continue;
      const document = documentFor('subscription', field);
      const variables = Object.fromEntries(field.args.map((arg) => [arg.name, sample(arg.type)]));
      for (const as of ['alice', 'worker'] as const) {
        const abort = new AbortController();
        const timer = setTimeout(() => abort.abort(), 500);
        const response = await suite.app.yoga.fetch('http://localhost/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${await suite.token(as)}` },
          body: JSON.stringify({ query: document, variables }),
          signal: abort.signal,
        });
        const text = await response.text().catch(() => '');
        clearTimeout(timer);
        for (const line of text.split('\n').filter((l) => l.startsWith('data: {'))) {
          for (const error of (JSON.parse(line.slice('data: '.length)) as { errors?: { message: string; extensions?: { code?: unknown } }[] }).errors ?? []) {
            subscriptionRefusals += 1;
            if (typeof error.extensions?.code !== 'string') untyped.push(`subscription ${field.name} as ${as}: ${error.message}`);
          }
        }
      }
    }
    expect(untyped).toEqual([]);
    // The walk reached the subscriptions' refusals (it is not vacuous).
    expect(subscriptionRefusals).toBeGreaterThan(0);
  });

  it('a user calling a service-only mutation gets ForbiddenError in its result; anonymous gets UNAUTHENTICATED', async () => {
    const cases = [
      ['sweepDocument', 'mutation($input: SweepDocumentInput!) { sweepDocument(input: $input) { __typename ... on Error { code message } } }', { documentID: 'doc-1' }],
      [
        'consumePendingAuthorization',
        'mutation($input: ConsumePendingAuthorizationInput!) { consumePendingAuthorization(input: $input) { __typename ... on Error { code message } } }',
        { state: 'state-1' },
      ],
    ] as const;
    for (const [name, document, input] of cases) {
      const user = await suite.gql(document, { input }, { as: 'alice' });
      expect(user.errors, name).toBeUndefined();
      expect(user.data[name]).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN', message: expect.stringContaining('only a service principal may') });
      const anonymous = await suite.gql(document, { input }, { as: 'anonymous' });
      expect(anonymous.errors?.[0]?.extensions?.code, name).toBe('UNAUTHENTICATED');
      const service = await suite.gql(document, { input }, { as: 'worker' });
      expect(service.data[name].__typename, name).not.toBe('ForbiddenError');
    }
  });
});
