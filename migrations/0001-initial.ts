/**
 * The initial schema: every table, key and index of the connector store,
 * plus the opaque `node_key` columns the GraphQL API uses as public ids.
 * Frozen: never edit after release; add a new migration instead.
 */
import type { Kysely, Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';

export function initialMigration(t: MigrationColumnTypes): Migration {
  return {
    async up(db: Kysely<any>): Promise<void> {
      await db.schema
        .createTable('kubun_connector_sync_state')
        .addColumn('connector_name', t.text, (c) => c.notNull())
        .addColumn('owner_did', t.text, (c) => c.notNull())
        // Public identity for the API; a delete + recreate gets a new one.
        .addColumn('node_key', t.text, (c) => c.notNull())
        .addColumn('checkpoint', t.text)
        .addColumn('last_synced_at', t.text, (c) => c.notNull())
        .addColumn('entity_count', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('status', t.text, (c) => c.notNull())
        .addColumn('error', t.text)
        .addColumn('lease_expires_at', t.bigint)
        .addColumn('recovery', t.text)
        .addColumn('version', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('incarnation', t.text)
        .addPrimaryKeyConstraint('kubun_connector_sync_state_pkey', ['connector_name', 'owner_did'])
        .execute();
      await db.schema
        .createIndex('uq_connector_sync_state_node_key')
        .on('kubun_connector_sync_state')
        .column('node_key')
        .unique()
        .execute();
      // Owner-scoped listing for the API (the primary key leads with the connector).
      await db.schema
        .createIndex('idx_connector_sync_state_owner')
        .on('kubun_connector_sync_state')
        .columns(['owner_did', 'connector_name'])
        .execute();

      await db.schema
        .createTable('kubun_connector_pending_auth')
        .addColumn('state', t.text, (c) => c.notNull().primaryKey())
        .addColumn('code_verifier', t.text, (c) => c.notNull())
        .addColumn('provider', t.text, (c) => c.notNull())
        .addColumn('owner_did', t.text, (c) => c.notNull())
        .addColumn('owner_wrappable_did', t.text)
        .addColumn('controller_wrappable_did', t.text)
        .addColumn('created_at', t.bigint, (c) => c.notNull())
        .addColumn('redirect_url', t.text, (c) => c.notNull())
        .addColumn('scopes', t.text, (c) => c.notNull())
        .addColumn('is_incremental', 'integer', (c) => c.notNull())
        .addColumn('expires_at', t.bigint, (c) => c.notNull())
        .execute();
      // The expiry sweep deletes by `expires_at` in bounded batches.
      await db.schema
        .createIndex('idx_connector_pending_auth_expires')
        .on('kubun_connector_pending_auth')
        .column('expires_at')
        .execute();

      await db.schema
        .createTable('kubun_connector_operation')
        .addColumn('caller_did', t.text, (c) => c.notNull())
        .addColumn('operation_id', t.text, (c) => c.notNull())
        .addColumn('node_key', t.text, (c) => c.notNull())
        .addColumn('owner_did', t.text, (c) => c.notNull())
        .addColumn('connector_name', t.text, (c) => c.notNull())
        .addColumn('model', t.text, (c) => c.notNull())
        .addColumn('op', t.text, (c) => c.notNull())
        .addColumn('account_key', t.text, (c) => c.notNull())
        .addColumn('target', t.text, (c) => c.notNull())
        .addColumn('source_id', t.text)
        .addColumn('deterministic_event_id', t.text, (c) => c.notNull())
        .addColumn('payload_hash', t.text, (c) => c.notNull())
        .addColumn('reissue_intent', t.text, (c) => c.notNull())
        .addColumn('provider_etag', t.text)
        .addColumn('document_id', t.text)
        .addColumn('result_entity', t.text)
        .addColumn('state', t.text, (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('next_attempt_at', t.bigint)
        .addColumn('defer_reason', t.text)
        .addColumn('send_marker', t.text)
        .addColumn('last_kind', t.text)
        .addColumn('last_http_status', 'integer')
        .addColumn('version', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('incarnation', t.text)
        .addColumn('lease_token', t.text)
        .addColumn('lease_expires_at', t.bigint)
        .addColumn('created_at', t.bigint, (c) => c.notNull())
        .addColumn('updated_at', t.bigint, (c) => c.notNull())
        .addPrimaryKeyConstraint('kubun_connector_operation_pkey', ['caller_did', 'operation_id'])
        .execute();
      await db.schema
        .createIndex('uq_connector_operation_node_key')
        .on('kubun_connector_operation')
        .column('node_key')
        .unique()
        .execute();
      await db.schema
        .createIndex('idx_connector_operation_document')
        .on('kubun_connector_operation')
        .column('document_id')
        .execute();
      await db.schema
        .createIndex('idx_connector_operation_owner')
        .on('kubun_connector_operation')
        .column('owner_did')
        .execute();
      await db.schema
        .createIndex('idx_connector_operation_state_updated')
        .on('kubun_connector_operation')
        .columns(['state', 'updated_at'])
        .execute();
      // Keyset listing newest first: (created_at, node_key) for everyone, and
      // per owner / per caller for the two visibility paths.
      await db.schema
        .createIndex('idx_connector_operation_created')
        .on('kubun_connector_operation')
        .columns(['created_at', 'node_key'])
        .execute();
      await db.schema
        .createIndex('idx_connector_operation_owner_created')
        .on('kubun_connector_operation')
        .columns(['owner_did', 'created_at', 'node_key'])
        .execute();
      await db.schema
        .createIndex('idx_connector_operation_caller_created')
        .on('kubun_connector_operation')
        .columns(['caller_did', 'created_at', 'node_key'])
        .execute();
      // Due work: live states by next attempt time.
      await db.schema
        .createIndex('idx_connector_operation_due')
        .on('kubun_connector_operation')
        .columns(['state', 'next_attempt_at'])
        .execute();

      await db.schema
        .createTable('kubun_connector_projection_watch')
        .addColumn('owner_did', t.text, (c) => c.notNull())
        .addColumn('connector_name', t.text, (c) => c.notNull())
        .addColumn('model', t.text, (c) => c.notNull())
        .addColumn('account_key', t.text, (c) => c.notNull())
        .addColumn('source_id', t.text, (c) => c.notNull())
        .addColumn('node_key', t.text, (c) => c.notNull())
        .addColumn('document_id', t.text, (c) => c.notNull())
        .addColumn('verified_state_digest', t.text)
        .addColumn('observed_winner_digest', t.text)
        .addColumn('verification_status', t.text, (c) => c.notNull())
        .addColumn('verification_attempts', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('repair_generation', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('next_attempt_at', t.bigint)
        .addColumn('claimed_until', t.bigint)
        .addColumn('defer_reason', t.text)
        .addColumn('version', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('created_at', t.bigint, (c) => c.notNull())
        .addColumn('updated_at', t.bigint, (c) => c.notNull())
        .addPrimaryKeyConstraint('kubun_connector_projection_watch_pkey', [
          'owner_did',
          'connector_name',
          'model',
          'account_key',
          'source_id',
        ])
        .execute();
      await db.schema
        .createIndex('uq_connector_watch_ingress')
        .on('kubun_connector_projection_watch')
        .columns(['owner_did', 'model', 'document_id'])
        .unique()
        .execute();
      await db.schema
        .createIndex('idx_connector_watch_document')
        .on('kubun_connector_projection_watch')
        .column('document_id')
        .execute();
      await db.schema
        .createIndex('uq_connector_watch_node_key')
        .on('kubun_connector_projection_watch')
        .column('node_key')
        .unique()
        .execute();
      await db.schema
        .createIndex('idx_connector_watch_due')
        .on('kubun_connector_projection_watch')
        .columns(['verification_status', 'next_attempt_at'])
        .execute();
      await db.schema
        .createIndex('idx_connector_watch_created')
        .on('kubun_connector_projection_watch')
        .columns(['created_at', 'node_key'])
        .execute();
      await db.schema
        .createIndex('idx_connector_watch_owner_created')
        .on('kubun_connector_projection_watch')
        .columns(['owner_did', 'created_at', 'node_key'])
        .execute();

      await db.schema
        .createTable('kubun_connector_observation_records')
        .addColumn('type', t.text, (c) => c.notNull())
        .addColumn('owner', t.text, (c) => c.notNull())
        .addColumn('id', t.text, (c) => c.notNull())
        .addColumn('op_hash', t.text, (c) => c.notNull())
        .addColumn('hlc', t.text, (c) => c.notNull())
        .addColumn('op_jwt', t.text, (c) => c.notNull())
        .addColumn('payload', t.binary)
        .addPrimaryKeyConstraint('kubun_connector_observation_records_pkey', ['type', 'owner', 'id', 'op_hash'])
        .execute();
      // The document sweep deletes a document's records by (type, id).
      await db.schema
        .createIndex('idx_connector_observation_records_document')
        .on('kubun_connector_observation_records')
        .columns(['type', 'id'])
        .execute();

      await db.schema
        .createTable('kubun_connector_observation_repair')
        .addColumn('document_id', t.text, (c) => c.notNull().primaryKey())
        .addColumn('owner', t.text, (c) => c.notNull())
        .addColumn('fetch_hlc', t.text, (c) => c.notNull())
        .addColumn('decision_hlc', t.text, (c) => c.notNull())
        .addColumn('present', 'integer', (c) => c.notNull())
        .addColumn('value_digest', t.text)
        .addColumn('written_at', t.bigint, (c) => c.notNull())
        .execute();
      await db.schema
        .createIndex('idx_connector_observation_repair_written')
        .on('kubun_connector_observation_repair')
        .columns(['written_at', 'document_id'])
        .execute();

      await db.schema
        .createTable('kubun_connector_entity_trim')
        .addColumn('document_id', t.text, (c) => c.notNull().primaryKey())
        .addColumn('owner_did', t.text, (c) => c.notNull())
        .addColumn('connector_name', t.text, (c) => c.notNull())
        .addColumn('trimmed_fields', t.text, (c) => c.notNull())
        .addColumn('updated_at', t.bigint, (c) => c.notNull())
        .execute();

      await db.schema
        .createTable('kubun_connector_sweep_receipt')
        .addColumn('owner_did', t.text, (c) => c.notNull())
        .addColumn('connector_name', t.text, (c) => c.notNull())
        .addColumn('partition', t.text, (c) => c.notNull())
        .addColumn('provenance', t.text, (c) => c.notNull())
        .addColumn('sequence', t.bigint, (c) => c.notNull())
        .addColumn('model_id', t.text, (c) => c.notNull())
        .addColumn('scope', t.text, (c) => c.notNull())
        .addColumn('keep', t.text, (c) => c.notNull())
        .addColumn('source_fetch_hlc', t.text, (c) => c.notNull())
        .addColumn('predicate', t.text)
        .addColumn('kind', t.text, (c) => c.notNull())
        .addColumn('complete', 'integer', (c) => c.notNull())
        .addColumn('created_at', t.bigint, (c) => c.notNull())
        .addColumn('committed_at', t.bigint)
        .addPrimaryKeyConstraint('kubun_connector_sweep_receipt_pkey', [
          'owner_did',
          'connector_name',
          'partition',
          'provenance',
        ])
        .execute();

      await db.schema
        .createTable('kubun_connector_sweep_candidate')
        .addColumn('owner_did', t.text, (c) => c.notNull())
        .addColumn('connector_name', t.text, (c) => c.notNull())
        .addColumn('partition', t.text, (c) => c.notNull())
        .addColumn('provenance', t.text, (c) => c.notNull())
        .addColumn('document_id', t.text, (c) => c.notNull())
        .addColumn('source_id', t.text, (c) => c.notNull())
        .addColumn('model_id', t.text, (c) => c.notNull())
        .addColumn('state', t.text, (c) => c.notNull())
        .addColumn('attempts', 'integer', (c) => c.notNull())
        .addColumn('apply_failures', 'integer', (c) => c.notNull().defaultTo(0))
        .addColumn('last_error', t.text)
        .addColumn('next_attempt_at', t.bigint, (c) => c.notNull().defaultTo(0))
        .addColumn('updated_at', t.bigint, (c) => c.notNull())
        .addPrimaryKeyConstraint('kubun_connector_sweep_candidate_pkey', [
          'owner_did',
          'connector_name',
          'partition',
          'provenance',
          'document_id',
        ])
        .execute();
      await db.schema
        .createIndex('kubun_connector_sweep_candidate_due_idx')
        .on('kubun_connector_sweep_candidate')
        .columns(['owner_did', 'connector_name', 'state', 'next_attempt_at'])
        .execute();
      // A document's candidates (document sweep, `hasDocumentConnectorWork`).
      await db.schema
        .createIndex('idx_connector_sweep_candidate_document')
        .on('kubun_connector_sweep_candidate')
        .column('document_id')
        .execute();

      await db.schema
        .createTable('kubun_connector_sweep_checkpoint')
        .addColumn('owner_did', t.text, (c) => c.notNull())
        .addColumn('connector_name', t.text, (c) => c.notNull())
        .addColumn('partition', t.text, (c) => c.notNull())
        .addColumn('provenance', t.text, (c) => c.notNull())
        .addColumn('receipt_sequence', t.bigint, (c) => c.notNull())
        .addColumn('updated_at', t.bigint, (c) => c.notNull())
        .addPrimaryKeyConstraint('kubun_connector_sweep_checkpoint_pkey', ['owner_did', 'connector_name', 'partition'])
        .execute();
    },

    async down(db: Kysely<any>): Promise<void> {
      for (const table of [
        'kubun_connector_sweep_checkpoint',
        'kubun_connector_sweep_candidate',
        'kubun_connector_sweep_receipt',
        'kubun_connector_observation_repair',
        'kubun_connector_observation_records',
        'kubun_connector_entity_trim',
        'kubun_connector_projection_watch',
        'kubun_connector_operation',
        'kubun_connector_pending_auth',
        'kubun_connector_sync_state',
      ]) {
        // Dropping a table drops its indexes on both dialects.
        await db.schema.dropTable(table).ifExists().execute();
      }
    },
  };
}
