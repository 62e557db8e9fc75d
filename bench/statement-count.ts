/**
 * Statements and wall time per GraphQL request for N = 1, 10, 100 documents:
 * the DataLoaders should keep the statement count flat as N grows. Runs on an
 * in-memory SQLite database, and on Postgres when PG_TEST_URL or a
 * postgres:// DATABASE_URL is reachable (in a temporary database created and
 * dropped on that server; nothing is written to the named database itself).
 * Prints a markdown table.
 *
 *   npx tsx bench/statement-count.ts        (or npm run bench)
 *   BENCH_REPEAT=50 npx tsx bench/statement-count.ts
 */
import { randomBytes } from 'node:crypto';
import { pathToFileURL } from 'node:url';
import pg from 'pg';
import { encodeNodeID } from '../schema/global-id.js';
import { generateLocalKey, mintToken } from '../src/auth/index.js';
import { openDatabase, type DialectName, type OpenDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrator.js';
import type { Database } from '../src/db/tables.js';
import { createServerApp } from '../src/server/app.js';
import { loadConfig } from '../src/server/config.js';
import { createLogger } from '../src/server/logger.js';
import { createStoreContext } from '../src/store/context.js';
import { seedDocumentsInBulk } from '../test/helpers/bulk-seed.js';
import { withStatementCounter } from '../test/helpers/statement-counter.js';

/** Document counts measured. */
const SIZES = [1, 10, 100];
/** Timed runs per cell (after one warm-up run); the median is reported. */
const REPEAT = Number(process.env.BENCH_REPEAT ?? 15);
const AUDIENCE = 'connector-store-bench';

const TABLES: (keyof Database)[] = [
  'kubun_connector_operation',
  'kubun_connector_projection_watch',
  'kubun_connector_entity_trim',
  'kubun_connector_sync_state',
];

interface Query {
  name: string;
  query: string;
  variables(seed: { documentIDs: string[]; operationIDs: string[]; watchIDs: string[]; syncStateIDs: string[] }, n: number): Record<string, unknown>;
}

const QUERIES: Query[] = [
  {
    name: 'documents(N ids) { operations watch entityTrim hasConnectorWork }',
    query: `query($ids: [String!]!) { documents(documentIDs: $ids) { documentID operations { id } watch { id } entityTrim { documentID } hasConnectorWork } }`,
    variables: (seed, n) => ({ ids: seed.documentIDs.slice(0, n) }),
  },
  {
    name: 'nodes(N ids of each type: operations, watches, sync states)',
    query: `query($ids: [ID!]!) { nodes(ids: $ids) { id ... on ConnectorOperation { state } ... on ProjectionWatch { verificationStatus } ... on SyncState { connectorName } } }`,
    variables: (seed, n) => ({ ids: [...seed.operationIDs.slice(0, n), ...seed.watchIDs.slice(0, n), ...seed.syncStateIDs.slice(0, n)] }),
  },
  {
    name: 'operations(first: N) { edges { node { watch } } }',
    query: `query($first: Int!) { operations(first: $first) { edges { node { id watch { id } } } } }`,
    variables: (_seed, n) => ({ first: n }),
  },
];

/** One row of the result table. */
export interface BenchRow {
  dialect: DialectName;
  query: string;
  n: number;
  statements: number;
  medianMs: number;
  p90Ms: number;
}

/** A database to measure on, and how to get rid of it. */
interface BenchDatabase {
  open: OpenDatabase;
  dispose(): Promise<void>;
}

async function sqliteDatabase(): Promise<BenchDatabase> {
  const open = openDatabase({ dialect: 'sqlite', path: ':memory:', display: 'sqlite::memory:' });
  await migrateToLatest(open.db, 'sqlite');
  return { open, dispose: () => open.close() };
}

/** The Postgres server to use, or null: PG_TEST_URL, else a postgres:// DATABASE_URL. */
function postgresServerURL(): string | null {
  if (process.env.PG_TEST_URL) return process.env.PG_TEST_URL;
  const url = process.env.DATABASE_URL ?? '';
  return /^postgres(ql)?:\/\//.test(url) ? url : null;
}

async function adminQuery(url: string, text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3_000 });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end().catch(() => {});
  }
}

