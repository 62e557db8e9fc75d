/** Announcing committed changes to subscribers. */
import type { ChangeEvent, ChangeKind, GraphQLContext } from './context.js';

/**
 * Publishes that these nodes changed. Called only after the store call
 * returned, i.e. after its transaction committed; a failure to publish is
 * logged, never turned into a failed mutation (the write stands).
 */
export async function announce(ctx: GraphQLContext, kind: ChangeKind, nodeKeys: readonly (string | null | undefined)[]): Promise<void> {
  await announceAll(ctx, { [kind]: nodeKeys });
}

/**
 * Whether a change a store step's own statement announced (`announced`: its
 * `pg_notify`, sent when it committed) reaches subscribers without
 * {@link announce}: only through a change feed listening on the change
 * channel (`ctx.changes.channel`); any other feed is told here.
 */
export function statementAnnounced(ctx: GraphQLContext, announced: boolean): boolean {
  return announced && ctx.changes.channel !== undefined;
}

/**
 * {@link announce} for changes of several kinds at once (finalize changes an
 * operation and a watch): one publish, so one `pg_notify` statement on Postgres.
 */
export async function announceAll(ctx: GraphQLContext, changes: Partial<Record<ChangeKind, readonly (string | null | undefined)[]>>): Promise<void> {
  const events: ChangeEvent[] = [];
  for (const [kind, nodeKeys] of Object.entries(changes) as [ChangeKind, readonly (string | null | undefined)[]][]) {
    for (const nodeKey of nodeKeys) if (nodeKey != null) events.push({ kind, nodeKey });
  }
  if (events.length === 0) return;
  try {
    await ctx.changes.publish(events);
  } catch (error) {
    ctx.log().warn({ err: error, count: events.length }, 'publishing a change failed; subscribers will miss it');
  }
}
