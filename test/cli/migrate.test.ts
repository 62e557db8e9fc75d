import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { getMigrations } from '../../migrations/index.js';
import { migrateCommand } from '../../src/cli/migrate.js';

/** Every migration's name, in order (the types do not matter for the names). */
const NAMES = Object.keys(getMigrations({} as never));
const NEWEST = NAMES.at(-1)!;
const PREVIOUS = NAMES.at(-2)!;

let cwd: string;
beforeEach(async () => {
  cwd = await mkdtemp(join(tmpdir(), 'cli-migrate-'));
});
afterEach(async () => {
  await rm(cwd, { recursive: true, force: true });
});

async function run(argv: string[], env: Record<string, string> = { DATABASE_URL: `sqlite:${join(cwd, 'store.sqlite')}` }) {
  let stdout = '';
  let stderr = '';
  const code = await migrateCommand.run({ argv, env, cwd, stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
  return { code, stdout, stderr };
}

describe('migrate command', () => {
  it('status, latest, status again, down: each says what it did', async () => {
    expect(await run(['status'])).toMatchObject({ code: 0, stdout: expect.stringMatching(/^0001-initial {2}pending$/m) });
    expect(await run(['latest'])).toMatchObject({ code: 0, stdout: expect.stringMatching(new RegExp(`^${NAMES.map((name) => `.*: up ${name} success\\n`).join('')}$`)) });
    expect(await run(['latest'])).toMatchObject({ code: 0, stdout: expect.stringMatching(/: nothing to do$/m) });
    expect(await run(['status'])).toMatchObject({ code: 0, stdout: expect.stringMatching(/^0001-initial {2}applied \d{4}-/m) });
    expect(await run(['down', '--yes'])).toMatchObject({ code: 0, stdout: expect.stringMatching(new RegExp(`: down ${NEWEST} success$`, 'm')) });
    expect(await run(['status'])).toMatchObject({ code: 0, stdout: expect.stringMatching(new RegExp(`^${NEWEST} {2}pending$`, 'm')) });
    expect((await run(['status'])).stdout).toMatch(new RegExp(`^${PREVIOUS} {2}applied `, 'm'));
  });

  it('down without --yes says what it would revert and exits 1, changing nothing; with --yes it reverts', async () => {
    await run(['latest']);
    const asked = await run(['down']);
    expect(asked.code).toBe(1);
    expect(asked.stdout).toBe('');
    expect(asked.stderr).toMatch(new RegExp(`^migrate down: would revert ${NEWEST} on sqlite:.*store\\.sqlite; nothing was changed\\. To revert it: npm run migrate -- down --yes\\n$`));
    expect((await run(['status'])).stdout).toMatch(new RegExp(`^${NEWEST} {2}applied `, 'm'));
    expect((await run(['--yes', 'down'])).stdout).toMatch(new RegExp(`: down ${NEWEST} success$`, 'm'));
    // Down to 0001 (each run reverts the newest applied one).
    for (let i = 0; i < NAMES.length - 2; i++) await run(['down', '-y']);
    // The last one drops every table: the preview says so.
    expect((await run(['down'])).stderr).toMatch(/^migrate down: would revert 0001-initial .*, which drops every table and all their data; nothing was changed\./);
    expect((await run(['status'])).stdout).toMatch(/^0001-initial {2}applied /m);
    expect((await run(['down', '--yes'])).stdout).toMatch(/: down 0001-initial success$/m);
    expect(await run(['down'])).toMatchObject({ code: 1, stderr: expect.stringMatching(/^migrate down: nothing to revert on sqlite:.*: no migration is applied\n$/) });
  });

  it('down on a SQLite file that does not exist does not create it', async () => {
    const path = join(cwd, 'nested', 'absent.sqlite');
    expect(await run(['down'], { DATABASE_URL: `sqlite:${path}` })).toMatchObject({ code: 1, stderr: expect.stringMatching(/nothing to revert .*: the file does not exist\n$/) });
    expect(await run(['down', '--yes'], { DATABASE_URL: `sqlite:${path}` })).toMatchObject({ code: 0, stdout: expect.stringMatching(/nothing to revert .*: the file does not exist\n$/) });
    expect(existsSync(join(cwd, 'nested'))).toBe(false);
  });

  it('refuses a missing or unknown action with the usage (exit 2), and a bad DATABASE_URL with one line (exit 1)', async () => {
    for (const argv of [[], ['sideways'], ['up', 'extra'], ['latest', '--yes'], ['down', '--force']]) {
      const result = await run(argv);
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(/usage: npm run migrate/);
    }
    const bad = await run(['latest'], { DATABASE_URL: 'mysql://nope' });
    expect(bad.code).toBe(1);
    expect(bad.stderr).toMatch(/^migrate: .+\n$/);
    expect((await run(['--help'])).stdout).toMatch(/usage/);
  });

  it('behind a transaction pooler (DATABASE_POOL_MODE=transaction) migrates over CHANGE_FEED_DATABASE_URL, and refuses without it', async () => {
    const pooled = { DATABASE_URL: 'postgres://app@127.0.0.1:1/pooled', DATABASE_POOL_MODE: 'transaction' };
    expect(await run(['status'], pooled)).toEqual({ code: 1, stdout: '', stderr: expect.stringMatching(/^migrate: DATABASE_POOL_MODE=transaction: migrations need the direct CHANGE_FEED_DATABASE_URL/) });
    // The direct URL is the one it connects to (here: refused on port 2, not the pooled port 1).
    const direct = await run(['status'], { ...pooled, CHANGE_FEED_DATABASE_URL: 'postgres://app@127.0.0.1:2/direct' });
    expect(direct).toMatchObject({ code: 1, stderr: expect.stringMatching(/^migrate: cannot reach postgres:\/\/app@127\.0\.0\.1:2\/direct: /) });
  });
});
