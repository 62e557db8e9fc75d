/**
 * Reads ask the database only for what the request needs (issue 40 item 5):
 * every statement of the list, node and documents paths selects only the
 * operation columns the GraphQL selection resolves — rounded up to the
 * smallest of the store's fixed shapes (brief, summary, full) — and never
 * the lease token, the finalize input or any other column no field shows;
 * the send marker only for `sendMarkerSet`. The app runs over the suite's
 * database through a Kysely plugin that keeps every statement's tree; the
 * columns are read from its select lists (union branches and subqueries
 * included), on both dialects, as a user (two-branch union) and a service.
 */
import { print, type DocumentNode } from 'graphql';
import type { OperationNode, RootOperationNode } from 'kysely';
import { beforeAll, beforeEach, expect, it } from 'vitest';
import { ConsoleOperationsDocument, DocumentStatesDocument, NodeDocument, OperationsDocument } from '../../client/generated/graphql.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { OPERATION_BRIEF_FIELDS, OPERATION_SUMMARY_FIELDS } from '../../src/store/operations/index.js';
import { describeGraphQL, TEST_AUDIENCE, type GraphQLResponse } from '../helpers/graphql.js';
import { seedFinalized } from '../helpers/graphql-seed.js';

/** The dashboard list of `npm run bench` (DASHBOARD_LIST in bench/throughput.ts). */
const DASHBOARD_LIST = `query { operations(first: 50) { edges { node { id operationID state attempts connectorName createdAt watch { id verificationStatus } } } pageInfo { hasNextPage } } }`;

/** The operation columns a GraphQL field of `ConnectorOperation` shows. */
const FIELD_COLUMNS: Record<string, string[]> = {
  __typename: [],
  id: ['node_key'],
  watch: ['document_id'],
  attemptHistory: ['caller_did', 'operation_id', 'state'],
  sendMarkerSet: ['send_marker'],
  lastHTTPStatus: ['last_http_status'],
};
const column = (field: string) => FIELD_COLUMNS[field] ?? [field.replace(/DID$/, '_did').replace(/ID$/, '_id').replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)];
/** What the API reads of every operation it answers: its cursor, and who may see it. */
const API_COLUMNS = ['node_key', 'created_at', 'caller_did', 'owner_did'];
/** Columns no field shows: never selected. */
const NEVER = ['lease_token', 'finalized_input', 'finalized_lease_digest', 'send_timeout_ms', 'send_deadline_at'];
const shapeColumns = (fields: readonly string[]) => new Set(fields.flatMap(column));

const OPERATION_TABLE = 'kubun_connector_operation';

/** The tables a statement reads and the columns its select lists name (in every subquery and union branch). */
function selectedColumns(root: OperationNode): { tables: Set<string>; columns: Set<string> } {
  const tables = new Set<string>();
  const columns = new Set<string>();
  const walk = (node: unknown, inSelection: boolean) => {
    if (node === null || typeof node !== 'object') return;
    if (Array.isArray(node)) return node.forEach((child) => walk(child, inSelection));
    const kind = (node as { kind?: string }).kind;
    if (kind === 'TableNode') tables.add((node as { table: { identifier: { name: string } } }).table.identifier.name);
    if (kind === 'ColumnNode' && inSelection) columns.add((node as { column: { name: string } }).column.name);
    for (const child of Object.values(node)) walk(child, inSelection || kind === 'SelectionNode');
  };
  walk(root, false);
  return { tables, columns };
}

