/**
 * Idempotent finalize retries: an operation records a digest of the lease
 * token that finalized it, so a finalize repeated by the same holder (same
 * version, token and document) is recognised as a replay after the commit
 * cleared the lease. Only a digest: the token itself is a secret of its
 * holder and is not kept once the lease ends.
 * Frozen: never edit after release; add a new migration instead.
 */
import type { Kysely, Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

export function operationFinalizedLeaseMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('kubun_connector_operation').addColumn('finalized_lease_digest', t.text).execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable('kubun_connector_operation').dropColumn('finalized_lease_digest').execute();
    },
  };
}
