/**
 * Replays that never hide a change (issue 23): what a keyed write was asked
 * with is kept where a replay of its key can compare it.
 *
 * - `kubun_connector_operation.finalized_input`: the finalize's watch
 *   identity and current-winner digest (JSON), beside the result entity and
 *   document the row already holds, so the same holder finalizing again with
 *   other values is refused, naming them.
 * - `kubun_connector_sweep_receipt.candidates_digest`: a digest of the
 *   receipt's candidate list as recorded (candidates are later applied and
 *   pruned, so the list itself cannot be compared), so re-recording the key
 *   with other candidates is refused.
 *
 * Rows written before this migration hold null: their replays compare what
 * they can (the result entity and document; the receipt's fields).
 * Frozen: never edit after release; add a new migration instead.
 */
import type { Kysely, Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

export function replayParametersMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('kubun_connector_operation').addColumn('finalized_input', t.text).execute();
      await db.schema.alterTable('kubun_connector_sweep_receipt').addColumn('candidates_digest', t.text).execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('kubun_connector_sweep_receipt').dropColumn('candidates_digest').execute();
      await db.schema.alterTable('kubun_connector_operation').dropColumn('finalized_input').execute();
    },
  };
}
