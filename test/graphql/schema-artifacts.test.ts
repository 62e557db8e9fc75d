/**
 * The committed schema artefacts: schema/schema.graphql is what `npm run
 * codegen` prints today, every required name of SPEC §4 (subscriptions aside)
 * is in it, no secret is readable, and the documented client operations in
 * client/operations validate against it (and were generated).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  GraphQLError,
  GraphQLObjectType,
  GraphQLScalarType,
  getNamedType,
  getNullableType,
  isInterfaceType,
  isObjectType,
  isUnionType,
  lexicographicSortSchema,
  parse,
  print,
  printSchema,
  validate,
  type DefinitionNode,
  type DocumentNode,
  type GraphQLField,
  type GraphQLInterfaceType,
  type GraphQLNamedType,
} from 'graphql';
import { describe, expect, it } from 'vitest';
import * as generated from '../../client/generated/graphql.js';
import { schema } from '../../schema/index.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const OPERATIONS_DIR = join(ROOT, 'client', 'operations');

function objectType(name: string): GraphQLObjectType {
  const type = schema.getType(name);
  if (!isObjectType(type)) throw new Error(`${name} is not an object type in the schema`);
  return type;
}

function field(typeName: string, fieldName: string): GraphQLField<unknown, unknown> {
  const found = objectType(typeName).getFields()[fieldName];
  if (found === undefined) throw new Error(`${typeName}.${fieldName} is missing from the schema`);
  return found;
}

/** The payload object of a mutation: its type, or the union member that is not an error. */
function payloadOf(mutation: string): GraphQLObjectType {
  const type = getNamedType(field('Mutation', mutation).type);
  if (isObjectType(type)) return type;
  if (!isUnionType(type)) throw new Error(`Mutation.${mutation} returns ${type.name}, neither a payload nor a union`);
  const payloads = type.getTypes().filter((member) => !member.getInterfaces().some((i) => i.name === 'Error'));
  expect(payloads, `Mutation.${mutation} union has exactly one non-error member`).toHaveLength(1);
  return payloads[0]!;
}

/** Every object and interface type with fields a client can read. */
function outputTypes(): (GraphQLObjectType | GraphQLInterfaceType)[] {
  return Object.values(schema.getTypeMap()).filter(
    (type): type is GraphQLObjectType | GraphQLInterfaceType => !type.name.startsWith('__') && (isObjectType(type) || isInterfaceType(type)),
  );
}

function loadClientOperations(): { file: string; document: DocumentNode }[] {
  return readdirSync(OPERATIONS_DIR)
    .filter((name) => name.endsWith('.graphql'))
    .sort()
    .map((file) => ({ file, document: parse(readFileSync(join(OPERATIONS_DIR, file), 'utf8')) }));
}

