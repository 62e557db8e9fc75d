/**
 * Sweep receipts become nodes of the API: each gets an opaque `node_key`
 * (unique, random, never reused), like operations, watches and sync states,
 * so dashboards can refetch one and subscribe to its progress. Existing
 * receipts are given fresh keys. Also the keyset indexes of the receipt
 * listing (newest first, for everyone and per owner).
 * Frozen: never edit after release; add a new migration instead.
 */
import { randomBytes } from 'node:crypto';
import type { Kysely, Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

const TABLE = 'kubun_connector_sweep_receipt';
const BACKFILL_BATCH = 500;

export function sweepReceiptNodeKeyMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema.alterTable(TABLE).addColumn('node_key', t.text).execute();
      for (;;) {
        const rows = await db
          .selectFrom(TABLE)
          .select(['owner_did', 'connector_name', 'partition', 'provenance'])
          .where('node_key', 'is', null)
          .limit(BACKFILL_BATCH)
          .execute();
        if (rows.length === 0) break;
        for (const row of rows) {
          await db
            .updateTable(TABLE)
            .set({ node_key: randomBytes(16).toString('base64url') })
            .where('owner_did', '=', row.owner_did)
            .where('connector_name', '=', row.connector_name)
            .where('partition', '=', row.partition)
            .where('provenance', '=', row.provenance)
            .execute();
        }
      }
      // SQLite cannot add NOT NULL to an existing column; there the store always writes one.
      if (t.dialect === 'postgres') await db.schema.alterTable(TABLE).alterColumn('node_key', (c) => c.setNotNull()).execute();
      await db.schema.createIndex('uq_connector_sweep_receipt_node_key').unique().on(TABLE).column('node_key').execute();
      await db.schema.createIndex('idx_connector_sweep_receipt_created').on(TABLE).columns(['created_at', 'node_key']).execute();
      await db.schema.createIndex('idx_connector_sweep_receipt_owner_created').on(TABLE).columns(['owner_did', 'created_at', 'node_key']).execute();
    },
    async down(db: Kysely<any>): Promise<void> {
      await db.schema.dropIndex('idx_connector_sweep_receipt_owner_created').execute();
      await db.schema.dropIndex('idx_connector_sweep_receipt_created').execute();
      await db.schema.dropIndex('uq_connector_sweep_receipt_node_key').execute();
      await db.schema.alterTable(TABLE).dropColumn('node_key').execute();
    },
  };
}
