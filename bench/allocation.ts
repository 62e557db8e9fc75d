/**
 * Memory allocated per request, the app against the jit floor (a bare yoga
 * with graphql-jit over the same SQL, bench/baselines/raw-sql.ts), under
 * the throughput benchmark's load: each target runs with the inspector on
 * loopback, takes a warm-up round, then V8's sampling heap profiler runs
 * through a measured round with the objects later collected included (a
 * scavenge's cost follows what is allocated and still alive, so allocation,
 * not the live heap, is what to compare). Prints KiB per request in all and
 * the packages and functions that allocate most (issue 21: what is left of
 * the list's gap is mostly allocation and its garbage collection).
 *
 *   npx tsx bench/allocation.ts list            (about 1 minute)
 *   ALLOCATION_TOP=60 npx tsx bench/allocation.ts sequence
 *   ALLOCATION_CALLERS_OF=@whatwg-node/promise-helpers npx tsx bench/allocation.ts list
 *   BENCH_APP_ENV=METRICS=false ALLOCATION_NODE_ARGS=--max-semi-space-size=8 npx tsx bench/allocation.ts list
 *
 * Needs a reachable Postgres (PG_TEST_URL).
 */
import { pathToFileURL } from 'node:url';
import WebSocket from 'ws';
import { parseDatabaseURL } from '../src/db/connect.js';
import { migrateOverOwnConnection } from '../src/db/migrator.js';
import { generateLocalKey, mintToken } from '../src/auth/index.js';
import { APP_ENV, AUDIENCE, appEnv, freePort, loadRound, nodeArgsFrom, scenarios, scratchDatabase, seed, startProcess, type Target } from './throughput.js';

const TOP = Number(process.env.ALLOCATION_TOP ?? 25);
/** A package whose allocations are also shown by the nearest calling function outside it (who asked for them). */
const CALLERS_OF = process.env.ALLOCATION_CALLERS_OF;

interface SampledNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SampledNode[];
}

/** A minimal Chrome DevTools Protocol session over the inspector's WebSocket. */
async function inspectorSession(port: number) {
  const [target] = (await (await fetch(`http://127.0.0.1:${port}/json/list`)).json()) as { webSocketDebuggerUrl: string }[];
  const socket = new WebSocket(target!.webSocketDebuggerUrl);
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  let id = 0;
  const pending = new Map<number, (result: any) => void>();
  socket.on('message', (data) => {
    const message = JSON.parse(String(data)) as { id?: number; result?: unknown };
    if (message.id !== undefined) pending.get(message.id)?.(message.result);
  });
  return {
    call: (method: string, params: object = {}) =>
      new Promise<any>((resolve) => {
        pending.set(++id, resolve);
        socket.send(JSON.stringify({ id, method, params }));
      }),
    close: () => socket.close(),
  };
}

