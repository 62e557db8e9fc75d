/**
 * Every migration of the connector store, in order. Migrations are frozen in
 * time: they take `Kysely<any>`, import nothing from the application, and
 * receive the dialect's column types from the migration provider.
 */
import type { Migration } from 'kysely';
import type { MigrationColumnTypes } from './column-types.js';
import { initialMigration } from './0001-initial.js';
import { sweepReceiptNodeKeyMigration } from './0002-sweep-receipt-node-key.js';
import { operationFinalizedLeaseMigration } from './0003-operation-finalized-lease.js';
import { operationCountsMigration } from './0004-operation-counts.js';
import { operationHistoryMigration } from './0005-operation-history.js';
import { operationFailureIndexesMigration } from './0006-operation-failure-indexes.js';
import { syncStateProgressedAtMigration } from './0007-sync-state-progressed-at.js';
import { operationOwnerForeignIndexMigration } from './0008-operation-owner-foreign-index.js';
import { everyRowIndexesFencedMigration } from './0009-every-row-indexes-fenced.js';
import { operationIDIndexMigration } from './0010-operation-id-index.js';
import { operationActivityMigration } from './0011-operation-activity.js';
import { replayParametersMigration } from './0012-replay-parameters.js';
import { requestKeysAndSendWindowMigration } from './0013-request-keys-and-send-window.js';
import { changeOutboxMigration } from './0014-change-outbox.js';
import { operationIDPrefixIndexMigration } from './0015-operation-id-prefix-index.js';
import { activityCommittedPerStatementMigration } from './0016-activity-committed-per-statement.js';
import { operationHotStepsMigration } from './0017-operation-hot-steps.js';

export type { MigrationColumnTypes } from './column-types.js';

/** The ordered record of migrations, keyed by a name that sorts in order. */
export function getMigrations(types: MigrationColumnTypes): Record<string, Migration> {
  return {
    '0001-initial': initialMigration(types),
    '0002-sweep-receipt-node-key': sweepReceiptNodeKeyMigration(types),
    '0003-operation-finalized-lease': operationFinalizedLeaseMigration(types),
    '0004-operation-counts': operationCountsMigration(types),
    '0005-operation-history': operationHistoryMigration(types),
    '0006-operation-failure-indexes': operationFailureIndexesMigration(types),
    '0007-sync-state-progressed-at': syncStateProgressedAtMigration(types),
    '0008-operation-owner-foreign-index': operationOwnerForeignIndexMigration(types),
    '0009-every-row-indexes-fenced': everyRowIndexesFencedMigration(types),
    '0010-operation-id-index': operationIDIndexMigration(types),
    '0011-operation-activity': operationActivityMigration(types),
    '0012-replay-parameters': replayParametersMigration(types),
    '0013-request-keys-and-send-window': requestKeysAndSendWindowMigration(types),
    '0014-change-outbox': changeOutboxMigration(types),
    '0015-operation-id-prefix-index': operationIDPrefixIndexMigration(types),
    '0016-activity-committed-per-statement': activityCommittedPerStatementMigration(types),
    '0017-operation-hot-steps': operationHotStepsMigration(types),
  };
}
