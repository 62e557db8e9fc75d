/**
 * The PostGraphile peer of the throughput benchmark (issue 21 item 1):
 * PostGraphile v5 (5.1.5, its newest release: it declares Node >= 22, and on
 * Node 20 needs only `Promise.withResolvers`, polyfilled below in this process
 * alone; see the pins and overrides in package.json) over the same database the
 * benchmark seeds, in its own process, served by grafserv on `node:http` at
 * POST /graphql, loopback only.
 *
 *   PORT=4102 DATABASE_URL=postgres://… npx tsx bench/peers/postgraphile/server.ts
 *
 * Production-style: the amber preset, the schema `public` introspected once at
 * start (no watch mode), no GraphiQL, no explain, no GET, no websockets, no
 * JWT, no role or pgSettings per request (so no transaction per request), a
 * pool of 10 connections as the app's. The database gains one index, the
 * plain (created_at, node_key) its list needs (below), and nothing else: the
 * operation → watch relation the dashboard list reads is declared by smart
 * tags in this process (jsonPgSmartTags), not by a constraint:
 *
 * - `@unique owner_did,model,document_id` on kubun_connector_projection_watch:
 *   true, it is the migrations' unique index uq_connector_watch_ingress (an
 *   index, not a constraint, so PostGraphile does not introspect it);
 * - `@foreignKey (owner_did,model,document_id) references
 *   kubun_connector_projection_watch (owner_did,model,document_id)` on
 *   kubun_connector_operation, named `watch`.
 *
 * A virtual key on document_id alone is not possible without a lie: PostGraphile
 * requires the referenced columns to be unique, and document_id is unique on
 * watches only with owner and model. The app joins by document_id alone and
 * takes the newest watch of the document; the two answers differ only for a
 * document watched under several owners or models (never in the seeded data,
 * where every watch has the operation's owner and model).
 *
 * The benchmark's document is POSTGRAPHILE_LIST in bench/throughput.ts, which
 * checks the answer once before it measures. PostGraphile plans it as one
 * statement (seen with DEBUG=@dataplan/pg:PgExecutor:explain):
 *
 *   select o.caller_did, o.operation_id, o.state, o.attempts::text, o.connector_name, o.created_at::text,
 *          w.owner_did, w.connector_name, w.model, w.account_key, w.source_id, w.verification_status
 *   from kubun_connector_operation o left outer join kubun_connector_projection_watch w
 *     on w.owner_did = o.owner_did and w.model = o.model and w.document_id = o.document_id
 *   order by o.created_at desc, o.node_key desc, o.caller_did desc, o.operation_id desc limit 51
 *
 * (an index scan backward on (created_at, node_key), an incremental sort for
 * the primary-key tie-break, a memoized index lookup per watch). The app's
 * index in that order is partial (migration 0009: only statements that state
 * `node_key <> ''` may use it), which PostGraphile's statement does not, so
 * before serving this process adds the plain index its query needs
 * (bench_postgraphile_created; the app's statements have their own). Without
 * it PostGraphile would sort the whole table for every page.
 */
// First: PostGraphile 5.1 calls Promise.withResolvers, which Node 20 lacks.
import './promise-with-resolvers.js';
import { createServer } from 'node:http';
import pg from 'pg';
import { postgraphile } from 'postgraphile';
import { makePgService } from 'postgraphile/adaptors/pg';
import { grafserv } from 'postgraphile/grafserv/node';
import { PostGraphileAmberPreset } from 'postgraphile/presets/amber';
import { jsonPgSmartTags } from 'postgraphile/utils';

const SmartTags = jsonPgSmartTags({
  version: 1,
  config: {
    class: {
      kubun_connector_projection_watch: { tags: { unique: 'owner_did,model,document_id' } },
      kubun_connector_operation: {
        tags: {
          foreignKey: '(owner_did,model,document_id) references kubun_connector_projection_watch (owner_did,model,document_id)|@fieldName watch|@foreignFieldName operationsByWatch',
        },
      },
    },
  },
});

const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL ?? '', max: Number(process.env.DB_POOL_MAX ?? 10) });
await pool.query('create index if not exists bench_postgraphile_created on kubun_connector_operation (created_at, node_key)');

const preset: GraphileConfig.Preset = {
  extends: [PostGraphileAmberPreset],
  plugins: [SmartTags],
  pgServices: [
    makePgService({
      pool,
      schemas: ['public'],
    }),
  ],
  grafserv: { graphqlPath: '/graphql', graphiql: false, graphiqlOnGraphQLGET: false, graphqlOverGET: false, watch: false, websockets: false },
  grafast: { explain: false },
};

const pgl = postgraphile(preset);

// The schema is built (the database introspected) before the port opens; the
// benchmark's readiness probe, GET /, is answered 200 by the fallback.
await pgl.getSchema();
const serv = pgl.createServ(grafserv);
// createHandler rather than addTo: websockets are off, and a fallback answers what grafserv does not handle.
const handler = serv.createHandler();
const server = createServer((request, response) =>
  handler(request, response, (error) => {
    if (error !== undefined) console.error(error);
    response.writeHead(error === undefined ? 200 : 500, { 'content-type': 'text/plain' }).end(error === undefined ? 'ok' : 'error');
  }),
);
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 4102), '127.0.0.1');
// A graceful exit, as the other baselines.
process.once('SIGTERM', () => process.exit(0));
