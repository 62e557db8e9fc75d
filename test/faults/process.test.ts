/**
 * Process faults end to end: a server SIGKILLed during a stream of writes on
 * SQLite leaves a database that passes `PRAGMA integrity_check` and holds
 * every write it acknowledged; SIGTERM under load with keep-alive clients
 * lets the in-flight requests finish and exits promptly; with two replicas on
 * Postgres, a killed replica's clients retry on the other and lose nothing.
 */
import { Agent, request } from 'node:http';
import SQLite from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { e2ePrincipals, postGraphQL, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import type { ServerProcess } from '../helpers/server-process.js';

const AUDIENCE = 'connector-store-process-faults';
const { keys, tokens, mint } = e2ePrincipals(AUDIENCE, ['alice', 'worker']);
const SET = 'mutation($i: SetSyncStateInput!) { setSyncState(input: $i) { __typename } }';
const setInput = (n: number) => ({ i: { connectorName: `connector-${n}`, lastSyncedAt: 'now', entityCount: n, status: 'idle' } });

beforeAll(async () => {
  await mint();
});

/** Sends writes one after another until the server stops answering; returns the numbers it acknowledged. */
async function writeUntilGone(server: ServerProcess, from = 0): Promise<number[]> {
  const acknowledged: number[] = [];
  for (let n = from; ; n++) {
    try {
      const { status, body } = await postGraphQL(server, tokens.alice, SET, setInput(n));
      if (status === 200 && body.data?.setSyncState?.__typename === 'SyncStatePayload') acknowledged.push(n);
    } catch {
      return acknowledged;
    }
  }
}

describe('sqlite: SIGKILL during writes', () => {
  let started: E2EServers | undefined;
  afterAll(async () => {
    await started?.dispose();
  });

  it('leaves a database that passes integrity_check and holds every acknowledged write', async () => {
    started = await startE2EServers('sqlite', { audience: AUDIENCE, serviceDID: keys.worker.did, name: 'sigkill', env: { RATE_LIMIT_PER_VIEWER: '0' } });
    const { server } = started;
    const writers = [writeUntilGone(server, 0), writeUntilGone(server, 100_000), writeUntilGone(server, 200_000)];
    await new Promise((r) => setTimeout(r, 700));
    server.child.kill('SIGKILL');
    const acknowledged = (await Promise.all(writers)).flat();
    expect(acknowledged.length).toBeGreaterThan(10);
    const db = new SQLite(started.databaseURL.slice('sqlite:'.length), { readonly: true });
    try {
      expect(db.pragma('integrity_check', { simple: true })).toBe('ok');
      const stored = new Set(db.prepare('select connector_name from kubun_connector_sync_state').pluck().all() as string[]);
      for (const n of acknowledged) expect(stored.has(`connector-${n}`), `acknowledged write ${n}`).toBe(true);
    } finally {
      db.close();
    }
  }, 60_000);
});

describe('sqlite: SIGTERM under load with keep-alive clients', () => {
  it('finishes the requests in flight, answers them, and exits 0 within the drain and grace periods', async () => {
    const started = await startE2EServers('sqlite', {
      audience: AUDIENCE,
      serviceDID: keys.worker.did,
      name: 'sigterm',
      env: { RATE_LIMIT_PER_VIEWER: '0', SHUTDOWN_DRAIN_MS: '300', SHUTDOWN_GRACE_MS: '5000' },
    });
    try {
      const { server } = started;
      const agent = new Agent({ keepAlive: true, maxSockets: 8 });
      const post = (n: number) =>
        new Promise<number>((resolve) => {
          const url = new URL(`${server.origin}/graphql`);
          const body = JSON.stringify({ query: SET, variables: setInput(n) });
          const headers = { 'content-type': 'application/json', authorization: `Bearer ${tokens.alice}`, 'content-length': Buffer.byteLength(body) };
          const req = request({ host: url.hostname, port: url.port, path: url.pathname, method: 'POST', agent, headers }, (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode ?? 0));
          });
          req.on('error', () => resolve(0));
          req.end(body);
        });
      // Warm the keep-alive pool, then SIGTERM while a burst is in flight.
      await Promise.all(Array.from({ length: 8 }, (_, n) => post(n)));
      const burst = Array.from({ length: 16 }, (_, n) => post(1_000 + n));
      const signalled = Date.now();
      server.child.kill('SIGTERM');
      const statuses = await Promise.all(burst);
      const { code } = (await server.exited) as { code: number | null };
      const tookMs = Date.now() - signalled;
      agent.destroy();
      expect(code).toBe(0);
      // Every request sent before the listener closed was answered in full.
      expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(8);
      expect(statuses.every((s) => s === 200 || s === 0 || s === 503)).toBe(true);
      // Idle keep-alive sockets did not hold the exit for their idle timeout.
      expect(tookMs).toBeLessThan(3_000);
    } finally {
      await started.dispose();
    }
  }, 60_000);
});

const postgres = testDialects().includes('postgres') && dialectAvailable('postgres');

describe.skipIf(!postgres)('postgres: a replica SIGKILLed under load', () => {
  it('its clients retry on the other replica: every write lands exactly once', async () => {
    const started = await startE2EServers('postgres', { audience: AUDIENCE, serviceDID: keys.worker.did, name: 'replica_kill', replicas: 2, env: { RATE_LIMIT_PER_VIEWER: '0' } });
    try {
      const [a, b] = started.servers as [ServerProcess, ServerProcess];
      let aDown = false;
      const write = async (n: number) => {
        for (let attempt = 0; attempt < 20; attempt++) {
          const target = aDown || attempt % 2 === 1 ? b : a;
          try {
            const { status, body } = await postGraphQL(target, tokens.alice, SET, setInput(n));
            if (status === 200 && body.data?.setSyncState?.__typename === 'SyncStatePayload') return true;
          } catch {
            // Connection refused or reset: the replica is gone; try the other.
          }
        }
        return false;
      };
      const writes = Array.from({ length: 60 }, (_, n) => write(n));
      await new Promise((r) => setTimeout(r, 100));
      a.child.kill('SIGKILL');
      aDown = true;
      expect((await Promise.all(writes)).every(Boolean)).toBe(true);
      const { body } = await postGraphQL<{ syncStates: { totalCount: number } }>(b, tokens.alice, '{ syncStates(first: 1) { totalCount } }');
      expect(body.data?.syncStates.totalCount).toBe(60);
      // The survivor keeps serving.
      expect((await fetch(`${b.origin}/readyz`)).status).toBe(200);
    } finally {
      await started.dispose();
    }
  }, 60_000);
});
