import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/tables.js';
import { loadConfig } from '../../src/server/config.js';
import { demoCommand } from '../../src/cli/demo.js';
import { DEMO_NEIGHBOUR_DID, DEMO_WORKER_DID, demoDID, seedDemoData, seedLocalDemo } from '../../src/demo/seed.js';
import { browsableBaseURL, developmentBanner, shouldPrintDevelopmentBanner } from '../../src/server/dev-banner.js';
import { describeGraphQL, TEST_AUDIENCE } from '../helpers/graphql.js';
import { countRows } from '../helpers/row-fixtures.js';

const TABLES: (keyof Database)[] = [
  'kubun_connector_operation',
  'kubun_connector_projection_watch',
  'kubun_connector_sync_state',
  'kubun_connector_entity_trim',
  'kubun_connector_sweep_receipt',
  'kubun_connector_sweep_candidate',
  'kubun_connector_operation_activity',
  'kubun_connector_operation_activity_total',
  'kubun_connector_backlog_sample',
];

const DASHBOARD = `{
  operationCounts { state count }
  operations(first: 50) { totalCount edges { node { operationID callerDID ownerDID state deferReason leaseExpiresAt sendMarkerSet lastKind lastError } } }
  watches(first: 50) { totalCount edges { node { verificationStatus claimedUntil deferReason } } }
  syncStates(first: 50) { totalCount edges { node { connectorName status } } }
  document(documentID: "demo-doc-event-planning") { hasConnectorWork entityTrim { connectorName } watch { verificationStatus } }
}`;

