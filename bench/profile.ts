/**
 * Where a scenario of the throughput benchmark spends the server's CPU: the
 * app (or the framework floor) runs under `node --cpu-prof`, takes the
 * scenario's load (warm-up first), stops gracefully, and the samples taken
 * during the measured load are summed by self time, per package and per
 * function. V8's profile timestamps and `process.hrtime` read the same
 * monotonic clock, so the measured window is cut out exactly.
 *
 *   npx tsx bench/profile.ts sequence            (app, Postgres; about 30 s)
 *   PROFILE_TARGET=floor PROFILE_DIALECT=sqlite npx tsx bench/profile.ts list
 *   PROFILE_TARGET=jit npx tsx bench/profile.ts list      (the jit floor)
 *   PROFILE_TOP=40 BENCH_SECONDS=8 npx tsx bench/profile.ts typename
 *   PROFILE_APP=sources npx tsx bench/profile.ts list   (the app's sources through tsx)
 *   PROFILE_TARGET=mercurius npx tsx bench/profile.ts list   (fastify + mercurius on the app's statements)
 *
 * The app runs as `npm start` runs it, from its bundle (scripts/start.mjs):
 * its own code is then one package, "the server (bundle)". With
 * PROFILE_APP=sources it runs from its sources through tsx, which names each
 * project file, at a price the bundle does not pay: tsx keeps function names
 * with a `__name(…)` call each time a function is made (a few per cent of a
 * request, misattributed to the files that make closures).
 *
 * The scenario is a substring of a throughput scenario's name (typename,
 * list, claim, sequence). The raw profile stays in the printed directory and
 * opens in Chrome DevTools (Performance → Load profile).
 */
import { mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseDatabaseURL } from '../src/db/connect.js';
import { migrateOverOwnConnection } from '../src/db/migrator.js';
import { generateLocalKey, mintToken } from '../src/auth/index.js';
import { APP_ENV, AUDIENCE, appEnv, load, scenarios, scratchDatabase, seed, startMercuriusOnAppSQL, startProcess, type Target } from './throughput.js';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

const DIALECT = process.env.PROFILE_DIALECT ?? 'postgres';
const TARGET = process.env.PROFILE_TARGET ?? 'app';
const TOP = Number(process.env.PROFILE_TOP ?? 25);
/** `bundle` (default, as npm start runs it) or `sources` (through tsx, each project file named). */
const APP = process.env.PROFILE_APP ?? 'bundle';
/** PROFILE_INCLUSIVE=all: inclusive times of every function, packages' too. */
const ALL = process.env.PROFILE_INCLUSIVE === 'all';

