/**
 * A viewer's listing reads each visibility branch from an index holding only
 * its rows (issue 10; migration 0008): as caller from the caller index, as
 * owner but not caller from the partial index of rows whose caller is not
 * their owner, so an owner who called most of their own writes does not
 * have them read (and skipped) by the second branch. Both dialects, on a
 * table where nine in ten of the viewer's rows are self-called.
 */
import { CompiledQuery, type KyselyPlugin } from 'kysely';
import { expect, it } from 'vitest';
import type { StoreContext } from '../../src/store/context.js';
import { listOperations } from '../../src/store/operations/index.js';
import { describeEachDialect } from '../helpers/databases.js';

const ROWS = 20_000;
const OWNERS = 97;
const VIEWER = 'did:key:zOwner3';

/** A copy of `store` that keeps the last statement it ran, compiled. */
function recordingLast(store: StoreContext): { store: StoreContext; last: () => CompiledQuery } {
  let last: CompiledQuery | undefined;
  const nodes = new Map<unknown, Parameters<NonNullable<KyselyPlugin['transformQuery']>>[0]['node']>();
  const plugin: KyselyPlugin = {
    transformQuery: (args) => {
      nodes.set(args.queryId, args.node);
      return args.node;
    },
    transformResult: async (args) => {
      const node = nodes.get(args.queryId);
      if (node !== undefined) last = store.db.getExecutor().compileQuery(node, args.queryId);
      return args.result;
    },
  };
  return { store: { ...store, db: store.db.withPlugin(plugin) }, last: () => last! };
}

describeEachDialect('listing plans', (suite) => {
  it("a viewer's page reads the caller index and the owner-not-caller partial index, never the table", { timeout: 60_000 }, async () => {
    const series =
      suite.dialect === 'postgres'
        ? (body: string) => `${body} from generate_series(1, ${ROWS}) as s(i)`
        : (body: string) => `with recursive s(i) as (select 1 union all select i + 1 from s where i < ${ROWS}) ${body} from s`;
    // Nine in ten self-called, one in ten written by a worker for the owner.
    await suite.store.db.executeQuery(
      CompiledQuery.raw(
        series(`insert into kubun_connector_operation
          (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
           payload_hash, reissue_intent, state, attempts, version, created_at, updated_at)
          select case when i % 10 = 0 then 'did:key:zWorker' else 'did:key:zOwner' || (i % ${OWNERS}) end, 'op-' || i, 'n' || i,
            'did:key:zOwner' || (i % ${OWNERS}), 'google', 'calendar.event', 'create', 'a', 't', 'e-' || i, 'h', 'none', 'committed', 1, 0,
            1700000000000 + i, 1700000000000 + i`),
      ),
    );
    await suite.store.db.executeQuery(CompiledQuery.raw('analyze'));

    const { store, last } = recordingLast(suite.store);
    const page = await listOperations(store, { visibleTo: VIEWER, first: 100 });
    expect(page.operations).toHaveLength(100);
    expect(page.operations.every((op) => op.ownerDID === VIEWER)).toBe(true);
    // Both branches contribute: the viewer's own calls and a worker's writes for them, newest first.
    expect(page.operations.some((op) => op.callerDID === 'did:key:zWorker')).toBe(true);
    expect(page.operations.some((op) => op.callerDID === VIEWER)).toBe(true);
    const created = page.operations.map((op) => op.createdAt);
    expect(created).toEqual([...created].sort((a, b) => b - a));
    const statement = last();
    let used: string[];
    if (suite.dialect === 'postgres') {
      const { rows } = await suite.store.db.executeQuery<{ 'QUERY PLAN': unknown }>(CompiledQuery.raw(`explain (format json) ${statement.sql}`, [...statement.parameters]));
      used = [];
      const walk = (node: Record<string, unknown>) => {
        if (node['Relation Name'] === 'kubun_connector_operation') used.push(String(node['Index Name'] ?? node['Node Type']));
        for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
      };
      walk((rows[0]!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
    } else {
      const { rows } = await suite.store.db.executeQuery<{ detail: string }>(CompiledQuery.raw(`explain query plan ${statement.sql}`, [...statement.parameters]));
      used = rows.map((row) => row.detail).filter((detail) => / kubun_connector_operation\b/.test(detail));
    }
    expect(used.some((path) => path.includes('idx_connector_operation_caller_created')), used.join('\n')).toBe(true);
    expect(used.some((path) => path.includes('idx_connector_operation_owner_foreign_created')), used.join('\n')).toBe(true);
    expect(used.filter((path) => !/idx_connector_operation_(caller_created|owner_foreign_created)/.test(path)), used.join('\n')).toEqual([]);
  });
});
