/**
 * Keyed writes find their row by its key whatever the statistics say
 * (issue 10, "key lookups and fenced writes use the primary key"): the
 * tables are analyzed while no operation holds a lease, has attempts or a
 * last kind and no watch is pending, then fill with rows that do, unanalyzed
 * (what a young or fast-growing table looks like to the planner). Every
 * UPDATE a write-back and a verification issue is then explained with its
 * own parameters: each must reach its table through the primary key (or the
 * unique node key), never through the partial index of held leases, the
 * attempts index or a status index that the stale statistics make look empty.
 */
import { CompiledQuery } from 'kysely';
import { expect, it } from 'vitest';
import { finalizeOperationAndArmWatch } from '../../src/store/finalize/index.js';
import {
  applyOperationAction,
  markOperationSent,
  markSentStep,
  recordOperationOutcome,
  releaseLeaseStep,
  renewLeaseStep,
  startAttemptStep,
  startOperationAttempt,
} from '../../src/store/operations/index.js';
import { claimWatchAttempt, recordVerification } from '../../src/store/projection-watches/index.js';
import { describeEachDialect, type DialectSuite } from '../helpers/databases.js';
import { accessPaths, overSeries, recordingStatements } from '../helpers/query-plans.js';
import { claimFresh } from '../helpers/operation-claim-fixtures.js';
import { CALLER, OWNER } from '../helpers/row-fixtures.js';

const ROWS = 3_000;

/** Rows by SQL: `rows` operations (and a watch per fourth one) shaped by `state`, `lease`, `attempts`, `kind`, `status`. */
async function bulkRows(suite: DialectSuite, prefix: string, shape: { state: string; lease: boolean; attempts: number; kind: string | null; status: string }) {
  const text = (value: string | null) => (value === null ? 'null' : `'${value}'`);
  const lease = shape.lease ? `'tok-' || i, 4102444800000` : 'null, null';
  await suite.store.db.executeQuery(
    overSeries(
      suite.dialect,
      ROWS,
      `insert into kubun_connector_operation
        (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
         payload_hash, reissue_intent, state, attempts, last_kind, version, lease_token, lease_expires_at, next_attempt_at, created_at, updated_at)
        select '${CALLER}', '${prefix}-' || i, '${prefix}' || i, '${OWNER}', 'google', 'calendar.event', 'create', 'account-1', 'primary',
          'e-${prefix}-' || i, 'h', 'none', '${shape.state}', ${shape.attempts}, ${text(shape.kind)}, 0, ${lease}, 1700000000000, 1700000000000 + i, 1700000000000`,
    ),
  );
  await suite.store.db.executeQuery(
    overSeries(
      suite.dialect,
      ROWS,
      `insert into kubun_connector_projection_watch
        (owner_did, connector_name, model, account_key, source_id, node_key, document_id, verification_status, next_attempt_at, created_at, updated_at)
        select '${OWNER}', 'google', 'calendar.event', 'account-1', 'src-${prefix}-' || i, 'w${prefix}' || i, 'doc-${prefix}-' || i,
          '${shape.status}', 1700000000000, 1700000000000, 1700000000000`,
    ),
  );
}

describeEachDialect('keyed writes find their row by its key whatever the statistics say', (suite) => {
  it('claim → start → sent → outcome → finalize → cancel, claim and verify the watch: every UPDATE goes through the key', { timeout: 60_000 }, async () => {
    // Analyzed while nothing holds a lease, has attempts or a last kind, and no watch is pending.
    await bulkRows(suite, 'old', { state: 'committed', lease: false, attempts: 0, kind: null, status: 'verified' });
    await suite.store.db.executeQuery(CompiledQuery.raw('analyze'));
    // Then the table fills with exactly such rows, behind the planner's back.
    await bulkRows(suite, 'new', { state: 'attempted', lease: true, attempts: 3, kind: 'retryable', status: 'pending_verification' });

    const { store, statements: updates } = recordingStatements(suite.store);
    const claimed = await claimFresh(store, { operationID: 'keyed', callerDID: CALLER, ownerDID: OWNER });
    await startOperationAttempt(store, claimed.fence);
    await markOperationSent(store, { ...claimed.fence, sendMarker: 'marker-keyed' });
    await recordOperationOutcome(store, { ...claimed.fence, kind: 'retryable', lastHTTPStatus: 503 });
    const { watch } = await finalizeOperationAndArmWatch(store, {
      ...claimed.fence,
      documentID: 'doc-keyed',
      resultEntity: { id: 'remote-1' },
      currentWinnerDigest: 'winner-1',
      watchIdentity: { ownerDID: OWNER, connectorName: 'google', model: 'calendar.event', accountKey: 'account-1', sourceID: 'src-keyed' },
    });
    // The API's steps, by node key as the viewer sees it: one statement each on Postgres (its UPDATE in a CTE).
    const stepped = await claimFresh(store, { operationID: 'keyed-steps', callerDID: CALLER, ownerDID: OWNER });
    const call = { nodeKey: stepped.operation.nodeKey, visibleTo: OWNER, version: stepped.lease.version, leaseToken: stepped.lease.token };
    await startAttemptStep(store, { ...call, request: { requestKey: 'start-1', input: {} } });
    await markSentStep(store, call, { sendMarker: 'marker-steps' });
    await renewLeaseStep(store, { ...call, request: { requestKey: 'renew-1', input: {} } }, { leaseMs: 30_000 });
    await releaseLeaseStep(store, call);
    const other = await claimFresh(store, { operationID: 'keyed-cancel', callerDID: CALLER, ownerDID: OWNER });
    await applyOperationAction(store, { key: other.fence.key, version: other.fence.version, action: 'cancel', actorDID: OWNER, reason: 'not needed' });
    const watchClaim = await claimWatchAttempt(store, { nodeKey: watch!.nodeKey, version: watch!.version, claimMs: 30_000 });
    await recordVerification(store, { nodeKey: watch!.nodeKey, version: watchClaim.version, repairGeneration: watchClaim.repairGeneration, outcome: { kind: 'match', digest: 'winner-1' } });

    const byTable = { kubun_connector_operation: 0, kubun_connector_projection_watch: 0 };
    for (const update of updates) {
      // A plain UPDATE, or one inside a statement's CTE (start and mark-sent on Postgres).
      const table = /\bupdate "(\w+)"/.exec(update.sql)?.[1];
      if (table !== 'kubun_connector_operation' && table !== 'kubun_connector_projection_watch') continue;
      byTable[table]++;
      // An operation's key also has idx_connector_operation_operation_id (migration 0010): the same two columns in the other order.
      const operationKeys = table === 'kubun_connector_operation' ? ['uq_connector_operation_node_key', 'idx_connector_operation_operation_id'] : ['uq_connector_watch_node_key'];
      const keys = suite.dialect === 'postgres' ? [`${table}_pkey`, ...operationKeys] : ['PRIMARY KEY', `sqlite_autoindex_${table}_1`, ...operationKeys];
      const paths = await accessPaths(suite.store, update, table);
      expect(paths, update.sql).not.toHaveLength(0);
      for (const path of paths) expect(keys.some((key) => path.includes(key)), `${path}\n  for ${update.sql}`).toBe(true);
    }
    // start, sent, outcome, finalize, the four steps, cancel; claim and verify the watch (arming inserts it).
    expect(byTable.kubun_connector_operation).toBeGreaterThanOrEqual(9);
    expect(byTable.kubun_connector_projection_watch).toBeGreaterThanOrEqual(2);
  });
});
