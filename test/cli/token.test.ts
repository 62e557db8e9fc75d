import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { decodeJwt } from 'jose';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { DEFAULT_AUDIENCE, verifyBearerToken } from '../../src/auth/index.js';
import { tokenCommand } from '../../src/cli/token.js';
import { NOW } from '../auth/fixtures.js';

let cwd: string;
beforeEach(async () => {
  cwd = await mkdtemp(join(tmpdir(), 'auth-token-cli-'));
});
afterEach(async () => {
  await rm(cwd, { recursive: true, force: true });
});

async function run(argv: string[], env: Record<string, string> = {}) {
  let stdout = '';
  let stderr = '';
  const code = await tokenCommand.run({
    argv,
    env,
    cwd,
    now: NOW,
    stdout: (text) => (stdout += text),
    stderr: (text) => (stderr += text),
  });
  return { code, stdout, stderr };
}

describe('token command', () => {
  it('creates ./data/local-key.json and prints a token for the default audience', async () => {
    const first = await run([]);
    expect(first.code).toBe(0);
    const token = first.stdout.trim();
    expect(first.stdout).toBe(`${token}\n`);
    const { did } = await verifyBearerToken(token, { audience: DEFAULT_AUDIENCE, now: NOW });
    expect(first.stderr).toContain(`did: ${did}`);
    expect(first.stderr).toContain('created a new local key');
    expect(first.stderr).not.toContain(token);
    expect((await stat(join(cwd, 'data', 'local-key.json'))).mode & 0o777).toBe(0o600);

    const second = await run([]);
    expect(second.stderr).not.toContain('created');
    await expect(verifyBearerToken(second.stdout.trim(), { audience: DEFAULT_AUDIENCE, now: NOW })).resolves.toMatchObject({ did });
  });

  it('takes the audience from AUTH_AUDIENCE and the lifetime from --ttl', async () => {
    const { code, stdout } = await run(['--ttl', '60'], { AUTH_AUDIENCE: 'staging-store' });
    expect(code).toBe(0);
    const claims = decodeJwt(stdout.trim());
    expect(claims.aud).toBe('staging-store');
    expect(claims.exp! - claims.iat!).toBe(60);
    expect(decodeJwt((await run(['--ttl=120'])).stdout.trim()).exp! - claims.iat!).toBe(120);
  });

  it('refuses a ttl the server would refuse, and unknown arguments', async () => {
    for (const argv of [['--ttl', '3601'], ['--ttl=0'], ['--ttl'], ['--ttl', '1h'], ['--issuer', 'x'], ['--audience']]) {
      const result = await run(argv);
      expect(result.code).toBe(2);
      expect(result.stdout).toBe('');
    }
    expect((await run(['--ttl', '7200'])).stderr).toMatch(/1 to 3600/);
    expect((await run(['--help'])).stdout).toMatch(/usage/);
  });

  it('runs as a script under tsx, the way npm run token does', async () => {
    const root = resolve(import.meta.dirname, '../..');
    const { stdout, stderr } = await promisify(execFile)(
      process.execPath,
      [join(root, 'node_modules/tsx/dist/cli.mjs'), join(root, 'src/cli/index.ts'), 'token', '--ttl', '300'],
      { cwd, env: { ...process.env, AUTH_AUDIENCE: 'cli-test' } },
    );
    const token = stdout.trim();
    const { did } = await verifyBearerToken(token, { audience: 'cli-test' });
    expect(stderr).toContain(`did: ${did}`);
    expect(JSON.parse(await readFile(join(cwd, 'data', 'local-key.json'), 'utf8'))).toMatchObject({ kty: 'OKP', crv: 'Ed25519' });
  });
});
