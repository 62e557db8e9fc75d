/**
 * Live status for dashboards (SPEC §4): a change of a visible operation or
 * watch is pushed over yoga's SSE transport. Authorization is exactly that of
 * queries: events are reloaded through the node loaders, so an invisible or
 * unknown node never produces one.
 */
import { changeStream, snapshotOf } from '../resolvers/subscriptions.js';
import { canSeeOperation, canSeeOwned } from '../resolvers/viewer.js';
import type { ChangeEvent } from '../src/server/change-feed.js';
import type { OperationFilterArgs } from '../resolvers/operations.js';
import type { WatchFilterArgs } from '../resolvers/watches.js';
import { getOperationsByNodeKeys, type ConnectorOperation as OperationShape } from '../src/store/operations/index.js';
import { getWatchesByNodeKeys, type ProjectionWatch as WatchShape } from '../src/store/projection-watches/index.js';
import { builder } from './builder.js';
import type { GraphQLContext } from './context.js';
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

/**
 * A changed operation as this subscriber may see it: the event's shared
 * snapshot, judged by the same access rule as the node loader, primed into
 * the subscriber's own (fresh) loader so nested fields resolve as in queries.
 */
async function loadOperation(event: ChangeEvent, ctx: GraphQLContext): Promise<OperationShape | null> {
  const row = await snapshotOf(event, async () => (await getOperationsByNodeKeys(ctx.store, [event.nodeKey]))[0] ?? null);
  if (row === null || !canSeeOperation(ctx.viewer, row)) return null;
  return ConnectorOperation.getDataloader(ctx).prime(event.nodeKey, row).load(event.nodeKey);
}

/** A changed watch as this subscriber may see it (see {@link loadOperation}). */
async function loadWatch(event: ChangeEvent, ctx: GraphQLContext): Promise<WatchShape | null> {
  const row = await snapshotOf(event, async () => (await getWatchesByNodeKeys(ctx.store, [event.nodeKey]))[0] ?? null);
  if (row === null || !canSeeOwned(ctx.viewer, row)) return null;
  return ProjectionWatch.getDataloader(ctx).prime(event.nodeKey, row).load(event.nodeKey);
}

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
