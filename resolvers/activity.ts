/**
 * Thin resolver of `operationActivity`: the viewer's window of hourly
 * activity (their own operations, or every one for a service) from the store.
 */
import { readOperationActivity, HOUR_MS, type ActivityBucket, type OperationActivity } from '../src/store/activity/index.js';
import type { GraphQLContext } from './context.js';
import { visibilityScope } from './viewer.js';

/** The windows the API offers, in hours. */
export const ACTIVITY_WINDOW_HOURS = { LAST_24_HOURS: 24, LAST_7_DAYS: 7 * 24 } as const;
export type ActivityWindowArg = keyof typeof ACTIVITY_WINDOW_HOURS;

/** What `OperationActivity` resolves from. */
export interface OperationActivityShape extends OperationActivity {
  window: ActivityWindowArg;
  bucketSeconds: number;
}

export type { ActivityBucket };

/** `operationActivity`: every hour of the window, oldest first; the backlog only for readers of every operation. */
export async function operationActivity(args: { window: ActivityWindowArg; connectorName?: string | null }, ctx: GraphQLContext): Promise<OperationActivityShape> {
  const activity = await readOperationActivity(ctx.store, {
    visibleTo: visibilityScope(ctx.viewer),
    hours: ACTIVITY_WINDOW_HOURS[args.window],
    ...(args.connectorName != null && { connectorName: args.connectorName }),
  });
  return { ...activity, window: args.window, bucketSeconds: HOUR_MS / 1000 };
}
