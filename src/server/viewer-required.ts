/**
 * One rule for credentials (issue 39 item 6): they are checked before
 * anything runs, and a request that needs a viewer runs only with one.
 *
 * - Credentials sent and refused (a bad signature, an expired token, another
 *   audience, a malformed header): 401 with `WWW-Authenticate: Bearer …
 *   error="invalid_token"` and a `TOKEN_*` code (app.ts's context factory).
 * - No credentials, for an operation that selects anything but the fields
 *   open to everyone (`serverInfo`, which the schema gives no auth scope, and
 *   introspection): 401 `UNAUTHENTICATED` with a bare `WWW-Authenticate:
 *   Bearer realm="connector-store"` (RFC 6750 §3.1), before anything runs,
 *   as GraphQL over HTTP has a server answer a request the client may not
 *   issue; never 200 with an error per field.
 * - Event streams need a viewer to open at all (graphql-sse: 401; graphql-ws:
 *   close 4401 at `connection_init`): a stream is held, so nobody holds one
 *   for nobody.
 *
 * A signed-in viewer a field refuses is authorization, not authentication:
 * `FORBIDDEN` for that field, or a typed `ForbiddenError` in a mutation's
 * result, with the other fields answered (HTTP 200).
 */
import { GraphQLError, Kind, getOperationAST, type DocumentNode, type GraphQLObjectType, type GraphQLSchema, type OperationTypeNode, type SelectionSetNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';

/** The realm of every bearer challenge. */
export const BEARER_REALM = 'connector-store';

const INTROSPECTION = new Set(['__typename', '__schema', '__type']);

/** Root fields open to anonymous callers, per operation type: introspection's and those the schema gives no auth scope. */
export type OpenRootFields = Readonly<Record<OperationTypeNode, ReadonlySet<string>>>;

/** {@link OpenRootFields} of `schema` (today: `serverInfo`, `__typename`, `__schema`, `__type`). */
export function openRootFields(schema: GraphQLSchema): OpenRootFields {
  const of = (root: GraphQLObjectType | null | undefined) => {
    const open = new Set(root === schema.getQueryType() ? INTROSPECTION : ['__typename']);
    for (const field of Object.values(root?.getFields() ?? {})) {
      if ((field.extensions as { pothosOptions?: { authScopes?: unknown } }).pothosOptions?.authScopes === undefined) open.add(field.name);
    }
    return open;
  };
  return { query: of(schema.getQueryType()), mutation: of(schema.getMutationType()), subscription: of(schema.getSubscriptionType()) };
}

/** Whether the operation selects a root field that is not open (fragments followed). */
export function selectsClosedField(document: DocumentNode, operationName: string | null | undefined, openFields: OpenRootFields): boolean {
  const operation = getOperationAST(document, operationName ?? undefined);
  if (!operation) return false;
  const open = openFields[operation.operation];
  const fragments = new Map(document.definitions.flatMap((definition) => (definition.kind === Kind.FRAGMENT_DEFINITION ? [[definition.name.value, definition] as const] : [])));
  const seen = new Set<string>();
  const closed = (set: SelectionSetNode): boolean =>
    set.selections.some((selection) => {
      if (selection.kind === Kind.FIELD) return !open.has(selection.name.value);
      if (selection.kind === Kind.INLINE_FRAGMENT) return closed(selection.selectionSet);
      const name = selection.name.value;
      if (seen.has(name)) return false;
      seen.add(name);
      const fragment = fragments.get(name);
      return fragment !== undefined && closed(fragment.selectionSet);
    });
  return closed(operation.selectionSet);
}

/** The refusal of an anonymous request for closed fields. */
export function viewerRequired(): GraphQLError {
  return new GraphQLError('this operation needs a bearer token (Authorization: Bearer <JWT>); without one only serverInfo and introspection answer', {
    extensions: { code: 'UNAUTHENTICATED', http: { status: 401, headers: { 'WWW-Authenticate': `Bearer realm="${BEARER_REALM}"` } } },
  });
}

/** The yoga plugin: an anonymous query, mutation or subscription selecting a closed field gets {@link viewerRequired} and runs nothing. */
export function useViewerRequired(schema: GraphQLSchema): Plugin {
  const open = openRootFields(schema);
  const anonymous = (contextValue: unknown) => (contextValue as { viewer?: { kind?: string } } | undefined)?.viewer?.kind === 'anonymous';
  return {
    onExecute: ({ args, setResultAndStopExecution }) => {
      if (anonymous(args.contextValue) && selectsClosedField(args.document, args.operationName, open)) setResultAndStopExecution({ errors: [viewerRequired()] });
    },
    onSubscribe: ({ args, setResultAndStopExecution }) => {
      if (anonymous(args.contextValue) && selectsClosedField(args.document, args.operationName, open)) setResultAndStopExecution({ errors: [viewerRequired()] });
    },
  };
}
