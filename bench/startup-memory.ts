/**
 * What `npm start`'s bundle saves (scripts/start.mjs): the server's memory at
 * rest, started as `npm start` runs it (the bundle) and as `npm run dev` does
 * (its sources through tsx), each on an in-memory SQLite database, in turn,
 * a few rounds; VmRSS three seconds after it answers `/readyz`, median.
 *
 *   npx tsx bench/startup-memory.ts        (or npm run bench)
 */
import { pathToFileURL } from 'node:url';
import { memoryMiB, startProcess } from './throughput.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Runs the benchmark and prints its markdown table. */
export async function runStartupMemoryBench(): Promise<void> {
  const env = { NODE_ENV: 'production', DATABASE_URL: 'sqlite::memory:', LOG_LEVEL: 'silent', CONSOLE: 'false', RETENTION_INTERVAL_MS: '0' };
  const ways = [
    { name: '`npm start` (the bundle, scripts/start.mjs)', script: 'scripts/start.mjs', rss: [] as number[] },
    { name: '`npm run dev` (the sources through tsx)', script: 'src/server/main.ts', rss: [] as number[] },
  ];
  for (let round = 0; round < ROUNDS; round++) {
    for (const way of ways) {
      const target = await startProcess(way.script, env, '/readyz');
      try {
        await new Promise((resolve) => setTimeout(resolve, 3_000));
        way.rss.push(memoryMiB(target.process).rss);
      } finally {
        target.process.kill('SIGKILL');
      }
    }
  }
  console.log(`\n### Server memory at rest (VmRSS 3 s after /readyz, SQLite in memory, median of ${ROUNDS})\n`);
  console.log('| started as | RSS MiB |');
  console.log('|---|--:|');
  for (const way of ways) console.log(`| ${way.name} | ${median(way.rss).toFixed(0)} |`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await runStartupMemoryBench();
