/**
 * Writes no request made publish their change too (issue 38 item 4), on both
 * dialects: the server's retention job and backlog sampler, `npm run
 * retention` and `npm run migrate` against the database a running server
 * serves. Each reaches `storeChanged` subscribers within a second, as one
 * event per subject however many rows went, and only the viewers it concerns.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDatabase, parseDatabaseURL, type DialectName, type OpenDatabase } from '../../src/db/connect.js';
import { migrateCommand } from '../../src/cli/migrate.js';
import { retentionCommand } from '../../src/cli/retention.js';
import { createStoreContext } from '../../src/store/context.js';
import type { Command } from '../../src/cli/command.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { e2eGraphQLClient, e2ePrincipals, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import { operationRowValues } from '../helpers/row-fixtures.js';

const AUDIENCE = 'connector-store-job-publishes';
const { keys, tokens, mint } = e2ePrincipals(AUDIENCE, ['alice', 'mallory', 'worker']);
const { subscribe, closeSubscriptions } = e2eGraphQLClient(tokens, 'alice');
const STORE_CHANGED = `subscription ($subjects: [StoreChangeSubject!]) { storeChanged(subjects: $subjects) { subject reason at } }`;
const DAY = 24 * 60 * 60 * 1000;
const dialects: DialectName[] = testDialects().filter(dialectAvailable);

/** Runs a CLI command in this process against `databaseURL`; its exit code and output. */
async function cli(command: Command, argv: string[], databaseURL: string) {
  let stdout = '';
  let stderr = '';
  const code = await command.run({ argv, env: { DATABASE_URL: databaseURL }, cwd: process.cwd(), stdout: (t) => (stdout += t), stderr: (t) => (stderr += t) });
  return { code, stdout, stderr };
}

/** Inserts, from outside the server, a committed operation of alice's that retention deletes on its next run (updated two days ago). */
async function insertExpiredOperation(database: OpenDatabase): Promise<void> {
  const store = createStoreContext(database.db, database.dialect);
  // Inserted, not read back: the server's retention may delete it the moment it is committed.
  await store.db.insertInto('kubun_connector_operation').values(operationRowValues(store, {
    caller_did: keys.alice.did,
    owner_did: keys.alice.did,
    state: 'committed',
    lease_token: null,
    lease_expires_at: null,
    updated_at: Date.now() - 2 * DAY,
  })).execute();
}

/** A server on `dialect` with `env` for the enclosing describe, and a connection of the test's own to its database. */
function serverFor(dialect: DialectName, name: string, env: Record<string, string>): { started?: E2EServers; database?: OpenDatabase } {
  const running: { started?: E2EServers; database?: OpenDatabase } = {};
  beforeAll(async () => {
    await mint();
    running.started = await startE2EServers(dialect, { audience: AUDIENCE, serviceDID: keys.worker.did, name, env });
    running.database = openDatabase(parseDatabaseURL(running.started.databaseURL), { poolMax: 1 });
  }, 60_000);
  afterAll(async () => {
    await closeSubscriptions();
    await running.database?.close();
    await running.started?.dispose();
  });
  return running;
}

