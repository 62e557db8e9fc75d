/**
 * Reading query plans in tests, on both dialects: record the statements a
 * store call runs (compiled, with their parameters), fill tables by one SQL
 * statement per table, and ask the planner how a statement reaches a table.
 */
import { CompiledQuery, type KyselyPlugin, type RootOperationNode } from 'kysely';
import type { DialectName } from '../../src/db/connect.js';
import type { StoreContext } from '../../src/store/context.js';

/** A copy of `store` that appends every statement it executes, compiled with its parameters, to `statements`. */
export function recordingStatements(store: StoreContext): { store: StoreContext; statements: CompiledQuery[] } {
  const statements: CompiledQuery[] = [];
  const nodes = new Map<unknown, RootOperationNode>();
  const plugin: KyselyPlugin = {
    transformQuery: (args) => {
      // Nested builders (subqueries, CTEs) pass here under ids of their own, whose results never come.
      nodes.set(args.queryId, args.node);
      return args.node;
    },
    transformResult: async (args) => {
      const node = nodes.get(args.queryId);
      if (node !== undefined) statements.push(store.db.getExecutor().compileQuery(node, args.queryId));
      nodes.delete(args.queryId);
      return args.result;
    },
  };
  return { store: { ...store, db: store.db.withPlugin(plugin) }, statements };
}

/** `select … ` (`body`) over i = 1 … `rows`, as one statement: generate_series on Postgres, a recursive CTE on SQLite. */
export function overSeries(dialect: DialectName, rows: number, body: string): CompiledQuery {
  return CompiledQuery.raw(
    dialect === 'postgres'
      ? `${body} from generate_series(1, ${rows}) as s(i)`
      : `with recursive s(i) as (select 1 union all select i + 1 from s where i < ${rows}) ${body} from s`,
  );
}

/** How the plan of `query` reaches `table`: the index names of its scans (Postgres) or SQLite's SCAN / SEARCH lines. */
export async function accessPaths(store: StoreContext, query: CompiledQuery, table: string): Promise<string[]> {
  if (store.dialect === 'postgres') {
    const { rows } = await store.db.executeQuery<{ 'QUERY PLAN': unknown }>(CompiledQuery.raw(`explain (format json) ${query.sql}`, [...query.parameters]));
    const paths: string[] = [];
    const walk = (node: Record<string, unknown>) => {
      if (node['Relation Name'] === table && node['Node Type'] === 'Bitmap Heap Scan') {
        // The indexes are its Bitmap Index Scan children (under a BitmapOr or BitmapAnd when several).
        const indexes: string[] = [];
        const collect = (n: Record<string, unknown>) => {
          if (n['Index Name'] !== undefined) indexes.push(String(n['Index Name']));
          for (const child of (n.Plans as Record<string, unknown>[] | undefined) ?? []) collect(child);
        };
        collect(node);
        paths.push(`Bitmap Heap Scan on ${indexes.join(', ')}`);
        return;
      }
      if (node['Relation Name'] === table && String(node['Node Type']).endsWith('Scan')) paths.push(String(node['Index Name'] ?? node['Node Type']));
      for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child);
    };
    walk((rows[0]!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
    return paths;
  }
  const { rows } = await store.db.executeQuery<{ detail: string }>(CompiledQuery.raw(`explain query plan ${query.sql}`, [...query.parameters]));
  return rows.map((row) => row.detail).filter((detail) => new RegExp(`\\b(SCAN|SEARCH) ${table}\\b`).test(detail));
}
