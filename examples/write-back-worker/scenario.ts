/**
 * One run of the example: a fake provider, N write-back operations enqueued
 * on a running server, W worker processes (worker.ts) taking them, optionally
 * killed at every step of the protocol, behind a provider that drops
 * responses after applying or takes longer than the lease to apply, talking
 * to the server through a lossy network (fault-proxy.ts), with the server
 * SIGKILLed and started again. Waits until no operation is live, stops the
 * workers (SIGTERM: they drain), and checks what the provider applied against
 * what the server recorded, and each operation's attempt history against the
 * attempts the workers really started (their event lines). Used by `npm run example:worker` (run.ts), the
 * fault test (test/e2e/write-back-workers.test.ts) and `npm run bench`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { storeClientFromKeyFile } from '../../client/key-file.js';
import type { ConnectorOperationState } from '../../client/generated/graphql.js';
import { enqueueAll, MAX_ENQUEUE_BATCH, type StoreClient } from '../../client/runtime/index.js';
import { startFakeProvider, type ProviderFaults, type ProviderStats } from './provider.js';
import { startFaultProxy, type FaultProxy, type NetworkFaults, type NetworkStats } from './fault-proxy.js';
import { parse } from 'graphql';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const WORKER = join(ROOT, 'examples/write-back-worker/worker.ts');

/**
 * worker.ts bundled into one plain `.mjs` (esbuild): a restarted worker is
 * running in ~0.2 s instead of the ~1.5 s tsx takes to compile it each time.
 */
