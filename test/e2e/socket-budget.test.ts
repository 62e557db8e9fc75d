/**
 * No one takes every socket (issue 41 item 2), on a real server process.
 * Loopback has a whole /8, so each party connects from an address of its
 * own (`localAddress`). Small caps: 8 WebSocket connections, 3 per viewer,
 * 4 waiting sockets per address and 8 in all; headers within 1 s; 128 open
 * files for the process (a flood of slow-header sockets used to take them all).
 * - Un-initialised WebSockets (no `connection_init`), reopened as they are
 *   closed, from one address or a few, no longer lock another principal out
 *   at the upgrade: they count against their address's budget of waiting
 *   sockets, not MAX_WEBSOCKET_CONNECTIONS.
 * - Slow-header HTTP sockets from one address no longer take HTTP from
 *   others (before: the process ran out of files and closed every new
 *   connection at accept).
 * - One known key (here the service DID) no longer opens every graphql-ws
 *   connection: it stops at MAX_WEBSOCKET_CONNECTIONS_PER_VIEWER.
 * The database plays no part, so this runs on the first dialect only.
 */
import { request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { createClient, type Client } from 'graphql-ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { e2ePrincipals, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import type { ServerProcess } from '../helpers/server-process.js';

const AUDIENCE = 'connector-store-socket-budget';
const { keys, tokens, mint } = e2ePrincipals(AUDIENCE, ['worker']);
const dialect = testDialects().filter(dialectAvailable)[0]!;

/** How a graphql-ws client's connection ended up: acknowledged, or closed with a code. */
type Outcome = 'connected' | { closed: number; reason: string };

describe(`sockets that never identify themselves (${dialect})`, () => {
  let started: E2EServers | undefined;
  let server: ServerProcess;
  const stops: (() => void)[] = [];
  const clients: Client[] = [];

  beforeAll(async () => {
    started = await startE2EServers(dialect, {
      audience: AUDIENCE,
      serviceDID: keys.worker.did,
      name: 'sockets',
      maxOpenFiles: 128,
      env: {
        CONSOLE: 'false',
        MAX_WEBSOCKET_CONNECTIONS: '8',
        MAX_WEBSOCKET_CONNECTIONS_PER_VIEWER: '3',
        MAX_PENDING_SOCKETS_PER_IP: '4',
        MAX_PENDING_SOCKETS: '8',
        WS_CONNECTION_INIT_TIMEOUT_MS: '2000',
        HTTP_HEADERS_TIMEOUT_MS: '1000',
      },
    });
    server = started.server;
    await mint();
  }, 60_000);

  afterEach(async () => {
    for (const stop of stops.splice(0)) stop();
    await Promise.all(clients.splice(0).map((c) => c.dispose()));
    // Let the server see the sockets go before the next test counts places.
    await new Promise((r) => setTimeout(r, 500));
  });

  afterAll(async () => {
    await started?.dispose();
  });

  const wsURL = () => `${server.origin.replace(/^http/, 'ws')}/graphql`;
  const freshToken = () => mintToken({ privateKey: generateLocalKey().privateKey, audience: AUDIENCE, ttlSeconds: 600 });

  /** A graphql-ws client of `token` from `localAddress` (connects at once); resolves when acknowledged or closed. */
  function connectGraphQLWS(token: string, localAddress: string): Promise<Outcome> {
    class FromAddress extends WebSocket {
      constructor(url: string, protocols?: string | string[]) {
        super(url, protocols, { localAddress });
      }
    }
    return new Promise<Outcome>((resolve) => {
      const client = createClient({
        url: wsURL(),
        webSocketImpl: FromAddress,
        retryAttempts: 0,
        lazy: false,
        onNonLazyError: () => {},
        connectionParams: { authorization: `Bearer ${token}` },
        on: {
          connected: () => resolve('connected'),
          closed: (event) => {
            const { code, reason } = event as { code: number; reason: string };
            resolve({ closed: code, reason });
          },
        },
      });
      clients.push(client);
    });
  }

  /** Keeps `count` WebSockets from `localAddress` open without ever sending `connection_init`, reopening each as it closes. */
  function holdUninitialisedWebSockets(localAddress: string, count: number): { opened: () => number } {
    let stopped = false;
    let opened = 0;
    const sockets = new Set<WebSocket>();
    const open = () => {
      if (stopped) return;
      const socket = new WebSocket(wsURL(), 'graphql-transport-ws', { localAddress });
      opened++;
      sockets.add(socket);
      socket.on('error', () => {});
      socket.on('close', () => {
        sockets.delete(socket);
        setTimeout(open, 100);
      });
    };
    for (let i = 0; i < count; i++) open();
    stops.push(() => {
      stopped = true;
      for (const socket of sockets) socket.terminate();
    });
    return { opened: () => opened };
  }

  /** Keeps `count` sockets from `localAddress` sending request headers one slow line at a time, reopening each as it closes. */
  function holdSlowHeaderSockets(localAddress: string, count: number): void {
    let stopped = false;
    const sockets = new Set<Socket>();
    const open = () => {
      if (stopped) return;
      const socket = connect({ host: '127.0.0.1', port: Number(new URL(server.origin).port), localAddress });
      sockets.add(socket);
      socket.on('error', () => {});
      socket.once('connect', () => socket.write('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n'));
      const trickle = setInterval(() => socket.writable && socket.write('X-Slow: 1\r\n'), 300);
      socket.on('close', () => {
        clearInterval(trickle);
        sockets.delete(socket);
        setTimeout(open, 250);
      });
    };
    for (let i = 0; i < count; i++) open();
    stops.push(() => {
      stopped = true;
      for (const socket of sockets) socket.destroy();
    });
  }

  /** GET /healthz from `localAddress` on a connection of its own: the status, or the error's code. */
  function healthz(localAddress: string): Promise<number | string> {
    return new Promise((resolve) => {
      const url = new URL('/healthz', server.origin);
      const req = request({ host: url.hostname, port: url.port, path: url.pathname, localAddress, agent: false, timeout: 4_000 }, (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
      });
      req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'TIMEOUT' })));
      req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
      req.end();
    });
  }

  it('un-initialised WebSockets from one address, reopened as they close, leave the replica to others: a service and a fresh key still connect', async () => {
    const flood = holdUninitialisedWebSockets('127.0.0.50', 12);
    await new Promise((r) => setTimeout(r, 500));
    expect(await connectGraphQLWS(tokens.worker, '127.0.0.51')).toBe('connected');
    expect(await connectGraphQLWS(await freshToken(), '127.0.0.52')).toBe('connected');
    // Past its budget of 4 waiting sockets, the address's oldest were closed to make room (and reopened).
    await new Promise((r) => setTimeout(r, 500));
    expect(flood.opened()).toBeGreaterThan(12);
  });

  it('un-initialised WebSockets from several addresses cannot take every socket either: the oldest waiting one makes room', async () => {
    const floods = [0, 1, 2, 3].map((i) => holdUninitialisedWebSockets(`127.0.0.${60 + i}`, 4));
    await new Promise((r) => setTimeout(r, 500));
    expect(await connectGraphQLWS(tokens.worker, '127.0.0.70')).toBe('connected');
    expect(await connectGraphQLWS(await freshToken(), '127.0.0.71')).toBe('connected');
    // 16 silent sockets, 8 waiting at most: the oldest anywhere were cut off (and reopened).
    expect(floods.reduce((sum, flood) => sum + flood.opened(), 0)).toBeGreaterThan(16);
  });

  it('slow-header sockets from one address leave HTTP to others', async () => {
    holdSlowHeaderSockets('127.0.0.80', 150);
    await new Promise((r) => setTimeout(r, 1_000));
    const statuses: (number | string)[] = [];
    for (let i = 0; i < 5; i++) {
      statuses.push(await healthz('127.0.0.81'));
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200]);
  });

  it('one known key cannot open every WebSocket: it stops at its per-viewer cap (4429) and another principal still connects', async () => {
    const outcomes: Outcome[] = [];
    for (let i = 0; i < 8; i++) outcomes.push(await connectGraphQLWS(tokens.worker, `127.0.0.${90 + i}`));
    expect(outcomes.slice(0, 3)).toEqual(['connected', 'connected', 'connected']);
    for (const outcome of outcomes.slice(3)) {
      expect(outcome).toMatchObject({ closed: 4429, reason: expect.stringMatching(/^TOO_MANY_SUBSCRIPTIONS: /) });
    }
    expect(await connectGraphQLWS(await freshToken(), '127.0.0.99')).toBe('connected');
  });
});
