/**
 * Background jobs of the server: the pending-authorization expiry sweep and
 * retention (SPEC §3.2, §3.6), run on an interval.
 *
 * Runs never overlap: the next tick is scheduled only after the current run
 * has finished, so a slow run delays the next one instead of stacking up.
 * A failing job is logged and never thrown: the other jobs of the tick still
 * run, and so does the next tick. Every replica may run these at once: the
 * store's deletes take disjoint batches (SKIP LOCKED on Postgres), so nothing
 * here needs to be coordinated in process memory.
 */
import type { ChangeEvent } from '../../resolvers/context.js';
import { storeChangeEvent, storeChangeEventsFor } from '../store/store-changes.js';
import type { StoreContext } from '../store/context.js';
import { sampleDueBacklog } from '../store/activity/index.js';
import { deleteExpiredPendingAuth } from '../store/pending-auth/index.js';
import { runRetention } from '../store/retention/index.js';
import type { ServerConfig } from './config.js';
import type { Logger } from './logger.js';

/** One named unit of background work; `run` returns a summary worth logging (counts), never secrets. */
export interface BackgroundJob {
  name: string;
  run(store: StoreContext): Promise<Record<string, unknown>>;
}

/** How one job of one tick ended. */
export type JobRunResult =
  | { name: string; ok: true; durationMs: number; summary: Record<string, unknown> }
  | { name: string; ok: false; durationMs: number; error: unknown };

/**
 * Tells subscribers what a job changed, after it committed: the server's
 * change feed, or `publishFromOutside` when the job runs in the CLI.
 */
export type PublishChanges = (events: readonly ChangeEvent[]) => Promise<void>;

/**
 * The server's jobs: first the pending-authorization expiry sweep (strict
 * `expires_at < now`), then retention (finished operations past
 * `idempotencyWindowMs`, expired authorizations the sweep raced with, settled
 * sweep candidates of committed receipts). Retention publishes one
 * `storeChanged` event per subject and DID whose rows went (never one per
 * row); expired authorizations are shown nowhere, so their sweep publishes nothing.
 */
export function serverJobs(jobs: Pick<ServerConfig['jobs'], 'idempotencyWindowMs' | 'deadRetentionMs'>, publish: PublishChanges): BackgroundJob[] {
  return [
    {
      name: 'pending-auth-expiry',
      run: async (store) => ({ deleted: await deleteExpiredPendingAuth(store, store.now()) }),
    },
    {
      name: 'retention',
      run: async (store) => {
        const { touched, ...counts } = await runRetention(store, { idempotencyWindowMs: jobs.idempotencyWindowMs, deadRetentionMs: jobs.deadRetentionMs });
        const events = [
          ...storeChangeEventsFor('OPERATIONS', 'RETENTION', touched.operations),
          ...storeChangeEventsFor('SWEEP_RECEIPTS', 'RETENTION', touched.sweepReceipts),
        ];
        if (events.length > 0) await publish(events);
        return { ...counts };
      },
    },
  ];
}

/**
 * The due-backlog sampler: one sample per slot of `intervalMs` (the first
 * replica to reach a slot takes it; the others find it taken). A sample
 * taken is published to services' `storeChanged` (BACKLOG). Scheduled
 * five times a slot ({@link backlogSamplerTickMs}), so a slow tick or a
 * replica restart does not leave a slot empty.
 */
export function backlogSamplerJob(intervalMs: number, publish: PublishChanges): BackgroundJob {
  return {
    name: 'backlog-sample',
    run: async (store) => {
      const result = await sampleDueBacklog(store, intervalMs);
      // The backlog is store-wide: only services are shown it (and told of a new sample).
      if (result.sampled) await publish([storeChangeEvent('BACKLOG', 'BACKLOG_SAMPLED', { services: true })]);
      // Only counts are summarised as "changed": a sample taken is 1, a slot already taken 0.
      return result.sampled ? { sampled: 1, due: result.due, capped: result.capped } : { sampled: 0 };
    },
  };
}

/** How often the backlog sampler ticks for slots of `intervalMs`: five times a slot, at most once a second. */
export const backlogSamplerTickMs = (intervalMs: number): number => (intervalMs === 0 ? 0 : Math.max(1_000, Math.floor(intervalMs / 5)));

/**
 * Runs every job once, one after the other, on the root store (not inside a
 * transaction: each job commits its own short batches). A job that throws is
 * logged at error level and reported as `ok: false`; this never rejects.
 */
export async function runJobsOnce(store: StoreContext, logger: Logger, jobs: readonly BackgroundJob[]): Promise<JobRunResult[]> {
  const results: JobRunResult[] = [];
  for (const job of jobs) {
    const started = performance.now();
    try {
      const summary = await job.run(store);
      const durationMs = Math.round(performance.now() - started);
      results.push({ name: job.name, ok: true, durationMs, summary });
      const changed = Object.values(summary).some((value) => typeof value === 'number' && value > 0);
      // A run that deleted nothing is routine: keep it out of info-level logs.
      logger[changed ? 'info' : 'debug']({ job: job.name, durationMs, ...summary }, 'background job done');
    } catch (error) {
      const durationMs = Math.round(performance.now() - started);
      results.push({ name: job.name, ok: false, durationMs, error });
      logger.error({ job: job.name, durationMs, err: error }, 'background job failed');
    }
  }
  return results;
}

/** Options of {@link startBackgroundJobs}. */
export interface StartBackgroundJobsOptions {
  store: StoreContext;
  logger: Logger;
  /** Pause between the end of one run and the start of the next, in ms; 0 starts nothing. */
  intervalMs: number;
  jobs: readonly BackgroundJob[];
  /** Delay before the first run, in ms. Default 0: run once right after start. */
  initialDelayMs?: number;
}

/** A running schedule of background jobs. */
export interface BackgroundJobs {
  /** Whether a schedule is running (false when the interval is 0 or after `stop`). */
  readonly active: boolean;
  /** Stops scheduling and resolves once the run in progress (if any) has finished. Idempotent. */
  stop(): Promise<void>;
}

/**
 * Starts running `jobs` every `intervalMs` (0: never). Timers are unref'd, so
 * they never keep the process alive; call `stop()` on shutdown before the
 * database pool closes.
 */
export function startBackgroundJobs(options: StartBackgroundJobsOptions): BackgroundJobs {
  const { store, logger, intervalMs, jobs } = options;
  if (!Number.isSafeInteger(intervalMs) || intervalMs < 0) throw new RangeError('intervalMs must be a non-negative integer');
  if (intervalMs === 0 || jobs.length === 0) {
    return { active: false, stop: async () => {} };
  }
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> | undefined;

  const schedule = (delayMs: number) => {
    timer = setTimeout(tick, delayMs);
    timer.unref();
  };
  function tick(): void {
    timer = undefined;
    if (stopped) return;
    running = runJobsOnce(store, logger, jobs)
      // runJobsOnce never rejects; this guards a logger that throws.
      .then(() => undefined, () => undefined)
      .finally(() => {
        running = undefined;
        if (!stopped) schedule(intervalMs);
      });
  }
  schedule(options.initialDelayMs ?? 0);
  logger.debug({ intervalMs, jobs: jobs.map((job) => job.name) }, 'background jobs scheduled');

  return {
    get active() {
      return !stopped;
    },
    stop: async () => {
      stopped = true;
      if (timer !== undefined) clearTimeout(timer);
      timer = undefined;
      await running;
    },
  };
}
