/**
 * `npm run keygen -- --out FILE` makes a client's key: an Ed25519 private JWK
 * in a 0600 file, its DID on stdout, tokens of it verified by the server's
 * own code; an existing file is kept unless --force, and a missing --out is
 * a usage error. `npm run token -- --key FILE` signs with such a file and
 * names the problem (exit 1) when the file is missing, not JSON or not an
 * Ed25519 private JWK.
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { decodeJwt } from 'jose';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_AUDIENCE, localKeyFromJWK, verifyBearerToken } from '../../src/auth/index.js';
import { callerFolder, type Command } from '../../src/cli/command.js';
import { keygenCommand } from '../../src/cli/keygen.js';
import { tokenCommand } from '../../src/cli/token.js';
import { NOW } from '../auth/fixtures.js';

let cwd: string;
beforeEach(async () => {
  cwd = await mkdtemp(join(tmpdir(), 'keygen-cli-'));
});
afterEach(async () => {
  await rm(cwd, { recursive: true, force: true });
});

async function run(command: Command, argv: string[], env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const code = await command.run({ argv, env, cwd, now: NOW, stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
  return { code, stdout, stderr };
}

describe('keygen command', () => {
  it('writes an Ed25519 private JWK with mode 0600 and prints its DID alone on stdout', async () => {
    const { code, stdout, stderr } = await run(keygenCommand, ['--out', 'keys/worker.json']);
    expect(code).toBe(0);
    const path = join(cwd, 'keys', 'worker.json');
    const jwk = JSON.parse(await readFile(path, 'utf8')) as Record<string, unknown>;
    expect(Object.keys(jwk).sort()).toEqual(['crv', 'd', 'kty', 'x']);
    expect(jwk).toMatchObject({ kty: 'OKP', crv: 'Ed25519' });
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    const { did } = localKeyFromJWK(jwk);
    expect(stdout).toBe(`${did}\n`);
    expect(stderr).toContain(path);
    expect(stderr).toContain('SERVICE_DIDS');
    expect(stderr).not.toContain(jwk.d as string);

    // Two runs, two keys.
    const other = await run(keygenCommand, ['--out=other.json']);
    expect(other.code).toBe(0);
    expect(other.stdout).not.toBe(stdout);
  });

  it('refuses an existing file unless --force, which replaces it (and makes it 0600)', async () => {
    const path = join(cwd, 'worker.json');
    await writeFile(path, 'precious\n', { mode: 0o644 });
    const refused = await run(keygenCommand, ['--out', 'worker.json']);
    expect(refused).toMatchObject({ code: 1, stdout: '' });
    expect(refused.stderr).toMatch(/^keygen: .*worker\.json already exists; pass --force/);
    expect(await readFile(path, 'utf8')).toBe('precious\n');

    const forced = await run(keygenCommand, ['--force', '--out', 'worker.json']);
    expect(forced.code).toBe(0);
    expect(localKeyFromJWK(JSON.parse(await readFile(path, 'utf8'))).did).toBe(forced.stdout.trim());
    expect((await stat(path)).mode & 0o777).toBe(0o600);
    expect((await readdir(cwd)).sort()).toEqual(['worker.json']);
  });

  it('needs --out with a file name; a path it cannot make is a failure that names it', async () => {
    for (const argv of [[], ['--force'], ['--out'], ['--out='], ['--out', '--force']]) {
      const result = await run(keygenCommand, argv);
      expect(result, argv.join(' ')).toMatchObject({ code: 2, stdout: '' });
      expect(result.stderr).toContain(keygenCommand.usage);
    }
    expect((await run(keygenCommand, [])).stderr).toMatch(/^--out <file> is required/);
    // A path under a regular file cannot be made (as root too, unlike a read-only directory).
    await writeFile(join(cwd, 'plain'), '');
    const result = await run(keygenCommand, ['--out', 'plain/k.json']);
    expect(result).toMatchObject({ code: 1, stdout: '' });
    expect(result.stderr).toMatch(/^keygen: .*plain/);
    expect(await readdir(cwd)).toEqual(['plain']);
  });
});

describe('token --key', () => {
  it('signs with the key file keygen wrote, for --audience, and never creates the local key', async () => {
    const did = (await run(keygenCommand, ['--out', 'worker.json'])).stdout.trim();
    const { code, stdout, stderr } = await run(tokenCommand, ['--key', 'worker.json', '--audience', 'staging-store', '--ttl', '600'], { AUTH_AUDIENCE: 'ignored' });
    expect(code).toBe(0);
    await expect(verifyBearerToken(stdout.trim(), { audience: 'staging-store', now: NOW })).resolves.toMatchObject({ did });
    expect(decodeJwt(stdout.trim())).toMatchObject({ aud: 'staging-store' });
    expect(stderr).toContain(`did: ${did}`);
    expect(stderr).toContain('audience: staging-store');
    expect(stderr).not.toContain('created');
    expect((await readdir(cwd)).sort()).toEqual(['worker.json']);

    const inline = await run(tokenCommand, [`--key=${join(cwd, 'worker.json')}`]);
    await expect(verifyBearerToken(inline.stdout.trim(), { audience: DEFAULT_AUDIENCE, now: NOW })).resolves.toMatchObject({ did });
  });

  it('names the problem with the file (exit 1, nothing on stdout, no local key made)', async () => {
    await writeFile(join(cwd, 'not-json.json'), '{ kty: OKP');
    await writeFile(join(cwd, 'rsa.json'), JSON.stringify({ kty: 'RSA', n: 'AQAB', e: 'AQAB', d: 'AQAB' }));
    await writeFile(join(cwd, 'public.json'), JSON.stringify({ kty: 'OKP', crv: 'Ed25519', x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' }));
    const worker = JSON.parse(await (async () => (await run(keygenCommand, ['--out', 'w.json']), readFile(join(cwd, 'w.json'), 'utf8')))()) as Record<string, string>;
    await writeFile(join(cwd, 'wrong-x.json'), JSON.stringify({ ...worker, x: '11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo' }));
    const cases: [string, RegExp][] = [
      ['missing.json', /key file .*missing\.json does not exist \(make one with: npm run keygen -- --out /],
      ['not-json.json', /key file .*not-json\.json is not JSON/],
      ['rsa.json', /key file .*rsa\.json: private key must be an Ed25519 private JWK/],
      ['public.json', /key file .*public\.json: private key must be an Ed25519 private JWK/],
      ['wrong-x.json', /key file .*wrong-x\.json: private key JWK "x" does not match its "d"/],
      ['.', /key file .* is a directory/],
    ];
    for (const [file, message] of cases) {
      const result = await run(tokenCommand, ['--key', file]);
      expect(result, file).toMatchObject({ code: 1, stdout: '' });
      expect(result.stderr, file).toMatch(new RegExp(`^token: ${message.source}`));
      expect(result.stderr.split('\n').filter(Boolean)).toHaveLength(1);
    }
    expect(await readdir(cwd)).not.toContain('data');
  });

  it('refuses --key and --audience without a value (usage, exit 2)', async () => {
    for (const argv of [['--key'], ['--key='], ['--audience'], ['--audience', ''], ['--key', '--ttl', '60']]) {
      const result = await run(tokenCommand, argv);
      expect(result, argv.join(' ')).toMatchObject({ code: 2, stdout: '' });
      expect(result.stderr).toMatch(/^--(key|audience) takes a/);
    }
  });
});

describe('npm run keygen / token as scripts', () => {
  it('run under tsx the way the package scripts do', { timeout: 60_000 }, async () => {
    const root = resolve(import.meta.dirname, '../..');
    const cli = (...argv: string[]) => promisify(execFile)(process.execPath, [join(root, 'node_modules/tsx/dist/cli.mjs'), join(root, 'src/cli/index.ts'), ...argv], { cwd });
    const { stdout: did } = await cli('keygen', '--out', 'svc.json');
    const { stdout: token } = await cli('token', '--key', 'svc.json', '--audience', 'cli-test', '--ttl', '60');
    await expect(verifyBearerToken(token.trim(), { audience: 'cli-test' })).resolves.toMatchObject({ did: did.trim() });
  });

  it('from another folder, `npm --prefix <checkout> run`: the file names are the caller\'s, not the checkout\'s (npm runs scripts in the package folder)', { timeout: 60_000 }, async () => {
    const root = resolve(import.meta.dirname, '../..');
    const npm = (...argv: string[]) => promisify(execFile)('npm', ['--prefix', root, 'run', '-s', ...argv], { cwd, env: { ...process.env, npm_config_loglevel: 'error' } });
    // As client/README.md and docs/getting-started.md write them, in the worker's own folder.
    const { stdout: did } = await npm('keygen', '--', '--out', 'worker-key.json');
    expect((await readdir(cwd)).sort()).toEqual(['worker-key.json']);
    expect(localKeyFromJWK(JSON.parse(await readFile(join(cwd, 'worker-key.json'), 'utf8'))).did).toBe(did.trim());
    await expect(stat(join(root, 'worker-key.json'))).rejects.toThrow(/ENOENT/);
    const { stdout: token } = await npm('token', '--', '--key', 'worker-key.json', '--audience', 'cli-test', '--ttl', '60');
    await expect(verifyBearerToken(token.trim(), { audience: 'cli-test' })).resolves.toMatchObject({ did: did.trim() });
  });
});

describe('callerFolder', () => {
  it("is npm's INIT_CWD only while npm runs this CLI as the script, else the process's folder", () => {
    const script = { INIT_CWD: '/home/me/worker', npm_lifecycle_script: 'tsx src/cli/index.ts keygen' };
    expect(callerFolder(script, '/srv/connector-store')).toBe('/home/me/worker');
    // Inherited from `npm test` by a CLI the tests start themselves: not this command's folder.
    expect(callerFolder({ INIT_CWD: '/srv/connector-store', npm_lifecycle_script: 'vitest run' }, '/tmp/x')).toBe('/tmp/x');
    expect(callerFolder({}, '/tmp/x')).toBe('/tmp/x');
    expect(callerFolder({ ...script, INIT_CWD: ' ' }, '/tmp/x')).toBe('/tmp/x');
  });
});