/** A temporary database on the server of `serverURL`, or null (with the reason) when unreachable. */
async function postgresDatabase(serverURL: string): Promise<BenchDatabase | string> {
  const name = `cs_bench_${Date.now().toString(36)}_${randomBytes(3).toString('hex')}`;
  try {
    await adminQuery(serverURL, `create database ${name}`);
  } catch (error) {
    return error instanceof Error ? error.message : String(error);
  }
  const url = new URL(serverURL);
  url.pathname = `/${name}`;
  const open = openDatabase({ dialect: 'postgres', connectionString: url.toString(), display: name }, { poolMax: 5 });
  await migrateToLatest(open.db, 'postgres');
  return {
    open,
    dispose: async () => {
      await open.close();
      await adminQuery(serverURL, `drop database if exists ${name} with (force)`);
    },
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length - 1) * p))] ?? Number.NaN;
}

/** Measures every query for every size on one database. */
async function measure(dialect: DialectName, database: BenchDatabase): Promise<BenchRow[]> {
  const alice = generateLocalKey();
  const store = createStoreContext(database.open.db, dialect);
  const counted = withStatementCounter(store);
  const app = createServerApp({
    config: loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0' }),
    database: { ...database.open, db: counted.store.db },
    logger: createLogger('silent'),
  });
  const token = await mintToken({ privateKey: alice.privateKey, did: alice.did, audience: AUDIENCE, ttlSeconds: 3600 });
  const post = async (query: string, variables: Record<string, unknown>) => {
    const response = await app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as { errors?: { message: string }[] };
    if (body.errors !== undefined) throw new Error(`bench query failed: ${body.errors.map((e) => e.message).join('; ')}`);
  };

  const rows: BenchRow[] = [];
  try {
    for (const n of SIZES) {
      for (const table of TABLES) await store.db.deleteFrom(table).execute();
      const bulk = await seedDocumentsInBulk(store, { ownerDID: alice.did, count: n });
      const seed = {
        documentIDs: bulk.documentIDs,
        operationIDs: bulk.operationNodeKeys.map((k) => encodeNodeID('ConnectorOperation', k)),
        watchIDs: bulk.watchNodeKeys.map((k) => encodeNodeID('ProjectionWatch', k)),
        syncStateIDs: bulk.syncStateNodeKeys.map((k) => encodeNodeID('SyncState', k)),
      };
      for (const q of QUERIES) {
        const variables = q.variables(seed, n);
        await post(q.query, variables);
        counted.statements.length = 0;
        await post(q.query, variables);
        const statements = counted.statements.length;
        const times: number[] = [];
        for (let i = 0; i < REPEAT; i++) {
          const started = process.hrtime.bigint();
          await post(q.query, variables);
          times.push(Number(process.hrtime.bigint() - started) / 1e6);
        }
        times.sort((a, b) => a - b);
        rows.push({ dialect, query: q.name, n, statements, medianMs: percentile(times, 0.5), p90Ms: percentile(times, 0.9) });
      }
    }
  } finally {
    app.closeSubscriptions();
  }
  return rows;
}

/** Runs the benchmark on every reachable dialect; returns the rows and the markdown it printed. */
export async function runStatementCountBench(log: (line: string) => void = console.log): Promise<BenchRow[]> {
  const rows: BenchRow[] = [];
  const notes: string[] = [];
  const sqlite = await sqliteDatabase();
  try {
    rows.push(...(await measure('sqlite', sqlite)));
  } finally {
    await sqlite.dispose();
  }
  const serverURL = postgresServerURL();
  if (serverURL === null) {
    notes.push('Postgres skipped: set PG_TEST_URL or a postgres:// DATABASE_URL.');
  } else {
    const postgres = await postgresDatabase(serverURL);
    if (typeof postgres === 'string') {
      notes.push(`Postgres skipped: cannot create a temporary database (${postgres}).`);
    } else {
      try {
        rows.push(...(await measure('postgres', postgres)));
      } finally {
        await postgres.dispose();
      }
    }
  }

  log(`### Statements and wall time per request (median and p90 of ${REPEAT} runs, in process via yoga.fetch)`);
  log('');
  log('| dialect | query | N | statements | median ms | p90 ms |');
  log('|---|---|--:|--:|--:|--:|');
  for (const r of rows) log(`| ${r.dialect} | \`${r.query}\` | ${r.n} | ${r.statements} | ${r.medianMs.toFixed(2)} | ${r.p90Ms.toFixed(2)} |`);
  for (const note of notes) log(`\n${note}`);
  return rows;
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await runStatementCountBench();
}
