/**
 * A streaming hot standby of the test Postgres server (issue 24): a
 * `pg_basebackup -R -X stream` of the whole cluster into a temporary
 * directory, started with `pg_ctl` on a free loopback port (its unix socket
 * inside that directory), fed by a physical replication slot on the primary so
 * a stopped standby can catch up. Postgres refuses to run as root, so as root
 * the directory is chown'd to `postgres` and every server tool runs as that
 * user (`runuser -u postgres --`).
 *
 * The replication connection goes to the primary's unix socket first (Debian's
 * default cluster allows `local replication all peer`), then to the host and
 * port of PG_TEST_URL. Nothing here edits the primary's configuration: when
 * its pg_hba.conf has no `replication` entry, {@link standbyToolsAvailable}
 * says so and the tests skip (locally) or fail (CI=true).
 */
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { adminPostgresURL } from './postgres.js';
import { freeLoopbackPort, processAlive } from './processes.js';
import { describe, it } from 'vitest';
import { dialectAvailable, testDialects } from './databases.js';

/** Prefix of the temporary directories (`cs-standby-<owner pid>-…`) and slots (`cs_standby_<owner pid>_…`). */
const DIRECTORY_PREFIX = 'cs-standby-';
const SLOT_PREFIX = 'cs_standby_';

// A hot standby refuses to start with less of these than the primary has.
const SETTINGS_COPIED_FROM_PRIMARY = ['max_connections', 'max_worker_processes', 'max_wal_senders', 'max_prepared_transactions', 'max_locks_per_transaction'];

/** What {@link standbyToolsAvailable} found. */
export type StandbyTools =
  | {
      available: true;
      /** The primary's major version's binaries (`PG_BIN_DIR`, default `/usr/lib/postgresql/<major>/bin`). */
      binDir: string;
      /** The libpq connection string a replication connection to the primary works with. */
      primaryConnection: string;
    }
  | { available: false; reason: string };

let probed: Promise<StandbyTools> | undefined;

/**
 * Whether a standby can be made here: the primary answers, `pg_basebackup`,
 * `pg_ctl` and `psql` of its major version exist, and a replication
 * connection to it succeeds (`IDENTIFY_SYSTEM`). Probed once per process.
 */
export function standbyToolsAvailable(): Promise<StandbyTools> {
  return (probed ??= probeStandbyTools());
}

/**
 * `describe(name, body)` when a standby can be made here; otherwise a loud
 * notice and no tests, or under `CI=true` one failing test saying why (as the
 * PgBouncer suite does). Only on the Postgres dialect: with TEST_DIALECTS
 * leaving it out, nothing runs.
 */
export async function describeWithStandby(name: string, body: () => void): Promise<void> {
  if (!(testDialects().includes('postgres') && dialectAvailable('postgres'))) return;
  const tools = await standbyToolsAvailable();
  if (tools.available) {
    describe(name, body);
  } else if (process.env.CI === 'true') {
    describe(name, () => {
      it('needs pg_basebackup, pg_ctl and a replication connection (CI=true: missing is a failure)', () => {
        throw new Error(`CI=true but no standby can be made: ${tools.reason}`);
      });
    });
  } else {
    const bar = '!'.repeat(78);
    console.warn(`\n${bar}\n!! No standby possible: SKIPPING "${name}".\n!! ${tools.reason}\n!! Under CI=true this is a failure.\n${bar}\n`);
  }
}

/** Options of {@link startStandby}. */
export interface StandbyOptions {
  /** The database {@link Standby.url} names; default `postgres`. The standby has every database of the cluster. */
  database?: string;
  /** Hold the primary's WAL for the standby in a replication slot (dropped by `destroy()`); default true. */
  slot?: boolean;
  /** How long starting may take, base backup excluded; default 30 s. */
  timeoutMs?: number;
}

