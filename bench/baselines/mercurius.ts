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
 * (the page's size + 1; the page's distinct document ids padded with NULLs
 * to the statement's placeholders), on a pool of named statements with
 * custom plans, as the app's (src/db/connect.ts). The benchmark captures this
 * process too and refuses to measure unless its statements (names, texts,
 * parameters) and its answer's bytes equal the app's.
 */
import Fastify from 'fastify';
import mercurius from 'mercurius';
import pg from 'pg';
import { appList, capturedListStatements, type RunCaptured } from './app-list.js';

const statements = capturedListStatements();
if (statements === undefined) throw new Error('LIST_STATEMENTS: the page and watch statements the app ran are required');

pg.types.setTypeParser(20, (value) => Number(value));
const pool = new pg.Pool({
  connectionString: process.env.DATABASE_URL ?? '',
  max: Number(process.env.DB_POOL_MAX ?? 10),
  // As the app's connections: plans stay custom for named statements (src/db/named-statements.ts).
  onConnect: async (client: pg.ClientBase) => void (await client.query('set plan_cache_mode = force_custom_plan')),
});

/** A statement's rows; named when the app's was. */
const run: RunCaptured = async (statement, values) => {
  const result = await pool.query({ text: statement.text, values, ...(statement.name !== '' && { name: statement.name }) });
  return result.rows;
};
const operations = appList(statements, run);

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
