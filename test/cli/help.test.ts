/**
 * Every command-line tool answers `--help` / `-h` with its usage and does
 * nothing else, wherever the flag stands; an unknown flag is refused with the
 * usage (exit 2) before anything is opened.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Command } from '../../src/cli/command.js';
import { demoCommand } from '../../src/cli/demo.js';
import { keygenCommand } from '../../src/cli/keygen.js';
import { migrateCommand } from '../../src/cli/migrate.js';
import { opsCommand } from '../../src/cli/ops.js';
import { retentionCommand } from '../../src/cli/retention.js';
import { tokenCommand } from '../../src/cli/token.js';

const ROOT = resolve(import.meta.dirname, '../..');
const TSX = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;
const OPERATION_ID = Buffer.from('ConnectorOperation:k1').toString('base64url');

let cwd: string;
beforeEach(async () => {
  cwd = await mkdtemp(join(tmpdir(), 'cli-help-'));
});
afterEach(async () => {
  await rm(cwd, { recursive: true, force: true });
});

async function run(command: Command, argv: string[]) {
  let stdout = '';
  let stderr = '';
  // The database (and the local key) would land in cwd: an empty cwd afterwards means nothing ran.
  const env = { DATABASE_URL: `sqlite:${join(cwd, 'store.sqlite')}`, NODE_ENV: 'development' };
  const code = await command.run({ argv, env, cwd, stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
  return { code, stdout, stderr, files: await readdir(cwd) };
}

const COMMANDS: [string, Command, string[][]][] = [
  ['demo', demoCommand, [[]]],
  ['retention', retentionCommand, [[]]],
  ['migrate', migrateCommand, [['latest'], ['down'], ['status']]],
  ['ops', opsCommand, [['stuck'], ['show', OPERATION_ID], ['retry', 'did:key:zCaller', 'op-1'], ['cancel', OPERATION_ID, '--reason', 'dup']]],
  ['token', tokenCommand, [[], ['--ttl', '60'], ['--key', 'k.json', '--audience', 'aud']]],
  ['keygen', keygenCommand, [['--out', 'k.json'], ['--out', 'k.json', '--force']]],
];

describe.each(COMMANDS)('%s', (name, command, invocations) => {
  it('answers --help and -h, anywhere in the arguments, with the usage only', async () => {
    for (const args of invocations) {
      for (const argv of [['--help'], ['-h'], [...args, '--help'], ['-h', ...args]]) {
        const result = await run(command, argv);
        expect(result, `${name} ${argv.join(' ')}`).toEqual({ code: 0, stdout: command.usage, stderr: '', files: [] });
        expect(command.usage).toMatch(new RegExp(`^usage: npm run (-s )?${name}`));
      }
    }
  });

  it('refuses an unknown flag with the usage (exit 2) before doing anything', async () => {
    for (const args of invocations) {
      for (const argv of [[...args, '--bogus'], [...args, '-x'], ['--dry-run', ...args]]) {
        const result = await run(command, argv);
        expect(result, `${name} ${argv.join(' ')}`).toMatchObject({ code: 2, stdout: '', files: [] });
        expect(result.stderr).toContain(command.usage);
        expect(result.stderr.split('\n')[0]).toMatch(/unknown|name an action|a command is required|takes/);
      }
    }
  });
});

describe('tsx src/cli/index.ts', () => {
  const cli = (...argv: string[]) =>
    promisify(execFile)(process.execPath, ['--import', TSX, join(ROOT, 'src/cli/index.ts'), ...argv], { cwd, env: { PATH: process.env.PATH ?? '' } }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (error: { code: number; stdout: string; stderr: string }) => ({ code: error.code, stdout: error.stdout, stderr: error.stderr }),
    );

  it('lists the commands for --help / -h (exit 0), and for no or an unknown command as a usage error (exit 2)', async () => {
    for (const flag of ['--help', '-h']) {
      const help = await cli(flag);
      expect(help.code).toBe(0);
      expect(help.stdout).toMatch(/^usage: .*<token\|keygen\|demo\|migrate\|retention\|ops\|console-build\|schema-check>/);
      expect(help.stdout).toMatch(/^ {2}retention {2,}/m);
    }
    for (const argv of [[], ['sideways']]) {
      const wrong = await cli(...argv);
      expect(wrong.code).toBe(2);
      expect(wrong.stderr).toMatch(/^(unknown command "sideways"\n)?usage: /);
    }
    expect(await readdir(cwd)).toEqual([]);
  });

  it('passes --help through to the command (npm run retention -- --help)', async () => {
    const help = await cli('retention', '--help');
    expect(help).toEqual({ code: 0, stdout: retentionCommand.usage, stderr: '' });
    expect(await readdir(cwd)).toEqual([]);
  });
});
