/** `npm run retention`: the background jobs once, on demand, as a real process. */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect, it } from 'vitest';
import { openDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { createStoreContext } from '../../src/store/context.js';
import { claimOperation, getOperationByKey, recordOperationOutcome, startOperationAttempt } from '../../src/store/operations/index.js';

const ROOT = resolve(import.meta.dirname, '../..');
const TSX = pathToFileURL(join(ROOT, 'node_modules/tsx/dist/loader.mjs')).href;

it('deletes finished operations past the window, keeps live ones, and prints one line per job', async () => {
  const dir = await mkdtemp(join(tmpdir(), 'cs-retention-'));
  try {
    const path = join(dir, 'store.sqlite');
    const database = openDatabase({ dialect: 'sqlite', path, display: path });
    await migrateToLatest(database.db, 'sqlite');
    const hourAgo = Date.now() - 3_600_000;
    const store = createStoreContext(database.db, 'sqlite', { now: () => hourAgo });
    const base = { callerDID: 'did:key:zCaller', ownerDID: 'did:key:zCaller', connectorName: 'google', model: 'm', op: 'create' as const, accountKey: 'a', target: 't', deterministicEventID: 'e', payloadHash: 'h', reissueIntent: 'none', leaseMs: 60_000 };
    const dead = await claimOperation(store, { ...base, operationID: 'dead' });
    const fence = { key: { callerDID: base.callerDID, operationID: 'dead' }, version: 0, leaseToken: dead.lease!.token };
    await startOperationAttempt(store, fence);
    await recordOperationOutcome(store, { ...fence, kind: 'fatal' });
    await claimOperation(store, { ...base, operationID: 'live' });
    await database.close();

    const child = spawn(process.execPath, ['--import', TSX, join(ROOT, 'src/cli/index.ts'), 'retention'], {
      cwd: dir,
      env: { PATH: process.env.PATH ?? '', DATABASE_URL: `sqlite:${path}`, IDEMPOTENCY_WINDOW_MS: '60000', DEAD_RETENTION_MS: '60000' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout!.on('data', (chunk) => (out += chunk));
    const code = await new Promise<number | null>((done) => child.on('exit', done));
    expect(code).toBe(0);
    expect(out).toMatch(/^pending-auth-expiry \(\d+ ms\): \{"deleted":0\}$/m);
    expect(out).toMatch(/^retention \(\d+ ms\): \{"operations":1,/m);

    const after = openDatabase({ dialect: 'sqlite', path, display: path });
    const check = createStoreContext(after.db, 'sqlite');
    expect(await getOperationByKey(check, { callerDID: base.callerDID, operationID: 'dead' })).toBeNull();
    expect(await getOperationByKey(check, { callerDID: base.callerDID, operationID: 'live' })).not.toBeNull();
    await after.close();
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}, 30_000);
