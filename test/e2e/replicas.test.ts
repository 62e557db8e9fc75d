/**
 * Two server processes on one Postgres (SPEC §6, issue 4): a change
 * committed on replica A reaches a subscriber on replica B through
 * LISTEN/NOTIFY; a lost write emits nothing; a stranger receives nothing;
 * a killed LISTEN connection is re-established and delivery resumes.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { adminPostgresURL } from '../helpers/postgres.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { e2eGraphQLClient, e2ePrincipals, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import { CLAIM, claimInput, FINALIZE, operationMutationDocument } from '../helpers/operation-graphql.js';
import type { ServerProcess } from '../helpers/server-process.js';

const AUDIENCE = 'connector-store-replicas';
const { keys, tokens, mint } = e2ePrincipals(AUDIENCE, ['alice', 'mallory', 'worker']);
const { gql, subscribe, closeSubscriptions } = e2eGraphQLClient(tokens, 'alice');

const START = operationMutationDocument('startOperationAttempt');
const OPERATIONS_CHANGED = `subscription { operationsChanged { id operationID state attempts } }`;

const runs = testDialects().includes('postgres') && dialectAvailable('postgres');

describe.skipIf(!runs)('postgres: two replicas, one database', () => {
  let started: E2EServers | undefined;
  let a: ServerProcess | undefined;
  let b: ServerProcess | undefined;

  beforeAll(async () => {
    started = await startE2EServers('postgres', {
      audience: AUDIENCE,
      serviceDID: keys.worker.did,
      name: 'replicas',
      env: { DB_POOL_MAX: '5' },
      replicas: 2,
    });
    [a, b] = started.servers;
    await mint();
  }, 120_000);

  afterAll(async () => {
    await closeSubscriptions();
    await started?.dispose();
  });

  it('a finalize on replica A reaches a subscriber on replica B within 1 s; a stranger on B receives nothing', async () => {
    const onB = await subscribe(b!, OPERATIONS_CHANGED, {}, 'alice');
    const strangerOnB = await subscribe(b!, OPERATIONS_CHANGED, {}, 'mallory');
    const claimed = (await gql(a!, CLAIM, { input: claimInput({ operationID: 'op-a1' }) })).data.claimOperation;
    expect(claimed.outcome).toBe('CLAIMED');
    await onB.waitFor(1, 1_000);

    const started = Date.now();
    const finalized = await gql(a!, FINALIZE, {
      input: { id: claimed.operation.id, version: claimed.lease.version, leaseToken: claimed.lease.token, documentID: 'doc-a1', sourceID: 'src-a1' },
    });
    expect(finalized.data.finalizeOperation.finalized).toBe(true);
    await onB.waitFor(2, 1_000);
    expect(Date.now() - started).toBeLessThan(1_000);
    expect(onB.events.map((e) => e.data.operationsChanged.state)).toEqual(['ATTEMPTED', 'COMMITTED']);
    await new Promise((r) => setTimeout(r, 200));
    expect(strangerOnB.events).toEqual([]);
  });

  it('a lost write on A emits nothing on B', async () => {
    const onB = await subscribe(b!, OPERATIONS_CHANGED, {}, 'alice');
    const claimed = (await gql(a!, CLAIM, { input: claimInput({ operationID: 'op-a2' }) })).data.claimOperation;
    await onB.waitFor(1, 1_000);
    const lost = await gql(a!, FINALIZE, {
      input: { id: claimed.operation.id, version: claimed.lease.version, leaseToken: 'not-the-token', documentID: 'doc-a2', sourceID: 'src-a2' },
    });
    expect(lost.data.finalizeOperation.finalized).toBe(false);
    await new Promise((r) => setTimeout(r, 300));
    expect(onB.events).toHaveLength(1);
  });

  it('a killed LISTEN connection is logged, re-established, and delivery resumes', async () => {
    const onB = await subscribe(b!, OPERATIONS_CHANGED, {}, 'alice');
    const admin = new pg.Client({ connectionString: adminPostgresURL() });
    await admin.connect();
    try {
      const killed = await admin.query(`select pg_terminate_backend(pid) from pg_stat_activity where application_name = $1`, [
        `connector-store-listener:${b!.child.pid}`,
      ]);
      expect(killed.rowCount).toBe(1);
    } finally {
      await admin.end();
    }
    await b!.waitForLog((line) => line.msg === 'change feed connection lost; reconnecting', 5_000);
    await b!.waitForLog((line) => line.msg === 'change feed connection re-established', 10_000);
    const ready = await fetch(`${b!.origin}/readyz`);
    expect(ready.status).toBe(200);

    const claimed = (await gql(a!, CLAIM, { input: claimInput({ operationID: 'op-a3' }) })).data.claimOperation;
    expect(claimed.outcome).toBe('CLAIMED');
    await onB.waitFor(1, 1_000);
    expect(onB.events[0]?.data.operationsChanged.operationID).toBe('op-a3');
    // And B's own writes still reach B's subscribers through the new connection.
    await gql(b!, START, { input: { id: claimed.operation.id, version: claimed.lease.version, leaseToken: claimed.lease.token } });
    await onB.waitFor(2, 1_000);
    expect(onB.events[1]?.data.operationsChanged.attempts).toBe(1);
  });

  it('a subscriber that disconnects frees its slot on the server', async () => {
    const sub = await subscribe(b!, OPERATIONS_CHANGED, {}, 'worker');
    await sub.close();
    // The server notices the socket closing; a new subscription still works and gets events.
    const again = await subscribe(b!, OPERATIONS_CHANGED, {}, 'worker');
    await gql(a!, CLAIM, { input: claimInput({ operationID: 'op-a4' }) });
    await again.waitFor(1, 1_000);
    expect(again.events[0]?.data.operationsChanged.operationID).toBe('op-a4');
  });
});
