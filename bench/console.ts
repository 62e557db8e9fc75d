/**
 * The console's first load (issue 13 item 6): what a browser downloads to
 * show it (index.html, JavaScript and CSS, gzipped as the server sends them),
 * and how long the operations table takes to render on the demo data, in
 * headless Chromium against a development server started with `--demo` on
 * SQLite: cold (a fresh browser profile, nothing cached) and warm (a reload,
 * hashed assets from the cache), median of the rounds, from navigation start
 * to the first row in the table. Budgets: 200 kB gzipped, 1 s to the first
 * table locally. Without Chromium the timing part is skipped.
 *
 *   npx tsx bench/console.ts        (or npm run bench)
 *   BENCH_ROUNDS=9 npx tsx bench/console.ts
 */
import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { generateLocalKey, LOCAL_KEY_PATH, loadOrCreateLocalKey } from '../src/auth/index.js';
import { loadConsoleBuild } from '../src/server/console-build.js';
import { chromiumPath, launchChromium } from '../test/helpers/browser.js';
import { startServerProcess } from '../test/helpers/server-process.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/** What the first load may weigh, gzipped. */
export const CONSOLE_BUNDLE_BUDGET_BYTES = 200 * 1024;
/** How long the first table may take to render, locally. */
export const CONSOLE_FIRST_TABLE_BUDGET_MS = 1_000;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
const kB = (bytes: number) => `${(bytes / 1024).toFixed(1)} kB`;

/** Runs the benchmark and prints its markdown tables. */
export async function runConsoleBench(): Promise<void> {
  const build = await loadConsoleBuild();
  console.log('\n### Console: first load (gzipped, as served)\n');
  console.log('| file | raw | gzipped |');
  console.log('|---|---:|---:|');
  let total = 0;
  for (const file of [...build.files.values()].sort((a, b) => a.path.localeCompare(b.path))) {
    const sent = (file.gzip ?? file.body).length;
    total += sent;
    console.log(`| ${file.path} | ${kB(file.body.length)} | ${kB(sent)} |`);
  }
  console.log(`| **total** | | **${kB(total)}** (budget ${kB(CONSOLE_BUNDLE_BUDGET_BYTES)}: ${total <= CONSOLE_BUNDLE_BUDGET_BYTES ? 'within' : 'OVER'}) |`);

  try {
    accessSync(chromiumPath(), constants.X_OK);
  } catch {
    console.log(`\n_No Chromium at ${chromiumPath()} (CHROMIUM_PATH): time to the first table not measured._`);
    return;
  }
  const cwd = await mkdtemp(join(tmpdir(), 'cs-bench-console-'));
  await loadOrCreateLocalKey(join(cwd, LOCAL_KEY_PATH));
  const server = await startServerProcess(
    {
      NODE_ENV: 'development',
      DATABASE_URL: `sqlite:${join(cwd, 'store.sqlite')}`,
      AUTH_AUDIENCE: 'connector-store-bench',
      SERVICE_DIDS: generateLocalKey().did,
      LOG_LEVEL: 'info',
      RETENTION_INTERVAL_MS: '0',
    },
    { cwd, args: ['--demo'] },
  );
  const browser = await launchChromium(chromiumPath());
  try {
    const cold: number[] = [];
    const warm: number[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const context = await browser.createBrowserContext();
      const page = await context.newPage();
      await page.setViewport({ width: 1280, height: 900 });
      const firstTable = async () => {
        await page.waitForSelector('[data-testid=operations-table] tbody tr[data-operation-id]', { timeout: 10_000 });
        // Milliseconds since this navigation started (the page's own clock).
        return page.evaluate(() => performance.now());
      };
      await page.goto(`${server.origin}/console/operations`, { waitUntil: 'domcontentloaded' });
      cold.push(await firstTable());
      await page.reload({ waitUntil: 'domcontentloaded' });
      warm.push(await firstTable());
      await context.close();
    }
    console.log(`\n### Console: time to the first rendered operations table (demo data, SQLite, headless Chromium, median of ${ROUNDS})\n`);
    console.log('| load | median | min | max | budget |');
    console.log('|---|---:|---:|---:|---|');
    for (const [name, values] of [
      ['cold (fresh profile: sign-in, scripts, first query)', cold],
      ['warm (reload: assets cached, token in sessionStorage)', warm],
    ] as const) {
      const m = median(values);
      console.log(`| ${name} | ${m.toFixed(0)} ms | ${Math.min(...values).toFixed(0)} ms | ${Math.max(...values).toFixed(0)} ms | ${CONSOLE_FIRST_TABLE_BUDGET_MS} ms: ${m <= CONSOLE_FIRST_TABLE_BUDGET_MS ? 'within' : 'OVER'} |`);
    }
  } finally {
    await browser.close();
    await server.kill();
    await rm(cwd, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await runConsoleBench();
