/**
 * What compressed answers cost and save (issue 39 item 3,
 * src/server/compression.ts): the dashboard list (50 operations with their
 * watches), the console's operations page (100 operations, every field, with
 * counts) and GraphiQL's introspection query, each asked through the app in
 * process (`yoga.fetch`) with no `Accept-Encoding`, with `gzip` and with
 * `gzip, br` (brotli), over a SQLite file seeded with 10 000 operations.
 * Prints the bytes sent and the process's CPU per request (user + system,
 * zlib's thread pool included), median of interleaved rounds, and the extra
 * CPU and the bytes saved against the uncompressed answer; and, apart, the
 * time zlib takes to compress each answer (median of 50), which the CPU
 * columns' noise on a shared machine can hide for the small answers.
 *
 *   npx tsx bench/compression.ts      (or npm run bench; about 30 s)
 *   BENCH_ROUNDS=7 BENCH_REQUESTS=200 npx tsx bench/compression.ts
 */
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { getIntrospectionQuery } from 'graphql';
import { generateLocalKey, mintToken } from '../src/auth/index.js';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrator.js';
import { createServerApp } from '../src/server/app.js';
import { compressAnswer, type AnswerEncoding } from '../src/server/compression.js';
import { loadConfig } from '../src/server/config.js';
import { createLogger } from '../src/server/logger.js';
import { DEFAULT_MANIFEST } from '../src/server/persisted-documents.js';
import { AUDIENCE, appEnv, DASHBOARD_LIST, scratchDatabase, seed } from './throughput.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 100);

const manifest = JSON.parse(readFileSync(DEFAULT_MANIFEST, 'utf8')) as Record<string, string>;
/** The console's operations page, as the console asks for it. */
const CONSOLE_OPERATIONS = Object.values(manifest).find((document) => /(^|\n| )query Operations\(/.test(document))!;

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

/** Runs the benchmark and prints its markdown table. */
export async function runCompressionBench(): Promise<void> {
  const scratch = (await scratchDatabase('sqlite'))!;
  const key = generateLocalKey();
  const database = openDatabase({ dialect: 'sqlite', path: scratch.url.slice('sqlite:'.length), display: scratch.url });
  await migrateToLatest(database.db, 'sqlite');
  await seed('sqlite', scratch.url, key.did);
  const config = loadConfig({ NODE_ENV: 'test', ...appEnv(key.did) });
  const app = createServerApp({ config, database, logger: createLogger('silent') });
  const token = await mintToken({ privateKey: key.privateKey, audience: AUDIENCE, ttlSeconds: 3_600 });

  const documents: [string, string, Record<string, unknown>][] = [
    ['dashboard list, 50 rows + watches', DASHBOARD_LIST, {}],
    ['console operations page, 100 rows, every field', CONSOLE_OPERATIONS, { first: 100 }],
    ["introspection (GraphiQL's, on every load)", getIntrospectionQuery({ inputValueDeprecation: true }), {}],
  ];
  const codings: [string, string | undefined][] = [
    ['none', undefined],
    ['gzip', 'gzip'],
    ['br', 'gzip, br'],
  ];
  /** Asks `query` REQUESTS times; CPU ms per request and the bytes of one answer as sent. */
  const measure = async (query: string, variables: Record<string, unknown>, acceptEncoding: string | undefined) => {
    const body = JSON.stringify({ query, variables });
    let bytes = 0;
    const cpu = process.cpuUsage();
    for (let i = 0; i < REQUESTS; i++) {
      const response = await app.yoga.fetch('http://localhost/graphql', {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${token}`, ...(acceptEncoding !== undefined && { 'accept-encoding': acceptEncoding }) },
        body,
      });
      if (response.status !== 200) throw new Error(`status ${response.status}: ${await response.text()}`);
      const expected = acceptEncoding === undefined ? null : acceptEncoding.includes('br') ? 'br' : 'gzip';
      if (response.headers.get('content-encoding') !== expected) throw new Error(`expected ${expected}, got ${response.headers.get('content-encoding')}`);
      bytes = (await response.arrayBuffer()).byteLength;
    }
    const used = process.cpuUsage(cpu);
    return { cpuMs: (used.user + used.system) / 1_000 / REQUESTS, bytes };
  };

  /** Wall ms of compressing `query`'s answer alone (zlib on its thread pool, awaited), median of 50: the part of the added CPU that is not noise. */
  const zlibMs = async (query: string, variables: Record<string, unknown>, encoding: AnswerEncoding) => {
    const response = await app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query, variables }),
    });
    const body = new Uint8Array(await response.arrayBuffer());
    const times: number[] = [];
    for (let i = 0; i < 50; i++) {
      const started = performance.now();
      await compressAnswer(body, encoding);
      times.push(performance.now() - started);
    }
    return median(times);
  };

  const results = new Map<string, { cpu: number[]; bytes: number; zlib?: number }>();
  for (const [name, query, variables] of documents) for (const [coding, accept] of codings) await measure(query, variables, accept).then(({ bytes }) => results.set(`${name}|${coding}`, { cpu: [], bytes })); // warm-up
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, query, variables] of documents) {
      for (const [coding, accept] of codings) results.get(`${name}|${coding}`)!.cpu.push((await measure(query, variables, accept)).cpuMs);
    }
  }
  for (const [name, query, variables] of documents) {
    results.get(`${name}|gzip`)!.zlib = await zlibMs(query, variables, 'gzip');
    results.get(`${name}|br`)!.zlib = await zlibMs(query, variables, 'br');
  }
  await database.close();
  await scratch.drop();

  console.log(`\n### Compressed answers (in process, ${ROUNDS} interleaved rounds × ${REQUESTS} requests, median CPU of the process per request)\n`);
  console.log('| answer | coding | bytes sent | saved | CPU ms / request | added CPU ms | compressing alone, ms |');
  console.log('|---|---|--:|--:|--:|--:|--:|');
  for (const [name] of documents) {
    const plain = results.get(`${name}|none`)!;
    for (const [coding] of codings) {
      const { cpu, bytes, zlib } = results.get(`${name}|${coding}`)!;
      const saved = coding === 'none' ? '' : `${(100 * (1 - bytes / plain.bytes)).toFixed(0)} %`;
      const added = coding === 'none' ? '' : (median(cpu) - median(plain.cpu)).toFixed(2);
      console.log(`| ${name} | ${coding} | ${bytes.toLocaleString('en')} | ${saved} | ${median(cpu).toFixed(2)} | ${added} | ${zlib === undefined ? '' : zlib.toFixed(2)} |`);
    }
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) await runCompressionBench();
