/** Committing a receipt: closes the pass and advances the partition checkpoint. */
import type { StoreContext } from '../context.js';
import { changedAny, forUpdate, inTransaction } from '../context.js';
import { InvalidStateError, NotFoundError } from '../errors.js';
import { getSweepCheckpoint } from './checkpoints.js';
import { rowToSweepReceipt } from './row.js';
import type { SweepCheckpoint, SweepReceipt, SweepReceiptKey } from './types.js';
import { requireReceiptKey } from './validate.js';

/** What {@link commitSweepReceipt} did. */
export interface CommitSweepReceiptResult {
  receipt: SweepReceipt;
  /** The partition's checkpoint after the commit. */
  checkpoint: SweepCheckpoint;
  /** False when the receipt was already committed (a replay). */
  newlyCommitted: boolean;
  /** Whether this call moved the checkpoint (false for an older or equal sequence, or a replay). */
  checkpointAdvanced: boolean;
}

/**
 * Commits a receipt in one transaction: sets `committed_at` (kept from the
 * first commit on a replay) and advances the partition checkpoint to the
 * receipt's sequence, never backwards: a commit of an older or equal sequence
 * leaves it. Refused with {@link InvalidStateError} while a candidate of the
 * receipt is still `pending` (the checkpoint means "fully applied"; `failed`
 * candidates do not block). A missing receipt is a {@link NotFoundError}.
 */
export async function commitSweepReceipt(store: StoreContext, key: SweepReceiptKey): Promise<CommitSweepReceiptResult> {
  requireReceiptKey('key', key);
  return inTransaction(store, async (tx) => {
    const receiptKey = { owner_did: key.ownerDID, connector_name: key.connectorName, partition: key.partition, provenance: key.provenance };
    // Locks the receipt so concurrent commits of it run one after the other on Postgres.
    const row = await forUpdate(tx, tx.db.selectFrom('kubun_connector_sweep_receipt').selectAll().where((eb) => eb.and(receiptKey))).executeTakeFirst();
    if (row === undefined) throw new NotFoundError('sweep receipt');

    const now = tx.now();
    let receipt = rowToSweepReceipt(row);
    const newlyCommitted = receipt.committedAt === null;
    if (newlyCommitted) {
      const pending = await tx.db
        .selectFrom('kubun_connector_sweep_candidate')
        .select('document_id')
        .where((eb) => eb.and(receiptKey))
        .where('state', '=', 'pending')
        .limit(1)
        .executeTakeFirst();
      if (pending !== undefined) throw new InvalidStateError('sweep receipt still has pending candidates');
      await tx.db.updateTable('kubun_connector_sweep_receipt').set({ committed_at: now }).where((eb) => eb.and(receiptKey)).execute();
      receipt = { ...receipt, committedAt: now };
    }

    const advanced = await tx.db
      .insertInto('kubun_connector_sweep_checkpoint')
      .values({ ...receiptKey, receipt_sequence: receipt.sequence, updated_at: now })
      .onConflict((oc) =>
        oc
          .columns(['owner_did', 'connector_name', 'partition'])
          .doUpdateSet((eb) => ({
            receipt_sequence: eb.ref('excluded.receipt_sequence'),
            provenance: eb.ref('excluded.provenance'),
            updated_at: eb.ref('excluded.updated_at'),
          }))
          // Never backwards: an older (or the same) sequence leaves the checkpoint.
          .where('kubun_connector_sweep_checkpoint.receipt_sequence', '<', receipt.sequence),
      )
      .executeTakeFirst();

    const checkpoint = await getSweepCheckpoint(tx, key);
    if (checkpoint === null) throw new Error('sweep checkpoint missing right after upsert');
    return { receipt, checkpoint, newlyCommitted, checkpointAdvanced: changedAny(advanced) };
  });
}
