/**
 * What a generic plan would save the key and id-list reads (issue 40 item
 * 5), Postgres only, in the CPU of the backend that runs them: each read
 * as the store sends it (a named statement, ids padded with NULLs), on a
 * connection planning every run (`force_custom_plan`, the server's) and
 * on one running the generic plan (`force_generic_plan`, what a second
 * pool for key reads would set); the id lists also as one array parameter
 * (`= any($1::text[])`), and the watch read and the key lookup also
 * through a plpgsql function with `SET plan_cache_mode =
 * force_generic_plan` called from the server's custom connection. Seeds
 * 200 000 operations and 200 000 watches by SQL in a scratch database and
 * runs ROUNDS rounds of READS reads of each form, interleaved, each on its
 * own connection; prints per form the median over rounds of the backend's
 * CPU per read (utime + stime from /proc, so the server must be on this
 * machine; 10 ms ticks, so READS × the CPU per read should span many) and
 * of the wall time per read seen by the client. Whether a generic plan is
 * safe is test/db/plan-modes.test.ts's question; the numbers and the
 * decision are in docs/store.md ("Plans stay custom").
 *
 *   PG_TEST_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/key-read-plans.ts
 */
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrator.js';
import { createStoreContext } from '../src/store/context.js';
import { getOperationByKey, getOperationsByNodeKeys } from '../src/store/operations/index.js';
import { getAllWatchesByDocumentIDs } from '../src/store/projection-watches/index.js';
import { recordingStatements } from '../test/helpers/query-plans.js';
import { statFields, TICKS_PER_SECOND } from './postgres-cpu.js';

