/**
 * A subscription holds no memory per delivered event (issue 19 item 4). With
 * yoga's `useExecutionCancellation`, every event's execution raced its fields
 * against one promise living as long as the stream, adding a reaction each
 * time: about 700 bytes per event for good, so a dashboard watching a busy
 * operation grew without bound whether or not it read (graphql-tools issue
 * 7563). Measured on the heap after full collections, for yoga's SSE on
 * `/graphql` and graphql-sse on `/graphql/stream`, over the real app.
 */
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect, it } from 'vitest';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { createServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { describeEachDialect } from '../helpers/databases.js';
import { CLAIM, claimInput } from '../helpers/operation-graphql.js';

setFlagsFromString('--expose-gc');
const collect = runInNewContext('gc') as () => void;
const AUDIENCE = 'connector-store-subscription-memory';
const WARM_EVENTS = 500;
const MEASURED_EVENTS = 4_000;

describeEachDialect('subscription memory', (suite) => {
  for (const path of ['/graphql', '/graphql/stream']) {
    it(`${path}: ${MEASURED_EVENTS} events to one subscriber leave the heap where it was`, { timeout: 120_000 }, async () => {
      const user = generateLocalKey();
      const app = createServerApp({
        config: loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, RETENTION_INTERVAL_MS: '0', RATE_LIMIT_PER_VIEWER: '0', RATE_LIMIT_PER_IP: '0' }),
        database: suite.database.open,
        logger: createLogger('silent'),
        storeDeps: { now: suite.clock.now },
      });
      const token = await mintToken({ privateKey: user.privateKey, audience: AUDIENCE, now: suite.clock.now() });
      const headers = { 'content-type': 'application/json', authorization: `Bearer ${token}` };
      const claimed = (await (await app.yoga.fetch('http://localhost/graphql', { method: 'POST', headers, body: JSON.stringify({ query: CLAIM, variables: { input: claimInput({ operationID: 'op-memory' }) } }) })).json()) as {
        data: { claimOperation: { operation: { id: string } } };
      };
      const { node_key: nodeKey } = await suite.database.open.db.selectFrom('kubun_connector_operation').select('node_key').executeTakeFirstOrThrow();
      const abort = new AbortController();
      const response = await app.yoga.fetch(`http://localhost${path}`, {
        method: 'POST',
        headers: { ...headers, accept: 'text/event-stream' },
        body: JSON.stringify({ query: 'subscription($id: ID!) { operationChanged(id: $id) { id state version leaseExpiresAt } }', variables: { id: claimed.data.claimOperation.operation.id } }),
        signal: abort.signal,
      });
      const reader = response.body!.getReader();
      const decoder = new TextDecoder();
      let received = 0;
      const reading = (async () => {
        for (;;) {
          const { done, value } = await reader.read().catch(() => ({ done: true, value: undefined }));
          if (done) return;
          received += decoder.decode(value).split('event: next').length - 1;
        }
      })();
      const deliver = async (count: number) => {
        const start = received;
        const target = start + count;
        for (let i = 0; i < count; i++) {
          await app.changes.publish([{ kind: 'operation', nodeKey }]);
          // Let the subscriber keep up (each event reloads the node): this measures what delivery holds, not a backlog.
          if (i % 20 === 19) await expect.poll(() => received, { timeout: 10_000, interval: 1 }).toBeGreaterThanOrEqual(start + i - 40);
        }
        await expect.poll(() => received, { timeout: 20_000 }).toBeGreaterThanOrEqual(target);
      };
      const heapAfterCollection = async () => {
        for (let i = 0; i < 3; i++) {
          collect();
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        return process.memoryUsage().heapUsed;
      };
      try {
        // The stream listens once the subscription is set up, a moment after the response began.
        while (received === 0) {
          await app.changes.publish([{ kind: 'operation', nodeKey }]);
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await new Promise((resolve) => setTimeout(resolve, 100));
        await deliver(WARM_EVENTS);
        // A first window warms what a first delivery allocates once (caches, compiled code).
        await deliver(MEASURED_EVENTS);
        const middle = await heapAfterCollection();
        await deliver(MEASURED_EVENTS);
        const after = await heapAfterCollection();
        // Held per event before the fix: ~700 bytes (2.8 MB per window here); now nothing that grows with the count.
        expect(after - middle).toBeLessThan(1_200_000);
      } finally {
        abort.abort();
        await reader.cancel().catch(() => {});
        await reading;
        app.closeSubscriptions();
        await app.changes.close();
      }
    });
  }
});
