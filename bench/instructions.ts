/**
 * Instructions per request, counted by valgrind's callgrind: the server,
 * the jit floor (a bare yoga with graphql-jit over the same SQL,
 * bench/baselines/raw-sql.ts) and, for the dashboard list, fastify +
 * mercurius on the app's captured statements (bench/baselines/mercurius.ts) each run under callgrind with counting off,
 * take a warm-up of sequential requests, then count the instructions of the
 * next N requests (every thread of the process: GC helpers included; the
 * kernel's share of a syscall is not counted). Unlike CPU time on this
 * shared two-core machine, which moves ±20 % between runs, the count repeats
 * within ~2 %, so it is the measure for "did this change make the server
 * cheaper" (issue 21). It does not see what concurrency costs (more live
 * requests, larger heaps): the throughput benchmark does.
 *
 *   npx tsx bench/instructions.ts list            (about 2 minutes)
 *   INSTRUCTIONS_TARGETS=app N=300 npx tsx bench/instructions.ts sequence
 *   INSTRUCTIONS_TARGETS=app BENCH_APP_ENV=METRICS=false npx tsx bench/instructions.ts list
 *   BENCH_QUERY='{ operations(first: 50) { edges { node { id } } } }' npx tsx bench/instructions.ts list
 *   INSTRUCTIONS_KEEP=1 INSTRUCTIONS_TOP=60 npx tsx bench/instructions.ts list   (and the cost by function)
 *
 * INSTRUCTIONS_KEEP runs node with V8's symbol map and log, which costs a few
 * per cent more: compare counts taken without it.
 *
 * Needs valgrind (Debian's package; skipped with a notice without it) and a
 * reachable Postgres (PG_TEST_URL).
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parseDatabaseURL } from '../src/db/connect.js';
import { migrateOverOwnConnection } from '../src/db/migrator.js';
import { generateLocalKey, mintToken } from '../src/auth/index.js';
import { APP_ENV, AUDIENCE, appEnv, freePort, mercuriusOnAppSQL, post, scenarios, scratchDatabase, seed, startProcess } from './throughput.js';

const COUNTED = Number(process.env.N ?? 200);
const WARM_UP = Number(process.env.WARM ?? 400);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 1);
const TARGETS = (process.env.INSTRUCTIONS_TARGETS ?? 'app,jit,mercurius').split(',');
/** The requests' Accept-Encoding: `identity` (no compressed answers, as the baselines give none); INSTRUCTIONS_ACCEPT_ENCODING='gzip, deflate' counts the app's compression too. */
const ACCEPT_ENCODING = process.env.INSTRUCTIONS_ACCEPT_ENCODING ?? 'identity';

interface Scripted {
  setupRequest: (request: Record<string, unknown>, context: Record<string, unknown>) => { body: string };
  onResponse?: (status: number, body: string, context: Record<string, unknown>) => void;
}

