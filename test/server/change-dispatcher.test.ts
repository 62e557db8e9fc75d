/**
 * The change dispatcher (resolvers/change-dispatcher.ts, issue 41 item 3)
 * alone, over an in-process feed and a reader the test controls: one
 * listener on the feed however many subscribers, one read per batch of 100
 * keys for all of them, nothing read for a node nobody follows, and a hard
 * bound on what waits to be read (OVERLOADED, retryable, for that kind only).
 */
import { describe, expect, it } from 'vitest';
import type { GraphQLError } from 'graphql';
import { createLogger } from '../../src/server/logger.js';
import { createInProcessChangeFeed } from '../../src/server/change-feed.js';
import type { StoreContext } from '../../src/store/context.js';
import { ChangeDispatcher, MAX_DISPATCH_PENDING, type ChangeSubscriber } from '../../resolvers/change-dispatcher.js';
import type { ChangeKind, ChangeWrite } from '../../resolvers/context.js';

const store = {} as StoreContext;
const log = createLogger('silent');

function subscriber(kind: ChangeKind, nodeKey?: string) {
  const offered: { key: string; write: ChangeWrite }[] = [];
  const failures: unknown[] = [];
  const sub: ChangeSubscriber = {
    kind,
    ...(nodeKey !== undefined && { nodeKey }),
    offer: (key, _row, write) => void offered.push({ key, write }),
    fail: (error) => void failures.push(error),
    log: () => log,
  };
  return { sub, offered, failures };
}

describe('change dispatcher', () => {
  it('listens once, reads each batch of 100 keys once for every subscriber, and reads nothing nobody follows', async () => {
    const feed = createInProcessChangeFeed();
    let listeners = 0;
    const listen = feed.listen.bind(feed);
    feed.listen = (listener) => {
      listeners++;
      return listen(listener);
    };
    const reads: string[][] = [];
    const dispatcher = new ChangeDispatcher(feed, store, { operation: async (_s, keys) => (reads.push(keys), keys.map((k) => ({ k }))) }, 100);
    const all = [subscriber('operation'), subscriber('operation'), subscriber('operation')];
    const one = subscriber('operation', 'k7');
    const watches = subscriber('watch', 'w1');
    for (const s of [...all, one, watches]) dispatcher.subscribe(s.sub);
    expect(listeners).toBe(1);
    await feed.publish(Array.from({ length: 250 }, (_, i) => ({ kind: 'operation' as const, nodeKey: `k${i}` })));
    await expect.poll(() => all[2]!.offered.length).toBe(250);
    expect(reads.map((keys) => keys.length)).toEqual([100, 100, 50]);
    expect(one.offered.map((o) => o.key)).toEqual(['k7']);
    expect(new Set(all[0]!.offered.map((o) => `${o.write.id}/${o.write.size}`)).size).toBe(1);
    // A watch nobody follows by this key is not read (no reader for it would even be asked).
    await feed.publish([{ kind: 'watch', nodeKey: 'w2' }]);
    await new Promise((r) => setTimeout(r, 20));
    expect(watches.offered).toEqual([]);
  });

  it('past MAX_DISPATCH_PENDING events waiting to be read, ends that kind’s subscribers with OVERLOADED (retryable), not the others', async () => {
    const feed = createInProcessChangeFeed();
    let release: () => void = () => {};
    const stuck = new Promise<void>((resolve) => {
      release = resolve;
    });
    const dispatcher = new ChangeDispatcher(feed, store, { operation: async (_s, keys) => (await stuck, keys.map(() => ({}))) }, 100);
    const operations = subscriber('operation');
    const stores = subscriber('store');
    dispatcher.subscribe(operations.sub);
    dispatcher.subscribe(stores.sub);
    // The first batch is being read (and waits); then more than the bound arrives.
    await feed.publish([{ kind: 'operation', nodeKey: 'first' }]);
    for (let i = 0; i <= MAX_DISPATCH_PENDING; i += 100) {
      await feed.publish(Array.from({ length: 100 }, (_, j) => ({ kind: 'operation' as const, nodeKey: `k${i + j}` })));
    }
    expect(operations.failures).toHaveLength(1);
    expect((operations.failures[0] as GraphQLError).extensions).toEqual({ code: 'OVERLOADED', retryable: true });
    await feed.publish([{ kind: 'store', nodeKey: 'OPERATIONS/RETENTION/*' }]);
    await expect.poll(() => stores.offered.length).toBe(1);
    expect(stores.failures).toEqual([]);
    release();
  });
});
