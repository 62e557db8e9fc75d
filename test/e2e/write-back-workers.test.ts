/**
 * Exactly once under kills (issue 20 item 6), on both dialects: a server
 * process, a fake provider that applies every request it gets without
 * deduplicating and drops 10 % of its responses after applying, 500
 * operations, and 3 worker processes (examples/write-back-worker/worker.ts, on
 * the client runtime) that SIGKILL themselves at every step of the protocol in
 * turn (before mark-sent, between mark-sent and the provider's apply, after the
 * apply) and are also killed from outside every few seconds, each restarted at
 * once. At the end every operation is COMMITTED or DEAD with a reason, and the
 * provider applied each committed operation's effect exactly once and nothing
 * else. The longer run with throughput figures is in `npm run bench`.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DialectName } from '../../src/db/connect.js';
import { makeWorkerKey } from '../../examples/write-back-worker/run.js';
import { CRASH_POINTS, runScenario } from '../../examples/write-back-worker/scenario.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { startE2EServers, type E2EServers } from '../helpers/e2e-server.js';

const AUDIENCE = 'connector-store-write-back-workers';
const OPERATIONS = 500;
const REJECT_EVERY = 50;
const dialects: DialectName[] = testDialects().filter(dialectAvailable);

describe.each(dialects)('write-back workers under kills (%s)', (dialect) => {
  let started: E2EServers | undefined;
  let keyFile = '';
  let dir = '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cs-workers-'));
    const key = await makeWorkerKey(dir);
    keyFile = key.keyFile;
    started = await startE2EServers(dialect, { audience: AUDIENCE, serviceDID: key.did, name: 'workers', env: { LOG_LEVEL: 'info' } });
  });
  afterAll(async () => {
    await started?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    'every operation ends COMMITTED or DEAD with a reason, and each committed one was applied exactly once',
    async () => {
      const result = await runScenario({
        storeURL: `${started!.server.origin}/graphql`,
        audience: AUDIENCE,
        keyFile,
        operations: OPERATIONS,
        workers: 3,
        concurrency: 4,
        leaseMs: 1_500,
        sendTimeoutMs: 1_000,
        faults: { dropRate: 0.1, failRate: 0.02 },
        rejectEvery: REJECT_EVERY,
        crashAtSend: [20, 40],
        killEveryMs: 6_000,
        timeoutMs: 150_000,
      });
      const summary = JSON.stringify({ ...result, provider: { ...result.provider, applies: undefined } });
      expect(result.timedOut, summary).toBe(false);
      expect(result.operations).toBe(OPERATIONS);
      expect(result.states, summary).toEqual({ COMMITTED: OPERATIONS - OPERATIONS / REJECT_EVERY, DEAD: OPERATIONS / REJECT_EVERY });
      expect(result.deadWithoutReason).toEqual([]);
      // Exactly once: no event applied twice, every committed one applied, nothing applied that is not committed.
      expect(result.duplicates).toEqual([]);
      expect(result.committedNotApplied).toEqual([]);
      expect(result.appliedNotCommitted).toEqual([]);
      expect(Object.keys(result.provider.applies)).toHaveLength(OPERATIONS - OPERATIONS / REJECT_EVERY);
      // The faults happened: kills at every step, dropped answers, and reconciles that found them.
      for (const point of CRASH_POINTS) expect(result.crashes[point], `${point}: ${summary}`).toBeGreaterThan(0);
      expect(result.externalKills).toBeGreaterThan(0);
      expect(result.provider.dropped).toBeGreaterThan(0);
      expect(result.provider.lookups).toBeGreaterThanOrEqual(result.provider.dropped);
      console.log(
        `${dialect}: ${OPERATIONS} operations in ${(result.elapsedMs / 1000).toFixed(1)} s, ${result.perWorkerPerSecond.toFixed(1)}/s per worker; ` +
          `kills ${JSON.stringify(result.crashes)} + ${result.externalKills} outside; ${result.provider.dropped} dropped answers, ${result.provider.lookups} reconciles`,
      );
    },
    200_000,
  );
});