/** A running (or stopped) hot standby. */
export interface Standby {
  /** `postgres://<user>@127.0.0.1:PORT/<database>`, the user of PG_TEST_URL. */
  url: string;
  port: number;
  /** The same standby, another database. */
  urlFor(database: string): string;
  /** The temporary directory (data directory in `data/`, log in `standby.log`, unix socket). */
  directory: string;
  /** The replication slot on the primary, if one was made. */
  slotName: string | undefined;
  /** Pauses WAL replay (`pg_wal_replay_pause()`) and waits until it is paused; WAL keeps streaming in. Lasts until `resumeReplay()` or a restart. */
  pauseReplay(): Promise<void>;
  /** Resumes WAL replay (`pg_wal_replay_resume()`). */
  resumeReplay(): Promise<void>;
  /** The last replayed WAL position (`pg_last_wal_replay_lsn()`), e.g. `0/3000148`. */
  replayLsn(): Promise<string>;
  /** Resolves once the standby has replayed `lsn`; throws after `timeoutMs` (default 10 s). */
  waitForReplay(lsn: string, timeoutMs?: number): Promise<void>;
  /** Fast shutdown; keeps the directory (and the slot, so it can catch up); idempotent. */
  stop(): Promise<void>;
  /** Starts the stopped standby again on the same port and waits until it serves reads. */
  start(): Promise<void>;
  /** Stops the standby, drops its slot, removes the directory; idempotent. */
  destroy(): Promise<void>;
  /** Everything the standby logged so far. */
  log(): string;
}

/**
 * Makes a streaming hot standby of the test server (PG_TEST_URL) and waits
 * until it accepts connections in recovery. Throws when
 * {@link standbyToolsAvailable} says no. Call `destroy()` in an `afterAll`.
 */
