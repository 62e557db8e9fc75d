/**
 * `ownsAnyRow` (src/store/ownership): a DID owns rows when it owns an
 * operation, a projection watch or a sync state; a caller who owns nothing,
 * or a DID with nothing at all, does not. Each probe reads an owner index,
 * never a table, on both dialects.
 */
import { CompiledQuery } from 'kysely';
import { expect, it } from 'vitest';
import { ownsAnyRow } from '../../src/store/ownership/index.js';
import { setSyncState } from '../../src/store/sync-state/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { accessPaths, overSeries, recordingStatements } from '../helpers/query-plans.js';
import { CALLER, insertOperationRow, insertWatchRow, OTHER_OWNER, OWNER } from '../helpers/row-fixtures.js';

describeEachDialect('ownership', (suite) => {
  it('is true for the owner of an operation, of a watch or of a sync state, false otherwise (a caller owns nothing)', async () => {
    const stranger = 'did:key:z6MkStranger';
    expect(await ownsAnyRow(suite.store, OWNER)).toBe(false);
    await insertOperationRow(suite.store, { owner_did: OWNER, caller_did: CALLER });
    expect(await ownsAnyRow(suite.store, OWNER)).toBe(true);
    expect(await ownsAnyRow(suite.store, CALLER)).toBe(false);
    expect(await ownsAnyRow(suite.store, stranger)).toBe(false);

    await insertWatchRow(suite.store, { owner_did: OTHER_OWNER, document_id: 'doc-1' });
    expect(await ownsAnyRow(suite.store, OTHER_OWNER)).toBe(true);

    const syncOwner = 'did:key:z6MkSyncOwner';
    await setSyncState(suite.store, 'google', syncOwner, { checkpoint: null, lastSyncedAt: '2026-01-01T00:00:00Z', entityCount: 0, status: 'idle' });
    expect(await ownsAnyRow(suite.store, syncOwner)).toBe(true);
    expect(await ownsAnyRow(suite.store, stranger)).toBe(false);
  });

  it('with createdBefore, counts only operations and watches created by then, never a sync state (issue 41: known costs more than a claim)', async () => {
    const at = 1_700_000_000_000;
    await insertOperationRow(suite.store, { owner_did: OWNER, caller_did: CALLER, created_at: at, updated_at: at });
    expect(await ownsAnyRow(suite.store, OWNER, { createdBefore: at - 1 })).toBe(false);
    expect(await ownsAnyRow(suite.store, OWNER, { createdBefore: at })).toBe(true);
    await insertWatchRow(suite.store, { owner_did: OTHER_OWNER, document_id: 'doc-1', created_at: at, updated_at: at });
    expect(await ownsAnyRow(suite.store, OTHER_OWNER, { createdBefore: at - 1 })).toBe(false);
    expect(await ownsAnyRow(suite.store, OTHER_OWNER, { createdBefore: at + 1 })).toBe(true);
    const syncOwner = 'did:key:z6MkSyncOwner';
    await setSyncState(suite.store, 'google', syncOwner, { checkpoint: null, lastSyncedAt: '2026-01-01T00:00:00Z', entityCount: 0, status: 'idle' });
    expect(await ownsAnyRow(suite.store, syncOwner)).toBe(true);
    expect(await ownsAnyRow(suite.store, syncOwner, { createdBefore: Number.MAX_SAFE_INTEGER })).toBe(false);
  });

  it('reads owner indexes only, never a table', { timeout: 60_000 }, async () => {
    await suite.store.db.executeQuery(
      overSeries(
        suite.dialect,
        5_000,
        `insert into kubun_connector_operation
          (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
           payload_hash, reissue_intent, state, attempts, version, created_at, updated_at)
          select 'did:key:zCaller', 'op-' || i, 'n' || i, 'did:key:zOwner' || (i % 500), 'google', 'calendar.event', 'create', 'a', 't', 'e-' || i, 'h', 'none',
            'committed', 1, 0, 1700000000000 + i, 1700000000000 + i`,
      ),
    );
    await suite.store.db.executeQuery(
      overSeries(
        suite.dialect,
        5_000,
        `insert into kubun_connector_projection_watch (owner_did, connector_name, model, account_key, source_id, node_key, document_id, verification_status, created_at, updated_at)
          select 'did:key:zOwner' || (i % 500), 'google', 'm', 'a', 's' || i, 'w' || i, 'd' || i, 'pending_verification', 1700000000000 + i, 1700000000000 + i`,
      ),
    );
    await suite.store.db.executeQuery(
      overSeries(
        suite.dialect,
        5_000,
        `insert into kubun_connector_sync_state (connector_name, owner_did, node_key, checkpoint, last_synced_at, entity_count, status, progressed_at, version)
          select 'c' || i, 'did:key:zOwner' || (i % 500), 's' || i, null, '2026-01-01T00:00:00Z', 0, 'idle', 1700000000000, 0`,
      ),
    );
    await suite.store.db.executeQuery(CompiledQuery.raw('analyze'));

    const { store, statements } = recordingStatements(suite.store);
    // Nobody: every probe runs, and each must still find its answer in an index.
    expect(await ownsAnyRow(store, 'did:key:zNobody')).toBe(false);
    // And with the age rule: the operation and watch probes, by the same indexes.
    expect(await ownsAnyRow(store, 'did:key:zNobody', { createdBefore: 1_700_000_003_000 })).toBe(false);
    expect(statements).toHaveLength(2);
    const paths = {
      kubun_connector_operation: 'idx_connector_operation_owner_created',
      kubun_connector_projection_watch: 'idx_connector_watch_owner_created',
      kubun_connector_sync_state: 'idx_connector_sync_state_owner',
    };
    for (const [table, index] of Object.entries(paths)) {
      for (const statement of table === 'kubun_connector_sync_state' ? statements.slice(0, 1) : statements) {
        const used = await accessPaths(suite.store, statement, table);
        expect(used.length, `${table}: ${used.join('\n')}`).toBeGreaterThan(0);
        expect(used.every((path) => path.includes(index)), `${table}: ${used.join('\n')}`).toBe(true);
      }
    }
  });
});