const ROWS = Number(process.env.BENCH_ROWS ?? 200_000);
const READS = Number(process.env.BENCH_READS ?? 4_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const PAGE = 50;
const OWNER = 'did:key:z6MkOwner';

const base = process.env.PG_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const admin = new pg.Client({ connectionString: base });
await admin.connect();
const name = `cs_keyreads_${randomBytes(4).toString('hex')}`;
await admin.query(`create database ${name}`);
const url = new URL(base);
url.pathname = `/${name}`;

/** One connection of its own, its backend's pid, and a named statement per text. */
class Session {
  #names = new Map<string, string>();
  private constructor(
    readonly client: pg.Client,
    readonly pid: number,
  ) {}
  static async open(mode: 'force_custom_plan' | 'force_generic_plan'): Promise<Session> {
    const client = new pg.Client({ connectionString: url.toString() });
    await client.connect();
    // The scratch database is dropped with force at the end, whatever happened.
    client.on('error', () => {});
    await client.query(`set plan_cache_mode = ${mode}`);
    const { rows } = await client.query<{ pid: number }>('select pg_backend_pid() as pid');
    return new Session(client, rows[0]!.pid);
  }
  /** Runs `text` as a named statement, parsed on its first run, as the server's pg wrapper sends it. */
  async run(text: string, values: unknown[]): Promise<number> {
    let statement = this.#names.get(text);
    if (statement === undefined) this.#names.set(text, (statement = `k${this.#names.size}`));
    return (await this.client.query({ name: statement, text, values })).rowCount ?? 0;
  }
  ticks(): number {
    const fields = statFields(this.pid)!;
    return Number(fields[11]) + Number(fields[12]);
  }
}

try {
  const database = openDatabase({ dialect: 'postgres', connectionString: url.toString(), display: name });
  await migrateToLatest(database.db, 'postgres');
  const store = createStoreContext(database.db, 'postgres');
  await sqlRun(
    `insert into kubun_connector_operation
       (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
        payload_hash, reissue_intent, state, attempts, version, created_at, updated_at, document_id)
     select '${OWNER}' || (i % 1000), 'op-' || i, 'op' || i, '${OWNER}' || (i % 1000), 'google', 'calendar.event', 'create', 'a', 'primary',
       'e-' || i, 'h', 'none', 'committed', 1, 0, 1700000000000 + i, 1700000000000 + i, 'doc-' || (i / 2)
     from generate_series(1, ${ROWS}) as i`,
  );
  await sqlRun(
    `insert into kubun_connector_projection_watch
       (owner_did, connector_name, model, account_key, source_id, node_key, document_id, verification_status, created_at, updated_at)
     select '${OWNER}' || (i % 1000), 'google', 'calendar.event', 'a', 's-' || i, 'w' || i, 'doc-' || i,
            (array['pending_verification','verified','failed'])[1 + i % 3], 1700000000000 + i, 1700000000000 + i
     from generate_series(1, ${ROWS}) as i`,
  );
  await sqlRun('vacuum analyze');

  // The store's own texts, as it sends them (an id list padded with NULLs to its prepared length).
  const { store: recording, statements } = recordingStatements(store);
  await getOperationByKey(recording, { callerDID: `${OWNER}1`, operationID: 'op-1' });
  await getOperationsByNodeKeys(recording, ['op1'], 'summary');
  await getOperationsByNodeKeys(recording, Array.from({ length: PAGE }, (_, i) => `op${i + 1}`), 'brief');
  await getAllWatchesByDocumentIDs(recording, Array.from({ length: PAGE }, (_, i) => `doc-${i + 1}`));
  await database.close();
  const [byKey, byNodeKey, byNodeKeys, watches] = statements.map((statement) => statement.sql) as [string, string, string, string];
  const padded = (ids: string[]) => [...ids, ...Array<null>(64 - ids.length).fill(null)];
  const anyArray = (text: string) => text.replace(/ in \(\$1(, \$\d+)*\)/, () => ' = any($1::text[])');
  const random = () => 1 + Math.floor(Math.random() * ROWS);
  const page = (prefix: string) => Array.from({ length: PAGE }, () => `${prefix}${random()}`);

  // Functions wrapping two reads, planned generic inside (plpgsql keeps its statements' plans per session).
  const columns = (text: string) => text.slice('select '.length, text.indexOf(' from '));
  await sqlRun(`create function cs_bench_operation_by_key(caller text, id text) returns setof kubun_connector_operation
    language plpgsql stable set plan_cache_mode = force_generic_plan as $$
    begin return query select * from kubun_connector_operation where caller_did = caller and operation_id = id; end $$`);
  await sqlRun(`create function cs_bench_watches(ids text[]) returns setof kubun_connector_projection_watch
    language plpgsql stable set plan_cache_mode = force_generic_plan as $$
    begin return query select * from kubun_connector_projection_watch where document_id = any(ids) order by created_at desc, node_key desc; end $$`);

  const custom = await Session.open('force_custom_plan');
  const generic = await Session.open('force_generic_plan');
  const functions = await Session.open('force_custom_plan');
  const forms: { read: string; form: string; session: Session; text: string; values: () => unknown[] }[] = [];
  const add = (read: string, text: string, values: () => unknown[], array?: () => unknown[]) => {
    forms.push({ read, form: 'custom (today)', session: custom, text, values });
    forms.push({ read, form: 'generic', session: generic, text, values });
    if (array !== undefined) {
      forms.push({ read, form: '= any($1) custom', session: custom, text: anyArray(text), values: array });
      forms.push({ read, form: '= any($1) generic', session: generic, text: anyArray(text), values: array });
    }
  };
  add('an operation by its key', byKey, () => {
    const i = random();
    return [`${OWNER}${i % 1000}`, `op-${i}`];
  });
  forms.push({
    read: 'an operation by its key',
    form: 'plpgsql, SET generic',
    session: functions,
    text: `select ${columns(byKey)} from cs_bench_operation_by_key($1, $2)`,
    values: () => {
      const i = random();
      return [`${OWNER}${i % 1000}`, `op-${i}`];
    },
  });
  add('an operation by node key (node)', byNodeKey, () => [`op${random()}`]);
  add('50 operations by node key (padded to 64)', byNodeKeys, () => padded(page('op')), () => [page('op')]);
  add('the watches of 50 documents (padded to 64)', watches, () => padded(page('doc-')), () => [page('doc-')]);
  forms.push({
    read: 'the watches of 50 documents (padded to 64)',
    form: 'plpgsql, SET generic',
    session: functions,
    text: `select ${columns(watches)} from cs_bench_watches($1)`,
    values: () => [page('doc-')],
  });

  const cpu = new Map<(typeof forms)[number], number[]>();
  const wall = new Map<(typeof forms)[number], number[]>();
  for (let round = 0; round <= ROUNDS; round++) {
    for (const form of forms) {
      const values = Array.from({ length: READS }, form.values);
      const ticks = form.session.ticks();
      const started = process.hrtime.bigint();
      let rows = 0;
      for (const v of values) {
        rows += await form.session.run(form.text, v).catch((error: unknown) => {
          throw new Error(`${form.read}, ${form.form}: ${form.text}`, { cause: error });
        });
      }
      const elapsed = Number(process.hrtime.bigint() - started) / 1e6;
      if (rows === 0) throw new Error(`${form.read}, ${form.form}: no rows`);
      // Round 0 warms each statement up (parsed, plan cached, pages in shared buffers): not counted.
      if (round === 0) continue;
      (cpu.get(form) ?? cpu.set(form, []).get(form)!).push((((form.session.ticks() - ticks) / TICKS_PER_SECOND) * 1000) / READS);
      (wall.get(form) ?? wall.set(form, []).get(form)!).push(elapsed / READS);
    }
  }
  const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  const range = (values: number[]) => `${Math.min(...values).toFixed(3)}–${Math.max(...values).toFixed(3)}`;
  const plans = async (session: Session) =>
    (await session.client.query<{ statement: string; generic_plans: string; custom_plans: string }>('select statement, generic_plans, custom_plans from pg_prepared_statements')).rows;
  console.log(`\n### Key and id-list reads (${ROWS.toLocaleString('en')} operations and watches; ${ROUNDS} rounds of ${READS} reads of each form, interleaved; per read)\n`);
  console.log('| read | form | backend CPU ms (median) | range | wall ms (median) | range |\n|---|---|--:|--:|--:|--:|');
  for (const form of forms) {
    console.log(`| ${form.read} | ${form.form} | ${median(cpu.get(form)!).toFixed(3)} | ${range(cpu.get(form)!)} | ${median(wall.get(form)!).toFixed(3)} | ${range(wall.get(form)!)} |`);
  }
  // The plan cache did as each connection was told.
  for (const [label, session] of [['custom', custom], ['generic', generic]] as const) {
    const counts = (await plans(session)).map((row) => `${row.generic_plans} generic / ${row.custom_plans} custom`);
    console.log(`\n${label} connection's named statements: ${[...new Set(counts)].join('; ')}`);
  }
  for (const session of [custom, generic, functions]) await session.client.end();
} finally {
  await admin.query(`drop database if exists ${name} with (force)`);
  await admin.end();
}

async function sqlRun(text: string): Promise<void> {
  const client = new pg.Client({ connectionString: url.toString() });
  await client.connect();
  try {
    await client.query(text);
  } finally {
    await client.end();
  }
}
