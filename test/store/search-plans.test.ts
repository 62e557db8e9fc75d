/**
 * The console's search (issue 22 item 3) reads indexes, never the table, on
 * both dialects: an idempotency key looked up by a service (any caller) reads
 * idx_connector_operation_operation_id (migration 0010; the primary key
 * leads with the caller), by a viewer the primary key or that index; a
 * document ID reads idx_connector_operation_document; an owner the owner's
 * listing index. 20 000 operations of 199 callers, analyzed.
 */
import { CompiledQuery } from 'kysely';
import { expect, it } from 'vitest';
import { listOperations, type OperationFilter } from '../../src/store/operations/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { accessPaths, overSeries, recordingStatements } from '../helpers/query-plans.js';

const ROWS = 20_000;
const caller = (i: string) => `'did:key:z6MkCaller' || ((${i}) % 199)`;

describeEachDialect('search reads indexes', (suite) => {
  it('by idempotency key, document and owner, for a service and for a viewer', { timeout: 120_000 }, async () => {
    await suite.store.db.executeQuery(
      overSeries(
        suite.dialect,
        ROWS,
        `insert into kubun_connector_operation
          (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
           payload_hash, reissue_intent, state, attempts, version, document_id, next_attempt_at, created_at, updated_at)
          select ${caller('i')}, 'op-' || (i % 5000), 'n' || i, ${caller('i + 1')}, 'google', 'calendar.event', 'create', 'a', 't',
            'e-' || i, 'h', 'none', 'committed', 1, 0, 'doc-' || i, 1700000000000 + i, 1700000000000 + i, 1700000000000 + i`,
      ),
    );
    await suite.store.db.executeQuery(CompiledQuery.raw('analyze'));

    const expectPaths = async (visibleTo: string | null, filter: OperationFilter, indexes: string[], rows: number) => {
      const { store, statements } = recordingStatements(suite.store);
      const page = await listOperations(store, { visibleTo, first: 25, filter });
      expect(page.operations, JSON.stringify(filter)).toHaveLength(rows);
      for (const statement of statements) {
        const paths = await accessPaths(suite.store, statement, 'kubun_connector_operation');
        expect(paths, statement.sql).not.toHaveLength(0);
        for (const path of paths) expect(indexes.some((index) => path.includes(index)), `${path}\n  for ${statement.sql}`).toBe(true);
      }
    };
    const viewer = 'did:key:z6MkCaller7';
    const pkey = ['kubun_connector_operation_pkey', 'sqlite_autoindex_kubun_connector_operation_1', 'idx_connector_operation_operation_id'];
    // 'op-7' was called by four callers (i = 7, 5007, 10007, 15007: callers 7, 32, 57, 82), the viewer (caller 7) one of them.
    await expectPaths(null, { operationID: 'op-7' }, ['idx_connector_operation_operation_id'], 4);
    await expectPaths(viewer, { operationID: 'op-7' }, [...pkey, 'idx_connector_operation_owner_foreign_created'], 1);
    await expectPaths(null, { documentID: 'doc-42' }, ['idx_connector_operation_document'], 1);
    await expectPaths(viewer, { documentID: 'doc-7' }, ['idx_connector_operation_document', 'idx_connector_operation_caller_created', 'idx_connector_operation_owner_foreign_created'], 1);
    await expectPaths(null, { ownerDID: viewer }, ['idx_connector_operation_owner_created'], 25);
  });
});
