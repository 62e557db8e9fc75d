/**
 * How committed changes are announced on Postgres: a NOTIFY on one channel
 * shared by every replica, whose payload is `code:nodeKey` pairs separated by
 * spaces (src/server/change-feed.ts decodes it). The store owns the channel
 * and the codes because a fenced step's own statement sends its NOTIFY
 * (src/store/operations/fenced-step.ts): Postgres delivers it when the
 * statement commits, never for a write that did not happen, and the step
 * needs no statement of its own to announce itself.
 */
import { sql, type RawBuilder } from 'kysely';

/** The NOTIFY channel shared by every replica on one database. */
export const CHANGE_CHANNEL = 'kubun_connector_changes';

/** The code of each kind of changed node in a payload. */
export const CHANGE_KIND_CODES = { operation: 'o', watch: 'w', syncState: 's', sweepReceipt: 'r', store: 'S' } as const;

/**
 * `pg_notify` of the operation whose node key is `nodeKey` (a column of the
 * statement's rows): selected once per changed row, it announces exactly the
 * rows the statement wrote.
 */
export function notifyOperationChanged(nodeKey: RawBuilder<unknown>): RawBuilder<unknown> {
  return sql`pg_notify(${sql.lit(CHANGE_CHANNEL)}, ${sql.lit(`${CHANGE_KIND_CODES.operation}:`)} || ${nodeKey})`;
}