/** Where a sampled frame's code lives: a package, a core module, the server's bundle (as npm start runs it) or a project path. */
function whereOf(url: string): string {
  if (url === '') return '(V8: native or generated code)';
  if (url.includes('/node_modules/.cache/connector-store-server/')) return 'the server (bundle)';
  const inPackage = /node_modules\/((@[^/]+\/)?[^/]+)/.exec(url);
  if (inPackage !== null) return inPackage[1]!;
  if (url.startsWith('node:')) return url.split('/')[0]!;
  return url.replace(/^.*\/(src|resolvers|schema|bench)\//, '$1/');
}

/** KiB allocated per unit by package and by function, and in all, for one target. */
async function measure(name: 'app' | 'jit', scenarioName: string, database: { url: string }, did: string, token: string) {
  const scenario = scenarios().find((s) => s.name.includes(scenarioName))!;
  const inspectPort = await freePort();
  // ALLOCATION_NODE_ARGS: more flags for both processes' node (V8 flags too), space-separated.
  const nodeArgs = [`--inspect=127.0.0.1:${inspectPort}`, ...nodeArgsFrom('ALLOCATION_NODE_ARGS')];
  const common = { DATABASE_URL: database.url, NODE_ENV: 'production', BENCH_CALLER: did };
  const target: Target =
    name === 'app'
      ? await startProcess('scripts/start.mjs', { ...common, ...appEnv(did), ...APP_ENV }, '/readyz', nodeArgs)
      : await startProcess('bench/baselines/raw-sql.ts', { ...common, BASELINE: 'yoga-jit' }, '/graphql?query=%7B__typename%7D', nodeArgs);
  const headers = { authorization: `Bearer ${token}` };
  try {
    // Both targets answer the app's GraphQL documents (the floor's schema has the same fields).
    await loadRound(target, scenario.app(), headers, { seconds: 4 });
    const session = await inspectorSession(inspectPort);
    await session.call('HeapProfiler.startSampling', { samplingInterval: 1_024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
    const result = await loadRound(target, scenario.app(), headers, { seconds: 5 });
    const { profile } = (await session.call('HeapProfiler.stopSampling')) as { profile: { head: SampledNode } };
    session.close();
    const units = result.requests.total / scenario.perUnit;
    const byPackage = new Map<string, number>();
    const byFunction = new Map<string, number>();
    const byCaller = new Map<string, number>();
    let total = 0;
    const stack: { node: SampledNode; caller: string }[] = [{ node: profile.head, caller: '(root)' }];
    while (stack.length > 0) {
      const { node, caller } = stack.pop()!;
      const where = whereOf(node.callFrame.url);
      const pkg = /^(src|resolvers|schema|bench)\//.test(where) ? where.split('/').slice(0, 2).join('/') : where;
      byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + node.selfSize);
      const fn = `${node.callFrame.functionName || '(anonymous)'} ${where}:${node.callFrame.lineNumber + 1}`;
      byFunction.set(fn, (byFunction.get(fn) ?? 0) + node.selfSize);
      const inside = CALLERS_OF !== undefined && where === CALLERS_OF;
      if (inside) byCaller.set(caller, (byCaller.get(caller) ?? 0) + node.selfSize);
      total += node.selfSize;
      for (const child of node.children) stack.push({ node: child, caller: inside || where.startsWith('(V8') ? caller : fn });
    }
    const kib = (bytes: number) => (bytes / units / 1_024).toFixed(1);
    return { total: kib(total), units, byPackage, byFunction, byCaller, kib };
  } finally {
    target.process.kill('SIGKILL');
  }
}

export async function runAllocationBench(scenarioName = 'list'): Promise<void> {
  const database = await scratchDatabase('postgres');
  if (database === undefined) {
    console.log('\nAllocation per request skipped: no Postgres reachable (set PG_TEST_URL).');
    return;
  }
  try {
    const key = generateLocalKey();
    const token = await mintToken({ privateKey: key.privateKey, audience: AUDIENCE, ttlSeconds: 3_600 });
    await migrateOverOwnConnection(parseDatabaseURL(database.url));
    await seed('postgres', database.url, key.did);
    const app = await measure('app', scenarioName, database, key.did, token);
    const jit = await measure('jit', scenarioName, database, key.did, token);
    const fullName = scenarios().find((s) => s.name.includes(scenarioName))!.name;
    console.log(`\n### Allocation per unit (V8 heap sampling, collected objects included; Postgres): ${fullName}\n`);
    console.log(`| target | KiB per unit |\n|---|--:|\n| app | ${app.total} |\n| jit floor | ${jit.total} |`);
    for (const [name, result] of [['app', app], ['jit floor', jit]] as const) {
      console.log(`\n${name}: KiB per unit by package (top ${TOP})\n\n| KiB | where |\n|--:|---|`);
      for (const [where, bytes] of [...result.byPackage].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`| ${result.kib(bytes)} | ${where} |`);
      console.log(`\n${name}: KiB per unit by function (top ${TOP})\n\n| KiB | function |\n|--:|---|`);
      for (const [fn, bytes] of [...result.byFunction].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`| ${result.kib(bytes)} | ${fn.replaceAll('|', '\\|')} |`);
      if (CALLERS_OF === undefined) continue;
      console.log(`\n${name}: KiB per unit allocated in ${CALLERS_OF}, by the nearest calling function outside it (top ${TOP})\n\n| KiB | caller |\n|--:|---|`);
      for (const [fn, bytes] of [...result.byCaller].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`| ${result.kib(bytes)} | ${fn.replaceAll('|', '\\|')} |`);
    }
  } finally {
    await database.drop();
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await runAllocationBench(process.argv[2] ?? 'list');
