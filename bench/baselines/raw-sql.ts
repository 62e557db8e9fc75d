/**
 * The raw-SQL baseline of the throughput benchmark: a bare `node:http`
 * handler that issues, per request, the statements the store issues for the
 * same request (same tables, predicates, RETURNING, transaction and
 * `pg_notify`), through `pg` or `better-sqlite3` directly, and answers JSON
 * shaped like the GraphQL answer. No GraphQL, no auth, no validation: the
 * floor the server is measured against.
 *
 *   PORT=4100 DATABASE_URL=postgres://…|sqlite:PATH npx tsx bench/baselines/raw-sql.ts
 *
 * POST / with `{ "op": "list" | "claim" | "start" | "sent" | "finalize", … }`.
 *
 * With BASELINE=yoga the same functions are served as GraphQL by a bare
 * graphql-yoga (an SDL schema with just the fields the benchmark selects, no
 * plugins, no auth, no validation beyond GraphQL's own) at /graphql: the
 * floor of any yoga server issuing this SQL, for every scenario but `{ __typename }`.
 * BASELINE=yoga-jit is the same yoga executing with graphql-jit (the app's own
 * compiled-execution plugin, src/server/jit.ts, and nothing else): the
 * best-built bare server on the same SQL (issue 21).
 */
import { randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage } from 'node:http';
import { createSchema, createYoga } from 'graphql-yoga';
import { useCompiledExecution } from '../../src/server/jit.js';
import { JSONResolver } from 'graphql-scalars';
import SQLite from 'better-sqlite3';
import pg from 'pg';

const url = process.env.DATABASE_URL ?? '';
const CALLER = process.env.BENCH_CALLER ?? 'did:key:zBenchCaller';
const LEASE_MS = 30_000;