/** Counts one target's instructions per unit of `scenario` (a unit: one request, or one write-back sequence). */
async function count(target: 'app' | 'jit' | 'mercurius', scenarioName: string): Promise<number> {
  const scenario = scenarios().find((s) => s.name.includes(scenarioName));
  if (scenario === undefined) throw new Error(`no scenario named like "${scenarioName}"`);
  const database = await scratchDatabase('postgres');
  if (database === undefined) throw new Error('no Postgres reachable (set PG_TEST_URL)');
  const key = generateLocalKey();
  const token = await mintToken({ privateKey: key.privateKey, audience: AUDIENCE, ttlSeconds: 3_600 });
  const dir = mkdtempSync(join(tmpdir(), 'cs-callgrind-'));
  // vgdb (callgrind_control) finds the process by user and host name: give both sides the same.
  const names = { USER: 'root', LOGNAME: 'root', HOST: '127.0.0.1' };
  try {
    await migrateOverOwnConnection(parseDatabaseURL(database.url));
    await seed('postgres', database.url, key.did);
    const port = await freePort();
    const env = {
      ...names,
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '',
      PORT: String(port),
      DATABASE_URL: database.url,
      NODE_ENV: 'production',
      BENCH_CALLER: key.did,
      ...appEnv(key.did),
      BASELINE: 'yoga-jit',
      ...(target === 'app' ? APP_ENV : {}),
    };
    // fastify + mercurius runs the app's captured statements (bench/throughput.ts, mercuriusOnAppSQL): the app answers once first.
    const mercurius = target === 'mercurius' ? await mercuriusEnvironment(env, { authorization: `Bearer ${token}` }) : {};
    const script = target === 'app' ? 'src/server/main.ts' : target === 'mercurius' ? 'bench/baselines/mercurius.ts' : 'bench/baselines/raw-sql.ts';
    const child = spawn(
      'valgrind',
      ['--tool=callgrind', '--instr-atstart=no', '--smc-check=all-non-file', `--callgrind-out-file=${join(dir, 'callgrind.out')}`, process.execPath, ...(process.env.INSTRUCTIONS_KEEP ? ['--perf-basic-prof', `--logfile=${join(dir, 'v8.log')}`] : []), ...(process.env.NODE_EXTRA ? process.env.NODE_EXTRA.split(' ') : []), '--import', 'tsx', script],
      { env: { ...env, ...mercurius }, stdio: ['ignore', 'ignore', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (chunk) => (stderr += chunk));
    const url = `http://127.0.0.1:${port}`;
    const readyPath = target === 'app' ? '/readyz' : '/graphql?query=%7B__typename%7D';
    for (let i = 0; ; i++) {
      if (child.exitCode !== null || i > 600) throw new Error(`${script} under valgrind did not start: ${stderr.slice(-2_000)}`);
      try {
        if ((await fetch(url + readyPath)).ok) break;
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 500));
    }
    const control = (...args: string[]) => execFileSync('callgrind_control', [...args, String(child.pid)], { env: { ...process.env, ...names }, stdio: 'ignore' });
    // BENCH_QUERY: another document in place of the scenario's (one request per unit), to count what a field costs.
    const requests = (process.env.BENCH_QUERY ? [post(() => ({ query: process.env.BENCH_QUERY }))] : scenario.app()) as unknown as Scripted[];
    const unit = async () => {
      const context: Record<string, unknown> = {};
      for (const request of requests) {
        const { body } = request.setupRequest({}, context);
        const response = await fetch(`${url}/graphql`, {
          method: 'POST',
          // As autocannon in the throughput benchmark: fetch would ask for gzip, which the app alone answers (src/server/compression.ts).
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, 'accept-encoding': ACCEPT_ENCODING },
          body,
        });
        const text = await response.text();
        if (response.status !== 200 || text.includes('"errors"')) throw new Error(`${target}: ${response.status} ${text.slice(0, 500)}`);
        request.onResponse?.(response.status, text, context);
      }
    };
    // CONCURRENCY clients at once (default 1): with several requests in flight, what stays alive longer costs the collector more.
    const clients = async (units: number) => {
      let left = units;
      await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
        while (left-- > 0) await unit();
      }));
    };
    await clients(WARM_UP);
    control('-i', 'on');
    await clients(COUNTED);
    control('-i', 'off');
    control('-d');
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    let total = 0;
    for (const file of readdirSync(dir)) total += Number(/^totals: (\d+)/m.exec(readFileSync(join(dir, file), 'utf8'))?.[1] ?? 0);
    if (total === 0) throw new Error(`${target}: callgrind counted nothing (${readdirSync(dir).join(', ')})`);
    if (process.env.INSTRUCTIONS_KEEP) printByFunction(target, dir, COUNTED);
    return total / COUNTED;
  } finally {
    if (process.env.INSTRUCTIONS_KEEP) console.log(`callgrind output kept in ${dir}`);
    else rmSync(dir, { recursive: true, force: true });
    await database.drop();
  }
}

/** LIST_STATEMENTS for mercurius: the app (started as `npm start` runs it, uncounted) answers one list while its statements are captured. */
async function mercuriusEnvironment(env: Record<string, string>, headers: Record<string, string>): Promise<Record<string, string>> {
  const appEnvironment = { ...appEnv(env.BENCH_CALLER!), DATABASE_URL: env.DATABASE_URL!, NODE_ENV: 'production', ...APP_ENV };
  const app = await startProcess('scripts/start.mjs', appEnvironment, '/readyz');
  try {
    return await mercuriusOnAppSQL(app, 'scripts/start.mjs', appEnvironment, env.DATABASE_URL!, headers);
  } finally {
    app.process.kill('SIGKILL');
  }
}

