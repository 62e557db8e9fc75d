/**
 * A write-back worker process whose write does nothing: `runWorker` with the
 * runtime's defaults and a handler that marks the send and reports it
 * committed at once, so what is measured is the queue (lease, start, mark
 * sent, finalize) and not a provider. It counts what it applied, per
 * operation, for the benchmark's exactly-once check.
 *
 * Environment: STORE_URL (…/graphql), KEY_FILE, AUDIENCE, CONNECTOR,
 * CONCURRENCY (16). Loaded, it prints its CPU so far (`{ "readyCPUms" }`) and
 * waits for a line on stdin before it starts; drained on SIGTERM, it prints
 * what it applied (`{ "applied": { operationID: times }, "counters": … }`).
 */
import { storeClientFromKeyFile } from '../../client/key-file.js';
import { runWorker, type CommittedOutcome, type WriteBackHandler } from '../../client/runtime/index.js';
import { ready } from './ready.js';

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is required`);
  return value;
};

const applied = new Map<string, number>();
const committed = (operationID: string): CommittedOutcome => ({ kind: 'committed', documentID: `doc-${operationID}`, sourceID: `item-${operationID}` });

const handler: WriteBackHandler = {
  async send({ operation, markSent }) {
    await markSent();
    applied.set(operation.operationID, (applied.get(operation.operationID) ?? 0) + 1);
    return committed(operation.operationID);
  },
  // Only a send that may have landed is reconciled; this process knows the ones it applied.
  async reconcile({ operation }) {
    return applied.has(operation.operationID) ? committed(operation.operationID) : { kind: 'not-landed' };
  },
};

const client = await storeClientFromKeyFile(env('KEY_FILE'), { url: env('STORE_URL'), audience: env('AUDIENCE') });
await ready();
const worker = runWorker({ client, connector: env('CONNECTOR'), concurrency: Number(env('CONCURRENCY', '16')), handler });
await worker.done;
client.dispose();
process.stdout.write(`${JSON.stringify({ applied: Object.fromEntries(applied), counters: worker.counters })}\n`);
