/**
 * The Pothos builder: plugins, scalars and auth scopes only. Types are
 * defined in their own files and imported by `schema/index.ts`.
 */
import SchemaBuilder, { brandWithType } from '@pothos/core';
import DataloaderPlugin from '@pothos/plugin-dataloader';
import ComplexityPlugin from '@pothos/plugin-complexity';
import ErrorsPlugin from '@pothos/plugin-errors';
import RelayPlugin from '@pothos/plugin-relay';
import ScopeAuthPlugin, { AuthScopeFailureType, type AuthFailure } from '@pothos/plugin-scope-auth';
import SimpleObjectsPlugin from '@pothos/plugin-simple-objects';
import ValidationPlugin from '@pothos/plugin-validation';
import { GraphQLError, type GraphQLResolveInfo } from 'graphql';
import { JSONResolver } from 'graphql-scalars';
import { z } from 'zod';
import type { GraphQLContext } from '../resolvers/context.js';
import { loadOperationNodes } from '../resolvers/operations.js';
import { DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE } from '../resolvers/pagination.js';
import { listComplexity } from './complexity.js';
import { decodeNodeID, encodeNodeID } from './global-id.js';
import NoNulStringsPlugin from './no-nul-strings.js';
import PlainEdgeNodesPlugin, { PLAIN_EDGE_NODE } from './plain-edge-nodes.js';
import { captureResolvedNodes, restoreResolvedNodes } from './resolved-nodes.js';
import SyncGlobalIDsPlugin from './sync-global-ids.js';
import { DateTimeScalar, parseDID } from './scalars.js';

/** Most ids one `nodes` call may name: one loader batch (one statement) per node type. */
export const MAX_NODES_PER_REQUEST = 500;

/** Operation nodes are read with the columns their selection needs (resolvers/operations.ts), not by the node type's loader. */
const OPERATION_NODE = 'ConnectorOperation';

/** The visible operations of `nodeKeys` as `node` and `nodes` answer them: branded with their type, which Node's resolveType reads. */
async function operationNodes(nodeKeys: readonly string[], ctx: GraphQLContext, info: GraphQLResolveInfo) {
  const loaded = await loadOperationNodes(nodeKeys, ctx, info);
  // By name: the type is defined in schema/operation.ts, which imports this file.
  for (const operation of loaded) if (operation !== null) brandWithType(operation, OPERATION_NODE as never);
  return loaded;
}

/** The types that implement `Node`; ids of any other type resolve to null. */
const NODE_TYPES = new Set(['ConnectorOperation', 'ProjectionWatch', 'SyncState', 'SweepReceipt']);

/** The builder's type parameters, for helpers that take field builders. */
export type Types = typeof builder extends PothosSchemaTypes.SchemaBuilder<infer T> ? T : never;

