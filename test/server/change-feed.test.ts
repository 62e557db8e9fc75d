import { expect, it, describe } from 'vitest';
import { createServerApp } from '../../src/server/app.js';
import type { ChangeFeed } from '../../resolvers/context.js';
import { createInProcessChangeFeed, decodePayload, decodeWrite, encodePayload } from '../../src/server/change-feed.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { describeEachDialect } from '../helpers/databases.js';

describe('change feed payloads', () => {
  it('round-trips kinds and node keys, skipping malformed parts', () => {
    const events = [
      { kind: 'operation' as const, nodeKey: 'abc_DEF-123' },
      { kind: 'watch' as const, nodeKey: 'w1' },
      { kind: 'syncState' as const, nodeKey: 's1' },
    ];
    expect(decodePayload(encodePayload(events))).toEqual(events);
    expect(decodePayload('x:nope o: o:ok garbage')).toEqual([{ kind: 'operation', nodeKey: 'ok' }]);
  });

  it('names the write every notification of it belongs to, which an older decoder skips', () => {
    const events = [{ kind: 'operation' as const, nodeKey: 'abc_DEF-123' }];
    const payload = encodePayload(events, { id: 'Ab-9_x.42', size: 1_000 });
    expect(payload).toBe('#Ab-9_x.42/1000 o:abc_DEF-123');
    expect(decodePayload(payload)).toEqual(events);
    expect(decodeWrite(payload)).toEqual({ id: 'Ab-9_x.42', size: 1_000 });
    expect(decodeWrite(encodePayload(events))).toBeUndefined();
    expect(decodeWrite('#nosize o:x')).toBeUndefined();
  });

  it('hands every event of one publish the same write, and each publish its own', async () => {
    const feed = createInProcessChangeFeed();
    const seen: { key: string; write: string; size: number }[] = [];
    feed.listen((e, write) => seen.push({ key: e.nodeKey, write: write.id, size: write.size }));
    await feed.publish([{ kind: 'operation', nodeKey: '1' }, { kind: 'watch', nodeKey: '2' }]);
    await feed.publish([{ kind: 'operation', nodeKey: '3' }]);
    expect(seen.map((s) => s.size)).toEqual([2, 2, 1]);
    expect(seen[0]!.write).toBe(seen[1]!.write);
    expect(seen[2]!.write).not.toBe(seen[0]!.write);
  });

  it('delivers in process to every listener, in order, until removed or closed', async () => {
    const feed = createInProcessChangeFeed();
    const seen: string[] = [];
    const stop = feed.listen((e) => seen.push(`a:${e.nodeKey}`));
    feed.listen(() => {
      throw new Error('a broken listener must not starve the others');
    });
    feed.listen((e) => seen.push(`b:${e.nodeKey}`));
    await feed.publish([{ kind: 'operation', nodeKey: '1' }, { kind: 'operation', nodeKey: '2' }]);
    stop();
    await feed.publish([{ kind: 'operation', nodeKey: '3' }]);
    await feed.close();
    await feed.publish([{ kind: 'operation', nodeKey: '4' }]);
    expect(seen).toEqual(['a:1', 'b:1', 'a:2', 'b:2', 'b:3']);
    expect(feed.status()).toBe('closed');
  });
});

describeEachDialect('readiness and the change feed', (suite) => {
  it('/readyz answers 503 naming the change feed while it reconnects, 200 once connected', async () => {
    let status: ReturnType<ChangeFeed['status']> = 'reconnecting';
    const feed: ChangeFeed = { ...createInProcessChangeFeed(), status: () => status };
    const app = createServerApp({
      config: loadConfig({ NODE_ENV: 'test', LOG_LEVEL: 'silent' }),
      database: suite.database.open,
      logger: createLogger('silent'),
      changes: feed,
    });
    const down = await app.yoga.fetch('http://localhost/readyz');
    expect(down.status).toBe(503);
    expect(await down.json()).toEqual({ ready: false, changeFeed: 'reconnecting' });
    status = 'connected';
    expect((await app.yoga.fetch('http://localhost/readyz')).status).toBe(200);
  });
});