describeGraphQL('demo data', (suite) => {
  it('fills the database so the owner sees every operation state, every watch status, sync states and a trim', async () => {
    const owner = suite.keys.alice.did;
    const result = await seedDemoData(suite.store, { ownerDID: owner });
    expect(result).toMatchObject({ ownerDID: owner, existing: 0 });
    expect(result.created).toBeGreaterThan(15);

    const res = await suite.gql(DASHBOARD, {}, { as: 'alice' });
    expect(res.errors).toBeUndefined();
    const counts = Object.fromEntries(res.data.operationCounts.map((c: { state: string; count: number }) => [c.state, c.count]));
    expect(Object.keys(counts).sort()).toEqual(['ATTEMPTED', 'COMMITTED', 'DEAD', 'RECONCILE_ONLY']);
    for (const state of Object.keys(counts)) expect(counts[state], state).toBeGreaterThan(0);

    const ops = res.data.operations.edges.map((e: any) => e.node);
    expect(ops.every((op: any) => op.ownerDID === owner)).toBe(true);
    expect(ops.map((op: any) => op.deferReason)).toEqual(expect.arrayContaining(['OFFLINE', 'AUTH']));
    const now = suite.clock.now();
    const live = ops.filter((op: any) => op.state === 'ATTEMPTED' && op.leaseExpiresAt !== null && Date.parse(op.leaseExpiresAt) > now);
    expect(live).toHaveLength(1);
    // Every attempt that ended badly says why in words, as a provider would (issue 22 item 9).
    const failed = ops.filter((op: any) => op.lastKind !== null);
    expect(failed.length).toBeGreaterThanOrEqual(5);
    for (const op of failed) expect(op.lastError, op.operationID).toMatch(/\w{4,}.*\w{4,}/);
    // Some are called by a worker on the owner's behalf: visible to the owner all the same.
    expect(ops.some((op: any) => op.callerDID === DEMO_WORKER_DID)).toBe(true);

    const watches = res.data.watches.edges.map((e: any) => e.node);
    expect(new Set(watches.map((w: any) => w.verificationStatus))).toEqual(new Set(['PENDING_VERIFICATION', 'VERIFIED', 'FAILED']));
    expect(watches.filter((w: any) => w.claimedUntil !== null && Date.parse(w.claimedUntil) > now)).toHaveLength(1);
    expect(watches.some((w: any) => w.deferReason === 'OFFLINE')).toBe(true);

    expect(res.data.syncStates.edges.map((e: any) => e.node.status).sort()).toEqual(['error', 'idle', 'syncing']);
    expect(res.data.document).toEqual({ hasConnectorWork: true, entityTrim: { connectorName: 'google' }, watch: { verificationStatus: 'PENDING_VERIFICATION' } });
    expect(await countRows(suite.store, 'kubun_connector_sweep_receipt')).toBe(1);
    const candidates = await suite.store.db.selectFrom('kubun_connector_sweep_candidate').select('state').orderBy('state').execute();
    expect(candidates.map((c) => c.state)).toEqual(['applied', 'kept', 'pending']);

    // The week before, for the overview's charts: every hour from 7 days to 1 hour ago has commits; the last hours are the items'.
    const activity = await suite.gql('{ operationActivity(window: LAST_7_DAYS) { buckets { start committed retryable offline } } }', {}, { as: 'alice' });
    const buckets = activity.data.operationActivity.buckets as { start: string; committed: number; retryable: number; offline: number }[];
    expect(buckets).toHaveLength(168);
    expect(buckets.slice(0, 167).every((b) => b.committed > 0)).toBe(true);
    expect(buckets.some((b) => b.retryable >= 10)).toBe(true);
    expect(buckets.some((b) => b.offline > 0)).toBe(true);
    const service = await suite.gql('{ operationActivity(window: LAST_7_DAYS) { backlogIncluded buckets { dueBacklog } } }', {}, { as: 'worker' });
    expect(service.data.operationActivity.backlogIncluded).toBe(true);
    expect(service.data.operationActivity.buckets.slice(0, 167).every((b: { dueBacklog: number | null }) => b.dueBacklog !== null)).toBe(true);
  });

  it('is idempotent: a second run writes nothing new', async () => {
    const owner = suite.keys.alice.did;
    await seedDemoData(suite.store, { ownerDID: owner });
    const before = await Promise.all(TABLES.map((t) => countRows(suite.store, t)));
    const operationsBefore = await suite.store.db.selectFrom('kubun_connector_operation').selectAll().orderBy('operation_id').execute();

    suite.clock.advance(60_000);
    const again = await seedDemoData(suite.store, { ownerDID: owner });
    expect(again.created).toBe(0);
    expect(await Promise.all(TABLES.map((t) => countRows(suite.store, t)))).toEqual(before);
    const operationsAfter = await suite.store.db.selectFrom('kubun_connector_operation').selectAll().orderBy('operation_id').execute();
    expect(operationsAfter).toEqual(operationsBefore);
  });

  it('keeps one lease live on a later run: a lapsed demo lease is taken again', async () => {
    const owner = suite.keys.alice.did;
    await seedDemoData(suite.store, { ownerDID: owner });
    suite.clock.advance(2 * 60 * 60 * 1000);
    await seedDemoData(suite.store, { ownerDID: owner });
    const res = await suite.gql('{ operations(first: 50, filter: { states: [ATTEMPTED] }) { edges { node { leaseExpiresAt } } } }', {}, { as: 'alice' });
    const live = res.data.operations.edges.filter((e: any) => e.node.leaseExpiresAt !== null && Date.parse(e.node.leaseExpiresAt) > suite.clock.now());
    expect(live).toHaveLength(1);
  });

  it("shows visibility: a stranger sees nothing, a service also sees the neighbour's rows", async () => {
    await seedDemoData(suite.store, { ownerDID: suite.keys.alice.did });
    const total = (res: any) => res.data.operations.totalCount as number;
    const query = '{ operations(first: 1) { totalCount } watches(first: 1) { totalCount } syncStates(first: 1) { totalCount } }';
    const alice = await suite.gql(query, {}, { as: 'alice' });
    const mallory = await suite.gql(query, {}, { as: 'mallory' });
    const worker = await suite.gql(query, {}, { as: 'worker' });
    expect(mallory.data).toEqual({ operations: { totalCount: 0 }, watches: { totalCount: 0 }, syncStates: { totalCount: 0 } });
    expect(total(worker)).toBeGreaterThan(total(alice));
    expect(worker.data.watches.totalCount).toBeGreaterThan(alice.data.watches.totalCount);
    const neighbour = await suite.gql('{ operations(first: 10, filter: { ownerDID: $did }) { totalCount } }'.replace('$did', JSON.stringify(DEMO_NEIGHBOUR_DID)), {}, { as: 'worker' });
    expect(neighbour.data.operations.totalCount).toBe(2);
  });

  let cwd: string;
  beforeEach(async () => {
    cwd = await mkdtemp(join(tmpdir(), 'demo-test-'));
  });
  afterEach(async () => {
    await rm(cwd, { recursive: true, force: true });
  });

  it('the development banner prints a working token for the local key, which sees the demo data', async () => {
    const config = loadConfig({ NODE_ENV: 'development', AUTH_AUDIENCE: TEST_AUDIENCE, PORT: '4321' });
    const seeded = await seedLocalDemo(suite.database.open, cwd, { now: suite.clock.now });
    const banner = await developmentBanner({ config, port: 4321, cwd, now: suite.clock.now() });

    expect(banner).toContain('GraphiQL:   http://127.0.0.1:4321/graphql');
    expect(banner).toContain('Console:    http://127.0.0.1:4321/console/');
    expect(banner).toContain(seeded.ownerDID);
    expect(banner).toContain('not a service principal');
    expect(banner).toContain('curl -s http://127.0.0.1:4321/graphql');
    expect(banner).not.toMatch(/^\{"level"/m);
    const token = /^ {3}TOKEN=(\S+)$/m.exec(banner)?.[1];
    expect(token).toBeDefined();
    expect(banner).toContain(`{"Authorization": "Bearer ${token}"}`);

    // What a new user does next: the printed curl query, with the printed token.
    const query = /--data '(.+)'$/m.exec(banner)?.[1];
    const response = await suite.app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: query!,
    });
    const body = (await response.json()) as any;
    expect(body.errors).toBeUndefined();
    expect(body.data.serverInfo).toEqual({ viewerDID: seeded.ownerDID, viewerIsService: false });
    expect(body.data.operationCounts.every((c: { count: number }) => c.count > 0)).toBe(true);
  });

  it('the banner is for development only, and says when the local key is a service principal', async () => {
    expect(shouldPrintDevelopmentBanner(loadConfig({ NODE_ENV: 'development' }))).toBe(true);
    expect(shouldPrintDevelopmentBanner(loadConfig({}))).toBe(true);
    expect(shouldPrintDevelopmentBanner(loadConfig({ NODE_ENV: 'production' }))).toBe(false);
    expect(shouldPrintDevelopmentBanner(loadConfig({ NODE_ENV: 'test' }))).toBe(false);

    const first = await developmentBanner({ config: loadConfig({}), port: 4000, cwd });
    const did = /Viewer: +(\S+)/.exec(first)?.[1];
    const asService = await developmentBanner({ config: loadConfig({ SERVICE_DIDS: did }), port: 4000, cwd });
    expect(asService).toContain('a service principal, sees every owner');
    expect(browsableBaseURL('0.0.0.0', 80)).toBe('http://127.0.0.1:80');
    expect(browsableBaseURL('::', 80)).toBe('http://[::1]:80');
    expect(browsableBaseURL('::1', 80)).toBe('http://[::1]:80');
  });
});

