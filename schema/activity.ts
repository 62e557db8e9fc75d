/** Operation activity over time: `operationActivity` and its hourly buckets (the console's charts). */
import * as resolve from '../resolvers/activity.js';
import { builder } from './builder.js';
import { nameInput } from './inputs.js';

const ActivityWindow = builder.enumType('ActivityWindow', {
  description: 'How far back `operationActivity` reads, ending with the current (partial) hour.',
  values: {
    LAST_24_HOURS: { description: 'The current hour and the 23 before it: 24 buckets.' },
    LAST_7_DAYS: { description: 'The current hour and the 167 before it: 168 buckets.' },
  } as const,
});

const OperationActivityBucket = builder.objectRef<resolve.ActivityBucket>('OperationActivityBucket').implement({
  description:
    'What happened to visible operations in one UTC hour. Counts are events, not operations: an operation that failed twice in the hour counts twice. Deleting an operation later takes nothing off.',
  fields: (t) => ({
    start: t.field({ type: 'DateTime', description: 'The start of the hour (UTC).', resolve: (bucket) => new Date(bucket.start) }),
    committed: t.int({ description: 'Operations that committed (finalize) in the hour.', resolve: (bucket) => bucket.counts.committed }),
    retryable: t.int({ description: 'Attempts that ended `RETRYABLE` (tried again after backoff).', resolve: (bucket) => bucket.counts.retryable }),
    unknown: t.int({ description: 'Attempts that ended `UNKNOWN` (may have reached the provider: reconcile before resending).', resolve: (bucket) => bucket.counts.unknown }),
    fatal: t.int({ description: 'Attempts that ended `FATAL` (given up).', resolve: (bucket) => bucket.counts.fatal }),
    offline: t.int({ description: 'Attempts deferred `OFFLINE` (the device was offline; the attempt is given back).', resolve: (bucket) => bucket.counts.offline }),
    auth: t.int({ description: 'Attempts deferred `AUTH` (the owner must authorize; the attempt is given back).', resolve: (bucket) => bucket.counts.auth }),
    dueBacklog: t.int({
      nullable: true,
      description:
        'The largest due backlog (live operations a worker could claim) sampled in the hour, across the whole store. Null when no sample was taken in the hour, and unless `backlogIncluded`.',
      resolve: (bucket) => bucket.dueBacklog,
    }),
    dueBacklogCapped: t.boolean({
      description: 'True when that sample stopped counting at 10 000: `dueBacklog` is then a lower bound.',
      resolve: (bucket) => bucket.dueBacklogCapped,
    }),
  }),
});

const OperationActivity = builder.objectRef<resolve.OperationActivityShape>('OperationActivity').implement({
  description: 'Visible operations’ activity per hour over a window, from counters the database keeps (never a scan of operations).',
  fields: (t) => ({
    window: t.field({ type: ActivityWindow, description: 'The window read.', resolve: (activity) => activity.window }),
    from: t.field({ type: 'DateTime', description: 'The start of the first bucket.', resolve: (activity) => new Date(activity.from) }),
    to: t.field({ type: 'DateTime', description: 'The end of the last bucket (the end of the current hour), exclusive.', resolve: (activity) => new Date(activity.to) }),
    bucketSeconds: t.exposeInt('bucketSeconds', { description: 'The width of every bucket: 3600.' }),
    buckets: t.field({
      type: [OperationActivityBucket],
      description: 'Every hour of the window, oldest first, zeros included; the last is the current hour so far.',
      resolve: (activity) => activity.buckets,
    }),
    backlogIncluded: t.exposeBoolean('backlogIncluded', {
      description:
        'Whether `dueBacklog` applies: backlog samples count every operation in the store, so only service principals reading without `connectorName` get them.',
    }),
  }),
});

builder.queryFields((t) => ({
  operationActivity: t.field({
    type: OperationActivity,
    description:
      'What happened to the viewer’s visible operations (as caller or owner; a service sees all) per hour: commits and recorded outcomes by kind, and for services the due backlog over time. For dashboards’ charts.',
    authScopes: { authenticated: true },
    args: {
      window: t.arg({ type: ActivityWindow, required: true, defaultValue: 'LAST_24_HOURS', description: 'How far back; default the last 24 hours.' }),
      connectorName: t.arg.string({ required: false, validate: nameInput.optional().nullable(), description: 'Only this connector’s operations.' }),
    },
    resolve: (_root, args, ctx) => resolve.operationActivity(args, ctx),
  }),
}));
