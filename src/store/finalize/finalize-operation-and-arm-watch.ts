import { inTransaction, type StoreContext } from '../context.js';
import { encodeJSONColumn } from '../json.js';
import { rowToOperation } from '../operations/row.js';
import type { ConnectorOperation, ConnectorOperationState } from '../operations/types.js';
import { armWatchForWrite } from '../projection-watches/arm-watch.js';
import type { ProjectionWatch, ProjectionWatchIdentity } from '../projection-watches/types.js';

/**
 * States finalize may commit from, as the reference has it: an attempt in
 * progress, or an already committed row (whose cleared lease token fails the
 * fence anyway). Never reconcile-only: that one must reconcile first.
 */
const FINALIZABLE_STATES = ['attempted', 'committed'] as const satisfies readonly ConnectorOperationState[];

/** Input of {@link finalizeOperationAndArmWatch}. */
export interface FinalizeOperationInput {
  /** The operation's idempotency key. */
  key: { callerDID: string; operationID: string };
  /** The lease epoch the holder acquired; finalize does not advance it. */
  version: number;
  /** The holder's lease token (a secret: never echoed in errors). */
  leaseToken: string;
  /** The local document the write landed in. */
  documentID: string;
  /** What the provider returned, recorded for replays (any JSON value). */
  resultEntity: unknown;
  /** Digest of the local winner the write carried; becomes the watch's observed digest. */
  currentWinnerDigest: string | null;
  /** The provider document to watch for verification. */
  watchIdentity: ProjectionWatchIdentity;
}

/** What {@link finalizeOperationAndArmWatch} did. */
export interface FinalizeOperationResult {
  /** False when the lease CAS lost: nothing at all was written. */
  finalized: boolean;
  /** The operation as committed; null when not finalized. */
  operation: ConnectorOperation | null;
  /** The armed watch as committed with the operation; null when not finalized. */
  watch: ProjectionWatch | null;
}

/**
 * Marks a leased operation `committed` and arms the watch of the document it
 * wrote, in one transaction (SPEC §3.4):
 *
 * 1. One conditional UPDATE of the operation to `committed` (document id,
 *    result entity, `updated_at`), guarded by the key, `state IN (attempted,
 *    committed)`, `version = input.version` and `lease_token = input.leaseToken`.
 *    The version (the lease epoch) is not bumped.
 * 2. No row matched → `{ finalized: false }` and nothing else is written: a
 *    stale lease never touches the watch.
 * 3. The document's watch under any other identity is deleted: one watch per
 *    (owner, model, document).
 * 4. The watch is upserted: a new one starts `pending_verification`, attempts
 *    0, generation 0, version 0, due now, with a new node key; an existing one
 *    of the same identity opens a new generation (generation + 1, attempts 0,
 *    pending, observed digest replaced, verified digest null, due now, claim
 *    and defer reason cleared, version + 1; node key, document and
 *    `created_at` kept).
 *
 * Deliberate addition to the reference: the same UPDATE also clears the lease
 * (`lease_token` and `lease_expires_at` null), because a committed operation
 * has no holder. So a finalize is single-use: repeating it with the same
 * token returns false, and of N concurrent finalizes with one lease exactly
 * one returns true and arms the watch once (on Postgres the others wait on
 * the operation's row lock, then find the token gone). Concurrent finalizes
 * and arms of one watch identity queue on the watch row's lock; on Postgres
 * writers that may create the watch of one (owner, model, document) also
 * queue on a transaction-scoped advisory lock (see `lockDocumentWatchSlot`),
 * so a concurrent first write of a document never fails on the second unique
 * index. A lost CAS takes no lock beyond the operation row.
 */
export async function finalizeOperationAndArmWatch(
  store: StoreContext,
  input: FinalizeOperationInput,
): Promise<FinalizeOperationResult> {
  return inTransaction(store, async (tx) => {
    const now = tx.now();
    const committed = await tx.db
      .updateTable('kubun_connector_operation')
      .set({
        state: 'committed',
        document_id: input.documentID,
        result_entity: encodeJSONColumn(input.resultEntity),
        updated_at: now,
        lease_token: null,
        lease_expires_at: null,
      })
      .where('caller_did', '=', input.key.callerDID)
      .where('operation_id', '=', input.key.operationID)
      .where('state', 'in', FINALIZABLE_STATES)
      .where('version', '=', input.version)
      .where('lease_token', '=', input.leaseToken)
      // The committed row comes back with the write: no read after commit.
      .returningAll()
      .executeTakeFirst();
    if (committed === undefined) return { finalized: false, operation: null, watch: null };

    const watch = await armWatchForWrite(tx, {
      identity: input.watchIdentity,
      documentID: input.documentID,
      observedWinnerDigest: input.currentWinnerDigest,
    });
    return { finalized: true, operation: rowToOperation(committed), watch };
  });
}