describe('demo command', () => {
  let cwd: string;
  beforeEach(async () => {
    cwd = await mkdtemp(join(tmpdir(), 'demo-cli-'));
  });
  afterEach(async () => {
    await rm(cwd, { recursive: true, force: true });
  });
  const io = (env: Record<string, string>, argv: string[] = []) => {
    const out: string[] = [];
    const err: string[] = [];
    return { out, err, io: { argv, env, cwd, stdout: (t: string) => void out.push(t), stderr: (t: string) => void err.push(t) } };
  };

  it('fills an SQLite file for the local key, and a second run adds nothing', async () => {
    const env = { DATABASE_URL: `sqlite:${join(cwd, 'store.sqlite')}` };
    const first = io(env);
    expect(await demoCommand.run(first.io)).toBe(0);
    expect(first.out.join('')).toMatch(/items written, 0 already there/);
    const second = io(env);
    expect(await demoCommand.run(second.io)).toBe(0);
    expect(second.out.join('')).toMatch(/: 0 items written, \d+ already there/);
  });

  it('refuses production, and unknown arguments', async () => {
    const prod = io({ NODE_ENV: 'production', DATABASE_URL: `sqlite:${join(cwd, 'p.sqlite')}` });
    expect(await demoCommand.run(prod.io)).toBe(1);
    expect(prod.err.join('')).toMatch(/refused with NODE_ENV=production/);
    const bad = io({}, ['--nope']);
    expect(await demoCommand.run(bad.io)).toBe(2);
  });

  it('demo DIDs are fixed did:keys', () => {
    expect(demoDID('worker')).toBe(DEMO_WORKER_DID);
    expect(DEMO_WORKER_DID).toMatch(/^did:key:z6Mk/);
    expect(DEMO_NEIGHBOUR_DID).not.toBe(DEMO_WORKER_DID);
  });
});
