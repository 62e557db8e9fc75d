/**
 * The dashboard list on the app's very statements, for the baselines that run
 * them (fastify + mercurius, bench/baselines/mercurius.ts; the raw-SQL handler
 * and the yoga floors on Postgres, bench/baselines/raw-sql.ts): the page, then
 * the page's watches by document id, as the benchmark captured them on the
 * wire from the app (bench/sql-capture.ts) and passed them in LIST_STATEMENTS.
 * The parameters are computed as the app computes them: the page's size + 1;
 * the page's distinct document ids padded with NULLs to the statement's
 * placeholders (src/store/prepared.ts).
 */

/** A statement as captured: its name (empty when the app sent it unnamed) and its text. */
export interface CapturedStatement {
  name: string;
  text: string;
}

/** Runs a captured statement with `values` (named when the app's was); its rows. */
export type RunCaptured = (statement: CapturedStatement, values: unknown[]) => Promise<Record<string, any>[]>;

/** The page and watch statements of LIST_STATEMENTS, or undefined when the benchmark passed none. */
export function capturedListStatements(): [CapturedStatement, CapturedStatement] | undefined {
  if (process.env.LIST_STATEMENTS === undefined || process.env.LIST_STATEMENTS === '') return undefined;
  const [page, watches] = JSON.parse(process.env.LIST_STATEMENTS) as CapturedStatement[];
  if (page === undefined || watches === undefined) throw new Error('LIST_STATEMENTS: the page and watch statements the app ran are required');
  return [page, watches];
}

/** A column by the app's alias or its own name, whichever the captured statement selects. */
const column = (row: Record<string, any>, alias: string, name: string) => (alias in row ? row[alias] : row[name]);
const globalID = (type: string, nodeKey: string) => Buffer.from(`${type}:${nodeKey}`).toString('base64url');

/** `operations(first)` of the dashboard list over the captured statements, answered as the app answers it. */
export function appList([page, watches]: [CapturedStatement, CapturedStatement], run: RunCaptured) {
  /** How many ids the watch statement takes: the app pads a page's ids to one of a few lengths. */
  const placeholders = (watches.text.match(/\$\d+/g) ?? []).length;
  return async (first: number) => {
    const rows = await run(page, [first + 1]);
    const shown = rows.slice(0, first);
    const documents = [...new Set(shown.map((row) => column(row, 'documentID', 'document_id')).filter((id) => id !== null))];
    const byDocument = new Map<string, Record<string, any>>();
    if (documents.length > 0) {
      if (documents.length > placeholders) throw new Error(`a page of ${documents.length} documents: the captured watch statement takes ${placeholders}`);
      const ids: (string | null)[] = [...documents];
      while (ids.length < placeholders) ids.push(null);
      // Newest first per document (the statement's order): the first of each is the app's pick.
      for (const watch of await run(watches, ids)) {
        const document = column(watch, 'documentID', 'document_id');
        if (!byDocument.has(document)) byDocument.set(document, watch);
      }
    }
    return {
      edges: shown.map((row) => {
        const watch = byDocument.get(column(row, 'documentID', 'document_id'));
        return {
          node: {
            id: globalID('ConnectorOperation', column(row, 'nodeKey', 'node_key')),
            operationID: column(row, 'operationID', 'operation_id'),
            state: String(row.state).toUpperCase(),
            attempts: row.attempts,
            connectorName: column(row, 'connectorName', 'connector_name'),
            createdAt: new Date(column(row, 'createdAt', 'created_at')).toISOString(),
            watch:
              watch === undefined
                ? null
                : { id: globalID('ProjectionWatch', column(watch, 'nodeKey', 'node_key')), verificationStatus: String(column(watch, 'verificationStatus', 'verification_status')).toUpperCase() },
          },
        };
      }),
      pageInfo: { hasNextPage: rows.length > first },
    };
  };
}
