/**
 * `CI=true npm test` with no Postgres answering: the run fails with one clear
 * message, not "No test files found" and a stack trace of vitest's internals.
 */
import { spawn } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
import { join, resolve } from 'node:path';
import { expect, it } from 'vitest';

const ROOT = resolve(import.meta.dirname, '../..');

/** A port on 127.0.0.1 nothing listens on (it was ours a moment ago). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  const { port } = server.address() as AddressInfo;
  await new Promise((closed) => server.close(closed));
  return port;
}

it('CI=true with Postgres unreachable: exit 1 and one message naming the server, nothing else', async () => {
  const url = `postgres://postgres@127.0.0.1:${await closedPort()}/postgres`;
  const child = spawn(process.execPath, [join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', 'test/store/gauges.test.ts'], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', CI: 'true', PG_TEST_URL: url, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout!.on('data', (chunk) => (output += chunk));
  child.stderr!.on('data', (chunk) => (output += chunk));
  const code = await new Promise<number | null>((done) => child.on('exit', done));

  expect(code).toBe(1);
  const lines = output.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !/^RUN\s+v\d/.test(l));
  expect(lines).toEqual([
    `CI=true, but PostgreSQL is unreachable at ${url} (connect ECONNREFUSED ${new URL(url).host}): start it, point PG_TEST_URL at one, or run TEST_DIALECTS=sqlite.`,
  ]);
}, 60_000);
