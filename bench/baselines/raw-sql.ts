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
 * POST / with `{ "op": "list" | "claim" | "start" | "sent" | "finalize" | "enqueue", … }`: the
 * fenced steps take the app's input (`id`, `version`, `leaseToken`, and `sendMarker` or
 * `documentID` and `sourceID`), `enqueue` takes `operationIDs`.
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
import { OPERATION_COLUMNS, PROJECTION_WATCH_COLUMNS } from '../../src/db/tables.js';
import { appList, capturedListStatements, type RunCaptured } from './app-list.js';

const url = process.env.DATABASE_URL ?? '';
const CALLER = process.env.BENCH_CALLER ?? 'did:key:zBenchCaller';
const LEASE_MS = 30_000;

interface Runner {
  /** Runs one statement (`?` placeholders); rows back. */
  query(text: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
  /** Runs a statement the app sent (`$n` placeholders), under the app's name for it (Postgres). */
  captured?: RunCaptured;
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
    async captured(captured, values) {
      return (await pool.query({ text: captured.text, values, ...(NAMED && captured.name !== '' && { name: captured.name }) })).rows;
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

/**
 * The dashboard list: on Postgres, when the benchmark passes LIST_STATEMENTS, the app's very statements
 * (bench/baselines/app-list.ts, as fastify + mercurius runs them); else the same reads in this file's SQL.
 */
const LIST = capturedListStatements();
const appListed = LIST !== undefined && db.captured !== undefined ? appList(LIST, db.captured) : undefined;

async function list(first: number) {
  if (appListed !== undefined) return { data: { operations: await appListed(first) } };
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

// On Postgres each write-back step is one statement, as the store's (src/store/operations/fenced-step.ts, claim.ts,
// src/store/finalize/): the write in a CTE `u`, what goes beside it from `u`, and the NOTIFY of the change in the final
// SELECT; on SQLite, the step's statements in one transaction, as the store runs them there.
const OPERATION = OPERATION_COLUMNS.join(', ');
const WATCH = PROJECTION_WATCH_COLUMNS.join(', ');
const written = (also = '') => `select ${OPERATION_COLUMNS.map((c) => `u.${c}`).join(', ')}${also}, pg_notify('kubun_connector_changes', 'o:' || u.node_key) as notified from u`;
const byKey = `select ${OPERATION} from kubun_connector_operation where caller_did = ? and operation_id = ?`;
const byNodeKey = `select ${OPERATION} from kubun_connector_operation where node_key in (?)`;
const visibleTo = '(cast(? as text) is null or caller_did is not distinct from ? or owner_did is not distinct from ?)';
const fencedByNodeKey = `node_key = ? and (${visibleTo} and version is not distinct from ? and lease_token is not distinct from ? and state is not distinct from 'attempted') and lease_expires_at > ?`;
const fencedValues = (body: Fenced, now: number) => [nodeKeyOf(body.id), CALLER, CALLER, CALLER, body.version, body.leaseToken, now];
/** A fenced step's input as the API's: the operation's id, the lease, and the step's own fields. */
interface Fenced {
  id: string;
  version: number;
  leaseToken: string;
  sendMarker?: string;
  documentID?: string;
  sourceID?: string;
}
/** The node key an operation's id names, as the API decodes it. */
const nodeKeyOf = (operationID: string) => Buffer.from(operationID, 'base64url').toString('utf8').slice('ConnectorOperation:'.length);

const NEW_OPERATION = `(caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, source_id, document_id, deterministic_event_id,
  payload_hash, reissue_intent, send_timeout_ms, state, attempts, next_attempt_at, version, incarnation, lease_token, lease_expires_at, created_at, updated_at)`;
const newOperationValues = (operationID: string, now: number, token: string | null, leaseExpiresAt: number | null) =>
  [CALLER, operationID, randomBytes(16).toString('base64url'), CALLER, 'google', 'calendar.event', 'create', 'account-1', 'primary', null, null,
    `event-${operationID}`, `hash-${operationID}`, 'none', null, 'attempted', 0, now, 0, randomBytes(16).toString('base64url'), token, leaseExpiresAt, now, now];
const ROW = '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)';

async function claim(operationID: string) {
  const now = Date.now();
  // As the store: insert first, read only when the key exists.
  const token = randomBytes(16).toString('base64url');
  const insert = `insert into kubun_connector_operation ${NEW_OPERATION} values ${ROW} on conflict (caller_did, operation_id) do nothing returning ${OPERATION}`;
  const values = newOperationValues(operationID, now, token, now + LEASE_MS);
  const [row] = db.notify ? await db.query(`with u as (${insert}) ${written()}`, values) : await db.query(insert, values);
  if (row === undefined) {
    await db.query(byKey, [CALLER, operationID]);
    return { data: { claimOperation: { outcome: 'IN_FLIGHT' } } };
  }
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

const START_SET = 'attempts = attempts + 1, send_marker = null, send_deadline_at = null, last_kind = null, last_http_status = null, updated_at = ?';
const SENT_SET = 'send_marker = ?, send_deadline_at = ? + coalesce(null, send_timeout_ms, 30000), updated_at = ?';
const newestSeq = (alias: string, of: string) => `(select max(${alias}.seq) from kubun_connector_operation_history as ${alias} where ${alias}.caller_did = ${of}.caller_did and ${alias}.operation_id = ${of}.operation_id)`;

async function start(body: Fenced) {
  const now = Date.now();
  let row: Record<string, unknown> | undefined;
  if (db.notify) {
    [row] = await db.query(
      `with u as (update kubun_connector_operation set ${START_SET} where ${fencedByNodeKey} and (send_marker is null or last_kind is not null) returning ${OPERATION}),
       h as (insert into kubun_connector_operation_history (caller_did, operation_id, seq, kind, attempt, started_at)
         select u.caller_did, u.operation_id, coalesce(${newestSeq('h', 'u')}, 0) + 1 as seq, 'attempt' as kind, u.attempts, ? as started_at from u)
       ${written()}`,
      [now, ...fencedValues(body, now), now],
    );
  } else {
    row = await db.transaction(async (query) => {
      const [updated] = await query(`update kubun_connector_operation set ${START_SET} where ${fencedByNodeKey} and (send_marker is null or last_kind is not null) returning ${OPERATION}`, [now, ...fencedValues(body, now)]);
      await query(
        `insert into kubun_connector_operation_history (caller_did, operation_id, seq, kind, attempt, started_at)
         select ?, ?, coalesce(max(seq), 0) + 1, 'attempt', ?, ? from kubun_connector_operation_history where caller_did = ? and operation_id = ?`,
        [CALLER, updated!.operation_id, updated!.attempts, now, CALLER, updated!.operation_id],
      );
      return updated;
    });
  }
  return { data: { startOperationAttempt: { operation: { id: id('ConnectorOperation', row!.node_key), attempts: row!.attempts } } } };
}

async function sent(body: Fenced) {
  const now = Date.now();
  const marker = String(body.sendMarker);
  let row: Record<string, unknown> | undefined;
  if (db.notify) {
    [row] = await db.query(
      `with u as (update kubun_connector_operation set ${SENT_SET} where ${fencedByNodeKey} and send_marker is null returning ${OPERATION}),
       h as (update kubun_connector_operation_history as h set sent_at = ? from u
         where h.caller_did = u.caller_did and h.operation_id = u.operation_id and h.ended_at is null and h.seq = ${newestSeq('m', 'u')})
       ${written()}`,
      [marker, now, now, ...fencedValues(body, now), now],
    );
  } else {
    row = await db.transaction(async (query) => {
      const [updated] = await query(`update kubun_connector_operation set ${SENT_SET} where ${fencedByNodeKey} and send_marker is null returning ${OPERATION}`, [marker, now, now, ...fencedValues(body, now)]);
      await query(
        `update kubun_connector_operation_history set sent_at = ? where caller_did = ? and operation_id = ? and ended_at is null
           and seq = (select max(seq) from kubun_connector_operation_history where caller_did = ? and operation_id = ?)`,
        [now, CALLER, updated!.operation_id, CALLER, updated!.operation_id],
      );
      return updated;
    });
  }
  return { data: { markOperationSent: { operation: { id: id('ConnectorOperation', row!.node_key) } } } };
}

const COMMIT_SET = `state = 'committed', document_id = ?, result_entity = ?, updated_at = ?, lease_token = null, lease_expires_at = null,
  finalized_lease_digest = ?, finalized_input = ?, last_error = null`;
const COMMIT_FENCE = `caller_did = ? and operation_id = ? and ((state is not distinct from 'attempted' or state is not distinct from 'committed')
  and version is not distinct from ? and lease_token is not distinct from ? and (document_id is null or document_id = ?))`;
const OTHER_WATCHES = `owner_did = ? and model = ? and document_id = ? and (connector_name != ? or account_key != ? or source_id != ?)`;
const NEW_WATCH = `owner_did, connector_name, model, account_key, source_id, node_key, document_id, verified_state_digest, observed_winner_digest,
  verification_status, verification_attempts, repair_generation, next_attempt_at, claimed_until, defer_reason, version, created_at, updated_at`;
const REARM = `repair_generation = kubun_connector_projection_watch.repair_generation + 1, verification_attempts = 0,
  verification_status = 'pending_verification', next_attempt_at = excluded.next_attempt_at, claimed_until = null, defer_reason = null,
  version = kubun_connector_projection_watch.version + 1, updated_at = excluded.updated_at, observed_winner_digest = null, verified_state_digest = null`;

async function finalize(body: Fenced) {
  const now = Date.now();
  const documentID = String(body.documentID);
  const sourceID = String(body.sourceID);
  const slot = JSON.stringify([CALLER, 'calendar.event', documentID]);
  // The app loads the operation by its node id first (the API's node argument), then commits it by its key; so does the baseline.
  const [loaded] = await db.query(byNodeKey, [nodeKeyOf(body.id)]);
  const commit = [documentID, '{"id":"remote-1"}', now, 'digest', `{"sourceID":"${sourceID}"}`, CALLER, loaded!.operation_id, body.version, body.leaseToken, documentID];
  const other = [CALLER, 'calendar.event', documentID, 'google', 'account-1', sourceID];
  const watch = [CALLER, 'google', 'calendar.event', 'account-1', sourceID, randomBytes(16).toString('base64url'), documentID, null, null, 'pending_verification', 0, 0, now, null, null, 0, now, now];
  let op: Record<string, unknown>;
  let watchKey: unknown;
  if (db.notify) {
    const [row] = await db.query(
      `with u as (update kubun_connector_operation set ${COMMIT_SET} where ${COMMIT_FENCE} returning ${OPERATION}),
       l as (select pg_advisory_xact_lock(1347895636, hashtext(?)) as locked from u),
       d as (delete from kubun_connector_projection_watch where ${OTHER_WATCHES} and exists (select 1 from l) returning node_key),
       w as (insert into kubun_connector_projection_watch (${NEW_WATCH})
         select ${NEW_WATCH.split(',').map(() => '?').join(', ')} from u where (select count(*) from d) >= 0
         on conflict (owner_did, connector_name, model, account_key, source_id) do update set ${REARM} returning ${WATCH})
       select ${OPERATION_COLUMNS.map((c) => `u.${c}`).join(', ')}, ${PROJECTION_WATCH_COLUMNS.map((c) => `w.${c} as watch_${c}`).join(', ')},
         pg_notify('kubun_connector_changes', 'o:' || u.node_key || ' w:' || w.node_key) as notified from u, w`,
      [...commit, slot, ...other, ...watch],
    );
    op = row!;
    watchKey = row!.watch_node_key;
  } else {
    ({ op, watchKey } = await db.transaction(async (query) => {
      const [updated] = await query(`update kubun_connector_operation set ${COMMIT_SET} where ${COMMIT_FENCE} returning ${OPERATION}`, commit);
      await query(`delete from kubun_connector_projection_watch where ${OTHER_WATCHES}`, other);
      const [armed] = await query(
        `insert into kubun_connector_projection_watch (${NEW_WATCH}) values (${NEW_WATCH.split(',').map(() => '?').join(', ')})
         on conflict (owner_did, connector_name, model, account_key, source_id) do update set ${REARM} returning ${WATCH}`,
        watch,
      );
      return { op: updated!, watchKey: armed!.node_key };
    }));
  }
  return {
    data: {
      finalizeOperation: {
        finalized: true,
        operation: { id: id('ConnectorOperation', op.node_key), state: 'COMMITTED', documentID },
        watch: { id: id('ProjectionWatch', watchKey) },
      },
    },
  };
}

/** A batch of new operations as the store enqueues one (src/store/operations/insert.ts, requests.ts): two multi-row INSERTs in a transaction, then one NOTIFY. */
async function enqueue(operationIDs: readonly string[]) {
  const now = Date.now();
  const rows = await db.transaction(async (query) => {
    const inserted = await query(
      `insert into kubun_connector_operation ${NEW_OPERATION} values ${operationIDs.map(() => ROW).join(', ')} on conflict (caller_did, operation_id) do nothing returning ${OPERATION}`,
      operationIDs.flatMap((operationID) => newOperationValues(operationID, now, null, null)),
    );
    await query(
      `insert into kubun_connector_operation_request (caller_did, operation_id, request_key, step, input, answer, lease_token, created_at)
       values ${inserted.map(() => '(?, ?, ?, ?, ?, ?, ?, ?)').join(', ')} on conflict (caller_did, operation_id, request_key) do nothing`,
      inserted.flatMap((row) => [CALLER, row.operation_id, '', 'enqueueOperation', `{"operationID":"${String(row.operation_id)}"}`, JSON.stringify(row), null, now]),
    );
    return inserted;
  });
  await notify('o', ...rows.map((row) => row.node_key));
  return {
    data: {
      enqueueOperations: {
        conflicts: 0,
        results: rows.map((row) => ({ outcome: 'CREATED', operation: { id: id('ConnectorOperation', row.node_key) } })),
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
      enqueueOperations(input: EnqueueOperationsInput!): EnqueueOperationsResult!
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
    type EnqueueOperationPayload { outcome: String!, operation: Operation! }
    union EnqueueOperationsItemResult = EnqueueOperationPayload
    type EnqueueOperationsPayload { conflicts: Int!, results: [EnqueueOperationsItemResult!]! }
    union EnqueueOperationsResult = EnqueueOperationsPayload
    input EnqueueOperationInput {
      operationID: String!, connectorName: String!, model: String!, op: String!, accountKey: String!, target: String!,
      deterministicEventID: String!, payloadHash: String!, reissueIntent: String!
    }
    input EnqueueOperationsInput { operations: [EnqueueOperationInput!]! }
    input ClaimOperationInput {
      operationID: String!, connectorName: String!, model: String!, op: String!, accountKey: String!, target: String!,
      deterministicEventID: String!, payloadHash: String!, reissueIntent: String!, leaseMs: Int!
    }
    input StartOperationAttemptInput { id: ID!, version: Int!, leaseToken: String! }
    input MarkOperationSentInput { id: ID!, version: Int!, leaseToken: String!, sendMarker: String! }
    input FinalizeOperationInput { id: ID!, version: Int!, leaseToken: String!, documentID: String!, sourceID: String!, resultEntity: JSON }`;
  type Step = { input: Fenced };
  return createYoga({
    schema: createSchema({
      typeDefs,
      resolvers: {
        JSON: JSONResolver,
        Query: { operations: async (_: unknown, args: { first: number }) => (await list(args.first)).data.operations },
        Mutation: {
          claimOperation: async (_: unknown, args: { input: { operationID: string } }) => (await claim(args.input.operationID)).data.claimOperation,
          startOperationAttempt: async (_: unknown, args: Step) => (await start(args.input)).data.startOperationAttempt,
          markOperationSent: async (_: unknown, args: Step) => (await sent(args.input)).data.markOperationSent,
          finalizeOperation: async (_: unknown, args: Step) => (await finalize(args.input)).data.finalizeOperation,
          enqueueOperations: async (_: unknown, args: { input: { operations: { operationID: string }[] } }) =>
            (await enqueue(args.input.operations.map((o) => o.operationID))).data.enqueueOperations,
        },
        ClaimOperationResult: { __resolveType: () => 'ClaimOperationPayload' },
        StartOperationAttemptResult: { __resolveType: () => 'OperationPayload' },
        MarkOperationSentResult: { __resolveType: () => 'OperationPayload' },
        FinalizeOperationResult: { __resolveType: () => 'FinalizeOperationPayload' },
        EnqueueOperationsItemResult: { __resolveType: () => 'EnqueueOperationPayload' },
        EnqueueOperationsResult: { __resolveType: () => 'EnqueueOperationsPayload' },
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
      : body.op === 'enqueue' ? await enqueue(body.operationIDs)
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