export const builder = new SchemaBuilder<{
  Context: GraphQLContext;
  AuthScopes: {
    /** A verified user or service principal. */
    authenticated: boolean;
    /** A service principal listed in SERVICE_DIDS. */
    service: boolean;
  };
  Scalars: {
    /** ms-epoch numbers inside; ISO 8601 strings over the wire. */
    DateTime: { Input: Date; Output: number | Date };
    JSON: { Input: unknown; Output: unknown };
    DID: { Input: string; Output: string };
  };
  DefaultFieldNullability: false;
  DefaultInputFieldRequiredness: true;
}>({
  plugins: [
    RelayPlugin,
    ScopeAuthPlugin,
    ErrorsPlugin,
    ValidationPlugin,
    // After validation (hooks run last-listed first): it hands its NUL check to the validation plugin.
    NoNulStringsPlugin,
    // Just before the dataloader plugin: it drops only that plugin's wrapper of an edge's node (held as is).
    PlainEdgeNodesPlugin,
    // Around the dataloader plugin: its wrapper comes off fields that resolve nodes, never ids (resolved-nodes.ts).
    restoreResolvedNodes,
    DataloaderPlugin,
    captureResolvedNodes,
    SimpleObjectsPlugin,
    ComplexityPlugin,
    // Last, so its wrapResolve sees each node id field's own resolver first: ids without a promise per row.
    SyncGlobalIDsPlugin,
  ],
  // Costs per field (see complexity.ts); the budget is enforced per request by the server.
  complexity: { defaultComplexity: 1, defaultListMultiplier: 10 },
  defaultFieldNullability: false,
  defaultInputFieldRequiredness: true,
  relay: {
    clientMutationId: 'omit',
    cursorType: 'String',
    encodeGlobalID: encodeNodeID,
    decodeGlobalID: decodeNodeID,
    // Descriptions of what the relay plugin generates: the Node interface, ids, page info, edges and connection arguments.
    nodeTypeOptions: {
      description: 'An object with an opaque global `id` that `node` and `nodes` refetch (Relay): ConnectorOperation, ProjectionWatch, SyncState, SweepReceipt.',
    },
    idFieldOptions: {
      description:
        'Opaque global id, assigned by the server: unguessable, never reused (a deleted and recreated row gets a new one), and carries no DID or idempotency key. Pass it to `node`, `nodes` and mutation inputs.',
    },
    pageInfoTypeOptions: { description: 'Where a page stands in its connection (Relay): cursors of its ends and whether more items exist.' },
    pageInfoFieldOptions: { description: 'Cursors of this page’s ends, and whether more items follow or precede it.' },
    hasNextPageFieldOptions: {
      description: 'True when more items follow this page. When paging backward (`last`), true exactly when `before` was given.',
    },
    hasPreviousPageFieldOptions: {
      description: 'True when items precede this page. When paging forward (`first`), true exactly when `after` was given.',
    },
    startCursorFieldOptions: { description: 'Cursor of the page’s first item (pass it as `before`); null when the page is empty.' },
    endCursorFieldOptions: { description: 'Cursor of the page’s last item (pass it as `after` for the next page); null when the page is empty.' },
    cursorFieldOptions: { description: 'Opaque cursor of this item, valid only in the connection it came from: pass it as `after` or `before`.' },
    // Edges hold their node itself: the field reads it without a resolver (plain-edge-nodes.ts).
    nodeFieldOptions: { description: 'The item at this place in the page.', extensions: { [PLAIN_EDGE_NODE]: true } },
    firstArgOptions: {
      description: `Page forward: at most this many items (0 to ${MAX_PAGE_SIZE}; default ${DEFAULT_PAGE_SIZE} when neither \`first\` nor \`last\` is given). Not with \`last\`.`,
    },
    afterArgOptions: { description: 'Start after this cursor (an `endCursor` or edge `cursor` of the same connection); a cursor of another connection is an error.' },
    lastArgOptions: {
      description: `Page backward: at most this many items before \`before\` (0 to ${MAX_PAGE_SIZE}). Not with \`first\`. Refused by connections that page forward only (their descriptions say so).`,
    },
    beforeArgOptions: {
      description: 'End before this cursor (a `startCursor` or edge `cursor` of the same connection). Refused by connections that page forward only.',
    },
    // A malformed id, or one naming a type that is not a node, is just "not found".
    nodeQueryOptions: {
      description: 'Relay refetch: the node with this global id; null when the id is unknown, malformed, or names a node the viewer may not see.',
      args: { id: { description: 'The global `id` of a node.' } },
      authScopes: { authenticated: true },
      resolve: async (_root, { id }, ctx, info, resolveNode) => {
        if (id.typename === OPERATION_NODE) return (await operationNodes([id.id], ctx, info))[0];
        return NODE_TYPES.has(id.typename) ? resolveNode(id) : null;
      },
    },
    // A connection's price is set by its page size (connectionComplexity): its edges are not multiplied again.
    edgesFieldOptions: { description: 'The items of this page, in the connection’s order, each with its cursor.', complexity: { field: 1, multiplier: 1 } },
    nodesQueryOptions: {
      authScopes: { authenticated: true },
      complexity: (args: { ids: readonly unknown[] }) => listComplexity(args.ids),
      description: `Relay refetch of several nodes, in order (at most ${MAX_NODES_PER_REQUEST}); null where unknown or not visible.`,
      args: {
        ids: {
          description: `Global ids of nodes, at most ${MAX_NODES_PER_REQUEST}; the answer has one slot per id, in the same order.`,
          validate: z.array(z.unknown()).max(MAX_NODES_PER_REQUEST, `at most ${MAX_NODES_PER_REQUEST} ids`),
        },
      },
      resolve: async (_root, args, ctx, info, resolveNodes) => {
        const all = args.ids;
        // Pothos' resolveNodes callback reads `args.ids` rather than its argument,
        // so narrow `args.ids` to the known node types it loads before calling it.
        args.ids = all.filter((id) => NODE_TYPES.has(id.typename) && id.typename !== OPERATION_NODE);
        const operationIDs = all.filter((id) => id.typename === OPERATION_NODE);
        const [loaded, operations] = await Promise.all([resolveNodes(args.ids), operationNodes(operationIDs.map((id) => id.id), ctx, info)]);
        return all.map((id) => {
          if (id.typename === OPERATION_NODE) return operations[operationIDs.indexOf(id)];
          const at = args.ids.indexOf(id);
          return at < 0 ? null : loaded[at];
        });
      },
    },
  },
  scopeAuth: {
    // Subscriptions are refused at subscribe time, not per event.
    authorizeOnSubscribe: true,
    // Expected, so not masked: a typed top-level error clients can act on.
    // A signed-in caller refused a service-only field hears which DID it signed as and where services are listed.
    unauthorizedError: (_parent, ctx, info, result) =>
      new GraphQLError(
        ctx.viewer.kind === 'anonymous'
          ? `Not authorized: ${info.fieldName} needs a bearer token (Authorization: Bearer <JWT>)`
          : needsScope(result.failure, 'service')
            ? `Not authorized to use ${info.fieldName}: it is for service principals, and ${'did' in ctx.viewer ? ctx.viewer.did : 'this caller'} is not one (a service's DID is listed in the server's SERVICE_DIDS)`
            : `Not authorized to use ${info.fieldName}`,
        { extensions: { code: ctx.viewer.kind === 'anonymous' ? 'UNAUTHENTICATED' : 'FORBIDDEN' } },
      ),
    // Anonymous callers see a typed "not authorized" error, never data.
    authScopes: (ctx) => ({
      authenticated: ctx.viewer.kind !== 'anonymous',
      service: ctx.viewer.kind === 'service',
    }),
  },
  errors: {
    // Input validation failures come back as typed `InputValidationError` results.
    unsafelyHandleInputErrors: true,
  },
});