/** The package (or project folder) a script belongs to. */
function packageOf(url: string): string {
  if (url === '') return '(native / V8)';
  if (url.startsWith('node:')) return 'node: (core)';
  if (url.includes('/node_modules/.cache/connector-store-server/')) return 'the server (bundle)';
  const modules = url.lastIndexOf('/node_modules/');
  if (modules >= 0) {
    const rest = url.slice(modules + '/node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  const project = url.indexOf('/work/');
  const path = project >= 0 ? url.slice(url.indexOf('/', project + '/work/'.length) + 1) : url;
  return path.split('/').slice(0, 2).join('/');
}

/** The project's own code (not node_modules), whose functions get inclusive times. */
const OWN = /\/work\/[^/]+\/(src|resolvers|schema|bench)\//;

/**
 * Kysely's statement building: its builders, parsers, operation nodes and
 * compiler (not its executor, whose time includes the driver's). Issue 40
 * item 2: under 3 % of a request once statements are prepared (src/store/prepared.ts).
 */
const BUILDING = /\/node_modules\/kysely\/dist\/[^/]+\/(query-builder|query-compiler|query-creator|parser|operation-node|expression|raw-builder|dynamic|schema)\//;

/** A function by name and file (project files by path, packages by name); lines are of the transpiled code. */
const nameOf = (frame: ProfileNode['callFrame']) => {
  const own = OWN.exec(frame.url);
  const where = own !== null ? frame.url.slice(own.index + own[0].length - own[1]!.length - 1) : packageOf(frame.url);
  return `${frame.functionName || '(anonymous)'}  ${where}${frame.url === '' ? '' : `:${frame.lineNumber + 1}`}`;
};

/** Self time (µs) per package and per function, of the samples taken in [from, to] (µs, monotonic). */
function summarise(profile: Profile, from: number, to: number) {
  const byID = new Map(profile.nodes.map((node) => [node.id, node]));
  const parents = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
  const packages = new Map<string, number>();
  const functions = new Map<string, number>();
  const inclusive = new Map<string, number>();
  let time = profile.startTime;
  let total = 0;
  let building = 0;
  for (let i = 0; i < profile.samples.length; i++) {
    time += profile.timeDeltas[i]!;
    if (time < from || time > to) continue;
    const delta = profile.timeDeltas[i + 1] ?? 0;
    const frame = byID.get(profile.samples[i]!)!.callFrame;
    if (frame.functionName === '(idle)' || frame.functionName === '(program)') continue;
    total += delta;
    const pkg = frame.functionName === '(garbage collector)' ? '(garbage collector)' : packageOf(frame.url);
    packages.set(pkg, (packages.get(pkg) ?? 0) + delta);
    functions.set(nameOf(frame), (functions.get(nameOf(frame)) ?? 0) + delta);
    // Inclusive time of the project's own functions: each once per sample, however deep the recursion.
    const seen = new Set<string>();
    let builds = false;
    for (let id: number | undefined = profile.samples[i]; id !== undefined; id = parents.get(id)) {
      const caller = byID.get(id)!.callFrame;
      builds ||= BUILDING.test(caller.url);
      if (!ALL && !OWN.test(caller.url)) continue;
      const name = nameOf(caller);
      if (seen.has(name)) continue;
      seen.add(name);
      inclusive.set(name, (inclusive.get(name) ?? 0) + delta);
    }
    if (builds) building += delta;
  }
  return { total, packages, functions, inclusive, building };
}

function table(title: string, entries: Map<string, number>, total: number, top: number): void {
  console.log(`\n${title}\n`);
  console.log('| share | ms | where |');
  console.log('|--:|--:|---|');
  for (const [name, us] of [...entries].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`| ${((100 * us) / total).toFixed(1)} % | ${(us / 1_000).toFixed(0)} | ${name.replaceAll('|', '\\|')} |`);
  }
}

async function main(): Promise<void> {
  const wanted = process.argv[2] ?? 'sequence';
  const scenario = scenarios().find((s) => s.name.includes(wanted));
  if (scenario === undefined) throw new Error(`no scenario named like "${wanted}"`);
  const database = await scratchDatabase(DIALECT);
  if (database === undefined) throw new Error(`${DIALECT}: no database reachable (set PG_TEST_URL)`);
  const key = generateLocalKey();
  const token = await mintToken({ privateKey: key.privateKey, audience: AUDIENCE, ttlSeconds: 3_600 });
  const headers = { authorization: `Bearer ${token}` };
  const profileDir = mkdtempSync(join(tmpdir(), 'cs-profile-'));
  const nodeArgs = ['--cpu-prof', `--cpu-prof-dir=${profileDir}`, '--cpu-prof-interval=200'];
  const common = { DATABASE_URL: database.url, NODE_ENV: 'production', BENCH_CALLER: key.did };
  let target: Target | undefined;
  let app: Target | undefined;
  try {
    if (TARGET === 'floor' || TARGET === 'jit') {
      await migrateOverOwnConnection(parseDatabaseURL(database.url));
      const baseline = TARGET === 'jit' ? 'yoga-jit' : 'yoga';
      target = await startProcess('bench/baselines/raw-sql.ts', { ...common, BASELINE: baseline }, '/graphql?query=%7B__typename%7D', nodeArgs);
      await seed(DIALECT, database.url, key.did);
    } else if (TARGET === 'mercurius') {
      // The app runs unprofiled: its statements are what the baseline runs (bench/baselines/mercurius.ts).
      const environment = { ...common, ...appEnv(key.did), ...APP_ENV };
      app = await startProcess('scripts/start.mjs', environment, '/readyz');
      await seed(DIALECT, database.url, key.did);
      target = await startMercuriusOnAppSQL(app, 'scripts/start.mjs', environment, database.url, headers, nodeArgs);
    } else {
      target = await startProcess(
        APP === 'sources' ? 'src/server/main.ts' : 'scripts/start.mjs',
        { ...common, ...appEnv(key.did), ...APP_ENV },
        '/readyz',
        nodeArgs,
      );
      await seed(DIALECT, database.url, key.did);
    }
    await load(target, scenario.app(), scenario.perUnit, headers);
    const from = Number(process.hrtime.bigint() / 1_000n);
    const measured = await load(target, scenario.app(), scenario.perUnit, headers);
    const to = Number(process.hrtime.bigint() / 1_000n);
    const exited = new Promise((resolve) => target!.process.once('exit', resolve));
    target.process.kill('SIGTERM');
    await exited;
    target = undefined;
    const file = readdirSync(profileDir).find((name) => name.endsWith('.cpuprofile'));
    if (file === undefined) throw new Error(`no profile written in ${profileDir}`);
    const profile = JSON.parse(readFileSync(join(profileDir, file), 'utf8')) as Profile;
    const { total, packages, functions, inclusive, building } = summarise(profile, from, to);
    console.log(`\n## ${TARGET} on ${DIALECT}: ${scenario.name}`);
    console.log(`\n${measured.rps.toFixed(0)} per s, ${measured.cpuMsPerRequest.toFixed(2)} CPU ms per unit; ${(total / 1_000).toFixed(0)} ms busy in the window; profile: ${join(profileDir, file)}`);
    console.log(`\nStatement building (Kysely's builders and compiler, inclusive): ${((100 * building) / total).toFixed(1)} % (${(building / 1_000).toFixed(0)} ms)`);
    table('Self time by package', packages, total, TOP);
    table('Self time by function', functions, total, TOP);
    table("Inclusive time of the project's own functions", inclusive, total, TOP);
  } finally {
    target?.process.kill('SIGKILL');
    app?.process.kill('SIGKILL');
    await new Promise((r) => setTimeout(r, 300));
    await database.drop();
  }
}

await main();
