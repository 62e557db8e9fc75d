/**
 * A viewer's listing reads each visibility branch from an index holding only
 * its rows (issue 10; migration 0008): as caller from the caller index, as
 * owner but not caller from the partial index of rows whose caller is not
 * their owner, so an owner who called most of their own writes does not
 * have them read (and skipped) by the second branch. Both dialects, on a
 * table where nine in ten of the viewer's rows are self-called.
 */
import { CompiledQuery } from 'kysely';
import { expect, it } from 'vitest';
import { listOperations } from '../../src/store/operations/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { accessPaths, overSeries, recordingStatements } from '../helpers/query-plans.js';

const ROWS = 20_000;
const OWNERS = 97;
const VIEWER = 'did:key:zOwner3';

describeEachDialect('listing plans', (suite) => {
  it("a viewer's page reads the caller index and the owner-not-caller partial index, never the table", { timeout: 60_000 }, async () => {
    // Nine in ten self-called, one in ten written by a worker for the owner.
    await suite.store.db.executeQuery(
      overSeries(
        suite.dialect,
        ROWS,
        `insert into kubun_connector_operation
          (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
           payload_hash, reissue_intent, state, attempts, version, created_at, updated_at)
          select case when i % 10 = 0 then 'did:key:zWorker' else 'did:key:zOwner' || (i % ${OWNERS}) end, 'op-' || i, 'n' || i,
            'did:key:zOwner' || (i % ${OWNERS}), 'google', 'calendar.event', 'create', 'a', 't', 'e-' || i, 'h', 'none', 'committed', 1, 0,
            1700000000000 + i, 1700000000000 + i`,
      ),
    );
    await suite.store.db.executeQuery(CompiledQuery.raw('analyze'));

    const { store, statements } = recordingStatements(suite.store);
    const page = await listOperations(store, { visibleTo: VIEWER, first: 100 });
    expect(page.operations).toHaveLength(100);
    expect(page.operations.every((op) => op.ownerDID === VIEWER)).toBe(true);
    // Both branches contribute: the viewer's own calls and a worker's writes for them, newest first.
    expect(page.operations.some((op) => op.callerDID === 'did:key:zWorker')).toBe(true);
    expect(page.operations.some((op) => op.callerDID === VIEWER)).toBe(true);
    const created = page.operations.map((op) => op.createdAt);
    expect(created).toEqual([...created].sort((a, b) => b - a));
    const used = await accessPaths(suite.store, statements.at(-1)!, 'kubun_connector_operation');
    expect(used.some((path) => path.includes('idx_connector_operation_caller_created')), used.join('\n')).toBe(true);
    expect(used.some((path) => path.includes('idx_connector_operation_owner_foreign_created')), used.join('\n')).toBe(true);
    expect(used.filter((path) => !/idx_connector_operation_(caller_created|owner_foreign_created)/.test(path)), used.join('\n')).toEqual([]);
  });
});
