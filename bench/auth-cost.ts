/**
 * What authentication costs per request: `{ __typename }` through the app
 * with one bearer token reused (verified once, then served from the cache)
 * and with a fresh token on every request (a full Ed25519 verification each),
 * against a bare yoga server with one field, in process (`yoga.fetch`), in
 * interleaved rounds; prints requests per second (median of the rounds) and
 * the ratio to the bare server. Absolute numbers are noise on a shared
 * machine; the ratios are the claim.
 *
 *   npx tsx bench/auth-cost.ts        (or npm run bench)
 *   BENCH_ROUNDS=9 BENCH_REQUESTS=1000 npx tsx bench/auth-cost.ts
 */
import { pathToFileURL } from 'node:url';
import { createSchema, createYoga } from 'graphql-yoga';
import { generateLocalKey, mintToken } from '../src/auth/index.js';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrator.js';
import { createServerApp } from '../src/server/app.js';
import { loadConfig } from '../src/server/config.js';
import { createLogger } from '../src/server/logger.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 400);
const AUDIENCE = 'connector-store-bench';
const BODY = JSON.stringify({ query: '{ __typename }' });

type Fetch = (url: string, init: RequestInit) => Response | Promise<Response>;

async function run(fetcher: Fetch, token: (i: number) => string | undefined): Promise<number> {
  const started = process.hrtime.bigint();
  for (let i = 0; i < REQUESTS; i++) {
    const t = token(i);
    const response = await fetcher('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(t !== undefined && { authorization: `Bearer ${t}` }) },
      body: BODY,
    });
    if (response.status !== 200) throw new Error(`status ${response.status}: ${await response.text()}`);
    await response.text();
  }
  return REQUESTS / (Number(process.hrtime.bigint() - started) / 1e9);
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Runs the benchmark and prints its markdown table. */
export async function runAuthCostBench(): Promise<void> {
  const bare = createYoga({ schema: createSchema({ typeDefs: 'type Query { ok: Boolean }', resolvers: { Query: { ok: () => true } } }), logging: false });
  const database = openDatabase({ dialect: 'sqlite', path: ':memory:', display: 'sqlite::memory:' });
  await migrateToLatest(database.db, 'sqlite');
  const config = loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0', RATE_LIMIT_PER_VIEWER: '0', RATE_LIMIT_PER_IP: '0' });
  const app = createServerApp({ config, database, logger: createLogger('silent') });
  const key = generateLocalKey();
  const reused = await mintToken({ privateKey: key.privateKey, audience: AUDIENCE });
  // A distinct token per request and round (distinct iat), so none comes from the cache.
  const fresh: string[] = [];
  for (let i = 0; i < REQUESTS * (ROUNDS + 1); i++) fresh.push(await mintToken({ privateKey: key.privateKey, audience: AUDIENCE, now: Date.now() - i * 1_000, ttlSeconds: 3_600 }));
  let freshAt = 0;

  const scenarios: [string, () => Promise<number>][] = [
    ['bare yoga, one field', () => run(bare.fetch as Fetch, () => undefined)],
    ['app, one token reused (cached)', () => run(app.yoga.fetch as Fetch, () => reused)],
    ['app, a fresh token per request', () => run(app.yoga.fetch as Fetch, () => fresh[freshAt++])],
  ];
  const results = new Map<string, number[]>(scenarios.map(([name]) => [name, []]));
  for (const [, scenario] of scenarios) await scenario(); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, scenario] of scenarios) results.get(name)!.push(await scenario());
  }
  await database.close();

  const baseline = median(results.get(scenarios[0]![0])!);
  console.log(`\n### Authentication cost per request (\`{ __typename }\`, in process, ${ROUNDS} rounds × ${REQUESTS} requests, median)\n`);
  console.log('| scenario | req/s | × bare yoga |');
  console.log('|---|--:|--:|');
  for (const [name] of scenarios) {
    const value = median(results.get(name)!);
    console.log(`| ${name} | ${value.toFixed(0)} | ${(value / baseline).toFixed(2)} |`);
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await runAuthCostBench();