interface Runner {
  /** Runs one statement (`?` placeholders); rows back. */
  query(text: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
  /** Runs `work` in one transaction on one connection. */
  transaction<T>(work: (query: Runner['query']) => Promise<T>): Promise<T>;
  notify: boolean;
}

/**
 * Statements are named as the server names its own (src/db/named-statements.ts: each connection parses
 * a text once, plans stay custom), so the baselines pay what the server pays in Postgres;
 * BASELINE_UNNAMED=1 sends them unnamed instead, as Kysely does.
 */
const NAMED = process.env.BASELINE_UNNAMED !== '1';

function postgresRunner(connectionString: string): Runner {
  pg.types.setTypeParser(20, (v) => Number(v));
  const pool = new pg.Pool({
    connectionString,
    max: Number(process.env.DB_POOL_MAX ?? 10),
    ...(NAMED && { onConnect: async (client: pg.ClientBase) => void (await client.query('set plan_cache_mode = force_custom_plan')) }),
  });
  const statements = new Map<string, { text: string; name: string | undefined }>();
  const statement = (text: string, values: unknown[]) => {
    let known = statements.get(text);
    if (known === undefined) {
      let n = 0;
      known = { text: text.replace(/\?/g, () => `$${++n}`), name: NAMED ? `b${statements.size}` : undefined };
      statements.set(text, known);
    }
    return { text: known.text, name: known.name, values };
  };
  return {
    notify: true,
    async query(text, params = []) {
      return (await pool.query(statement(text, params))).rows;
    },
    async transaction(work) {
      const client = await pool.connect();
      try {
        await client.query('begin');
        const result = await work(async (text, params = []) => (await client.query(statement(text, params))).rows);
        await client.query('commit');
        return result;
      } catch (error) {
        await client.query('rollback').catch(() => {});
        throw error;
      } finally {
        client.release();
      }
    },
  };
}

function sqliteRunner(path: string): Runner {
  const db = new SQLite(path);
  // The server's settings (src/db/connect.ts).
  db.pragma('journal_mode = WAL');
  db.pragma('synchronous = NORMAL');
  db.pragma('busy_timeout = 5000');
  const statements = new Map<string, SQLite.Statement>();
  const run = async (text: string, params: unknown[] = []) => {
    let statement = statements.get(text);
    if (statement === undefined) statements.set(text, (statement = db.prepare(text)));
    return statement.reader ? (statement.all(...params) as Record<string, unknown>[]) : (statement.run(...params), []);
  };
  return {
    notify: false,
    query: run,
    async transaction(work) {
      run('begin immediate');
      try {
        const result = await work(run);
        run('commit');
        return result;
      } catch (error) {
        run('rollback');
        throw error;
      }
    },
  };
}

const db = url.startsWith('postgres') ? postgresRunner(url) : sqliteRunner(url.replace(/^sqlite:(\/\/)?/, ''));
const id = (type: string, nodeKey: unknown) => Buffer.from(`${type}:${nodeKey}`).toString('base64url');
const iso = (ms: unknown) => new Date(Number(ms)).toISOString();
const notify = async (kind: string, ...nodeKeys: unknown[]) => {
  if (db.notify) await db.query('select pg_notify(?, ?)', ['kubun_connector_changes', nodeKeys.map((k) => `${kind}:${k}`).join(' ')]);
};
// The store's fence: the key finds the row, the rest is checked on it (src/store/row-checks.ts).
const fence = 'caller_did = ? and operation_id = ? and (version is not distinct from ? and lease_token is not distinct from ?)';
const byKey = 'select * from kubun_connector_operation where caller_did = ? and operation_id = ?';

async function list(first: number) {
  // As the store reads every tenant's rows (ACROSS_TENANTS, src/store/page.ts): the condition that admits the partial newest-first index.
  const rows = await db.query(`select * from kubun_connector_operation where node_key <> '' order by created_at desc, node_key desc limit ?`, [first + 1]);
  const page = rows.slice(0, first);
  const documents = [...new Set(page.map((r) => r.document_id).filter((d) => d !== null))];
  const watches = documents.length === 0 ? [] : await db.query(`select * from kubun_connector_projection_watch where document_id in (${documents.map(() => '?').join(', ')})`, documents);
  const byDocument = new Map(watches.map((w) => [w.document_id, w]));
  return {
    data: {
      operations: {
        edges: page.map((r) => {
          const watch = r.document_id === null ? undefined : byDocument.get(r.document_id);
          return {
            node: {
              id: id('ConnectorOperation', r.node_key),
              operationID: r.operation_id,
              state: String(r.state).toUpperCase(),
              attempts: r.attempts,
              connectorName: r.connector_name,
              createdAt: iso(r.created_at),
              watch: watch === undefined ? null : { id: id('ProjectionWatch', watch.node_key), verificationStatus: String(watch.verification_status).toUpperCase() },
            },
          };
        }),
        pageInfo: { hasNextPage: rows.length > first },
      },
    },
  };
}

async function claim(operationID: string) {
  const now = Date.now();
  // As the store: insert first, read only when the key exists.
  const token = randomBytes(16).toString('base64url');
  const [row] = await db.query(
    `insert into kubun_connector_operation
       (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, source_id, deterministic_event_id,
        payload_hash, reissue_intent, state, attempts, next_attempt_at, version, incarnation, lease_token, lease_expires_at, created_at, updated_at)
     values (?, ?, ?, ?, 'google', 'calendar.event', 'create', 'account-1', 'primary', null, ?, ?, 'none', 'attempted', 0, ?, 0, ?, ?, ?, ?, ?)
     on conflict (caller_did, operation_id) do nothing returning *`,
    [CALLER, operationID, randomBytes(16).toString('base64url'), CALLER, `event-${operationID}`, `hash-${operationID}`, now, randomBytes(16).toString('base64url'), token, now + LEASE_MS, now, now],
  );
  if (row === undefined) {
    await db.query(byKey, [CALLER, operationID]);
    return { data: { claimOperation: { outcome: 'IN_FLIGHT' } } };
  }
  await notify('o', row.node_key);
  return {
    data: {
      claimOperation: {
        outcome: 'CLAIMED',
        operation: { id: id('ConnectorOperation', row.node_key), state: 'ATTEMPTED' },
        lease: { token, version: row.version, expiresAt: iso(row.lease_expires_at) },
      },
    },
  };
}

// Start and mark-sent as the store runs them: the operation read by its id first (the API's node
// argument), then the fenced update and its attempt-history write in one transaction, then the notice.
const newestOpen = `caller_did = ? and operation_id = ? and ended_at is null
  and seq = (select max(seq) from kubun_connector_operation_history where caller_did = ? and operation_id = ?)`;

async function start(body: { operationID: string; version: number; leaseToken: string }) {
  const now = Date.now();
  await db.query(byKey, [CALLER, body.operationID]);
  const row = await db.transaction(async (query) => {
    const [updated] = await query(
      `update kubun_connector_operation set attempts = attempts + 1, send_marker = null, last_kind = null, last_http_status = null, updated_at = ?
       where ${fence} and state is not distinct from 'attempted' and lease_expires_at > ? returning *`,
      [now, CALLER, body.operationID, body.version, body.leaseToken, now],
    );
    await query(
      `insert into kubun_connector_operation_history (caller_did, operation_id, seq, kind, attempt, started_at)
       select ?, ?, coalesce(max(seq), 0) + 1, 'attempt', ?, ? from kubun_connector_operation_history where caller_did = ? and operation_id = ?`,
      [CALLER, body.operationID, updated!.attempts, now, CALLER, body.operationID],
    );
    return updated!;
  });
  await notify('o', row.node_key);
  return { data: { startOperationAttempt: { operation: { id: id('ConnectorOperation', row.node_key), attempts: row.attempts } } } };
}

async function sent(body: { operationID: string; version: number; leaseToken: string }) {
  const now = Date.now();
  await db.query(byKey, [CALLER, body.operationID]);
  const row = await db.transaction(async (query) => {
    const [updated] = await query(
      `update kubun_connector_operation set send_marker = ?, updated_at = ? where ${fence} and state is not distinct from 'attempted' and lease_expires_at > ? returning *`,
      [`marker-${body.operationID}`, now, CALLER, body.operationID, body.version, body.leaseToken, now],
    );
    await query(`update kubun_connector_operation_history set sent_at = ? where ${newestOpen}`, [now, CALLER, body.operationID, CALLER, body.operationID]);
    return updated!;
  });
  await notify('o', row.node_key);
  return { data: { markOperationSent: { operation: { id: id('ConnectorOperation', row.node_key) } } } };
}

async function finalize(body: { operationID: string; version: number; leaseToken: string }) {
  const now = Date.now();
  const documentID = `doc-${body.operationID}`;
  // The app reads the operation by its node id before the transaction; so does the baseline (by key).
  await db.query(byKey, [CALLER, body.operationID]);
  const { op, watch } = await db.transaction(async (query) => {
    const [op] = await query(
      `update kubun_connector_operation set state = 'committed', document_id = ?, result_entity = ?, updated_at = ?, lease_token = null,
         lease_expires_at = null, finalized_lease_digest = ?
       where ${fence} and (state is not distinct from 'attempted' or state is not distinct from 'committed') returning *`,
      [documentID, '{"id":"remote-1"}', now, 'digest', CALLER, body.operationID, body.version, body.leaseToken],
    );
    if (db.notify) await query('select pg_advisory_xact_lock(?, hashtext(?))', [7, JSON.stringify([CALLER, 'calendar.event', documentID])]);
    await query(
      `delete from kubun_connector_projection_watch where owner_did = ? and model = ? and document_id = ?
         and not (connector_name = ? and account_key = ? and source_id = ?)`,
      [CALLER, 'calendar.event', documentID, 'google', 'account-1', `src-${body.operationID}`],
    );
    const [watch] = await query(
      `insert into kubun_connector_projection_watch
         (owner_did, connector_name, model, account_key, source_id, node_key, document_id, observed_winner_digest, verification_status,
          verification_attempts, repair_generation, next_attempt_at, version, created_at, updated_at)
       values (?, 'google', 'calendar.event', 'account-1', ?, ?, ?, null, 'pending_verification', 0, 0, ?, 0, ?, ?)
       on conflict (owner_did, connector_name, model, account_key, source_id) do update set
         repair_generation = kubun_connector_projection_watch.repair_generation + 1, verification_status = 'pending_verification',
         verification_attempts = 0, next_attempt_at = excluded.next_attempt_at, version = kubun_connector_projection_watch.version + 1,
         updated_at = excluded.updated_at
       returning *`,
      [CALLER, `src-${body.operationID}`, randomBytes(16).toString('base64url'), documentID, now, now, now],
    );
    return { op: op!, watch: watch! };
  });
  await notify('o', op.node_key);
  return {
    data: {
      finalizeOperation: {
        finalized: true,
        operation: { id: id('ConnectorOperation', op.node_key), state: 'COMMITTED', documentID },
        watch: { id: id('ProjectionWatch', watch.node_key) },
      },
    },
  };
}

async function readBody(request: IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
}

/** The same SQL behind a bare yoga: only the fields and arguments the benchmark's documents use. */
function yogaOverSameSQL() {
  const typeDefs = /* GraphQL */ `
    scalar JSON
    type Query { operations(first: Int!): OperationConnection! }
    type Mutation {
      claimOperation(input: ClaimOperationInput!): ClaimOperationResult!
      startOperationAttempt(input: StartOperationAttemptInput!): StartOperationAttemptResult!
      markOperationSent(input: MarkOperationSentInput!): MarkOperationSentResult!
      finalizeOperation(input: FinalizeOperationInput!): FinalizeOperationResult!
    }
    type OperationConnection { edges: [OperationEdge!]!, pageInfo: PageInfo! }
    type OperationEdge { node: Operation! }
    type PageInfo { hasNextPage: Boolean! }
    type Operation { id: ID!, operationID: String, state: String, attempts: Int, connectorName: String, createdAt: String, documentID: String, watch: Watch }
    type Watch { id: ID!, verificationStatus: String }
    type Lease { token: String!, version: Int!, expiresAt: String! }
    type ClaimOperationPayload { outcome: String!, operation: Operation, lease: Lease }
    union ClaimOperationResult = ClaimOperationPayload
    type OperationPayload { operation: Operation }
    union StartOperationAttemptResult = OperationPayload
    union MarkOperationSentResult = OperationPayload
    type FinalizeOperationPayload { finalized: Boolean!, operation: Operation, watch: Watch }
    union FinalizeOperationResult = FinalizeOperationPayload
    input ClaimOperationInput {
      operationID: String!, connectorName: String!, model: String!, op: String!, accountKey: String!, target: String!,
      deterministicEventID: String!, payloadHash: String!, reissueIntent: String!, leaseMs: Int!
    }
    input StartOperationAttemptInput { id: ID!, version: Int!, leaseToken: String! }
    input MarkOperationSentInput { id: ID!, version: Int!, leaseToken: String!, sendMarker: String! }
    input FinalizeOperationInput { id: ID!, version: Int!, leaseToken: String!, documentID: String!, sourceID: String!, resultEntity: JSON }`;
  // The floor's operation ids carry the idempotency key, so the fenced steps address rows as the raw handler does.
  const floorID = (operationID: string) => Buffer.from(`Floor:${operationID}`).toString('base64url');
  const fenced = (input: { id: string; version: number; leaseToken: string }) => ({
    operationID: Buffer.from(input.id, 'base64url').toString('utf8').slice('Floor:'.length),
    version: input.version,
    leaseToken: input.leaseToken,
  });
  type Fenced = { input: { id: string; version: number; leaseToken: string } };
  const withID = <T extends { operation?: { id: string } }>(payload: T, operationID: string): T =>
    payload.operation === undefined ? payload : { ...payload, operation: { ...payload.operation, id: floorID(operationID) } };
  return createYoga({
    schema: createSchema({
      typeDefs,
      resolvers: {
        JSON: JSONResolver,
        Query: { operations: async (_: unknown, args: { first: number }) => (await list(args.first)).data.operations },
        Mutation: {
          claimOperation: async (_: unknown, args: { input: { operationID: string } }) =>
            withID((await claim(args.input.operationID)).data.claimOperation as { operation?: { id: string } }, args.input.operationID),
          startOperationAttempt: async (_: unknown, args: Fenced) => withID((await start(fenced(args.input))).data.startOperationAttempt, fenced(args.input).operationID),
          markOperationSent: async (_: unknown, args: Fenced) => withID((await sent(fenced(args.input))).data.markOperationSent, fenced(args.input).operationID),
          finalizeOperation: async (_: unknown, args: Fenced) => withID((await finalize(fenced(args.input))).data.finalizeOperation, fenced(args.input).operationID),
        },
        ClaimOperationResult: { __resolveType: () => 'ClaimOperationPayload' },
        StartOperationAttemptResult: { __resolveType: () => 'OperationPayload' },
        MarkOperationSentResult: { __resolveType: () => 'OperationPayload' },
        FinalizeOperationResult: { __resolveType: () => 'FinalizeOperationPayload' },
      },
    }),
    logging: false,
    plugins: process.env.BASELINE === 'yoga-jit' ? [useCompiledExecution()] : [],
  });
}

const server = createServer(process.env.BASELINE === 'yoga' || process.env.BASELINE === 'yoga-jit' ? yogaOverSameSQL() : async (request, response) => {
  if (request.method !== 'POST') {
    response.writeHead(200, { 'content-type': 'text/plain' }).end('ok');
    return;
  }
  try {
    const body = await readBody(request);
    const answer =
      body.op === 'list' ? await list(Number(body.first ?? 50))
      : body.op === 'claim' ? await claim(String(body.operationID))
      : body.op === 'start' ? await start(body)
      : body.op === 'sent' ? await sent(body)
      : body.op === 'finalize' ? await finalize(body)
      : undefined;
    if (answer === undefined) {
      response.writeHead(400).end();
      return;
    }
    response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
  } catch (error) {
    response.writeHead(500, { 'content-type': 'text/plain' }).end(String((error as Error).message));
  }
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT ?? 4100), '127.0.0.1');
// A graceful exit, so `node --cpu-prof` writes its profile (bench/profile.ts).
process.once('SIGTERM', () => process.exit(0));