describe.each(dialects)('%s: background jobs and CLI maintenance publish what they changed', (dialect) => {
  describe('the server’s own jobs', () => {
    const running = serverFor(dialect, 'job_publishes', { RETENTION_INTERVAL_MS: '200', BACKLOG_SAMPLE_INTERVAL_MS: '1000' });

    it('retention deleting alice’s finished operation tells alice and services within a second, once; mallory hears nothing', async () => {
      const server = running.started!.server;
      const alice = await subscribe(server, STORE_CHANGED, { subjects: ['OPERATIONS'] }, 'alice');
      const worker = await subscribe(server, STORE_CHANGED, { subjects: ['OPERATIONS'] }, 'worker');
      const mallory = await subscribe(server, STORE_CHANGED, {}, 'mallory');
      const at = Date.now();
      await insertExpiredOperation(running.database!);
      await alice.waitFor(1, 1_000);
      expect(Date.now() - at).toBeLessThan(1_000);
      await worker.waitFor(1, 1_000);
      expect(alice.events[0]!.data.storeChanged).toMatchObject({ subject: 'OPERATIONS', reason: 'RETENTION' });
      expect(worker.events[0]!.data.storeChanged).toMatchObject({ subject: 'OPERATIONS', reason: 'RETENTION' });
      // Later runs delete nothing and publish nothing.
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(alice.events).toHaveLength(1);
      expect(mallory.events).toEqual([]);
    });

    it('a backlog sample taken reaches a service within a second of its slot; a user is never told (the backlog is store-wide)', async () => {
      const server = running.started!.server;
      const worker = await subscribe(server, STORE_CHANGED, { subjects: ['BACKLOG'] }, 'worker');
      const alice = await subscribe(server, STORE_CHANGED, { subjects: ['BACKLOG'] }, 'alice');
      // One sample per 1 s slot, the sampler ticking every second: the next one within about two.
      await worker.waitFor(1, 2_500);
      expect(worker.events[0]!.data.storeChanged).toMatchObject({ subject: 'BACKLOG', reason: 'BACKLOG_SAMPLED' });
      await worker.waitFor(2, 2_500);
      expect(alice.events).toEqual([]);
    });
  });

  describe('the operator CLI', () => {
    // Jobs off: only the CLI deletes.
    const running = serverFor(dialect, 'cli_job_publishes', { RETENTION_INTERVAL_MS: '0', BACKLOG_SAMPLE_INTERVAL_MS: '0' });

    it('npm run retention tells the owner of what it deleted within a second; a run that deletes nothing tells no one', async () => {
      const server = running.started!.server;
      await insertExpiredOperation(running.database!);
      const alice = await subscribe(server, STORE_CHANGED, {}, 'alice');
      const mallory = await subscribe(server, STORE_CHANGED, {}, 'mallory');
      const at = Date.now();
      expect(await cli(retentionCommand, [], running.started!.databaseURL)).toMatchObject({ code: 0, stderr: '' });
      await alice.waitFor(1, 1_000);
      expect(Date.now() - at).toBeLessThan(1_000);
      expect(alice.events[0]!.data.storeChanged).toMatchObject({ subject: 'OPERATIONS', reason: 'RETENTION' });

      expect(await cli(retentionCommand, [], running.started!.databaseURL)).toMatchObject({ code: 0 });
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(alice.events).toHaveLength(1);
      expect(mallory.events).toEqual([]);
    });

    it('migrate with nothing to apply publishes nothing', async () => {
      const server = running.started!.server;
      const alice = await subscribe(server, STORE_CHANGED, {}, 'alice');
      expect(await cli(migrateCommand, ['latest'], running.started!.databaseURL)).toMatchObject({ code: 0, stdout: expect.stringContaining('nothing to do') });
      await new Promise((resolve) => setTimeout(resolve, 600));
      expect(alice.events.map((e) => e.data.storeChanged)).toEqual([]);
    });

    it('npm run migrate tells every viewer that rows may have been rewritten, within a second of applying', async () => {
      const server = running.started!.server;
      // The last two migrations reverted and applied again, as a rolling deploy's migrate step would apply them.
      // On SQLite that drops and recreates the change outbox (0014), numbered from 1 again: the server's feed notices.
      // (A revert publishes too; the subscriptions open after its events were delivered.)
      for (let i = 0; i < 2; i++) expect(await cli(migrateCommand, ['down', '--yes'], running.started!.databaseURL)).toMatchObject({ code: 0, stderr: '' });
      await new Promise((resolve) => setTimeout(resolve, 500));
      const alice = await subscribe(server, STORE_CHANGED, { subjects: ['OPERATIONS'] }, 'alice');
      const mallory = await subscribe(server, STORE_CHANGED, { subjects: ['OPERATIONS'] }, 'mallory');
      expect(alice.events).toEqual([]);
      const at = Date.now();
      expect(await cli(migrateCommand, ['latest'], running.started!.databaseURL)).toMatchObject({ code: 0, stderr: '' });
      await alice.waitFor(1, 1_000);
      await mallory.waitFor(1, 1_000);
      expect(Date.now() - at).toBeLessThan(1_000);
      expect(alice.events[0]!.data.storeChanged).toMatchObject({ subject: 'OPERATIONS', reason: 'MIGRATION' });
      expect(mallory.events[0]!.data.storeChanged).toMatchObject({ subject: 'OPERATIONS', reason: 'MIGRATION' });
    });
  });
});
