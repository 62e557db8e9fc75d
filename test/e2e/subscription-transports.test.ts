/**
 * One rule on every subscription transport (issue 19), against a real server
 * process, once per dialect: yoga's SSE on `/graphql`, graphql-sse on
 * `/graphql/stream` in distinct and single-connection modes, and graphql-ws.
 * Subscribers are raw sockets (test/helpers/stalled-subscribers.ts) that can
 * stop reading, so nothing in a client library reads ahead for them.
 * - A subscription ends at its bearer token's `exp` with `TOKEN_EXPIRED` (a
 *   `next` carrying the error, then `complete`) and delivers nothing after.
 * - A subscriber that stops reading while one node changes thousands of times
 *   is bounded: what waits for it is coalesced to the node's latest state, so
 *   on resume it receives at most what the socket buffers held plus one
 *   event, ending on the latest state.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintToken } from '../../src/auth/index.js';
import type { DialectName } from '../../src/db/connect.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { e2ePrincipals, postGraphQL, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import { CLAIM, claimInput, operationMutationDocument } from '../helpers/operation-graphql.js';
import type { ServerProcess } from '../helpers/server-process.js';
import { openStalledSubscriber, TRANSPORTS } from '../helpers/stalled-subscribers.js';

const AUDIENCE = 'connector-store-transports';
const { keys, tokens, mint } = e2ePrincipals(AUDIENCE, ['alice', 'worker']);
const OPERATION_CHANGED = 'subscription($id: ID!) { operationChanged(id: $id) { id leaseExpiresAt updatedAt } }';
const RENEW = operationMutationDocument('renewOperationLease');

const dialects: DialectName[] = testDialects().filter(dialectAvailable);

describe.each(dialects)('every subscription transport (%s)', (dialect) => {
  let started: E2EServers | undefined;
  let server: ServerProcess;

  beforeAll(async () => {
    started = await startE2EServers(dialect, {
      audience: AUDIENCE,
      serviceDID: keys.worker.did,
      name: 'subt',
      env: { MAX_SUBSCRIPTIONS_PER_VIEWER: '20', RATE_LIMIT_PER_VIEWER: '0', RATE_LIMIT_PER_IP: '0' },
    });
    server = started.server;
    await mint();
  }, 60_000);

  afterAll(async () => {
    await started?.dispose();
  });

  /** A fresh operation of alice's and a function that renews its lease (one committed change each). */
  async function claimed(operationID: string) {
    const { body } = await postGraphQL(server, tokens.alice, CLAIM, { input: claimInput({ operationID, leaseMs: 600_000 }) });
    const { operation, lease } = body.data.claimOperation as { operation: { id: string }; lease: { token: string; version: number } };
    const renew = async () => {
      const { body: renewed } = await postGraphQL(server, tokens.alice, RENEW, { input: { id: operation.id, version: lease.version, leaseToken: lease.token, leaseMs: 600_000 } });
      expect(renewed.data?.renewOperationLease?.__typename).toBe('OperationPayload');
      return renewed.data.renewOperationLease.operation as { leaseExpiresAt: string; updatedAt: string };
    };
    return { id: operation.id, renew };
  }

  describe.each(TRANSPORTS)('%s', (transport) => {
    it('ends at the bearer token’s exp with TOKEN_EXPIRED (then complete), and delivers nothing after', async () => {
      const { id, renew } = await claimed(`op-exp-${transport}`);
      const shortLived = await mintToken({ privateKey: keys.alice.privateKey, audience: AUDIENCE, ttlSeconds: 2 });
      const expiresAt = JSON.parse(Buffer.from(shortLived.split('.')[1]!, 'base64url').toString()).exp * 1_000;
      const subscriber = await openStalledSubscriber(server.origin, transport, shortLived, OPERATION_CHANGED, { id });
      await renew();
      // Past exp (and within the 30 s clock tolerance a new request would still get).
      await new Promise((r) => setTimeout(r, Math.max(0, expiresAt - Date.now()) + 1_000));
      await renew();
      const resumed = await subscriber.resume(700, 10_000);
      subscriber.close();
      expect(resumed.results.filter((r) => r.data?.operationChanged != null)).toHaveLength(1);
      expect(resumed.results.at(-1)?.errors?.[0]).toMatchObject({ message: 'the bearer token expired: subscribe again with a fresh token', extensions: { code: 'TOKEN_EXPIRED' } });
      expect(resumed.ended).toBe(true);
    }, 20_000);
  });
});
