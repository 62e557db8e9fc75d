/**
 * Picking and opening the database: DATABASE_URL parsing, and start-up
 * failures as one clear line rather than a stack trace.
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { describe, expect, inject, it } from 'vitest';
import { migrateCommand } from '../../src/cli/migrate.js';
import { checkConnection, DatabaseConfigError, DatabaseUnavailableError, DEFAULT_SQLITE_PATH, openDatabase, parseDatabaseURL } from '../../src/db/connect.js';
import { postgresURLFor } from '../helpers/postgres.js';

describe('DATABASE_URL', () => {
  it('defaults to the embedded SQLite file', () => {
    expect(parseDatabaseURL(undefined)).toMatchObject({ dialect: 'sqlite', path: DEFAULT_SQLITE_PATH });
    expect(parseDatabaseURL('  ')).toMatchObject({ dialect: 'sqlite', path: DEFAULT_SQLITE_PATH });
  });

  it('takes sqlite:PATH, sqlite://PATH and sqlite::memory:', () => {
    expect(parseDatabaseURL('sqlite:./x.sqlite')).toMatchObject({ dialect: 'sqlite', path: './x.sqlite' });
    expect(parseDatabaseURL('sqlite:///tmp/x.sqlite')).toMatchObject({ dialect: 'sqlite', path: '/tmp/x.sqlite' });
    expect(parseDatabaseURL('sqlite::memory:')).toMatchObject({ dialect: 'sqlite', path: ':memory:' });
  });

  it('takes postgres:// and postgresql:// and never shows the password', () => {
    const target = parseDatabaseURL('postgres://app:s3cret@db.example:5432/store');
    expect(target).toMatchObject({ dialect: 'postgres', connectionString: 'postgres://app:s3cret@db.example:5432/store' });
    expect(target.display).not.toContain('s3cret');
    expect(parseDatabaseURL('postgresql://db.example/store').dialect).toBe('postgres');
  });

  it('refuses anything else with a DatabaseConfigError naming what it takes', () => {
    for (const bad of ['mysql://x/y', 'sqlite:', 'postgres://', 'file.sqlite']) {
      expect(() => parseDatabaseURL(bad), bad).toThrow(DatabaseConfigError);
    }
    expect(() => parseDatabaseURL('mysql://x/y')).toThrow(/postgres:\/\/.*sqlite:/);
  });

  it('reports an unreachable Postgres as DatabaseUnavailableError, naming the database without its password', async () => {
    const open = openDatabase(parseDatabaseURL('postgres://nobody:hunter2@127.0.0.1:1/none'), { connectionTimeoutMs: 1_000 });
    try {
      const failure = await checkConnection(open).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(DatabaseUnavailableError);
      expect((failure as Error).message).toMatch(/^cannot reach postgres:\/\/nobody:\*\*\*@127\.0\.0\.1:1\/none: /);
      expect((failure as Error).message).not.toContain('hunter2');
    } finally {
      await open.close();
    }
  });
});

describe('npm start with a bad database', () => {
  const ROOT = resolve(import.meta.dirname, '../..');
  const TSX = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;

  async function startWith(databaseURL: string): Promise<{ code: number | null; stderr: string }> {
    const cwd = await mkdtemp(join(tmpdir(), 'cs-start-'));
    try {
      const child = spawn(process.execPath, ['--import', TSX, join(ROOT, 'src/server/main.ts')], {
        cwd,
        env: { PATH: process.env.PATH ?? '', PORT: '0', DATABASE_URL: databaseURL, NODE_ENV: 'production' },
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      let stderr = '';
      child.stderr!.on('data', (chunk) => (stderr += chunk));
      const code = await new Promise<number | null>((done) => child.on('exit', (c) => done(c)));
      return { code, stderr };
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  }

  it('exits 1 with one line for an unreachable database and for a malformed URL, no stack trace', async () => {
    const [unreachable, malformed] = await Promise.all([startWith('postgres://nobody@127.0.0.1:1/none'), startWith('mysql://x/y')]);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr.trim()).toMatch(/^connector store failed to start: cannot reach postgres:\/\/nobody@127\.0\.0\.1:1\/none: .*ECONNREFUSED/);
    expect(malformed.code).toBe(1);
    expect(malformed.stderr).toMatch(/ - DATABASE_URL: must start with postgres:\/\/.* \(got "mysql:\/\/x\/y"\)\n/);
    for (const { stderr } of [unreachable, malformed]) expect(stderr).not.toMatch(/^\s+at /m);
  }, 30_000);
});

describe.skipIf(!inject('postgresAvailable'))('a Postgres database that does not exist (3D000)', () => {
  const name = `cs_missing_${randomBytes(6).toString('hex')}`;
  const url = postgresURLFor(name);
  const { hostname, port, username } = new URL(url);
  const createdb = `createdb -h ${hostname} -p ${port || 5432} -U ${decodeURIComponent(username)} ${name}`;
  const line = new RegExp(`^database "${name}" does not exist on ${hostname}:${port || 5432}; create it with: ${createdb.replace(/[.]/g, '\\.')}$`);

  it('checkConnection says so in one line, with the createdb command', async () => {
    const open = openDatabase(parseDatabaseURL(url));
    try {
      const failure = await checkConnection(open).catch((error: unknown) => error);
      expect(failure).toBeInstanceOf(DatabaseUnavailableError);
      expect((failure as Error).message).toMatch(line);
    } finally {
      await open.close();
    }
  });

  it('npm run migrate prints that line and exits 1', async () => {
    let stdout = '';
    let stderr = '';
    const code = await migrateCommand.run({ argv: ['latest'], env: { DATABASE_URL: url }, cwd: tmpdir(), stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
    expect({ code, stdout }).toEqual({ code: 1, stdout: '' });
    expect(stderr.trim().split('\n')).toHaveLength(1);
    expect(stderr.trim().replace(/^migrate: /, '')).toMatch(line);
  });

  it('npm start prints that line and exits 1, no stack trace', async () => {
    const cwd = await mkdtemp(join(tmpdir(), 'cs-start-'));
    try {
      const ROOT = resolve(import.meta.dirname, '../..');
      const child = spawn(process.execPath, ['--import', pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href, join(ROOT, 'src/server/main.ts')], {
        cwd,
        env: { PATH: process.env.PATH ?? '', PORT: '0', DATABASE_URL: url, NODE_ENV: 'production' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stderr = '';
      child.stderr!.on('data', (chunk) => (stderr += chunk));
      const code = await new Promise<number | null>((done) => child.on('exit', (c) => done(c)));
      expect(code).toBe(1);
      expect(stderr.trim().split('\n')).toHaveLength(1);
      expect(stderr.trim().replace(/^connector store failed to start: /, '')).toMatch(line);
    } finally {
      await rm(cwd, { recursive: true, force: true });
    }
  }, 30_000);
});
