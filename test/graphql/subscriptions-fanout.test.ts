/**
 * Fan-out cost: a change reaching N subscribers of one replica reads its row
 * once, however large N is (the event's snapshot is shared; each subscriber
 * still applies its own access rule).
 */
import { afterEach, beforeAll, expect, it } from 'vitest';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { describeGraphQL, TEST_AUDIENCE } from '../helpers/graphql.js';
import { seedClaim } from '../helpers/graphql-seed.js';
import { subscribeSSE, type SSESubscription } from '../helpers/sse.js';
import { withStatementCounter } from '../helpers/statement-counter.js';

const OPERATION_CHANGED = `subscription($id: ID!) { operationChanged(id: $id) { id attempts } }`;

describeGraphQL('subscription fan-out cost', (suite) => {
  let app: ServerApp;
  let statements: string[];
  const open: SSESubscription[] = [];

  beforeAll(() => {
    const counted = withStatementCounter(suite.store);
    statements = counted.statements;
    app = createServerApp({
      config: loadConfig({
        NODE_ENV: 'test',
        AUTH_AUDIENCE: TEST_AUDIENCE,
        SERVICE_DIDS: suite.keys.worker.did,
        LOG_LEVEL: 'silent',
        MAX_SUBSCRIPTIONS_PER_VIEWER: '100',
      }),
      database: { ...suite.database.open, db: counted.store.db },
      logger: createLogger('silent'),
      storeDeps: { now: suite.clock.now },
    });
  });

  afterEach(async () => {
    await Promise.all(open.splice(0).map((s) => s.close()));
  });

  async function subscribers(count: number, id: string) {
    const tokens = { alice: await suite.token('alice'), mallory: await suite.token('mallory') };
    const subs: SSESubscription[] = [];
    for (let i = 0; i < count; i++) {
      // Every fifth one is a stranger: judged separately, never shown the row.
      const who = i % 5 === 4 ? 'mallory' : 'alice';
      subs.push(await subscribeSSE(app.yoga.fetch as never, 'http://localhost/graphql', OPERATION_CHANGED, { id }, { authorization: `Bearer ${tokens[who]}` }));
    }
    open.push(...subs);
    await new Promise((r) => setTimeout(r, 50));
    return subs;
  }

  it.each([1, 50])('one change reaching %i subscribers costs one statement', async (count) => {
    const seeded = await seedClaim(suite);
    const subs = await subscribers(count, seeded.id);
    statements.length = 0;
    await app.changes.publish([{ kind: 'operation', nodeKey: seeded.operation.nodeKey }]);
    const readers = subs.filter((_, i) => i % 5 !== 4);
    await Promise.all(readers.map((s) => s.waitFor(1)));
    await new Promise((r) => setTimeout(r, 50));
    expect(statements).toEqual(['SelectQueryNode']);
    for (const [i, sub] of subs.entries()) expect(sub.events, `subscriber ${i}`).toHaveLength(i % 5 === 4 ? 0 : 1);
  });
});
