/**
 * Garbage collection under a throughput scenario, the app against the jit
 * floor: each runs with `node --trace-gc-nvp` (its stdout to a file), takes
 * the scenario's load twice (warm-up, then measured), and the scavenges and
 * mark-compacts of the measured load are summed: how many, their pause, and
 * per scavenge the bytes allocated, surviving and promoted to the old
 * generation. Promotion is what fills the old space between mark-compacts,
 * so it drives both the scavenges' cost and the RSS right after a run.
 *
 *   npx tsx bench/gc.ts list          (typename, list, claim, sequence; Postgres; about a minute)
 *   BENCH_APP_ENV=METRICS=false npx tsx bench/gc.ts list
 *   GC_TARGETS=app npx tsx bench/gc.ts list      (the app alone)
 *   GC_NODE_ARGS='--no-page-promotion' GC_KEEP_TRACE=/tmp npx tsx bench/gc.ts list
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDatabaseURL } from '../src/db/connect.js';
import { migrateOverOwnConnection } from '../src/db/migrator.js';
import { generateLocalKey, mintToken } from '../src/auth/index.js';
import { APP_ENV, AUDIENCE, appEnv, freePort, load, nodeArgsFrom, scenarios, scratchDatabase, seed, startNodeArgs, type Measured } from './throughput.js';

/** More flags for both processes' node (V8 flags too), space-separated: GC_NODE_ARGS='--no-allocation-site-pretenuring'. */
const NODE_ARGS = nodeArgsFrom('GC_NODE_ARGS');

interface Collections {
  measured: Measured;
  scavenges: string[];
  markCompacts: string[];
}

/** One numeric field of a --trace-gc-nvp line. */
function field(line: string, name: string): number {
  return Number(new RegExp(`\\b${name}=([\\d.]+)`).exec(line)?.[1] ?? 0);
}

async function measure(target: 'app' | 'jit', wanted: string): Promise<Collections> {
  const scenario = scenarios().find((s) => s.name.includes(wanted));
  if (scenario === undefined) throw new Error(`no scenario named like "${wanted}"`);
  const database = await scratchDatabase('postgres');
  if (database === undefined) throw new Error('postgres: no database reachable (set PG_TEST_URL)');
  const dir = mkdtempSync(join(tmpdir(), 'cs-gc-'));
  const traceFile = join(dir, 'trace-gc.log');
  const key = generateLocalKey();
  const token = await mintToken({ privateKey: key.privateKey, audience: AUDIENCE, ttlSeconds: 3_600 });
  const headers = { authorization: `Bearer ${token}` };
  const port = await freePort();
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', HOST: '127.0.0.1', PORT: String(port), DATABASE_URL: database.url, NODE_ENV: 'production', BENCH_CALLER: key.did };
  if (target === 'jit') await migrateOverOwnConnection(parseDatabaseURL(database.url));
  const args = target === 'app' ? ['scripts/start.mjs'] : ['--import', 'tsx', 'bench/baselines/raw-sql.ts'];
  // The app with `npm start`'s node flags; GC_NODE_ARGS after them, so they may override.
  const child = spawn(process.execPath, ['--trace-gc-nvp', ...(target === 'app' ? startNodeArgs() : []), ...NODE_ARGS, ...args], {
    env: target === 'app' ? { ...env, ...appEnv(key.did), ...APP_ENV } : { ...env, BASELINE: 'yoga-jit' },
    stdio: ['ignore', openSync(traceFile, 'w'), 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    const readyPath = target === 'app' ? '/readyz' : '/graphql?query=%7B__typename%7D';
    for (let i = 0; ; i++) {
      if (child.exitCode !== null || i === 300) throw new Error(`${target} did not become ready`);
      if (await fetch(url + readyPath).then((r) => r.ok, () => false)) break;
      await new Promise((r) => setTimeout(r, 100));
    }
    await seed('postgres', database.url, key.did);
    await load({ url, process: child }, scenario.app(), scenario.perUnit, headers);
    const before = readFileSync(traceFile, 'utf8').split('\n').length;
    const measured = await load({ url, process: child }, scenario.app(), scenario.perUnit, headers);
    const lines = readFileSync(traceFile, 'utf8').split('\n').slice(before);
    // GC_KEEP_TRACE=dir keeps each target's --trace-gc-nvp lines of the measured load (every field V8 prints).
    if (process.env.GC_KEEP_TRACE) writeFileSync(join(process.env.GC_KEEP_TRACE, `trace-gc-${target}.log`), lines.join('\n'));
    return { measured, scavenges: lines.filter((l) => l.includes(' gc=s ')), markCompacts: lines.filter((l) => l.includes(' gc=mc ')) };
  } finally {
    child.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    await database.drop();
    rmSync(dir, { recursive: true, force: true });
  }
}

const wanted = process.argv[2] ?? 'list';
const rows: string[] = [];
/** GC_TARGETS=app measures the app alone (a quicker loop when trying a change). */
const targets = (process.env.GC_TARGETS ?? 'app,jit').split(',').filter((t): t is 'app' | 'jit' => t === 'app' || t === 'jit');
for (const target of targets) {
  const { measured, scavenges, markCompacts } = await measure(target, wanted);
  // load() runs BENCH_SECONDS (default 4) of load; rps counts the scenario's units (a sequence is one).
  const units = measured.rps * Number(process.env.BENCH_SECONDS ?? 4);
  const sum = (name: string) => scavenges.reduce((total, l) => total + field(l, name), 0);
  const mean = (name: string) => sum(name) / Math.max(scavenges.length, 1);
  const pause = (lines: string[]) => lines.reduce((total, l) => total + field(l, 'pause'), 0);
  const kib = (bytes: number) => (bytes / 1024).toFixed(0);
  rows.push(
    `| ${target === 'app' ? 'app' : 'jit floor'} | ${measured.rps.toFixed(0)} | ${scavenges.length} | ${mean('pause').toFixed(2)} | ${kib(mean('allocated'))} | ${kib(mean('new_space_survived'))} | ${kib(mean('promoted'))} | ${markCompacts.length} (${pause(markCompacts).toFixed(0)} ms) | ${(sum('allocated') / units / 1024).toFixed(0)} | ${(sum('promoted') / units / 1024).toFixed(1)} | ${((pause(scavenges) + pause(markCompacts)) / units).toFixed(3)} |`,
  );
}
console.log(`\n### Garbage collection under "${wanted}" (Postgres, the measured load; per scavenge: mean)\n`);
console.log('| target | req/s | scavenges | pause ms | allocated KiB | survived KiB | promoted KiB | mark-compacts | allocated KiB per unit | promoted KiB per unit | GC pause ms per unit |');
console.log('|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|');
for (const row of rows) console.log(row);