async function bundleWorker(): Promise<{ file: string; remove(): void }> {
  const dir = mkdtempSync(join(tmpdir(), 'write-back-worker-'));
  const file = join(dir, 'worker.mjs');
  await build({ entryPoints: [WORKER], outfile: file, bundle: true, platform: 'node', format: 'esm', target: 'node20', logLevel: 'error' });
  return { file, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/** The steps a worker may be killed at (worker.ts `CRASH_AT`). */
export const CRASH_POINTS = ['before-mark', 'after-mark', 'during-send', 'after-apply'] as const;
export type CrashPoint = (typeof CRASH_POINTS)[number];

/** Options of {@link runScenario}. */
export interface ScenarioOptions {
  /** The server's GraphQL endpoint. */
  storeURL: string;
  audience: string;
  /** A key file whose DID is in the server's SERVICE_DIDS. */
  keyFile: string;
  operations: number;
  workers: number;
  /** Per worker. */
  concurrency: number;
  leaseMs: number;
  /**
   * The longest a send to the provider may take (the workers' `sendTimeoutMs`):
   * a takeover of a send marked by a killed worker waits this long plus the
   * server's 2 s margin. Default: the runtime's (30 s).
   */
  sendTimeoutMs?: number;
  /** Default: a fresh name per run. */
  connector?: string;
  /** The fake provider's port on 127.0.0.1. Default: a free one. */
  providerPort?: number;
  /** The provider's faults (e.g. `{ dropRate: 0.1 }`). */
  faults?: Partial<ProviderFaults>;
  /** Each worker process SIGKILLs itself at a step of its n-th send, n in this range, the step rotating over {@link CRASH_POINTS}; restarted at once. Default: none. */
  crashAtSend?: [number, number];
  /** Also SIGKILL a random worker from outside this often (ms). Default: never. */
  killEveryMs?: number;
  /** Every n-th operation targets what the provider refuses for good (422 → DEAD with its message). Default: none. */
  rejectEvery?: number;
  /** The workers reach the server through a lossy network (fault-proxy.ts): connections reset, answers lost after the commit, answers delayed. Default: directly. */
  network?: Partial<NetworkFaults>;
  /** Once, `atMs` after the workers started: `kill` SIGKILLs the server and starts it again on the same origin. */
  serverKill?: { atMs: number; kill(): Promise<void> };
  /** Give up waiting after this long. Default: 120 s. */
  timeoutMs?: number;
  /** Progress lines. */
  log?: (line: string) => void;
}

/** What {@link runScenario} found. */
export interface ScenarioResult {
  operations: number;
  states: Partial<Record<ConnectorOperationState, number>>;
  /** DEAD operations without a `lastError`. */
  deadWithoutReason: string[];
  /** Event ids the provider applied more than once. */
  duplicates: string[];
  /** COMMITTED operations the provider never applied, and applied operations not COMMITTED. */
  committedNotApplied: string[];
  appliedNotCommitted: string[];
  /** Worker processes killed, per step (self) and from outside. */
  crashes: Record<CrashPoint, number>;
  externalKills: number;
  provider: ProviderStats;
  /** What the lossy network did, when there was one. */
  network: NetworkStats | undefined;
  serverKills: number;
  /** From the workers' event lines: leases taken from a holder that was killed or lost it. */
  takeovers: number;
  /** Reconciles started (a marked send looked up at the provider). */
  reconciles: number;
  /** Holders told their lease was lost (a renewal refused, or it lapsed). */
  leaseLost: number;
  /** Requests the workers' clients sent again (a reset, a lost answer, a 5xx, a retryable refusal). */
  clientRetries: number;
  /** Attempts in the operations' histories, and 'started' events the workers logged. */
  attemptsRecorded: number;
  attemptsSeen: number;
  /** Operations whose history has fewer attempts than were seen started, or more (only a killed worker can leave one unseen). */
  attemptsMismatched: { operationID: string; recorded: number; seen: number }[];
  /** Summed from the workers that drained at the end (killed ones took theirs with them). */
  drainedCounters: Record<string, number>;
  /** From the first worker's start to the last operation finished. */
  elapsedMs: number;
  /** Finished (committed or dead) operations per second per worker. */
  perWorkerPerSecond: number;
  timedOut: boolean;
}

interface ScenarioOperation {
  operationID: string;
  deterministicEventID: string;
  state: ConnectorOperationState;
  lastError: string | null;
  attempts: number;
  attemptHistory: { edges: { node: { kind: string } }[] };
}

interface OperationsPage {
  operations: { pageInfo: { hasNextPage: boolean; endCursor: string | null }; edges: { node: ScenarioOperation }[] };
}

const OPERATIONS_PAGE = parse(`
  query ScenarioOperations($after: String, $connectorName: String!) {
    operations(first: 25, after: $after, filter: { connectorName: $connectorName }) {
      pageInfo { hasNextPage endCursor }
      edges { node { operationID deterministicEventID state lastError attempts attemptHistory(first: 40) { edges { node { kind } } } } }
    }
  }`) as TypedDocumentNode<OperationsPage, { after?: string | null; connectorName: string }>;

const LIVE_COUNT = parse(`
  query ScenarioLive($connectorName: String!) {
    operationCounts(filter: { connectorName: $connectorName, states: [ATTEMPTED, RECONCILE_ONLY] }, groupBy: []) { count }
  }`) as TypedDocumentNode<{ operationCounts: { count: number }[] }, { connectorName: string }>;

/** Runs the scenario; see the module comment. Always stops what it started. */
export async function runScenario(options: ScenarioOptions): Promise<ScenarioResult> {
  const log = options.log ?? (() => {});
  const connector = options.connector ?? `example-${Date.now().toString(36)}`;
  const provider = await startFakeProvider({ port: options.providerPort ?? 0, faults: { ...options.faults, rejectTargets: ['rejected'] } });
  log(`fake provider on ${provider.url}`);
  const client = await storeClientFromKeyFile(options.keyFile, { url: options.storeURL, audience: options.audience });
  const crashes: Record<CrashPoint, number> = { 'before-mark': 0, 'after-mark': 0, 'during-send': 0, 'after-apply': 0 };
  const children = new Set<ChildProcess>();
  const events = new WorkerEvents();
  let proxy: FaultProxy | undefined;
  let serverKills = 0;
  let serverKillTimer: ReturnType<typeof setTimeout> | undefined;
  let serverKilled: Promise<void> | undefined;
  const drained: Record<string, number>[] = [];
  let externalKills = 0;
  let stopping = false;
  let incarnation = 0;
  let killTimer: ReturnType<typeof setInterval> | undefined;
  const bundle = await bundleWorker();
  try {
    await enqueueOperations(client, connector, options);
    log(`enqueued ${options.operations} operations for connector ${connector}`);
    if (options.network !== undefined) proxy = await startFaultProxy(new URL(options.storeURL).origin, options.network);
    const workerStoreURL = proxy === undefined ? options.storeURL : `${proxy.url}${new URL(options.storeURL).pathname}`;

    const spawnWorker = () => {
      const point = CRASH_POINTS[incarnation % CRASH_POINTS.length]!;
      incarnation++;
      const range = options.crashAtSend;
      const crashAt = range === undefined ? undefined : `${point}@${range[0] + Math.floor(Math.random() * (range[1] - range[0] + 1))}`;
      const child = spawn(process.execPath, [bundle.file], {
        cwd: ROOT,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '',
          STORE_URL: workerStoreURL,
          LOG_EVENTS: '1',
          KEY_FILE: options.keyFile,
          AUDIENCE: options.audience,
          PROVIDER_URL: provider.url,
          CONNECTOR: connector,
          CONCURRENCY: String(options.concurrency),
          LEASE_MS: String(options.leaseMs),
          ...(options.sendTimeoutMs !== undefined && { SEND_TIMEOUT_MS: String(options.sendTimeoutMs) }),
          ...(process.env.SUBSCRIBE !== undefined && { SUBSCRIBE: process.env.SUBSCRIBE }),
          ...(crashAt !== undefined && { CRASH_AT: crashAt }),
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      children.add(child);
      let out = '';
      let partial = '';
      const pid = child.pid ?? -incarnation;
      child.stdout!.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
      child.stderr!.setEncoding('utf8').on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          const crash = /"crash":"([a-z-]+)"/.exec(line)?.[1] as CrashPoint | undefined;
          if (crash !== undefined) crashes[crash]++;
          events.read(pid, line);
        }
      });
      child.once('exit', (_code, signal) => {
        children.delete(child);
        events.read(pid, partial);
        const counters = /\{"counters":(\{[^}]*\})\}/.exec(out)?.[1];
        if (counters !== undefined) drained.push(JSON.parse(counters) as Record<string, number>);
        if (!stopping) {
          log(`worker ${child.pid} ended (${signal ?? 'exit'}); starting another`);
          spawnWorker();
        }
      });
    };

    const started = Date.now();
    for (let i = 0; i < options.workers; i++) spawnWorker();
    if (options.killEveryMs !== undefined && options.killEveryMs > 0) {
      killTimer = setInterval(() => {
        const live = [...children];
        const victim = live[Math.floor(Math.random() * live.length)];
        if (victim !== undefined && victim.kill('SIGKILL')) externalKills++;
      }, options.killEveryMs);
    }
    const serverKill = options.serverKill;
    if (serverKill !== undefined) {
      serverKillTimer = setTimeout(() => {
        log('SIGKILL of the server, and a new one on the same origin');
        serverKills++;
        serverKilled = serverKill.kill();
      }, serverKill.atMs);
    }

    const deadline = started + (options.timeoutMs ?? 120_000);
    let timedOut = false;
    let polls = 0;
    for (;;) {
      await new Promise((resolve) => setTimeout(resolve, 250));
      if (serverKilled !== undefined) await serverKilled;
      let live: number;
      try {
        live = (await client.request(LIVE_COUNT, { connectorName: connector })).operationCounts[0]?.count ?? 0;
      } catch (error) {
        // A read that met the server's kill (before it was announced): ask again, until the deadline.
        if (serverKill === undefined || Date.now() > deadline) throw error;
        log(`live count failed (${(error as Error).message}); asking again`);
        continue;
      }
      if (live === 0 && (serverKill === undefined || serverKills > 0)) break;
      if (++polls % 8 === 0) log(`${((Date.now() - started) / 1000).toFixed(0)} s: ${live} live`);
      if (Date.now() > deadline) {
        timedOut = true;
        break;
      }
    }
    const elapsedMs = Date.now() - started;
    clearInterval(killTimer);
    clearTimeout(serverKillTimer);
    stopping = true;
    await stopWorkers(children);

    const operations = await listOperations(client, connector);
    const stats = provider.stats();
    const states: ScenarioResult['states'] = {};
    for (const operation of operations) states[operation.state] = (states[operation.state] ?? 0) + 1;
    const byEvent = new Map(operations.map((operation) => [operation.deterministicEventID, operation]));
    const finished = (states.COMMITTED ?? 0) + (states.DEAD ?? 0);
    const drainedCounters: Record<string, number> = {};
    for (const counters of drained) for (const [name, value] of Object.entries(counters)) drainedCounters[name] = (drainedCounters[name] ?? 0) + value;
    const attempts = operations.map((operation) => ({
      operationID: operation.operationID,
      recorded: operation.attemptHistory.edges.filter((edge) => edge.node.kind === 'ATTEMPT').length,
      seen: events.started.get(operation.operationID) ?? 0,
    }));
    return {
      operations: operations.length,
      states,
      deadWithoutReason: operations.filter((operation) => operation.state === 'DEAD' && !operation.lastError).map((operation) => operation.operationID),
      duplicates: Object.entries(stats.applies)
        .filter(([, count]) => count > 1)
        .map(([eventID]) => eventID),
      committedNotApplied: operations.filter((operation) => operation.state === 'COMMITTED' && stats.applies[operation.deterministicEventID] !== 1).map((operation) => operation.operationID),
      appliedNotCommitted: Object.keys(stats.applies).filter((eventID) => byEvent.get(eventID)?.state !== 'COMMITTED'),
      crashes,
      externalKills,
      network: proxy?.stats(),
      serverKills,
      takeovers: events.takeovers(),
      reconciles: events.count('reconciling'),
      leaseLost: events.count('lease-lost'),
      clientRetries: events.retries,
      attemptsRecorded: attempts.reduce((sum, a) => sum + a.recorded, 0),
      attemptsSeen: attempts.reduce((sum, a) => sum + a.seen, 0),
      attemptsMismatched: attempts.filter((a) => a.recorded !== a.seen),
      provider: stats,
      drainedCounters,
      elapsedMs,
      perWorkerPerSecond: finished / (elapsedMs / 1000) / options.workers,
      timedOut,
    };
  } finally {
    clearInterval(killTimer);
    clearTimeout(serverKillTimer);
    stopping = true;
    await stopWorkers(children);
    client.dispose();
    await proxy?.close();
    await provider.close();
    bundle.remove();
  }
}