export async function startStandby(options: StandbyOptions = {}): Promise<Standby> {
  const tools = await standbyToolsAvailable();
  if (!tools.available) throw new Error(`cannot make a standby: ${tools.reason}`);
  const timeoutMs = options.timeoutMs ?? 30_000;
  const user = decodeURIComponent(new URL(adminPostgresURL()).username) || 'postgres';
  await removeAbandonedStandbys(tools.binDir);

  const settings = await primarySettings(SETTINGS_COPIED_FROM_PRIMARY);
  const port = await freeLoopbackPort();
  const directory = mkdtempSync(join(tmpdir(), `${DIRECTORY_PREFIX}${process.pid}-`));
  const data = join(directory, 'data');
  const logFile = join(directory, 'standby.log');
  const slotName = options.slot === false ? undefined : `${SLOT_PREFIX}${process.pid}_${randomBytes(4).toString('hex')}`;
  const tool = (name: string, args: string[], ms: number) => runPostgresTool(tools.binDir, name, args, { cwd: directory, timeoutMs: ms });
  const postmasterPid = (): number | undefined => {
    try {
      const pid = Number.parseInt(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0] ?? '', 10);
      return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
    } catch {
      return undefined;
    }
  };
  const log = () => {
    try {
      return readFileSync(logFile, 'utf8');
    } catch {
      return '';
    }
  };
  const urlFor = (database: string) => `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
  const query = async <T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> => {
    const client = new pg.Client({ connectionString: urlFor('postgres'), connectionTimeoutMillis: 5_000 });
    await client.connect();
    try {
      return (await client.query<T>(text, values)).rows;
    } finally {
      await client.end();
    }
  };

  // Last resort if the test process ends without its afterAll: an immediate
  // shutdown; the slot and anything left are removed by the next startStandby.
  const killOnExit = () => {
    const pid = postmasterPid();
    if (pid !== undefined && processAlive(pid)) process.kill(pid, 'SIGQUIT');
    try {
      rmSync(directory, { recursive: true, force: true });
    } catch {
      // a later startStandby removes it
    }
  };
  process.once('exit', killOnExit);

  let running = false;
  let destroyed: Promise<void> | undefined;

  const start = async () => {
    if (destroyed !== undefined) throw new Error('the standby was destroyed');
    if (running) return;
    // On the command line, so settings the base backup copied (postgresql.auto.conf) cannot move it.
    const serverOptions = `-p ${port} -c listen_addresses=127.0.0.1 -k ${shellQuote(directory)}`;
    try {
      await tool('pg_ctl', ['-D', data, '-l', logFile, '-w', '-t', String(Math.ceil(timeoutMs / 1000)), '-o', serverOptions, 'start'], timeoutMs + 5_000);
      running = true;
      await waitUntilServing(query, timeoutMs);
    } catch (error) {
      throw new Error(`${(error as Error).message}\nstandby log:\n${log()}`, { cause: error });
    }
  };

  const stop = async () => {
    if (!running && postmasterPid() === undefined) return;
    try {
      await tool('pg_ctl', ['-D', data, '-m', 'fast', '-w', '-t', '20', 'stop'], 25_000);
    } catch (error) {
      if (postmasterPid() !== undefined) await tool('pg_ctl', ['-D', data, '-m', 'immediate', '-w', '-t', '10', 'stop'], 15_000).catch(() => {});
      if (postmasterPid() !== undefined) throw error;
    } finally {
      running = postmasterPid() !== undefined;
    }
  };

  const destroy = () =>
    (destroyed ??= (async () => {
      try {
        await stop();
        if (slotName !== undefined) await dropSlot(slotName);
      } finally {
        process.off('exit', killOnExit);
        rmSync(directory, { recursive: true, force: true });
      }
    })());

  try {
    if (asRoot()) chownSync(directory, ...postgresIDs());
    const backup = ['-D', data, '-X', 'stream', '-R', '-c', 'fast', '--no-sync', '-d', tools.primaryConnection];
    if (slotName !== undefined) backup.push('-C', '-S', slotName);
    await tool('pg_basebackup', backup, 120_000);
    // Debian keeps the primary's postgresql.conf and pg_hba.conf in /etc, outside the copy.
    writePostgresFile(
      join(data, 'postgresql.conf'),
      [
        ...settings.map(([name, value]) => `${name} = ${value}`),
        'hot_standby = on',
        "cluster_name = 'cs-standby'",
        'shared_buffers = 32MB',
        // The directory is thrown away; a crash never needs to be survived.
        'fsync = off',
        'logging_collector = off',
        // Reconnect to the primary quickly after either side restarts (default 5 s).
        'wal_retrieve_retry_interval = 200ms',
        'wal_receiver_status_interval = 1s',
        '',
      ].join('\n'),
    );
    writePostgresFile(join(data, 'pg_hba.conf'), 'local all all trust\nhost all all 127.0.0.1/32 trust\n');
    await start();
  } catch (error) {
    await destroy().catch(() => {});
    throw error;
  }

  return {
    url: urlFor(options.database ?? 'postgres'),
    port,
    urlFor,
    directory,
    slotName,
    pauseReplay: async () => {
      await query('select pg_wal_replay_pause()');
      // Until the startup process confirms, it may still apply the next records.
      await poll(async () => (await query<{ state: string }>('select pg_get_wal_replay_pause_state() as state'))[0]?.state === 'paused', 10_000, 'replay did not pause');
    },
    resumeReplay: async () => {
      await query('select pg_wal_replay_resume()');
    },
    replayLsn: async () => {
      const lsn = (await query<{ lsn: string | null }>('select pg_last_wal_replay_lsn()::text as lsn'))[0]?.lsn;
      if (lsn == null) throw new Error('the standby reports no replay position (not in recovery?)');
      return lsn;
    },
    waitForReplay: async (lsn, waitMs = 10_000) => {
      let last = '';
      await poll(
        async () => {
          const row = (await query<{ done: boolean; lsn: string }>('select pg_last_wal_replay_lsn() >= $1::pg_lsn as done, pg_last_wal_replay_lsn()::text as lsn', [lsn]))[0];
          last = row?.lsn ?? '';
          return row?.done === true;
        },
        waitMs,
        () => `the standby did not replay ${lsn} within ${waitMs} ms (at ${last})`,
      );
    },
    stop,
    start,
    destroy,
    log,
  };
}

async function probeStandbyTools(): Promise<StandbyTools> {
  const url = new URL(adminPostgresURL());
  const user = decodeURIComponent(url.username) || 'postgres';
  let settings: Map<string, string>;
  try {
    settings = new Map(await primarySettings(['server_version_num', 'unix_socket_directories', 'port', 'wal_level', 'max_wal_senders']));
  } catch (error) {
    return { available: false, reason: `the test server does not answer: ${(error as Error).message}` };
  }
  if (settings.get('wal_level') === 'minimal' || settings.get('max_wal_senders') === '0') {
    return { available: false, reason: `the test server cannot stream WAL (wal_level=${settings.get('wal_level')}, max_wal_senders=${settings.get('max_wal_senders')})` };
  }
  const major = Math.floor(Number(settings.get('server_version_num')) / 10_000);
  const binDir = process.env.PG_BIN_DIR ?? `/usr/lib/postgresql/${major}/bin`;
  const missing = ['pg_basebackup', 'pg_ctl', 'psql'].filter((name) => !existsSync(join(binDir, name)));
  if (missing.length > 0) return { available: false, reason: `${missing.join(', ')} not found in ${binDir} (Debian: apt-get install postgresql-${major}; or set PG_BIN_DIR)` };
  if (asRoot()) {
    try {
      postgresIDs();
    } catch {
      return { available: false, reason: 'running as root, but there is no `postgres` OS user to run the standby as' };
    }
  }

  // The primary's own unix socket first: that is what Debian's default pg_hba.conf lets replicate (peer).
  const candidates: string[] = [];
  if (['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname)) {
    const port = settings.get('port') ?? '5432';
    for (const dir of (settings.get('unix_socket_directories') ?? '').split(',').map((d) => d.trim())) {
      if (dir.startsWith('/') && existsSync(join(dir, `.s.PGSQL.${port}`))) candidates.push(conninfo({ host: dir, port, user }));
    }
  }
  candidates.push(conninfo({ host: url.hostname.replace(/^\[|\]$/g, ''), port: url.port || '5432', user }));
  const refusals: string[] = [];
  for (const candidate of candidates) {
    try {
      await runPostgresTool(binDir, 'psql', ['-XAtq', '-c', 'IDENTIFY_SYSTEM', `${candidate} dbname=postgres replication=true connect_timeout=5`], { cwd: tmpdir(), timeoutMs: 10_000 });
      return { available: true, binDir, primaryConnection: candidate };
    } catch (error) {
      const message = (error as Error).message.trim();
      refusals.push(`${candidate}: ${/FATAL:\s+(.*)/.exec(message)?.[1] ?? message.split('\n').at(-1)}`);
    }
  }
  return {
    available: false,
    reason:
      `no replication connection to the test server is allowed (${refusals.join('; ')}). ` +
      "Its pg_hba.conf needs a `replication` entry, e.g. Debian's default `local replication all peer`, then `select pg_reload_conf()`",
  };
}

/** `[name, setting]` of the primary's settings, in the order asked. */
async function primarySettings(names: string[]): Promise<[string, string][]> {
  const client = new pg.Client({ connectionString: adminPostgresURL(), connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    const rows = (await client.query<{ name: string; setting: string }>('select name, setting from pg_settings where name = any($1)', [names])).rows;
    return names.flatMap((name) => rows.filter((row) => row.name === name).map((row): [string, string] => [name, row.setting]));
  } finally {
    await client.end();
  }
}

/** Drops a slot on the primary once its walsender is gone (it notices the standby's shutdown shortly after). */
async function dropSlot(slotName: string): Promise<void> {
  const client = new pg.Client({ connectionString: adminPostgresURL(), connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    await poll(
      async () => {
        const slot = (await client.query<{ active: boolean }>('select active from pg_replication_slots where slot_name = $1', [slotName])).rows[0];
        if (slot === undefined) return true;
        if (slot.active) return false;
        await client.query('select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = $1 and not active', [slotName]);
        return false;
      },
      10_000,
      `replication slot ${slotName} stayed active`,
    );
  } finally {
    await client.end();
  }
}

/**
 * Removes what test processes that died without their cleanup left behind:
 * their standbys (immediate shutdown), directories, and inactive slots,
 * which would otherwise hold the primary's WAL forever.
 */
async function removeAbandonedStandbys(binDir: string): Promise<void> {
  const ownerGone = (name: string, prefix: string) => {
    const owner = Number.parseInt(name.slice(prefix.length), 10);
    return Number.isSafeInteger(owner) && owner !== process.pid && !processAlive(owner);
  };
  for (const name of readdirSync(tmpdir()).filter((n) => n.startsWith(DIRECTORY_PREFIX) && ownerGone(n, DIRECTORY_PREFIX))) {
    const directory = join(tmpdir(), name);
    if (existsSync(join(directory, 'data', 'postmaster.pid'))) {
      await runPostgresTool(binDir, 'pg_ctl', ['-D', join(directory, 'data'), '-m', 'immediate', '-w', '-t', '10', 'stop'], { cwd: tmpdir(), timeoutMs: 15_000 }).catch(() => {});
    }
    rmSync(directory, { recursive: true, force: true });
  }
  const client = new pg.Client({ connectionString: adminPostgresURL(), connectionTimeoutMillis: 5_000 });
  await client.connect();
  try {
    const slots = (await client.query<{ slot_name: string }>("select slot_name from pg_replication_slots where slot_name like 'cs\\_standby\\_%' and not active")).rows;
    for (const { slot_name } of slots.filter((s) => ownerGone(s.slot_name, SLOT_PREFIX))) {
      await client.query('select pg_drop_replication_slot(slot_name) from pg_replication_slots where slot_name = $1 and not active', [slot_name]);
    }
  } finally {
    await client.end();
  }
}

async function waitUntilServing(query: (text: string) => Promise<{ recovering?: boolean }[]>, timeoutMs: number): Promise<void> {
  let lastError: unknown;
  await poll(
    async () => {
      try {
        const recovering = (await query('select pg_is_in_recovery() as recovering'))[0]?.recovering;
        if (recovering === false) throw new Error('the standby is not in recovery (promoted?)');
        return recovering === true;
      } catch (error) {
        if ((error as Error).message.includes('promoted?')) throw error;
        lastError = error;
        return false;
      }
    },
    timeoutMs,
    () => `the standby did not accept connections within ${timeoutMs} ms: ${(lastError as Error | undefined)?.message ?? 'no answer'}`,
  );
}

/** Runs a binary of `binDir`, as the `postgres` OS user when this process is root (Postgres refuses root). */
function runPostgresTool(binDir: string, name: string, args: string[], options: { cwd: string; timeoutMs: number }): Promise<string> {
  const [file, argv] = asRoot() ? ['runuser', ['-u', 'postgres', '--', join(binDir, name), ...args]] : [join(binDir, name), args];
  return new Promise((resolve, reject) => {
    execFile(file, argv, { cwd: options.cwd, timeout: options.timeoutMs, encoding: 'utf8' }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${name} failed (${error.code ?? error.signal}): ${stderr || stdout || error.message}`));
      else resolve(stdout);
    });
  });
}

