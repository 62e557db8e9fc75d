/**
 * `npm start` as a real process (scripts/start.mjs: the server bundled from
 * its sources, built on first start): the development banner, `--demo`, the
 * background jobs and graceful shutdown, as a new user would meet them.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createTCPServer, type AddressInfo } from 'node:net';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');
const START = join(ROOT, 'scripts/start.mjs');

interface Started {
  child: ChildProcess;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
}

function start(cwd: string, env: Record<string, string>, args: string[] = []): Started {
  const child = spawn(process.execPath, [START, ...args], {
    cwd,
    env: { PATH: process.env.PATH ?? '', PORT: '0', DATABASE_URL: `sqlite:${join(cwd, 'store.sqlite')}`, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout!.on('data', (chunk) => (out += chunk));
  child.stderr!.on('data', (chunk) => (err += chunk));
  const exited = new Promise<number | null>((resolveExit) => child.on('exit', (code) => resolveExit(code)));
  return { child, stdout: () => out, stderr: () => err, exited };
}

async function waitFor<T>(probe: () => T | undefined, what: string, ms = 20_000): Promise<T> {
  const until = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function listeningURL(started: Started): string | undefined {
  for (const line of started.stdout().split('\n')) {
    if (!line.includes('connector store listening')) continue;
    return (JSON.parse(line) as { url: string }).url;
  }
  return undefined;
}

describe('npm start (process)', () => {
  let cwd: string;
  let running: Started | undefined;
  beforeEach(async () => {
    cwd = await mkdtemp(join(tmpdir(), 'main-test-'));
  });
  afterEach(async () => {
    if (running !== undefined && running.child.exitCode === null) {
      running.child.kill('SIGKILL');
      await running.exited;
    }
    running = undefined;
    await rm(cwd, { recursive: true, force: true });
  });

  it('in development with --demo: prints a banner whose token and curl work, runs the jobs, stops cleanly on SIGTERM', async () => {
    // JSON logs asked for explicitly (development defaults to pino-pretty) so the test can read them.
    running = start(cwd, { NODE_ENV: 'development', LOG_FORMAT: 'json', LOG_LEVEL: 'debug', RETENTION_INTERVAL_MS: '60000' }, ['--demo']);
    const banner = await waitFor(() => (running!.stderr().includes('No data yet?') ? running!.stderr() : undefined), 'the banner');
    const url = await waitFor(() => listeningURL(running!), 'the listening log line');
    const token = /^ {3}TOKEN=(\S+)$/m.exec(banner)?.[1];
    const query = /--data '(.+)'$/m.exec(banner)?.[1];
    expect(banner).toContain(`GraphiQL:   ${url}`);

    const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: query });
    const body = (await response.json()) as any;
    expect(body.data.serverInfo.viewerIsService).toBe(false);
    expect(body.data.operationCounts.every((c: { count: number }) => c.count > 0)).toBe(true);

    // Logs are JSON lines only (the banner went to stderr), and never carry the token.
    const logs = running.stdout().trim().split('\n');
    expect(() => logs.map((l) => JSON.parse(l))).not.toThrow();
    expect(running.stdout()).not.toContain(token!);
    await waitFor(() => (running!.stdout().includes('"job":"retention"') ? true : undefined), 'a retention run');

    running.child.kill('SIGTERM');
    expect(await running.exited).toBe(0);
    expect(running.stdout()).toContain('"msg":"stopped"');
  });

  it('in development, the default log format writes one line per request, and the banner’s console URL comes back after the first burst', async () => {
    running = start(cwd, { NODE_ENV: 'development', CONSOLE: 'false', RETENTION_INTERVAL_MS: '0', BACKLOG_SAMPLE_INTERVAL_MS: '0' });
    const banner = await waitFor(() => (running!.stderr().includes('No data yet?') ? running!.stderr() : undefined), 'the banner');
    const url = /GraphiQL: {3}(\S+)/.exec(banner)![1]!;
    const token = /^ {3}TOKEN=(\S+)$/m.exec(banner)![1]!;
    const before = running.stdout().split('\n').length;
    for (const name of ['First', 'Second', 'Third']) {
      const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify({ query: `query ${name} { serverInfo { version } }` }) });
      expect(response.status).toBe(200);
    }
    const reminder = await waitFor(() => (running!.stderr().length > banner.length ? running!.stderr().slice(banner.length) : undefined), 'the reminder', 10_000);
    expect(reminder).toContain(`GraphiQL:   ${url}`);
    expect(reminder).toContain('npm run -s token');
    expect(reminder).not.toContain(token);
    const requestLines = running.stdout().split('\n').slice(before - 1).filter((line) => / (First|Second|Third) /.test(line));
    expect(requestLines).toHaveLength(3);
    for (const line of requestLines) expect(line).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  POST (First|Second|Third) 200 [\d.]+ ms$/);
    expect(running.stdout()).not.toContain(token);
  });

  it('runs the bundle built from the sources (kept under node_modules/.cache): its version is package.json’s, it finds the console and the client documents', async () => {
    running = start(cwd, { NODE_ENV: 'production', SHUTDOWN_DRAIN_MS: '0', PERSISTED_DOCUMENTS: 'allow' });
    const url = await waitFor(() => listeningURL(running!), 'the server');
    const { version } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const info = (await (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query":"{ serverInfo { version } }"}' })).json()) as any;
    expect(info).toEqual({ data: { serverInfo: { version } } });
    expect((await fetch(new URL('/console/', url))).status).toBe(200);
    const bundles = readdirSync(join(ROOT, 'node_modules/.cache/connector-store-server')).filter((name) => /^server-[0-9a-f]{16}\.mjs$/.test(name));
    expect(bundles).toHaveLength(1);
    expect(running.stderr()).toBe('');
  });

  it('where no bundle can be built (an unwritable SERVER_BUILD_DIR), it says so and runs the sources through tsx', async () => {
    const blocked = join(cwd, 'not-a-directory');
    writeFileSync(blocked, '');
    running = start(cwd, { NODE_ENV: 'production', SHUTDOWN_DRAIN_MS: '0', SERVER_BUILD_DIR: join(blocked, 'cache') });
    const url = await waitFor(() => listeningURL(running!), 'the server from its sources');
    expect(running.stderr()).toMatch(/^connector store: could not build the server bundle in .*not-a-directory\/cache \(.+\); running the sources through tsx instead\n$/);
    const info = (await (await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"query":"{ serverInfo { dialect } }"}' })).json()) as any;
    expect(info).toEqual({ data: { serverInfo: { dialect: 'sqlite' } } });
  });

  it('a second server on the same SQLite file refuses to start, naming the first; after the first stops, it starts', async () => {
    running = start(cwd, { NODE_ENV: 'production', SHUTDOWN_DRAIN_MS: '0' });
    await waitFor(() => listeningURL(running!), 'the first server');
    const second = start(cwd, { NODE_ENV: 'production', SHUTDOWN_DRAIN_MS: '0' });
    expect(await second.exited).toBe(1);
    expect(second.stderr()).toContain(`connector store failed to start: another server (pid ${running.child.pid}) is already serving`);
    running.child.kill('SIGTERM');
    expect(await running.exited).toBe(0);
    running = start(cwd, { NODE_ENV: 'production', SHUTDOWN_DRAIN_MS: '0' });
    await waitFor(() => listeningURL(running!), 'the server after the first stopped');
    // Three server starts in one test: ~3 s each on a quiet machine, five times that under a loaded full suite.
  }, 60_000);

  it('starts on a fresh machine: the database directory does not exist yet', async () => {
    running = start(cwd, { NODE_ENV: 'production', SHUTDOWN_DRAIN_MS: '0', DATABASE_URL: `sqlite:${join(cwd, 'data', 'nested', 'store.sqlite')}` });
    await waitFor(() => listeningURL(running!), 'the server on a new directory');
    expect(existsSync(join(cwd, 'data', 'nested', 'store.sqlite'))).toBe(true);
  });

  it('a lock left by a killed server is taken over', async () => {
    running = start(cwd, { NODE_ENV: 'production', SHUTDOWN_DRAIN_MS: '0' });
    await waitFor(() => listeningURL(running!), 'the first server');
    running.child.kill('SIGKILL');
    await running.exited;
    expect(existsSync(join(cwd, 'store.sqlite.server.lock'))).toBe(true);
    running = start(cwd, { NODE_ENV: 'production', SHUTDOWN_DRAIN_MS: '0' });
    await waitFor(() => listeningURL(running!), 'the server after a crash');
  });

  it('a PORT already in use stops start-up with one clear line naming the port, no stack trace, before any database file is made', async () => {
    const holder = createTCPServer();
    await new Promise<void>((listening) => holder.listen(0, '127.0.0.1', listening));
    const { port } = holder.address() as AddressInfo;
    try {
      // A new database file in a folder that does not exist yet: the port is checked before either is made or migrated.
      running = start(cwd, { NODE_ENV: 'production', SHUTDOWN_DRAIN_MS: '0', PORT: String(port), DATABASE_URL: `sqlite:${join(cwd, 'new/store.sqlite')}` });
      expect(await running.exited).toBe(1);
      expect(readdirSync(cwd)).toEqual([]);
      const output = running.stdout() + running.stderr();
      expect(output).not.toMatch(/^\s+at /m);
      expect(output).not.toContain('WebSocket');
      expect(running.stderr().trim().split('\n')).toEqual([
        `connector store failed to start: port ${port} on 127.0.0.1 is already in use by another process; stop it or choose another port, e.g. PORT=${port + 1} npm start`,
      ]);
    } finally {
      await new Promise((closed) => holder.close(closed));
    }
  });

  it('--help prints the usage and starts nothing; an unknown argument is a usage error (exit 2)', async () => {
    for (const flag of ['--help', '-h']) {
      running = start(cwd, { NODE_ENV: 'production' }, [flag]);
      expect(await running.exited).toBe(0);
      expect(running.stdout()).toMatch(/^usage: npm start/);
      expect(running.stderr()).toBe('');
    }
    running = start(cwd, { NODE_ENV: 'production' }, ['--dmeo']);
    expect(await running.exited).toBe(2);
    expect(running.stderr()).toMatch(/^unknown argument "--dmeo"\nusage: npm start/);
    expect(existsSync(join(cwd, 'store.sqlite'))).toBe(false);
  });

  it('in production, --demo is refused before anything is opened', async () => {
    running = start(cwd, { NODE_ENV: 'production' }, ['--demo']);
    expect(await running.exited).toBe(1);
    expect(running.stderr()).toContain('connector store failed to start: demo data is refused with NODE_ENV=production');
    expect(running.stderr()).not.toContain('TOKEN=');
    expect(existsSync(join(cwd, 'store.sqlite'))).toBe(false);
    expect(existsSync(join(cwd, 'data'))).toBe(false);
  });
});
