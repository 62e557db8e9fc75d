/**
 * The fastify + mercurius baseline of the throughput benchmark (issue 40
 * item 6): the best-built bare GraphQL server on Node we know of, on the
 * app's very SQL. fastify 5 on `node:http`, mercurius 16 with graphql-jit
 * (`jit: 1`: a document is compiled after its first run) and its parsed and
 * validated document cache, no plugins, no auth, no limits, at POST /graphql.
 *
 *   PORT=4103 DATABASE_URL=postgres://… LIST_STATEMENTS='[…]' npx tsx bench/baselines/mercurius.ts
 *
 * Only the dashboard list (`operations(first:) { edges { node { … watch } } pageInfo }`):
 * LIST_STATEMENTS holds the statements the app ran for one such request, as
 * the benchmark captured them on the wire (bench/sql-capture.ts): the page,
 * then the page's watches by document id. Each request runs those two texts
 * under the same names, with the parameters computed as the app computes them
 * (the page's size + 1; the page's distinct document ids padded with the last
 * to the statement's placeholders), on a pool of named statements with
 * custom plans, as the app's (src/db/connect.ts). The benchmark captures this
 * process too and refuses to measure unless its statements (names, texts,
 * parameters) and its answer's bytes equal the app's.
 */
import Fastify from 'fastify';
import mercurius from 'mercurius';
import pg from 'pg';

interface Statement {
  name: string;
  text: string;
}

function listStatements(): [Statement, Statement] {
  const [page, watches] = JSON.parse(process.env.LIST_STATEMENTS ?? '[]') as Statement[];
  if (page === undefined || watches === undefined) throw new Error('LIST_STATEMENTS: the page and watch statements the app ran are required');
  return [page, watches];
}
const [PAGE, WATCHES] = listStatements();
/** How many ids the watch statement takes: the app pads a page's ids to one of a few lengths (src/store/prepared.ts). */
const WATCH_PLACEHOLDERS = (WATCHES.text.match(/\$\d+/g) ?? []).length;

pg.types.setTypeParser(20, (value) => Number(value));
const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL ?? '',
  max: Number(process.env.DB_POOL_MAX ?? 10),
  // As the app's connections: plans stay custom for named statements (src/db/named-statements.ts).
  onConnect: async (client: pg.ClientBase) => void (await client.query('set plan_cache_mode = force_custom_plan')),
});

/** A statement's rows; named when the app's was. */
async function run(statement: Statement, values: unknown[]): Promise<Record<string, any>[]> {
  const result = await pool.query({ text: statement.text, values, ...(statement.name !== '' && { name: statement.name }) });
  return result.rows;
}

/** A column by the app's alias or its own name, whichever the captured statement selects. */
const column = (row: Record<string, any>, alias: string, name: string) => (alias in row ? row[alias] : row[name]);
const globalID = (type: string, nodeKey: string) => Buffer.from(`${type}:${nodeKey}`).toString('base64url');

async function operations(first: number) {
  const rows = await run(PAGE, [first + 1]);
  const page = rows.slice(0, first);
  const documents = [...new Set(page.map((row) => column(row, 'documentID', 'document_id')).filter((id) => id !== null))];
  const watches = new Map<string, Record<string, any>>();
  if (documents.length > 0) {
    if (documents.length > WATCH_PLACEHOLDERS) throw new Error(`a page of ${documents.length} documents: the captured watch statement takes ${WATCH_PLACEHOLDERS}`);
    const ids = [...documents];
    while (ids.length < WATCH_PLACEHOLDERS) ids.push(ids[ids.length - 1]);
    // Newest first per document (the statement's order): the first of each is the app's pick.
    for (const watch of await run(WATCHES, ids)) {
      const document = column(watch, 'documentID', 'document_id');
      if (!watches.has(document)) watches.set(document, watch);
    }
  }
  return {
    edges: page.map((row) => {
      const watch = watches.get(column(row, 'documentID', 'document_id'));
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
}

const schema = /* GraphQL */ `
  type Query { operations(first: Int!): OperationConnection! }
  type OperationConnection { edges: [OperationEdge!]!, pageInfo: PageInfo! }
  type OperationEdge { node: Operation! }
  type PageInfo { hasNextPage: Boolean! }
  type Operation { id: ID!, operationID: String!, state: String!, attempts: Int!, connectorName: String!, createdAt: String!, watch: Watch }
  type Watch { id: ID!, verificationStatus: String! }`;

const app = Fastify({ logger: false, keepAliveTimeout: 60_000 });
await app.register(mercurius, {
  schema,
  resolvers: { Query: { operations: (_: unknown, args: { first: number }) => operations(args.first) } },
  path: '/graphql',
  graphiql: false,
  jit: 1,
});
await app.listen({ port: Number(process.env.PORT ?? 4103), host: '127.0.0.1' });
// A graceful exit, as the other baselines.
process.once('SIGTERM', () => process.exit(0));