/** Writes a file into the data directory, owned by the user the server runs as. */
function writePostgresFile(path: string, text: string): void {
  writeFileSync(path, text, { mode: 0o600 });
  if (asRoot()) chownSync(path, ...postgresIDs());
}

function asRoot(): boolean {
  return process.getuid?.() === 0;
}

let postgresUser: [number, number] | undefined;

/** uid and gid of the `postgres` OS user (from /etc/passwd). */
function postgresIDs(): [number, number] {
  if (postgresUser !== undefined) return postgresUser;
  const line = readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('postgres:'));
  const [, , uid, gid] = line?.split(':') ?? [];
  if (uid === undefined || gid === undefined) throw new Error('no postgres user in /etc/passwd');
  return (postgresUser = [Number(uid), Number(gid)]);
}

function conninfo(values: Record<string, string>): string {
  return Object.entries(values)
    .map(([key, value]) => `${key}='${value.replace(/[\\']/g, '\\$&')}'`)
    .join(' ');
}

function shellQuote(value: string): string {
  return `'${value.replace(/'/g, `'\\''`)}'`;
}

async function poll(check: () => Promise<boolean>, timeoutMs: number, failure: string | (() => string)): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check()) return;
    if (Date.now() >= deadline) throw new Error(typeof failure === 'string' ? failure : failure());
    await new Promise((r) => setTimeout(r, 25));
  }
}

