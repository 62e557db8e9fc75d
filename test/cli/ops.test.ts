/**
 * `npm run ops` (issue 11 item 7) on both databases: stuck, show, retry,
 * cancel --reason, requeue through the same store functions as the API, with
 * clear errors and exit codes (0 done, 1 refused, 2 usage).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { opsCommand } from '../../src/cli/ops.js';
import { openDatabase } from '../../src/db/connect.js';
import { migrateToLatest } from '../../src/db/migrator.js';
import { createStoreContext } from '../../src/store/context.js';
import { claimOperation, markOperationSent, recordOperationOutcome, startOperationAttempt } from '../../src/store/operations/index.js';
import { testDialects } from '../helpers/databases.js';
import { createScratchPostgresDatabase } from '../helpers/postgres.js';

const CALLER = 'did:key:zOpsCaller';
const base = { callerDID: CALLER, ownerDID: CALLER, connectorName: 'google', model: 'm', op: 'create' as const, accountKey: 'a', target: 't', deterministicEventID: 'e', payloadHash: 'h', reissueIntent: 'none', leaseMs: 30_000 };

for (const dialect of testDialects()) {
  describe.runIf(dialect === 'sqlite' || inject('postgresAvailable'))(`${dialect}: ops command`, () => {
    let url: string;
    let cleanup: () => Promise<void>;

    beforeAll(async () => {
      if (dialect === 'sqlite') {
        const dir = await mkdtemp(join(tmpdir(), 'cli-ops-'));
        url = `sqlite:${join(dir, 'store.sqlite')}`;
        cleanup = () => rm(dir, { recursive: true, force: true });
      } else {
        const scratch = await createScratchPostgresDatabase('cs_cli_ops');
        url = scratch.url;
        cleanup = scratch.drop;
      }
      // A dead operation (its request was sent) and one whose lease lapsed an hour ago.
      const database = openDatabase(dialect === 'sqlite' ? { dialect, path: url.slice('sqlite:'.length), display: url } : { dialect, connectionString: url, display: url });
      await migrateToLatest(database.db, dialect);
      const hourAgo = Date.now() - 3_600_000;
      const store = createStoreContext(database.db, dialect, { now: () => hourAgo });
      const dead = await claimOperation(store, { ...base, operationID: 'dead' });
      const fence = { key: { callerDID: CALLER, operationID: 'dead' }, version: 0, leaseToken: dead.lease!.token };
      await startOperationAttempt(store, fence);
      await markOperationSent(store, { ...fence, sendMarker: 'marker' });
      await recordOperationOutcome(store, { ...fence, kind: 'fatal', lastHTTPStatus: 422, message: 'rejected by provider' });
      await claimOperation(store, { ...base, operationID: 'lapsed' });
      await database.close();
    });
    afterAll(async () => cleanup());

    async function ops(...argv: string[]) {
      let stdout = '';
      let stderr = '';
      const code = await opsCommand.run({ argv, env: { DATABASE_URL: url, OPS_ACTOR_DID: 'did:web:example.com:alice' }, cwd: tmpdir(), stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
      return { code, stdout, stderr };
    }

    it('stuck lists the lapsed operation, not the dead one', async () => {
      const { code, stdout } = await ops('stuck', '--json');
      expect(code).toBe(0);
      expect((JSON.parse(stdout) as { operationID: string }[]).map((o) => o.operationID)).toEqual(['lapsed']);
    });

    it('show prints state, last error and history, by key or by id', async () => {
      const byKey = await ops('show', CALLER, 'dead');
      expect(byKey.code).toBe(0);
      expect(byKey.stdout).toMatch(/dead .*last fatal 422 {2}"rejected by provider"/);
      expect(byKey.stdout).toMatch(/#1 attempt 1 .* sent {2}fatal 422 {2}"rejected by provider"/);
      const json = JSON.parse((await ops('show', CALLER, 'dead', '--json')).stdout) as { operation: { nodeKey: string } };
      const id = Buffer.from(`ConnectorOperation:${json.operation.nodeKey}`).toString('base64url');
      expect((await ops('show', id)).stdout).toMatch(/dead/);
    });

    it('retry sends a sent operation to reconcile_only and records who did it; a second retry is refused', async () => {
      const retried = await ops('retry', CALLER, 'dead');
      expect(retried.code).toBe(0);
      expect(retried.stdout).toMatch(/^retry: .* reconcile_only/);
      expect((await ops('show', CALLER, 'dead')).stdout).toMatch(/#2 retry by did:web:example.com:alice/);
      const again = await ops('retry', CALLER, 'dead');
      expect(again).toMatchObject({ code: 1, stdout: '' });
      expect(again.stderr).toBe('retry: cannot retry an operation that is reconcile_only (only dead)\n');
    });

    it('requeue and cancel --reason act on a live operation', async () => {
      expect((await ops('requeue', CALLER, 'lapsed')).code).toBe(0);
      const cancelled = await ops('cancel', CALLER, 'lapsed', '--reason', 'duplicate');
      expect(cancelled.code).toBe(0);
      expect(cancelled.stdout).toMatch(/dead .*"cancelled: duplicate"/);
      expect((await ops('stuck')).stdout).toBe('nothing is stuck\n');
    });

    it('usage errors exit 2; an unknown operation or database exits 1 with one line', async () => {
      expect((await ops()).code).toBe(2);
      expect(await ops('cancel', CALLER, 'lapsed')).toMatchObject({ code: 2, stderr: expect.stringMatching(/^cancel needs --reason\n/) });
      expect((await ops('explode')).code).toBe(2);
      expect((await ops('stuck', '--limit', '0')).code).toBe(2);
      expect(await ops('show', CALLER, 'nope')).toMatchObject({ code: 1, stderr: 'show: no such operation\n' });
      expect(await ops('show', 'not-an-id')).toMatchObject({ code: 1, stderr: 'show: no such operation\n' });
      let stderr = '';
      const code = await opsCommand.run({ argv: ['stuck'], env: { DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' }, cwd: tmpdir(), stdout: () => {}, stderr: (t) => (stderr += t) });
      expect(code).toBe(1);
      expect(stderr.trim().split('\n')).toHaveLength(1);
    });
  });
}