describeGraphQL('graphql selected columns', (suite) => {
  let app: ServerApp;
  const statements: RootOperationNode[] = [];
  const documentIDs = ['doc-columns-1', 'doc-columns-2', 'doc-columns-3'];
  let operationID = '';

  beforeAll(() => {
    const nodes = new Map<unknown, RootOperationNode>();
    const db = suite.store.db.withPlugin({
      transformQuery: (args) => {
        nodes.set(args.queryId, args.node);
        return args.node;
      },
      transformResult: async (args) => {
        const node = nodes.get(args.queryId);
        if (node !== undefined) statements.push(node);
        nodes.delete(args.queryId);
        return args.result;
      },
    });
    app = createServerApp({
      config: loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: TEST_AUDIENCE, SERVICE_DIDS: suite.keys.worker.did, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0' }),
      database: { ...suite.database.open, db },
      logger: createLogger('silent'),
      storeDeps: { now: suite.clock.now },
    });
  });

  beforeEach(async () => {
    for (const documentID of documentIDs) operationID = (await seedFinalized(suite, { documentID })).id;
    // One more alice owns but a worker called: the viewer's second union branch has a row.
    await seedFinalized(suite, { documentID: 'doc-columns-4', callerDID: suite.keys.worker.did, ownerDID: suite.keys.alice.did });
  });

  /** Runs `query` as `as`; returns the operation columns each statement selected. */
  async function columnsOf(query: string | DocumentNode, variables: Record<string, unknown>, as: 'alice' | 'worker') {
    statements.length = 0;
    const response = await app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await suite.token(as)}` },
      body: JSON.stringify({ query: typeof query === 'string' ? query : print(query), variables }),
    });
    const body = (await response.json()) as GraphQLResponse;
    expect(body.errors).toBeUndefined();
    const reads = statements.map(selectedColumns).filter((read) => read.tables.has(OPERATION_TABLE));
    expect(reads.length).toBeGreaterThan(0);
    return { body, reads: reads.map((read) => read.columns) };
  }

  /** Each read selects exactly `expected`, and nothing no field shows. */
  function expectColumns(reads: Set<string>[], expected: Set<string>) {
    for (const read of reads) {
      expect([...read].sort()).toEqual([...expected].sort());
      for (const secret of NEVER) expect(read.has(secret), secret).toBe(false);
    }
  }

  const brief = shapeColumns(OPERATION_BRIEF_FIELDS);
  const summary = shapeColumns(OPERATION_SUMMARY_FIELDS);

  it.each(['alice', 'worker'] as const)("the bench's dashboard list reads only the columns it shows (%s)", async (as) => {
    const { body, reads } = await columnsOf(DASHBOARD_LIST, {}, as);
    expect(body.data.operations.edges.length).toBeGreaterThan(0);
    const needed = new Set([...['id', 'operationID', 'state', 'attempts', 'connectorName', 'createdAt', 'watch'].flatMap(column), ...API_COLUMNS]);
    expect(brief).toEqual(needed);
    expectColumns(reads, needed);
  });

  it.each(['alice', 'worker'] as const)("the console's operations table (ConsoleOperations) reads only its columns, both ways (%s)", async (as) => {
    const rowFields = ['id', 'version', 'operationID', 'ownerDID', 'connectorName', 'model', 'op', 'documentID', 'state', 'attempts', 'lastKind', 'lastHTTPStatus', 'deferReason', 'nextAttemptAt', 'leaseExpiresAt', 'createdAt', 'updatedAt'];
    const needed = new Set([...rowFields.flatMap(column), ...API_COLUMNS]);
    expect(summary).toEqual(needed);
    const first = await columnsOf(ConsoleOperationsDocument, { first: 2 }, as);
    expectColumns(first.reads, needed);
    const cursor = first.body.data.operations.pageInfo.endCursor as string;
    expectColumns((await columnsOf(ConsoleOperationsDocument, { first: 2, after: cursor }, as)).reads, needed);
    expectColumns((await columnsOf(ConsoleOperationsDocument, { last: 1, before: cursor }, as)).reads, needed);
  });

  it.each(['alice', 'worker'] as const)('node(id) and nodes(ids) read the shape their selection on ConnectorOperation needs, not the other types’ fields (%s)', async (as) => {
    // Node (dashboard.graphql): operationID state version updatedAt on operations; watch and sync state fields do not count.
    const node = await columnsOf(NodeDocument, { id: operationID }, as);
    expect(node.body.data.node.__typename).toBe('ConnectorOperation');
    expectColumns(node.reads, summary);
    const nodes = await columnsOf(`query($ids: [ID!]!) { nodes(ids: $ids) { id ... on ConnectorOperation { state attempts } ... on ProjectionWatch { verificationStatus } } }`, { ids: [operationID] }, as);
    expect(nodes.body.data.nodes[0].state).toBe('COMMITTED');
    expectColumns(nodes.reads, brief);
  });

  it.each(['alice', 'worker'] as const)("documents' operations read what their selection and hasConnectorWork need, in one statement (%s)", async (as) => {
    // DocumentStates (dashboard.graphql): operations { id state } and hasConnectorWork.
    const { body, reads } = await columnsOf(DocumentStatesDocument, { documentIDs }, as);
    expect(body.data.documents.map((d: { operations: unknown[] }) => d.operations.length)).toEqual([1, 1, 1]);
    expect(reads).toHaveLength(1);
    expectColumns(reads, brief);
  });

  it.each(['alice', 'worker'] as const)('every exposed field (the Operations fragment) reads the full shape: the send marker only as sendMarkerSet, never the lease token or finalize input (%s)', async (as) => {
    const { body, reads } = await columnsOf(OperationsDocument, { first: 5 }, as);
    expect(body.data.operations.edges[0].node.resultEntity).not.toBeNull();
    for (const read of reads) {
      expect(read.has('send_marker')).toBe(true);
      for (const secret of NEVER) expect(read.has(secret), secret).toBe(false);
    }
  });
});
