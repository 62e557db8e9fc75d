/**
 * Live status for dashboards (SPEC §4): a change of a visible operation or
 * watch is pushed over yoga's SSE transport. Authorization is exactly that of
 * queries: events are reloaded through the node loaders, so an invisible or
 * unknown node never produces one.
 */
import { changeStream } from '../resolvers/subscriptions.js';
import type { OperationFilterArgs } from '../resolvers/operations.js';
import type { WatchFilterArgs } from '../resolvers/watches.js';
import type { ConnectorOperation as OperationShape } from '../src/store/operations/index.js';
import type { ProjectionWatch as WatchShape } from '../src/store/projection-watches/index.js';
import { builder } from './builder.js';
import { ConnectorOperation, OperationFilter } from './operation.js';
import { ProjectionWatch, WatchFilter } from './watch.js';

builder.subscriptionType({
  description:
    'Over server-sent events (Accept: text/event-stream) or graphql-ws (WebSocket, same path). After a reconnect, re-query, then subscribe again.',
});

function operationMatches(filter: OperationFilterArgs | null | undefined) {
  return (op: OperationShape) =>
    (filter?.states == null || filter.states.includes(op.state)) &&
    (filter?.connectorName == null || filter.connectorName === op.connectorName) &&
    (filter?.ownerDID == null || filter.ownerDID === op.ownerDID) &&
    (filter?.documentID == null || filter.documentID === op.documentID);
}

function watchMatches(filter: WatchFilterArgs | null | undefined) {
  return (watch: WatchShape) =>
    (filter?.statuses == null || filter.statuses.includes(watch.verificationStatus)) &&
    (filter?.connectorName == null || filter.connectorName === watch.connectorName) &&
    (filter?.ownerDID == null || filter.ownerDID === watch.ownerDID) &&
    (filter?.documentID == null || filter.documentID === watch.documentID);
}

const loadOperation = (nodeKey: string, ctx: Parameters<typeof ConnectorOperation.getDataloader>[0]) =>
  ConnectorOperation.getDataloader(ctx).load(nodeKey);
const loadWatch = (nodeKey: string, ctx: Parameters<typeof ProjectionWatch.getDataloader>[0]) => ProjectionWatch.getDataloader(ctx).load(nodeKey);

builder.subscriptionFields((t) => ({
  operationChanged: t.field({
    type: ConnectorOperation,
    description: 'Every committed change of one operation, as it is after the change. An id you may not see never emits.',
    authScopes: { authenticated: true },
    args: { id: t.arg.globalID({ required: true, for: [ConnectorOperation] }) },
    subscribe: (_root, args, ctx) => changeStream(ctx, { kind: 'operation', nodeKey: args.id.id, load: loadOperation }),
    resolve: (op: OperationShape) => op,
  }),
  operationsChanged: t.field({
    type: ConnectorOperation,
    description: 'Every committed change of a visible operation matching the filter (same filters as `operations`).',
    authScopes: { authenticated: true },
    args: { filter: t.arg({ type: OperationFilter, required: false }) },
    subscribe: (_root, args, ctx) => changeStream(ctx, { kind: 'operation', load: loadOperation, accept: operationMatches(args.filter) }),
    resolve: (op: OperationShape) => op,
  }),
  watchChanged: t.field({
    type: ProjectionWatch,
    description: 'Every committed change of one watch. An id you may not see never emits.',
    authScopes: { authenticated: true },
    args: { id: t.arg.globalID({ required: true, for: [ProjectionWatch] }) },
    subscribe: (_root, args, ctx) => changeStream(ctx, { kind: 'watch', nodeKey: args.id.id, load: loadWatch }),
    resolve: (watch: WatchShape) => watch,
  }),
  watchesChanged: t.field({
    type: ProjectionWatch,
    description: 'Every committed change of a visible watch matching the filter (same filters as `watches`).',
    authScopes: { authenticated: true },
    args: { filter: t.arg({ type: WatchFilter, required: false }) },
    subscribe: (_root, args, ctx) => changeStream(ctx, { kind: 'watch', load: loadWatch, accept: watchMatches(args.filter) }),
    resolve: (watch: WatchShape) => watch,
  }),
}));
