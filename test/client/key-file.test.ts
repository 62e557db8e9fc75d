/**
 * client/key-file.ts (the package's Node-only `connector-store-client/key-file`):
 * a worker takes a key file `npm run keygen` wrote and gets a token source
 * whose tokens the server's own code verifies as the file's DID; a missing,
 * non-JSON or non-Ed25519 file fails at once with an error naming the file.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readKeyFile, signingKeyFromFile, tokenSourceFromKeyFile } from '../../client/key-file.js';
import { generateLocalKey, verifyBearerToken, writeKeyFile } from '../../src/auth/index.js';

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), 'client-key-file-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('client key files', () => {
  it('a token source from a keygen key file signs as its DID, for the audience asked', async () => {
    const key = generateLocalKey();
    const path = join(dir, 'worker.json');
    await writeKeyFile(path, key);
    const source = await tokenSourceFromKeyFile(path, { audience: 'workers', lifetimeSeconds: 600 });
    expect(source.did).toBe(key.did);
    const token = await source.getToken();
    await expect(verifyBearerToken(token, { audience: 'workers' })).resolves.toMatchObject({ did: key.did });
    expect(await source.getToken()).toBe(token);
    expect((await signingKeyFromFile(new URL(`file://${path}`))).did).toBe(key.did);
    expect(await readKeyFile(path)).toEqual(key.privateKeyJWK);
  });

  it('names the file and the problem, before any request', async () => {
    const x = generateLocalKey().privateKeyJWK.x;
    const files: Record<string, string> = {
      'not-json.json': '{ kty: OKP',
      'array.json': '[]',
      'rsa.json': JSON.stringify({ kty: 'RSA', n: 'AQAB', e: 'AQAB', d: 'AQAB' }),
      'wrong-x.json': JSON.stringify({ ...generateLocalKey().privateKeyJWK, x }),
    };
    for (const [name, text] of Object.entries(files)) await writeFile(join(dir, name), text);
    const failures: [string, RegExp][] = [
      ['missing.json', /^key file .*missing\.json does not exist \(make one with: npm run keygen -- --out FILE\)$/],
      ['not-json.json', /^key file .*not-json\.json is not JSON/],
      ['array.json', /^key file .*array\.json does not hold a JWK object$/],
      ['rsa.json', /^key file .*rsa\.json: private key must be an Ed25519 private JWK/],
      ['wrong-x.json', /^key file .*wrong-x\.json: private key JWK "x" does not match its "d"$/],
      ['.', /^key file .* cannot be read \(EISDIR\)$/],
    ];
    for (const [name, message] of failures) {
      await expect(tokenSourceFromKeyFile(join(dir, name)), name).rejects.toThrow(message);
    }
  });
});