builder.addScalarType('DateTime', DateTimeScalar);
builder.addScalarType('JSON', JSONResolver);
builder.scalarType('DID', {
  description: 'A decentralized identifier (did:method:identifier), validated on input.',
  serialize: (value) => String(value),
  parseValue: parseDID,
  parseLiteral: (ast) => parseDID('value' in ast ? ast.value : undefined),
});

builder.queryType({
  description: 'Reads. Every field but `serverInfo` needs a bearer token; rows the viewer may not see are left out, exactly as if they did not exist.',
});
builder.mutationType({
  description:
    'Writes. Each takes one `input` and returns a union of its payload and the expected errors (types implementing `Error`); a refused write changes nothing.',
});

/** Auth scope of a mutation any signed-in viewer may call (who may act on what is the resolvers' check). */
export const mutation = { authScopes: { authenticated: true } } as const;

/** Whether an auth failure (or any failure it is made of) is the missing scope `scope`. */
function needsScope(failure: AuthFailure, scope: string): boolean {
  switch (failure.kind) {
    case AuthScopeFailureType.AuthScope:
      return failure.scope === scope;
    case AuthScopeFailureType.AnyAuthScopes:
    case AuthScopeFailureType.AllAuthScopes:
      return failure.failures.some((inner) => needsScope(inner, scope));
    default:
      return false;
  }
}
