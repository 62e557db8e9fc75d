/**
 * The Postgres change feed's connection (issue 12 item 5): reconnect delays
 * grow with jitter, so replicas that lost the database together do not come
 * back in lockstep; a LISTEN connection that stops answering without closing
 * (here: a loopback TCP proxy that freezes) is detected by the heartbeat,
 * reported as `reconnecting`, and replaced, and notifications flow again.
 */
import { createServer, connect, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createPostgresChangeFeed, reconnectDelay } from '../../src/server/change-feed.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';
import { captureLogs } from './log-capture.js';

describe('change feed reconnect delays', () => {
  it('double from the base up to the cap, each between half and all of its ceiling', () => {
    const low = (n: number) => reconnectDelay(n, 100, 5_000, () => 0);
    const high = (n: number) => reconnectDelay(n, 100, 5_000, () => 0.999999);
    expect([0, 1, 2, 3, 4, 5, 6, 7].map(low)).toEqual([50, 100, 200, 400, 800, 1_600, 2_500, 2_500]);
    expect([0, 1, 2, 6, 60].map(high)).toEqual([100, 200, 400, 5_000, 5_000]);
    // Two replicas with different random draws wait different times.
    expect(reconnectDelay(4, 100, 5_000, () => 0.1)).not.toBe(reconnectDelay(4, 100, 5_000, () => 0.9));
  });
});

/** A TCP proxy to Postgres that can stop forwarding without closing anything (a silent network drop). */
async function freezableProxy(target: URL): Promise<{ server: Server; port: number; freeze(): void; thaw(): void }> {
  let frozen = false;
  const pairs: [Socket, Socket][] = [];
  const server = createServer((client) => {
    if (frozen) return; // accepted, never answered: like a black hole
    const upstream = connect(Number(target.port || 5432), target.hostname);
    client.pipe(upstream);
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', end);
    upstream.on('error', end);
    pairs.push([client, upstream]);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    server,
    port: (server.address() as AddressInfo).port,
    freeze() {
      frozen = true;
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
    thaw() {
      frozen = false;
    },
  };
}

const run = testDialects().includes('postgres') && dialectAvailable('postgres');

describe.skipIf(!run)('postgres: change feed heartbeat', () => {
  let scratch: ScratchPostgresDatabase;
  beforeAll(async () => {
    scratch = await createScratchPostgresDatabase('cs_feed');
  });
  afterAll(async () => {
    await scratch?.drop();
  });

  it('a write of more than 100 nodes goes out as several notifications, each naming the one write (issue 41 item 3)', async () => {
    const publisher = new pg.Client({ connectionString: scratch.url });
    await publisher.connect();
    const feed = await createPostgresChangeFeed({
      connectionString: scratch.url,
      publish: async (channel, payload) => void (await publisher.query('select pg_notify($1, $2)', [channel, payload])),
      logger: captureLogs('info').logger,
      heartbeatMs: 0,
    });
    try {
      const seen: { key: string; write: string; size: number }[] = [];
      feed.listen((event, write) => seen.push({ key: event.nodeKey, write: write.id, size: write.size }));
      await feed.publish(Array.from({ length: 250 }, (_, i) => ({ kind: 'operation' as const, nodeKey: `k${i}` })));
      await feed.publish([{ kind: 'operation', nodeKey: 'next' }]);
      await expect.poll(() => seen.length).toBe(251);
      expect(seen.map((s) => s.key)).toEqual([...Array.from({ length: 250 }, (_, i) => `k${i}`), 'next']);
      expect(new Set(seen.slice(0, 250).map((s) => `${s.write}/${s.size}`))).toEqual(new Set([`${seen[0]!.write}/250`]));
      expect(seen[250]).toMatchObject({ size: 1 });
      expect(seen[250]!.write).not.toBe(seen[0]!.write);
    } finally {
      await feed.close();
      await publisher.end();
    }
  });

  it('detects a connection that stops answering, reports reconnecting, and delivers again once replaced', async () => {
    const proxy = await freezableProxy(new URL(scratch.url));
    const viaProxy = new URL(scratch.url);
    viaProxy.hostname = '127.0.0.1';
    viaProxy.port = String(proxy.port);
    const logs = captureLogs('info');
    const publisher = new pg.Client({ connectionString: scratch.url });
    await publisher.connect();
    const feed = await createPostgresChangeFeed({
      connectionString: viaProxy.toString(),
      publish: async (channel, payload) => void (await publisher.query('select pg_notify($1, $2)', [channel, payload])),
      logger: logs.logger,
      heartbeatMs: 100,
      heartbeatTimeoutMs: 300,
      connectTimeoutMs: 300,
      reconnectDelayMs: 50,
      maxReconnectDelayMs: 200,
    });
    try {
      const seen: string[] = [];
      feed.listen((event) => seen.push(event.nodeKey));
      expect(feed.status()).toBe('connected');
      await feed.publish([{ kind: 'operation', nodeKey: 'before' }]);
      await expect.poll(() => seen).toEqual(['before']);

      proxy.freeze();
      // Nothing closed: only the heartbeat can tell.
      await expect.poll(() => feed.status(), { timeout: 5_000 }).toBe('reconnecting');
      expect(logs.text).toContain('no answer to the heartbeat within 300 ms');
      await feed.publish([{ kind: 'operation', nodeKey: 'lost' }]);
      // Reconnect attempts meanwhile reach a peer that accepts and never answers: each must time out, not hang.
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      expect(feed.status()).toBe('reconnecting');
      expect(logs.text).toMatch(/timeout|not answered/i);

      proxy.thaw();
      await expect.poll(() => feed.status(), { timeout: 10_000 }).toBe('connected');
      expect(logs.text).toContain('change feed connection re-established');
      await feed.publish([{ kind: 'operation', nodeKey: 'after' }]);
      await expect.poll(() => seen).toContain('after');
      // Published while the LISTEN was gone: not replayed (clients re-query on reconnect).
      expect(seen).not.toContain('lost');
    } finally {
      await feed.close();
      await publisher.end();
      proxy.server.close();
    }
  }, 30_000);
});