/** A run of a worker process holding one operation: from its 'claimed'/'acquired' line to how it let go (none: the process died holding it). */
interface Holding {
  pid: number;
  end: string | undefined;
}

/** What the workers' event lines (worker.ts LOG_EVENTS) tell, across every process. */
class WorkerEvents {
  readonly started = new Map<string, number>();
  retries = 0;
  private readonly counts = new Map<string, number>();
  /** Per operation, each holder in the order their leases were taken. */
  private readonly holdings = new Map<string, Holding[]>();
  /** Per process and operation, the holding it is in. */
  private readonly open = new Map<string, Holding>();

  read(pid: number, line: string): void {
    if (!line.startsWith('{')) return;
    let record: { event?: string; operationID?: string; retry?: string };
    try {
      record = JSON.parse(line) as typeof record;
    } catch {
      return;
    }
    if (record.retry !== undefined) this.retries++;
    const { event, operationID } = record;
    if (event === undefined || operationID === undefined) return;
    this.counts.set(event, (this.counts.get(event) ?? 0) + 1);
    const slot = `${pid} ${operationID}`;
    if (event === 'claimed' || event === 'acquired') {
      const holding: Holding = { pid, end: undefined };
      this.open.set(slot, holding);
      const list = this.holdings.get(operationID) ?? [];
      list.push(holding);
      this.holdings.set(operationID, list);
    } else if (event === 'started') {
      this.started.set(operationID, (this.started.get(operationID) ?? 0) + 1);
    } else if (event === 'released' || event === 'finalized' || event === 'recorded' || event === 'lease-lost') {
      const holding = this.open.get(slot);
      if (holding !== undefined) holding.end = event;
      this.open.delete(slot);
    }
  }

