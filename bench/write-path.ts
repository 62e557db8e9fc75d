/**
 * The write path before and after, in one run (issue 40 item 7): every write
 * scenario of the throughput benchmark (a claim of a new key, the write-back
 * sequence claim → start → sent → finalize, an enqueue batch of 100) against
 * the server as it is, the server as it was at `BENCH_BEFORE_REF` (default
 * f4f6f2d, main before issue 40's first change: two to eight statements per
 * fenced step in a transaction, one INSERT per enqueued operation), and beside
 * them the jit floor (bare yoga + graphql-jit) and raw SQL (`node:http` + pg),
 * which issue the server's current statements (bench/baselines/raw-sql.ts).
 * Interleaved rounds over real HTTP (autocannon); per target the requests done
 * per second (a typed, retryable 503 is counted as refused, not done), CPU of
 * its process and CPU of every `postgres` process per request.
 *
 * The earlier server runs from a detached git worktree of that commit (made
 * once under the system's temporary directory, with this checkout's
 * node_modules linked in), as `npm start` runs it, on a database of its own
 * that its own migrations built. Both databases commit with
 * `synchronous_commit = off` (bench/throughput.ts: the disk's flush would set
 * every target's pace).
 *
 *   npx tsx bench/write-path.ts           (Postgres; about 4 minutes)
 *   BENCH_DIALECTS=sqlite,postgres BENCH_ROUNDS=5 BENCH_BEFORE_REF=<commit> npx tsx bench/write-path.ts
 */
import { execFileSync } from 'node:child_process';
import { existsSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { generateLocalKey, mintToken } from '../src/auth/index.js';
import { APP_ENV, AUDIENCE, appEnv, load, scenarios, scratchDatabase, startProcess, type Measured, type Target } from './throughput.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const BEFORE_REF = process.env.BENCH_BEFORE_REF ?? 'f4f6f2d';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const DIALECTS = (process.env.BENCH_DIALECTS ?? 'postgres').split(',');
const WRITES = ['claim, new keys', 'write-back sequence', 'enqueue batch'];

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
/** A number with `digits` decimals, or a dash when there is none (nothing was done in the round). */
const fixed = (value: number, digits: number) => (Number.isFinite(value) ? value.toFixed(digits) : '–');

/** A checkout of `ref` beside this one (made once), sharing this checkout's packages. */
function checkoutOf(ref: string): string {
  const commit = execFileSync('git', ['rev-parse', '--short=12', `${ref}^{commit}`], { cwd: ROOT, encoding: 'utf8' }).trim();
  const dir = join(tmpdir(), `cs-write-path-${commit}`);
  if (!existsSync(join(dir, 'package.json'))) {
    execFileSync('git', ['worktree', 'prune'], { cwd: ROOT });
    execFileSync('git', ['worktree', 'add', '--detach', '--force', dir, commit], { cwd: ROOT, stdio: 'ignore' });
  }
  if (!existsSync(join(dir, 'node_modules'))) symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  return dir;
}

export async function runWritePathBench(): Promise<void> {
  const before = checkoutOf(BEFORE_REF);
  const key = generateLocalKey();
  const token = await mintToken({ privateKey: key.privateKey, audience: AUDIENCE, ttlSeconds: 3_600 });
  const headers = { authorization: `Bearer ${token}` };
  const rows: string[] = [];
  for (const dialect of DIALECTS) {
    const now = await scratchDatabase(dialect);
    const then = await scratchDatabase(dialect);
    if (now === undefined || then === undefined) {
      console.log(`\nThe write path on ${dialect} skipped: no Postgres reachable (set PG_TEST_URL).`);
      continue;
    }
    const targets: Target[] = [];
    try {
      const env = (url: string) => ({ DATABASE_URL: url, NODE_ENV: 'production', BENCH_CALLER: key.did });
      const app = await startProcess('scripts/start.mjs', { ...env(now.url), ...appEnv(key.did), ...APP_ENV }, '/readyz');
      targets.push(app);
      const earlier = await startProcess(join(before, 'scripts/start.mjs'), { ...env(then.url), ...appEnv(key.did), ...APP_ENV }, '/readyz');
      targets.push(earlier);
      const jit = await startProcess('bench/baselines/raw-sql.ts', { ...env(now.url), BASELINE: 'yoga-jit' }, '/graphql?query=%7B__typename%7D');
      targets.push(jit);
      const raw = await startProcess('bench/baselines/raw-sql.ts', env(now.url), '/');
      targets.push(raw);
      for (const scenario of scenarios().filter((s) => WRITES.some((w) => s.name.startsWith(w)))) {
        const runs: [string, Target, () => ReturnType<typeof scenario.app>][] = [
          ['after', app, scenario.app],
          ['before', earlier, scenario.app],
          ['jit floor', jit, scenario.app],
          ['raw SQL', raw, scenario.raw],
        ];
        const results = runs.map(() => [] as Measured[]);
        const measure = async ([name, target, requests]: (typeof runs)[number]) => {
          try {
            return await load(target, requests(), scenario.perUnit, headers, 'count');
          } catch (error) {
            throw new Error(`${scenario.name}, ${name}: ${(error as Error).message}`);
          }
        };
        for (const run of runs) await measure(run);
        for (let round = 0; round < ROUNDS; round++) {
          for (const [i, run] of runs.entries()) results[i]!.push(await measure(run));
        }
        const m = (i: number, field: keyof Measured) => median(results[i]!.map((r) => r[field]));
        // What was done: requests answered 200 (a refused one is retryable, and was not done).
        const done = (i: number) => median(results[i]!.map((r) => r.rps * (1 - r.refusedShare)));
        const refused = (i: number) => (m(i, 'refusedShare') === 0 ? '' : ` (${(100 * m(i, 'refusedShare')).toFixed(0)} % refused)`);
        const db = (i: number) => (dialect === 'postgres' ? fixed(m(i, 'dbCpuMsPerRequest'), 2) : '–');
        const each = (format: (i: number) => string) => runs.map((_, i) => format(i)).join(' / ');
        rows.push(
          `| ${dialect} | ${scenario.name} | ${done(0).toFixed(0)}${refused(0)} | ${done(1).toFixed(0)}${refused(1)} | **${fixed(done(0) / done(1), 2)}×** | ${done(2).toFixed(0)} | **${fixed(done(0) / done(2), 2)}×** | ${done(3).toFixed(0)} | ${each((i) => fixed(m(i, 'cpuMsPerRequest'), 2))} | ${each(db)} |`,
        );
      }
    } finally {
      for (const target of targets) target.process.kill('SIGKILL');
      await new Promise((r) => setTimeout(r, 300));
      await now.drop();
      await then.drop();
    }
  }
  if (rows.length === 0) return;
  console.log(`\n### The write path before (${BEFORE_REF}) and after, with the jit floor and raw SQL on today's statements (${ROUNDS} interleaved rounds, median)\n`);
  console.log('| dialect | scenario | after req/s | before req/s | after ÷ before | jit floor req/s | after ÷ jit floor | raw SQL req/s | CPU ms/req: after / before / jit / raw | Postgres CPU ms/req: after / before / jit / raw |');
  console.log('|---|---|--:|--:|--:|--:|--:|--:|--:|--:|');
  for (const row of rows) console.log(row);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await runWritePathBench();
