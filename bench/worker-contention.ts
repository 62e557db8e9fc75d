/**
 * Workers competing for one connector's backlog (issue 40 item 3): W
 * `runWorker`s in this process, each `concurrency` at a time, over N
 * operations enqueued up front, with a no-op handler (mark sent, answer
 * committed at once), so what is measured is the store round trips and how
 * the workers share the due list: no-op write-backs per second, and refused
 * acquires (`contended`: an operation another worker took first) per
 * operation, requests per operation, and the server process's CPU per
 * operation (the steadier figure on a shared machine, where wall-clock
 * throughput follows whatever else runs). The server is a separate process,
 * as deployed.
 *
 *   npx tsx bench/worker-contention.ts
 *   BENCH_DIALECTS=postgres CONTENTION_WORKERS=4 CONTENTION_CONCURRENCY=16 CONTENTION_OPERATIONS=2000 npx tsx bench/worker-contention.ts
 *   CONTENTION_SUBSCRIBE=0: the workers poll only (no operationsChanged subscription).
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { makeWorkerKey, startServer } from '../examples/write-back-worker/run.js';
import { enqueueOperations } from '../examples/write-back-worker/scenario.js';
import { runWorker, type StoreClient, type WriteBackHandler } from '../client/runtime/index.js';
import { storeClientFromKeyFile } from '../client/key-file.js';
import { scratchDatabase } from './throughput.js';

const DIALECTS = (process.env.BENCH_DIALECTS ?? 'postgres').split(',');
const WORKERS = Number(process.env.CONTENTION_WORKERS ?? 4);
const CONCURRENCY = Number(process.env.CONTENTION_CONCURRENCY ?? 16);
const OPERATIONS = Number(process.env.CONTENTION_OPERATIONS ?? 2_000);
const WARM_UP = 200;
const AUDIENCE = 'connector-store-bench-contention';
const log = (line: string) => console.error(`[worker contention] ${line}`);

/** Commits every operation at once: the provider is not what is measured. */
const NO_OP: WriteBackHandler = {
  send: async ({ operation, markSent }) => {
    await markSent();
    return { kind: 'committed', documentID: `doc-${operation.operationID}`, sourceID: `source-${operation.operationID}` };
  },
  reconcile: async ({ operation }) => ({ kind: 'committed', documentID: `doc-${operation.operationID}`, sourceID: `source-${operation.operationID}` }),
};

interface Round {
  ms: number;
  requests: number;
  serverCPUms: number;
  committed: number;
  contended: number;
  polls: number;
  leaseLost: number;
  errors: number;
}

/** CPU time (user + system) of a process so far, in ms. */
function cpuMs(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/** `client` with its requests counted. */
function counting(client: StoreClient): { client: StoreClient; count: () => number } {
  let requests = 0;
  const counted = new Proxy(client, {
    get(target, property, receiver) {
      const value = Reflect.get(target, property, receiver) as unknown;
      if (property !== 'request' || typeof value !== 'function') return typeof value === 'function' ? value.bind(target) : value;
      return (...args: unknown[]) => {
        requests++;
        return (value as (...a: unknown[]) => unknown).apply(target, args);
      };
    },
  });
  return { client: counted, count: () => requests };
}

/** W workers over `operations` fresh operations of a new connector, until all are committed. */
async function round(baseClient: StoreClient, operations: number, serverPid: number): Promise<Round> {
  const connector = `contention-${Date.now().toString(36)}`;
  await enqueueOperations(baseClient, connector, { operations });
  const { client, count } = counting(baseClient);
  const cpuBefore = cpuMs(serverPid);
  const started = Date.now();
  const workers = Array.from({ length: WORKERS }, () => runWorker({ client, connector, handler: NO_OP, concurrency: CONCURRENCY, signals: false, subscribe: process.env.CONTENTION_SUBSCRIBE !== '0'}));
  const sum = (field: keyof (typeof workers)[number]['counters']) => workers.reduce((total, worker) => total + worker.counters[field], 0);
  while (sum('committed') < operations) await new Promise((resolve) => setTimeout(resolve, 5));
  const ms = Date.now() - started;
  const serverCPUms = cpuMs(serverPid) - cpuBefore;
  const requests = count();
  await Promise.all(workers.map((worker) => worker.stop()));
  return { ms, requests, serverCPUms, committed: sum('committed'), contended: sum('contended'), polls: sum('polls'), leaseLost: sum('leaseLost'), errors: sum('errors') };
}

/** Runs the benchmark and prints its markdown table. */
export async function runWorkerContentionBench(): Promise<void> {
  const rows: string[] = [];
  for (const dialect of DIALECTS) {
    const database = await scratchDatabase(dialect);
    if (database === undefined) {
      console.log(`(worker contention: no Postgres on 127.0.0.1:5432, ${dialect} skipped)`);
      continue;
    }
    const dir = mkdtempSync(join(tmpdir(), 'cs-bench-contention-'));
    const { keyFile, did } = await makeWorkerKey(dir);
    const server = await startServer({ DATABASE_URL: database.url, SERVICE_DIDS: did, AUTH_AUDIENCE: AUDIENCE, RETENTION_INTERVAL_MS: '0' });
    try {
      const client = await storeClientFromKeyFile(keyFile, { url: server.url, audience: AUDIENCE });
      try {
        log(`${dialect}: warming up`);
        await round(client, WARM_UP, server.pid);
        log(`${dialect}: ${WORKERS} workers × ${CONCURRENCY}, ${OPERATIONS} operations`);
        const result = await round(client, OPERATIONS, server.pid);
        rows.push(
          `| ${dialect} | ${WORKERS} × ${CONCURRENCY} | ${OPERATIONS} | ${(result.ms / 1000).toFixed(1)} | ${(OPERATIONS / (result.ms / 1000)).toFixed(0)} | ${result.contended} | ${(result.contended / OPERATIONS).toFixed(2)} | ${(result.requests / OPERATIONS).toFixed(2)} | ${(result.serverCPUms / OPERATIONS).toFixed(2)} | ${result.polls} | ${result.leaseLost} | ${result.errors} |`,
        );
      } finally {
        client.dispose();
      }
    } finally {
      await server.stop();
      await database.drop();
      rmSync(dir, { recursive: true, force: true });
    }
  }
  console.log('\n### Workers competing for one backlog (issue 40 item 3)\n');
  console.log('| dialect | workers × concurrency | operations | s | no-op write-backs/s | refused acquires | per operation | requests per operation | server CPU ms per operation | due reads / batch leases | leases lost | errors |');
  console.log('|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
  for (const row of rows) console.log(row);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) await runWorkerContentionBench();