  count(event: string): number {
    return this.counts.get(event) ?? 0;
  }

  /** Leases taken after a holder that died holding the operation or lost its lease. */
  takeovers(): number {
    let taken = 0;
    for (const list of this.holdings.values()) for (let i = 0; i + 1 < list.length; i++) if (list[i]!.end === undefined || list[i]!.end === 'lease-lost') taken++;
    return taken;
  }
}

/**
 * Enqueues `options.operations` operations of `connector` (`enqueueAll`,
 * batches of at most 100, two at a time): each is due at once, with no lease,
 * for the workers to take; resolves with their global ids in order. Every
 * `rejectEvery`-th targets what the provider refuses.
 */
export async function enqueueOperations(client: StoreClient, connector: string, options: Pick<ScenarioOptions, 'operations' | 'rejectEvery'>): Promise<string[]> {
  const ids: string[] = [];
  const write = (i: number) => ({
    operationID: `${connector}-${i}`,
    connectorName: connector,
    model: 'contact',
    op: i % 3 === 0 ? ('UPDATE' as const) : ('CREATE' as const),
    accountKey: 'account-1',
    target: options.rejectEvery !== undefined && i % options.rejectEvery === options.rejectEvery - 1 ? 'rejected' : 'contacts',
    deterministicEventID: `${connector}-event-${i}`,
    payloadHash: `hash-${i}`,
    reissueIntent: 'none',
  });
  const batches: number[][] = [];
  for (let first = 0; first < options.operations; first += MAX_ENQUEUE_BATCH) {
    batches.push(Array.from({ length: Math.min(MAX_ENQUEUE_BATCH, options.operations - first) }, (_, k) => first + k));
  }
  let next = 0;
  await Promise.all(
    Array.from({ length: 2 }, async () => {
      while (next < batches.length) {
        const batch = batches[next++]!;
        const results = await enqueueAll(client, batch.map(write));
        results.forEach((result, k) => {
          if (result.status === 'conflict') throw new Error(`enqueue ${batch[k]}: conflict on ${result.fields.join(', ')}`);
          ids[batch[k]!] = result.operation.id;
        });
      }
    }),
  );
  return ids;
}

async function listOperations(client: StoreClient, connectorName: string): Promise<ScenarioOperation[]> {
  const operations: ScenarioOperation[] = [];
  let after: string | null = null;
  for (;;) {
    const page: OperationsPage = await client.request(OPERATIONS_PAGE, { after, connectorName });
    operations.push(...page.operations.edges.map((edge) => edge.node));
    if (!page.operations.pageInfo.hasNextPage) return operations;
    after = page.operations.pageInfo.endCursor;
  }
}

/** SIGTERM every worker (they drain), SIGKILL whatever is still there after 20 s. */
async function stopWorkers(children: Set<ChildProcess>): Promise<void> {
  const exits = [...children].map(
    (child) =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
        setTimeout(() => child.kill('SIGKILL'), 20_000).unref();
      }),
  );
  await Promise.all(exits);
}