/**
 * Self instructions per unit by function (INSTRUCTIONS_KEEP=1): callgrind
 * names V8's builtins, the collector and native code itself; JavaScript
 * compiled at run time is an address, named here from V8's symbol map
 * (`--perf-basic-prof` writes /tmp/perf-PID.map).
 */
function printByFunction(target: string, dir: string, units: number): void {
  const top = Number(process.env.INSTRUCTIONS_TOP ?? 40);
  for (const file of readdirSync(dir).filter((name) => name.startsWith('callgrind.out.'))) {
    const path = join(dir, file);
    const pid = /^pid: (\d+)/m.exec(readFileSync(path, 'utf8'))?.[1];
    const symbols: { start: number; end: number; name: string }[] = [];
    try {
      for (const line of readFileSync(`/tmp/perf-${pid}.map`, 'utf8').split('\n')) {
        const [start, size, ...name] = line.split(' ');
        if (start !== undefined && size !== undefined && name.length > 0) symbols.push({ start: Number.parseInt(start, 16), end: Number.parseInt(start, 16) + Number.parseInt(size, 16), name: name.join(' ') });
      }
    } catch {
      // no symbol map: addresses stay addresses
    }
    symbols.sort((a, b) => a.start - b.start);
    const nameOf = (address: number) => {
      let low = 0;
      let high = symbols.length - 1;
      while (low <= high) {
        const middle = (low + high) >> 1;
        const symbol = symbols[middle]!;
        if (address < symbol.start) high = middle - 1;
        else if (address >= symbol.end) low = middle + 1;
        else return symbol.name;
      }
      return undefined;
    };
    const annotated = spawnSync('callgrind_annotate', ['--threshold=100', '--inclusive=no', path], { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024 }).stdout;
    const costs = new Map<string, number>();
    for (const line of annotated.split('\n')) {
      const match = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line);
      if (match === null || match[2]!.includes('PROGRAM TOTALS')) continue;
      const cost = Number(match[1]!.replaceAll(',', ''));
      const address = /^\?\?\?:0x([0-9a-f]+)/.exec(match[2]!);
      const name = (address !== null ? nameOf(Number.parseInt(address[1]!, 16)) : undefined) ?? match[2]!.replace(/ \[[^\]]*\]$/, '');
      costs.set(name, (costs.get(name) ?? 0) + cost);
    }
    console.log(`\n${target}: self instructions per unit by function (top ${top}; ${path})\n`);
    console.log('| K instr. | function |');
    console.log('|--:|---|');
    for (const [name, cost] of [...costs].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`| ${(cost / units / 1_000).toFixed(1)} | ${name.slice(0, 160).replaceAll('|', '\\|')} |`);
  }
}

/** Runs the count for each target and prints a markdown table. */
export async function runInstructionsBench(scenarioNames: string[] = ['list']): Promise<void> {
  if (spawnSync('valgrind', ['--version']).status !== 0) {
    console.log('\nInstructions per request skipped: valgrind is not installed (apt-get install valgrind).');
    return;
  }
  console.log(`\n### Instructions per request (callgrind; ${WARM_UP} warm-up, ${COUNTED} counted, sequential; Postgres)\n`);
  console.log('| scenario | app M instr. | jit floor M instr. | app ÷ jit floor | mercurius M instr. | app ÷ mercurius |');
  console.log('|---|--:|--:|--:|--:|--:|');
  for (const name of scenarioNames) {
    const scenario = scenarios().find((s) => s.name.includes(name))!;
    const results = new Map<string, number>();
    // mercurius answers the dashboard list only.
    for (const target of TARGETS) if (target !== 'mercurius' || scenario.mercurius === true) results.set(target, await count(target as 'app' | 'jit' | 'mercurius', name));
    const app = results.get('app');
    const m = (value: number | undefined) => (value === undefined ? '–' : (value / 1e6).toFixed(2));
    const ratio = (other: number | undefined) => (app !== undefined && other !== undefined ? `**${(app / other).toFixed(2)}×**` : '–');
    console.log(`| ${scenario.name} | ${m(app)} | ${m(results.get('jit'))} | ${ratio(results.get('jit'))} | ${m(results.get('mercurius'))} | ${ratio(results.get('mercurius'))} |`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await runInstructionsBench(process.argv.slice(2).length > 0 ? process.argv.slice(2) : ['list']);
