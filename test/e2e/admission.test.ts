/**
 * Admission over graphql-ws against a flood of fresh did:keys (issue 19 item
 * 5; src/server/admission.ts), on a real server process per dialect (the
 * ownership probe reads the database). Loopback has a whole /8, so each
 * flooding key can connect from an address of its own (`localAddress`).
 * Small caps: 2 subscriptions per viewer, 8 subscriptions and 8 WebSocket
 * connections in total, half of each for keys that own nothing, 3 per address
 * for them.
 * - Keys from many addresses fill their share of connections (the next is
 *   closed 1013, try again later) and of subscriptions (OVERLOADED); an owner
 *   of rows and a service DID still connect, subscribe and receive changes.
 * - Keys from one address stop at its cap (closed 4429
 *   TOO_MANY_SUBSCRIPTIONS_PER_IP); an owner at that address still gets in.
 * - Keys that made one claim each a moment ago are still fresh keys (issue
 *   41): known takes a row older than KNOWN_VIEWER_ROW_AGE_MS (the owner's
 *   row is aged in the database here), so they fill only their share and the
 *   owner still subscribes.
 * The same rule for graphql-sse reservations and /graphql SSE, in process:
 * test/graphql/admission.test.ts.
 */
import { createClient, type Client } from 'graphql-ws';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { openDatabase, parseDatabaseURL, type DialectName } from '../../src/db/connect.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { e2ePrincipals, postGraphQL, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import { CLAIM, claimInput } from '../helpers/operation-graphql.js';
import type { ServerProcess } from '../helpers/server-process.js';

const AUDIENCE = 'connector-store-admission';
const { keys, tokens, mint } = e2ePrincipals(AUDIENCE, ['alice', 'worker']);
const OPERATIONS_CHANGED = 'subscription { operationsChanged { operationID } }';
const FLOOD_KEYS = 6;

interface Result {
  data?: { operationsChanged?: { operationID: string } } | null;
  errors?: { extensions?: { code?: string; retryable?: boolean } }[];
}

/** One graphql-ws subscription on a client of its own. */
interface WSSubscription {
  client: Client;
  results: Result[];
  /** The close event, if the server closed the connection. */
  closed: { code: number; reason: string } | undefined;
}

const dialects: DialectName[] = testDialects().filter(dialectAvailable);

