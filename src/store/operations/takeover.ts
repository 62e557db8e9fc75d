/** Taking the lease of a live operation whose lease is absent or expired (claim and acquire share it). */
import type { Expression, ExpressionBuilder } from 'kysely';
import type { Database, OperationRow } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { LIVE_OPERATION_STATES } from './types.js';
import { OPERATION_TABLE, sendWindowClosedAt } from './row.js';
import { rowHas } from '../row-checks.js';

/**
 * CAS on the version read in `read`: a new lease token, `version + 1`, and an
 * attempted row with a send marker becomes `reconcile_only` (a previous
 * holder may have reached the provider). The state is decided in the UPDATE
 * itself, from the row as it is at write time, because a holder's mark-sent
 * does not move the version and may land between our read and this write.
 * The lease guard stops a takeover of a lease its holder renewed meanwhile
 * (renewal keeps the version), the send-window guard one of a marked send
 * the provider may still be applying. Returns the new row, or `undefined` when the
 * CAS lost.
 */
export async function takeOverLease(
  store: StoreContext,
  read: OperationRow,
  leaseMs: number,
  now: number,
): Promise<{ row: OperationRow; token: string } | undefined> {
  const token = store.getRandomID();
  const row = await store.db
    .updateTable(OPERATION_TABLE)
    .set((eb) => takeoverSet(eb, token, now + leaseMs, now))
    .where('caller_did', '=', read.caller_did)
    .where('operation_id', '=', read.operation_id)
    .where((eb) => eb.and([rowHas(eb, 'version', Number(read.version)), rowHas(eb, 'state', LIVE_OPERATION_STATES)]))
    .where((eb) => eb.or([eb('lease_token', 'is', null), eb('lease_expires_at', 'is', null), eb('lease_expires_at', '<=', now)]))
    // A marked send still inside its window may still be applied: not yet (issue 37).
    .where((eb) => sendWindowClosedAt(eb, now))
    .returningAll()
    .executeTakeFirst();
  return row === undefined ? undefined : { row, token };
}

/**
 * The columns a takeover writes (the rule {@link takeOverLease} and
 * `leaseDueOperations` share): the new token, the new expiry, `version + 1`,
 * and `reconcile_only` for an attempted row with a send marker, decided from
 * the row as it is at write time.
 */
export function takeoverSet(
  eb: ExpressionBuilder<Database, typeof OPERATION_TABLE>,
  token: string | Expression<string>,
  leaseExpiresAt: number,
  now: number,
) {
  return {
    lease_token: token,
    lease_expires_at: leaseExpiresAt,
    version: eb('version', '+', 1),
    state: eb
      .case()
      .when(eb.and([eb('state', '=', 'attempted'), eb('send_marker', 'is not', null)]))
      .then('reconcile_only')
      .else(eb.ref('state'))
      .end(),
    updated_at: now,
  };
}
