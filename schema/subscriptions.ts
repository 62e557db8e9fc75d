/**
 * Live status for dashboards (SPEC §4): a change of a visible operation or
 * watch is pushed over yoga's SSE transport or graphql-ws. Authorization is
 * exactly that of queries: events are reloaded through the node loaders, so
 * an invisible or unknown node never produces one.
 */
import type { ConnectorOperation as OperationShape } from '../resolvers/operations.js';
import * as resolve from '../resolvers/subscriptions.js';
import type { SweepReceipt as ReceiptShape } from '../resolvers/sweeps.js';
import type { ProjectionWatch as WatchShape } from '../resolvers/watches.js';
import { nodeKeyOf } from './node-ids.js';
import { builder } from './builder.js';
import { ConnectorOperation, OperationFilter } from './operation.js';
import { SweepReceipt, SweepReceiptFilter } from './sweep.js';
import { ProjectionWatch, WatchFilter } from './watch.js';
import type { StoreChange as StoreChangeShape } from '../resolvers/subscriptions.js';

const StoreChangeSubject = builder.enumType('StoreChangeSubject', {
  description: 'Which rows a store change touched: re-read the views that show them.',
  values: {
    OPERATIONS: { description: 'Operations: lists, counts and details (e.g. retention deleted finished ones).' },
    WATCHES: { description: 'Projection watches (only with `BULK_CHANGE`).' },
    SWEEP_RECEIPTS: { description: 'Sweep receipts and their candidates’ counts.' },
    BACKLOG: { description: 'The due backlog over time (`operationActivity.buckets.dueBacklog`); told to service principals only.' },
  } as const,
});

const StoreChangeReason = builder.enumType('StoreChangeReason', {
  description: 'Why the store changed without a node-by-node event.',
  values: {
    RETENTION: { description: 'Retention deleted rows past their window (IDEMPOTENCY_WINDOW_MS, DEAD_RETENTION_MS): the server’s job or `npm run retention`.' },
    BACKLOG_SAMPLED: { description: 'The due backlog was sampled (BACKLOG_SAMPLE_INTERVAL_MS).' },
    MIGRATION: { description: 'Migrations were applied (a server’s start or `npm run migrate`); they may have rewritten rows of any subject.' },
    BULK_CHANGE: {
      description:
        'One write changed more than 100 rows of the subject that you may see (a bulk operator action, `resumeDeferred`): node-by-node subscriptions (`operationsChanged`, `watchesChanged`, `sweepReceiptsChanged`) were sent at most 100 of them each.',
    },
  } as const,
});

const StoreChange = builder.objectRef<StoreChangeShape>('StoreChange').implement({
  description:
    'Rows of a subject changed in a way not delivered node by node: one event however many rows went, and only when some of them were yours (or for every viewer: migrations; services: the backlog). Re-read what you show.',
  fields: (t) => ({
    subject: t.field({ type: StoreChangeSubject, description: 'Which rows changed.', resolve: (change) => change.subject }),
    reason: t.field({ type: StoreChangeReason, description: 'Why.', resolve: (change) => change.reason }),
    at: t.field({ type: 'DateTime', description: 'When this server delivered it.', resolve: (change) => new Date(change.at) }),
  }),
});

builder.subscriptionType({
  description:
    'Over server-sent events (Accept: text/event-stream) or graphql-ws (WebSocket, same path). After a reconnect, re-query, then subscribe again.',
});

builder.subscriptionFields((t) => ({
  operationChanged: t.field({
    type: ConnectorOperation,
    description: 'Every committed change of one operation, as it is after the change. An id you may not see never emits.',
    authScopes: { authenticated: true },
    args: { id: t.arg.globalID({ required: true, description: 'The operation’s global id.' }) },
    subscribe: (_root, args, ctx) => resolve.operationChanged(nodeKeyOf(ConnectorOperation, args.id), ctx, () => ConnectorOperation.getDataloader(ctx)),
    resolve: (op: OperationShape) => op,
  }),
  operationsChanged: t.field({
    type: ConnectorOperation,
    description: 'Every committed change of a visible operation matching the filter (same filters as `operations`).',
    authScopes: { authenticated: true },
    args: { filter: t.arg({ type: OperationFilter, required: false, description: 'Which operations; omitted: every visible one.' }) },
    subscribe: (_root, args, ctx) => resolve.operationsChanged(args.filter, ctx, () => ConnectorOperation.getDataloader(ctx)),
    resolve: (op: OperationShape) => op,
  }),
  watchChanged: t.field({
    type: ProjectionWatch,
    description: 'Every committed change of one watch. An id you may not see never emits.',
    authScopes: { authenticated: true },
    args: { id: t.arg.globalID({ required: true, description: 'The watch’s global id.' }) },
    subscribe: (_root, args, ctx) => resolve.watchChanged(nodeKeyOf(ProjectionWatch, args.id), ctx, () => ProjectionWatch.getDataloader(ctx)),
    resolve: (watch: WatchShape) => watch,
  }),
  watchesChanged: t.field({
    type: ProjectionWatch,
    description: 'Every committed change of a visible watch matching the filter (same filters as `watches`).',
    authScopes: { authenticated: true },
    args: { filter: t.arg({ type: WatchFilter, required: false, description: 'Which watches; omitted: every visible one.' }) },
    subscribe: (_root, args, ctx) => resolve.watchesChanged(args.filter, ctx, () => ProjectionWatch.getDataloader(ctx)),
    resolve: (watch: WatchShape) => watch,
  }),
  sweepReceiptChanged: t.field({
    type: SweepReceipt,
    description: 'Every committed change of one sweep receipt or of its candidates (reselect candidateCounts for progress). An id you may not see never emits.',
    authScopes: { authenticated: true },
    args: { id: t.arg.globalID({ required: true, description: 'The sweep receipt’s global id.' }) },
    subscribe: (_root, args, ctx) => resolve.sweepReceiptChanged(nodeKeyOf(SweepReceipt, args.id), ctx, () => SweepReceipt.getDataloader(ctx)),
    resolve: (receipt: ReceiptShape) => receipt,
  }),
  sweepReceiptsChanged: t.field({
    type: SweepReceipt,
    description: 'Sweep progress: every committed change of a visible receipt (or its candidates) matching the filter, e.g. one partition.',
    authScopes: { authenticated: true },
    args: { filter: t.arg({ type: SweepReceiptFilter, required: false, description: 'Which receipts; omitted: every visible one.' }) },
    subscribe: (_root, args, ctx) => resolve.sweepReceiptsChanged(args.filter, ctx, () => SweepReceipt.getDataloader(ctx)),
    resolve: (receipt: ReceiptShape) => receipt,
  }),
  storeChanged: t.field({
    type: StoreChange,
    description:
      'Changes not delivered node by node (retention, backlog samples, migrations, and writes of more than 100 rows you may see: `BULK_CHANGE`): one event per subject and reason however many rows went, only when rows you may see went. Events a slow reader has not taken yet merge.',
    authScopes: { authenticated: true },
    args: { subjects: t.arg({ type: [StoreChangeSubject], required: false, description: 'Which subjects; omitted: all.' }) },
    subscribe: (_root, args, ctx) => resolve.storeChanged(args.subjects, ctx),
    resolve: (change: StoreChangeShape) => change,
  }),
}));