describe('schema artefacts', () => {
  it('schema/schema.graphql is the printed schema (run `npm run codegen` when this fails)', () => {
    // The codegen loader sorts the schema lexicographically, then schema-ast prints it.
    const printed = printSchema(lexicographicSortSchema(schema));
    const committed = readFileSync(join(ROOT, 'schema', 'schema.graphql'), 'utf8');
    expect(committed, 'schema/schema.graphql is stale: run `npm run codegen` and commit the result').toBe(printed);
  });

  it('has the three node types of SPEC §4 implementing Node', () => {
    for (const name of ['ConnectorOperation', 'ProjectionWatch', 'SyncState']) {
      expect(objectType(name).getInterfaces().map((i) => i.name), name).toContain('Node');
    }
    expect(isInterfaceType(schema.getType('Node'))).toBe(true);
  });

  it('has the DateTime, JSON and DID scalars', () => {
    for (const name of ['DateTime', 'JSON', 'DID']) {
      expect(schema.getType(name), name).toBeInstanceOf(GraphQLScalarType);
    }
  });

  it('answers DateTime as the ISO 8601 string itself, never a Date that JSON.stringify must call toJSON on (issue 21)', () => {
    const dateTime = schema.getType('DateTime') as GraphQLScalarType;
    expect(dateTime.serialize(Date.UTC(2026, 11, 2, 17, 30))).toBe('2026-12-02T17:30:00.000Z');
    expect(dateTime.serialize(new Date(0))).toBe('1970-01-01T00:00:00.000Z');
    expect(dateTime.serialize('2026-12-02T18:30:00+01:00')).toBe('2026-12-02T17:30:00.000Z');
    // A time no Date holds is a GraphQLError (masked for clients as any resolver's), not a RangeError or a null.
    expect(() => dateTime.serialize(Number.NaN)).toThrow(GraphQLError);
    expect(() => dateTime.serialize(8.64e15 + 1)).toThrow(GraphQLError);
    expect(() => dateTime.serialize({})).toThrow(GraphQLError);
    // Input is graphql-scalars' own: a Date.
    expect(dateTime.parseValue('2026-12-02T17:30:00Z')).toEqual(new Date(Date.UTC(2026, 11, 2, 17, 30)));
  });

  it('has every required Query field with its arguments', () => {
    const required: Record<string, string[]> = {
      node: ['id'],
      nodes: ['ids'],
      operations: ['first', 'after', 'last', 'before', 'filter'],
      operationByKey: ['operationID', 'callerDID'],
      watches: ['first', 'after'],
      syncStates: ['first', 'after'],
      document: ['documentID'],
      documents: ['documentIDs'],
    };
    for (const [name, args] of Object.entries(required)) {
      const argNames = field('Query', name).args.map((a) => a.name);
      for (const arg of args) expect(argNames, `Query.${name}(${arg})`).toContain(arg);
    }
    // callerDID defaults to the viewer: optional.
    const callerDID = field('Query', 'operationByKey').args.find((a) => a.name === 'callerDID')!;
    expect(getNullableType(callerDID.type)).toBe(callerDID.type);
    expect(getNamedType(callerDID.type).name).toBe('DID');
    for (const connection of ['operations', 'watches', 'syncStates']) {
      const type = getNamedType(field('Query', connection).type) as GraphQLObjectType;
      expect(Object.keys(type.getFields()), `Query.${connection}`).toEqual(expect.arrayContaining(['edges', 'pageInfo', 'totalCount']));
    }
    const filter = field('Query', 'operations').args.find((a) => a.name === 'filter')!;
    const filterFields = Object.keys((getNamedType(filter.type) as unknown as GraphQLObjectType).getFields());
    expect(filterFields).toEqual(expect.arrayContaining(['states', 'connectorName', 'ownerDID', 'documentID']));
  });

  it('has every required Mutation field, each with one `input` argument', () => {
    const required = [
      'claimOperation',
      'markOperationSent',
      'recordOperationAttempt',
      'renewOperationLease',
      'releaseOperationLease',
      'finalizeOperation',
      'requestRepull',
      'claimWatchAttempt',
      'recordVerification',
      'resumeDeferred',
      'updateSyncProgress',
    ];
    for (const name of required) {
      const args = field('Mutation', name).args;
      expect(args.map((a) => a.name), `Mutation.${name}`).toEqual(['input']);
      expect(getNullableType(args[0]!.type), `Mutation.${name}(input) is required`).not.toBe(args[0]!.type);
    }
  });

  it('finalizeOperation’s payload has finalized: Boolean!, the operation and the watch', () => {
    const payload = payloadOf('finalizeOperation');
    const fields = payload.getFields();
    expect(String(fields.finalized?.type)).toBe('Boolean!');
    expect(getNamedType(fields.operation!.type).name).toBe('ConnectorOperation');
    expect(getNamedType(fields.watch!.type).name).toBe('ProjectionWatch');
  });

  it('claimOperation’s payload has the operation, outcome, lease and replayed result', () => {
    const fields = payloadOf('claimOperation').getFields();
    expect(Object.keys(fields)).toEqual(expect.arrayContaining(['operation', 'outcome', 'lease', 'replay']));
    expect(getNamedType(fields.operation!.type).name).toBe('ConnectorOperation');
  });

  it('never exposes a lease token, send marker or code verifier, except the holder’s lease `token` and the service’s consume', () => {
    const SECRETS = /leasetoken|sendmarker|codeverifier/i;
    const readable: string[] = [];
    const tokens: string[] = [];
    const leaseFields: string[] = [];
    const verifierFields: string[] = [];
    for (const type of outputTypes()) {
      for (const f of Object.values(type.getFields())) {
        // A flag about a secret (`sendMarkerSet: Boolean!`) is fine; the secret is not.
        if (SECRETS.test(f.name) && String(getNullableType(f.type)) !== 'Boolean') readable.push(`${type.name}.${f.name}`);
        if (getNamedType(f.type).name === 'ConsumedPendingAuthorization') verifierFields.push(`${type.name}.${f.name}`);
        if (/token/i.test(f.name)) tokens.push(`${type.name}.${f.name}`);
        if (getNamedType(f.type).name === 'OperationLease') leaseFields.push(`${type.name}.${f.name}`);
      }
    }
    // The code verifier: only in the payload of the service-only consume (SPEC §3.2).
    expect(readable).toEqual(['ConsumedPendingAuthorization.codeVerifier']);
    expect(verifierFields).toEqual(['ConsumePendingAuthorizationPayload.consumed']);
    expect(payloadOf('consumePendingAuthorization').name).toBe('ConsumePendingAuthorizationPayload');
    // Service-only by its resolver (requireService: anyone else gets ForbiddenError in the result; pending-auth.test.ts and typed-refusals.test.ts call it as a user).
    expect(schema.getMutationType()?.getFields().consumePendingAuthorization?.extensions?.pothosOptions).toMatchObject({ authScopes: { authenticated: true } });
    expect(tokens).toEqual(['OperationLease.token']);
    // The lease is only handed out by mutation payloads: claim (and acquire/renew via OperationPayload, leaseDueOperations via LeasedOperation).
    expect(leaseFields.sort()).toEqual(['ClaimOperationPayload.lease', 'LeasedOperation.lease', 'OperationPayload.lease']);
    expect(payloadOf('claimOperation').name).toBe('ClaimOperationPayload');
    expect(payloadOf('leaseDueOperations').name).toBe('LeaseDueOperationsPayload');
    expect(payloadOf('renewOperationLease').name).toBe('OperationPayload');
    for (const root of [schema.getQueryType(), schema.getSubscriptionType()]) {
      if (root == null) continue;
      expect(reachableFrom(root).has('OperationLease'), `OperationLease must not be reachable from ${root.name}`).toBe(false);
      expect(reachableFrom(root).has('ConsumedPendingAuthorization'), `the code verifier must not be reachable from ${root.name}`).toBe(false);
    }
  });

  describe('client operations (client/operations/*.graphql)', () => {
    const sources = loadClientOperations();
    const all: DocumentNode = { kind: 'Document' as DocumentNode['kind'], definitions: sources.flatMap((s) => s.document.definitions) };

    it('exist', () => {
      expect(sources.length).toBeGreaterThan(0);
    });

    it('validate against the schema (fragments shared across files)', () => {
      const errors = validate(schema, all).map((e) => `${e.message} ${JSON.stringify(e.locations)}`);
      expect(errors).toEqual([]);
    });

    it('cover the dashboard queries, the write-back sequence and the worker side', () => {
      const names = all.definitions.filter((d) => d.kind === 'OperationDefinition').map((d) => d.name?.value);
      expect(names).toEqual(
        expect.arrayContaining([
          'Operations',
          'DocumentState',
          'Watches',
          'ClaimOperation',
          'StartOperationAttempt',
          'MarkOperationSent',
          'RecordOperationAttempt',
          'FinalizeOperation',
          'RenewOperationLease',
          'ReleaseOperationLease',
          'RequestRepull',
          'ClaimWatchAttempt',
          'RecordVerification',
          'ResumeDeferred',
          'UpdateSyncProgress',
        ]),
      );
      for (const definition of all.definitions) {
        if (definition.kind === 'OperationDefinition') expect(definition.name, 'every client operation is named').toBeDefined();
      }
    });

    it('are generated in client/generated (run `npm run codegen` when this fails)', () => {
      const exports = generated as unknown as Record<string, DocumentNode | undefined>;
      for (const definition of all.definitions) {
        const name = generatedName(definition);
        if (name === undefined) continue;
        const document = exports[name];
        expect(document, `client/generated/graphql.ts lacks ${name}: run \`npm run codegen\``).toBeDefined();
        const own = document!.definitions.find((d) => d.kind === definition.kind && 'name' in d && d.name?.value === (definition as { name?: { value: string } }).name?.value);
        expect(own && print(own), `${name} is stale: run \`npm run codegen\``).toBe(print(definition));
      }
    });
  });
});

/** The export name the client preset gives a definition. */
function generatedName(definition: DefinitionNode): string | undefined {
  if (definition.kind === 'OperationDefinition') return definition.name ? `${definition.name.value}Document` : undefined;
  if (definition.kind === 'FragmentDefinition') return `${definition.name.value}FragmentDoc`;
  return undefined;
}

/** Names of every type reachable from `root` through output fields. */
function reachableFrom(root: GraphQLObjectType): Set<string> {
  const seen = new Set<string>();
  const queue: GraphQLNamedType[] = [root];
  while (queue.length > 0) {
    const type = queue.pop()!;
    if (seen.has(type.name)) continue;
    seen.add(type.name);
    if (isObjectType(type) || isInterfaceType(type)) {
      for (const f of Object.values(type.getFields())) queue.push(getNamedType(f.type));
      if (isInterfaceType(type)) queue.push(...schema.getPossibleTypes(type));
    }
    if (isUnionType(type)) queue.push(...type.getTypes());
  }
  return seen;
}
