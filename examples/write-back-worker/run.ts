/**
 * The example in one command: `npm run example:worker`. Makes a worker key,
 * starts the server on a fresh SQLite file (or on DATABASE_URL) with that key
 * as its service identity, starts the fake provider, enqueues operations, runs
 * worker processes until every operation is COMMITTED or DEAD, and prints what
 * happened. Options (environment): OPERATIONS (200), WORKERS (2),
 * CONCURRENCY (4), LEASE_MS (5 000), SEND_TIMEOUT_MS (2 000: the fake provider answers in milliseconds), and for the faults DROP_RATE (0.1: the
 * provider applies, then cuts the connection), FAIL_RATE (0.05: 503),
 * CRASH=1 (kill workers at every step: before mark-sent, after it, after the
 * provider applied), REJECT_EVERY (25: that target refuses for good → DEAD),
 * and where its servers listen on 127.0.0.1: PORT (the store's, default 0: a
 * free port) and PROVIDER_PORT (the fake provider's, default 0).
 */
import { spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { createWriteStream, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { importSigningKey } from '../../client/token.js';
import { runScenario } from './scenario.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const number = (name: string, fallback: number) => (process.env[name] === undefined ? fallback : Number(process.env[name]));

/** A port from the environment (0: any free one), or a usage error naming the variable. */
function portFrom(name: string): number {
  const raw = process.env[name];
  if (raw === undefined || raw.trim() === '') return 0;
  const port = /^\s*\d+\s*$/.test(raw) ? Number(raw) : Number.NaN;
  if (port >= 0 && port <= 65_535) return port;
  console.error(`${name}: must be an integer from 0 to 65535 (got ${JSON.stringify(raw)})`);
  process.exit(2);
}

/** Writes a fresh Ed25519 private JWK (mode 0600) into `dir`; returns its path and DID. */
export async function makeWorkerKey(dir: string): Promise<{ keyFile: string; did: string }> {
  const jwk = generateKeyPairSync('ed25519').privateKey.export({ format: 'jwk' });
  const keyFile = join(dir, 'worker-key.json');
  writeFileSync(keyFile, `${JSON.stringify(jwk)}\n`, { mode: 0o600 });
  return { keyFile, did: (await importSigningKey(jwk as never)).did };
}

/**
 * Starts `src/server/main.ts` on a free loopback port; resolves with its
 * GraphQL URL and a stop function. It logs at `info` (the listening line is
 * an info line); `env` goes on top. `nodeArgs` follow tsx's loader, so an
 * `--import` of a TypeScript file works.
 */
export async function startServer(env: Record<string, string>, nodeArgs: readonly string[] = []): Promise<{ url: string; pid: number; stop(): Promise<void>; kill(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href, ...nodeArgs, join(ROOT, 'src/server/main.ts')], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', HOST: '127.0.0.1', PORT: '0', LOG_FORMAT: 'json', NODE_ENV: 'production', ...env, LOG_LEVEL: 'info' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let stopping = false;
  const exited = new Promise<void>((resolve) =>
    child.once('exit', (code, signal) => {
      if (!stopping) process.stderr.write(`the server exited unexpectedly (code ${code}, signal ${signal})\n`);
      resolve();
    }),
  );
  let started = () => {};
  const url = await new Promise<string>((resolve, reject) => {
    let buffered = '';
    const onData = (chunk: string) => {
      buffered += chunk;
      const match = /"msg":"connector store listening"[^\n]*"url":"([^"]+)"|"url":"([^"]+)"[^\n]*"msg":"connector store listening"/.exec(buffered);
      if (match === null) return;
      // Found: from now on the request log is dropped, or kept in SERVER_LOG when set.
      child.stdout!.off('data', onData);
      if (process.env.SERVER_LOG !== undefined) child.stdout!.pipe(createWriteStream(process.env.SERVER_LOG));
      else child.stdout!.resume();
      buffered = '';
      started();
      resolve(new URL('/graphql', match[1] ?? match[2]).href);
    };
    child.stdout!.setEncoding('utf8').on('data', onData);
    void exited.then(() => reject(new Error('the server exited before it listened')));
    const giveUp = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('the server did not log "connector store listening" within 30 s'));
    }, 30_000);
    giveUp.unref();
    exited.finally(() => clearTimeout(giveUp)).catch(() => {});
    started = () => clearTimeout(giveUp);
  });
  return {
    url,
    pid: child.pid!,
    stop: async () => {
      stopping = true;
      child.kill('SIGTERM');
      await exited;
    },
    /** SIGKILL: no drain, no goodbye (a crash). */
    kill: async () => {
      stopping = true;
      child.kill('SIGKILL');
      await exited;
    },
  };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = portFrom('PORT');
  const providerPort = portFrom('PROVIDER_PORT');
  const dir = mkdtempSync(join(tmpdir(), 'write-back-example-'));
  const audience = 'connector-store';
  const { keyFile, did } = await makeWorkerKey(dir);
  const server = await startServer({
    DATABASE_URL: process.env.DATABASE_URL ?? `sqlite:${join(dir, 'store.sqlite')}`,
    SERVICE_DIDS: did,
    AUTH_AUDIENCE: audience,
    RETENTION_INTERVAL_MS: '0',
    PORT: String(port),
  });
  console.log(`server ${server.url}, worker key ${keyFile} (${did})`);
  try {
    const crash = process.env.CRASH === '1';
    const result = await runScenario({
      storeURL: server.url,
      audience,
      providerPort,
      keyFile,
      operations: number('OPERATIONS', 200),
      workers: number('WORKERS', 2),
      concurrency: number('CONCURRENCY', 4),
      leaseMs: number('LEASE_MS', 5_000),
      sendTimeoutMs: number('SEND_TIMEOUT_MS', 2_000),
      faults: { dropRate: number('DROP_RATE', 0.1), failRate: number('FAIL_RATE', 0.05) },
      rejectEvery: number('REJECT_EVERY', 25),
      ...(crash && { crashAtSend: [5, 20] as [number, number] }),
      // LOSSY=1: the workers reach the server through the fault proxy (resets, answers lost after the commit, delays).
      ...(process.env.LOSSY === '1' && { network: { resetBeforeRate: 0.04, dropAnswerRate: 0.08, delayRate: 0.05, delayMs: 300 } }),
      log: (line) => console.log(line),
    });
    console.log(JSON.stringify({ ...result, provider: { ...result.provider, applies: `${Object.keys(result.provider.applies).length} events` } }, null, 2));
    const exactlyOnce = result.duplicates.length === 0 && result.committedNotApplied.length === 0 && result.appliedNotCommitted.length === 0 && (result.network?.replayMismatches.length ?? 0) === 0;
    console.log(
      `${result.states.COMMITTED ?? 0} committed, ${result.states.DEAD ?? 0} dead, ${exactlyOnce ? 'each applied exactly once' : 'NOT exactly once'}; ` +
        `${result.provider.lookups} reconciles, ${result.takeovers} takeovers` +
        (result.network === undefined ? '' : `, ${result.network.lostAnswers} answers lost and ${result.network.resendsAfterLoss} resent`) +
        `; ${result.perWorkerPerSecond.toFixed(1)} operations/s per worker`,
    );
    process.exitCode = exactlyOnce && !result.timedOut ? 0 : 1;
  } finally {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