describe.each(dialects)('admission over graphql-ws (%s)', (dialect) => {
  let started: E2EServers | undefined;
  let server: ServerProcess;
  const clients: Client[] = [];

  beforeAll(async () => {
    started = await startE2EServers(dialect, {
      audience: AUDIENCE,
      serviceDID: keys.worker.did,
      name: 'admit',
      env: {
        DB_POOL_MAX: '5',
        MAX_SUBSCRIPTIONS_PER_VIEWER: '2',
        MAX_SUBSCRIPTIONS: '8',
        MAX_WEBSOCKET_CONNECTIONS: '8',
        UNKNOWN_VIEWER_SHARE_PERCENT: '50',
        MAX_SUBSCRIPTIONS_PER_IP: '3',
      },
    });
    server = started.server;
    await mint();
    // alice owns a row: a known viewer.
    const { body } = await postGraphQL<{ claimOperation: { outcome: string } }>(server, tokens.alice, CLAIM, { input: claimInput({ operationID: 'op-owned' }) });
    expect(body.data!.claimOperation.outcome).toBe('CLAIMED');
    // Known takes a row older than KNOWN_VIEWER_ROW_AGE_MS (an hour by default): alice's is made two hours old.
    const database = openDatabase(parseDatabaseURL(started.databaseURL), { poolMax: 1 });
    try {
      await database.db
        .updateTable('kubun_connector_operation')
        .set({ created_at: Date.now() - 2 * 3_600_000 })
        .where('owner_did', '=', keys.alice.did)
        .execute();
    } finally {
      await database.close();
    }
  }, 60_000);

  afterEach(async () => {
    await Promise.all(clients.splice(0).map((c) => c.dispose()));
    // Let the server see the sockets go before the next test counts places.
    await new Promise((r) => setTimeout(r, 300));
  });

  afterAll(async () => {
    await started?.dispose();
  });

  const freshToken = () => mintToken({ privateKey: generateLocalKey().privateKey, audience: AUDIENCE, ttlSeconds: 600 });

  /** Connects from `localAddress` with `token` and subscribes `count` times on that one connection. */
  async function connect(token: string, localAddress: string, count: number): Promise<WSSubscription> {
    const sub: WSSubscription = { client: undefined as never, results: [], closed: undefined };
    class FromAddress extends WebSocket {
      constructor(url: string, protocols?: string | string[]) {
        super(url, protocols, { localAddress });
      }
    }
    sub.client = createClient({
      url: `${server.origin.replace(/^http/, 'ws')}/graphql`,
      webSocketImpl: FromAddress,
      retryAttempts: 0,
      // Held open even when every subscription on it was refused (lazy clients close then, 1000).
      lazy: false,
      onNonLazyError: () => {},
      connectionParams: { authorization: `Bearer ${token}` },
      on: {
        closed: (event) => {
          const { code, reason } = event as { code: number; reason: string };
          sub.closed ??= { code, reason };
        },
      },
    });
    clients.push(sub.client);
    for (let i = 0; i < count; i++) {
      sub.client.subscribe<Result['data']>({ query: OPERATIONS_CHANGED }, { next: (result) => void sub.results.push(result as Result), error: () => {}, complete: () => {} });
    }
    await new Promise((r) => setTimeout(r, 250));
    return sub;
  }

  const refusedCodes = (sub: WSSubscription) => sub.results.map((r) => r.errors?.[0]?.extensions?.code).filter((c) => c !== undefined);

  async function ownerAndServiceReceive(address: string, operationID: string) {
    const owner = await connect(tokens.alice, address, 1);
    const service = await connect(tokens.worker, address, 1);
    expect([owner.closed, service.closed]).toEqual([undefined, undefined]);
    expect([refusedCodes(owner), refusedCodes(service)]).toEqual([[], []]);
    const { body } = await postGraphQL<{ claimOperation: { outcome: string } }>(server, tokens.alice, CLAIM, { input: claimInput({ operationID }) });
    expect(body.data!.claimOperation.outcome).toBe('CLAIMED');
    await expect.poll(() => owner.results.length, { timeout: 3_000 }).toBe(1);
    await expect.poll(() => service.results.length, { timeout: 3_000 }).toBe(1);
    expect(owner.results[0]?.data?.operationsChanged?.operationID).toBe(operationID);
  }

  it('keys from many addresses fill only their share of connections (then 1013) and of subscriptions (then OVERLOADED); an owner and a service DID still subscribe', async () => {
    const flood: WSSubscription[] = [];
    for (let i = 0; i < FLOOD_KEYS; i++) flood.push(await connect(await freshToken(), `127.0.0.${10 + i}`, 2));
    // Half of 8 connections for keys that own nothing; the others were told to try again later.
    const closed = flood.filter((s) => s.closed !== undefined);
    expect(closed).toHaveLength(FLOOD_KEYS - 4);
    expect(closed.map((s) => s.closed!.code)).toEqual(closed.map(() => 1013));
    expect(closed[0]!.closed!.reason).toMatch(/^OVERLOADED/);
    // Half of 8 subscriptions among the connected ones; the rest OVERLOADED.
    const connected = flood.filter((s) => s.closed === undefined);
    expect(connected.flatMap(refusedCodes)).toEqual(['OVERLOADED', 'OVERLOADED', 'OVERLOADED', 'OVERLOADED']);
    await ownerAndServiceReceive('127.0.0.10', 'op-after-many');
  });

  it('keys from one address stop at its cap (closed 4429 TOO_MANY_SUBSCRIPTIONS_PER_IP); an owner there still subscribes', async () => {
    const flood: WSSubscription[] = [];
    for (let i = 0; i < 4; i++) flood.push(await connect(await freshToken(), '127.0.0.40', 1));
    expect(flood.map((s) => s.closed?.code)).toEqual([undefined, undefined, undefined, 4429]);
    expect(flood[3]!.closed!.reason).toMatch(/^TOO_MANY_SUBSCRIPTIONS_PER_IP/);
    await ownerAndServiceReceive('127.0.0.40', 'op-after-one');
  });

  it('keys that each made one claim and waited out the standing cache are not known: they fill only their share, and the owner still subscribes', async () => {
    const flood: WSSubscription[] = [];
    const floodTokens: string[] = [];
    for (let i = 0; i < FLOOD_KEYS; i++) {
      const token = await freshToken();
      const { body } = await postGraphQL<{ claimOperation: { outcome: string } }>(server, token, CLAIM, { input: claimInput({ operationID: `op-fresh-${i}` }) });
      expect(body.data!.claimOperation.outcome).toBe('CLAIMED');
      floodTokens.push(token);
    }
    // Past the 2 s a fresh key's "unknown" is cached: a one-row owner used to be known by now.
    await new Promise((r) => setTimeout(r, 2_500));
    for (const [i, token] of floodTokens.entries()) flood.push(await connect(token, `127.0.0.${50 + i}`, 2));
    // Still fresh keys: half of 8 connections, and half of 8 subscriptions among them; the rest OVERLOADED.
    expect(flood.filter((s) => s.closed !== undefined).map((s) => s.closed!.code)).toEqual([1013, 1013]);
    expect(flood.filter((s) => s.closed === undefined).flatMap(refusedCodes)).toEqual(['OVERLOADED', 'OVERLOADED', 'OVERLOADED', 'OVERLOADED']);
    await ownerAndServiceReceive('127.0.0.50', 'op-after-one-claim');
  });
});
