/**
 * A PgBouncer of the test's own (Debian's `pgbouncer` package, 1.18) in
 * front of one database of the test server: transaction pooling, a free
 * loopback port, a temporary directory for its ini, auth file, log and pid
 * file. PgBouncer refuses to run as root, so as root the directory is
 * chown'd to `postgres` and it runs as that user (`-u postgres`).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { freeLoopbackPort, processAlive } from './processes.js';

/** Where the pgbouncer binary is (Debian installs it in /usr/sbin, not always on PATH), or undefined. */
export function findPgBouncer(): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin'].filter((dir) => dir.startsWith('/'));
  return dirs.map((dir) => join(dir, 'pgbouncer')).find((path) => existsSync(path));
}

/** A running PgBouncer. */
export interface PgBouncer {
  /** `postgres://postgres@127.0.0.1:PORT/<database>`: the upstream database through the pooler. */
  url: string;
  /** The admin console (`SHOW POOLS`, `SHOW STATS`; simple queries only). */
  adminURL: string;
  port: number;
  /** Everything PgBouncer logged so far. */
  log(): string;
  /** SIGINT (safe shutdown), SIGTERM after `timeoutMs`; removes the directory; idempotent. */
  stop(timeoutMs?: number): Promise<void>;
}

/** Options of {@link startPgBouncer}. */
export interface PgBouncerOptions {
  /** Server connections per (database, user); default 3, fewer than the clients, so they share. */
  poolSize?: number;
}

/**
 * Starts PgBouncer in transaction mode in front of the database of
 * `upstreamURL` (a loopback URL of the test server, trust auth).
 */
export async function startPgBouncer(upstreamURL: string, options: PgBouncerOptions = {}): Promise<PgBouncer> {
  const binary = findPgBouncer();
  if (binary === undefined) throw new Error('pgbouncer is not installed (Debian: apt-get install pgbouncer)');
  const upstream = new URL(upstreamURL);
  const database = decodeURIComponent(upstream.pathname.slice(1));
  const user = decodeURIComponent(upstream.username) || 'postgres';
  if (!/^\w+$/.test(database) || !/^\w+$/.test(user)) throw new Error(`unexpected database or user name in ${upstreamURL}`);
  const port = await freeLoopbackPort();
  const dir = mkdtempSync(join(tmpdir(), 'cs-pgbouncer-'));
  const asRoot = process.getuid?.() === 0;
  writeFileSync(join(dir, 'userlist.txt'), `"${user}" ""\n`);
  writeFileSync(
    join(dir, 'pgbouncer.ini'),
    [
      '[databases]',
      `${database} = host=${upstream.hostname} port=${upstream.port || '5432'} dbname=${database}`,
      '[pgbouncer]',
      'listen_addr = 127.0.0.1',
      `listen_port = ${port}`,
      'unix_socket_dir =',
      'auth_type = trust',
      `auth_file = ${join(dir, 'userlist.txt')}`,
      'pool_mode = transaction',
      `default_pool_size = ${options.poolSize ?? 3}`,
      'max_client_conn = 200',
      `logfile = ${join(dir, 'pgbouncer.log')}`,
      `pidfile = ${join(dir, 'pgbouncer.pid')}`,
      `admin_users = ${user}`,
      '',
    ].join('\n'),
  );
  const log = () => {
    try {
      return readFileSync(join(dir, 'pgbouncer.log'), 'utf8');
    } catch {
      return '';
    }
  };
  let pid: number | undefined;
  const killOnExit = () => {
    if (pid !== undefined) process.kill(pid, 'SIGTERM');
  };
  let stopped: Promise<void> | undefined;
  const stop = (timeoutMs = 10_000) =>
    (stopped ??= (async () => {
      process.off('exit', killOnExit);
      if (pid !== undefined && processAlive(pid)) {
        process.kill(pid, 'SIGINT');
        if (!(await exited(pid, timeoutMs))) {
          process.kill(pid, 'SIGTERM');
          if (!(await exited(pid, 2_000))) process.kill(pid, 'SIGKILL');
        }
      }
      rmSync(dir, { recursive: true, force: true });
    })());
  try {
    if (asRoot) execFileSync('chown', ['-R', 'postgres', dir]);
    const started = spawnSync(binary, [...(asRoot ? ['-u', 'postgres'] : []), '-d', join(dir, 'pgbouncer.ini')], { encoding: 'utf8', timeout: 10_000 });
    if (started.status !== 0) throw new Error(`pgbouncer exited ${started.status}: ${started.stderr}${log()}`);
    pid = await waitForPid(join(dir, 'pgbouncer.pid'), log);
    // Last resort if the test process ends without its afterAll.
    process.once('exit', killOnExit);
    await waitForPort(port, log);
  } catch (error) {
    await stop(2_000);
    throw error;
  }
  return {
    url: `postgres://${user}@127.0.0.1:${port}/${database}`,
    adminURL: `postgres://${user}@127.0.0.1:${port}/pgbouncer`,
    port,
    log,
    stop,
  };
}

async function exited(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (!processAlive(pid)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return !processAlive(pid);
}

async function waitForPid(path: string, log: () => string): Promise<number> {
  for (let i = 0; i < 100; i++) {
    try {
      const pid = Number.parseInt(readFileSync(path, 'utf8').trim(), 10);
      if (Number.isSafeInteger(pid) && pid > 0) return pid;
    } catch {
      // not written yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`pgbouncer wrote no pid file:\n${log()}`);
}

async function waitForPort(port: number, log: () => string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const open = await new Promise<boolean>((resolve) => {
      const socket = createConnection({ host: '127.0.0.1', port }, () => {
        socket.destroy();
        resolve(true);
      });
      socket.once('error', () => resolve(false));
    });
    if (open) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`pgbouncer does not listen on 127.0.0.1:${port}:\n${log()}`);
}
