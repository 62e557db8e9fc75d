/**
 * A graphile-worker process with one task that does nothing (`noop`), run as
 * its documentation recommends for throughput: the local
 * queue (jobs fetched and locked in batches) and batched completion, with a
 * pool one larger than the concurrency. It counts the jobs it ran, per job id.
 *
 * Environment: DATABASE_URL, CONCURRENCY (16), GRAPHILE_BATCHING (1; 0: the
 * library's defaults, one fetch and one completion per job), LOCAL_QUEUE_SIZE
 * (17: concurrency + 1, its documentation's starting point). Loaded, it prints
 * its CPU so far (`{ "readyCPUms" }`) and waits for a line on stdin before it
 * starts; stopped on SIGTERM, it prints what it ran
 * (`{ "applied": { jobID: times } }`).
 */
import { Logger, run, type Runner, type Task } from 'graphile-worker';
import { ready } from './ready.js';

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is required`);
  return value;
};

const concurrency = Number(env('CONCURRENCY', '16'));
const batching = env('GRAPHILE_BATCHING', '1') !== '0';
const applied = new Map<string, number>();

const noop: Task = async (_payload, helpers) => {
  applied.set(helpers.job.id, (applied.get(helpers.job.id) ?? 0) + 1);
};

// Errors and warnings only: its info lines (one per job) are not what is measured.
const logger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') process.stderr.write(`[graphile-worker ${level}] ${message}\n`);
});

await ready();
// Installed before `run` resolves: with few jobs, the others may all be done (and this process told to stop) by then.
let stopping = false;
let runner: Runner | undefined;
process.once('SIGTERM', () => {
  stopping = true;
  void runner?.stop();
});
runner = await run({
  connectionString: env('DATABASE_URL'),
  concurrency,
  maxPoolSize: concurrency + 1,
  noHandleSignals: true,
  logger,
  taskList: { noop },
  preset: {
    worker: {
      ...(batching && { localQueue: { size: Number(env('LOCAL_QUEUE_SIZE', String(concurrency + 1))) }, completeJobBatchDelay: 0, failJobBatchDelay: 0 }),
    },
  },
});

if (stopping) void runner.stop();
await runner.promise;
process.stdout.write(`${JSON.stringify({ applied: Object.fromEntries(applied) })}\n`);
