/**
 * The example write-back worker: one process running `runWorker` for one
 * connector against the fake provider (provider.ts). In your project the
 * imports are `connector-store-client/runtime` and
 * `connector-store-client/key-file`; the handler is all a connector writes.
 *
 * Environment: STORE_URL (…/graphql), KEY_FILE, AUDIENCE, PROVIDER_URL,
 * CONNECTOR (default `example`), CONCURRENCY (4), LEASE_MS (30 000),
 * SUBSCRIBE (1; 0: poll only),
 * and for the fault test CRASH_AT=`point@n`: SIGKILL this process at its n-th
 * send, at `before-mark`, `after-mark` (marked, not yet sent) or
 * `after-apply` (the provider applied and answered; nothing recorded yet).
 * On SIGTERM it drains and prints its counters as one JSON line.
 */
import { storeClientFromKeyFile } from '../../client/key-file.js';
import { runWorker, type CommittedOutcome, type WriteBackHandler, type WriteBackOperation } from '../../client/runtime/index.js';

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is required`);
  return value;
};

const providerURL = env('PROVIDER_URL');
const [crashPoint, crashAtSend] = (process.env.CRASH_AT ?? '').split('@');
let sends = 0;

/** Dies here, at once and without a word to the server, if this run was told to. */
function maybeCrash(point: 'before-mark' | 'after-mark' | 'after-apply', send: number): void {
  if (point === crashPoint && send === Number(crashAtSend)) {
    process.stderr.write(`${JSON.stringify({ crash: point, send })}\n`);
    process.kill(process.pid, 'SIGKILL');
  }
}

/** What the provider's item becomes in the store: the local document and the provider's id. */
function committed(operation: WriteBackOperation, item: { id: string; etag: string }): CommittedOutcome {
  return { kind: 'committed', documentID: `doc-${operation.operationID}`, sourceID: item.id, providerEtag: item.etag, resultEntity: { id: item.id, etag: item.etag } };
}

const handler: WriteBackHandler = {
  async send({ operation, signal, markSent }) {
    const send = ++sends;
    maybeCrash('before-mark', send);
    // From here on a crash is reconciled by the next holder, never resent blindly.
    await markSent();
    maybeCrash('after-mark', send);
    let response: Response;
    try {
      response = await fetch(`${providerURL}/items`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // The deterministic event id goes with every attempt: a reconcile finds the write by it.
        body: JSON.stringify({ eventID: operation.deterministicEventID, operationID: operation.operationID, op: operation.op, model: operation.model, target: operation.target }),
        signal,
      });
    } catch (error) {
      // Sent, and no answer: it may have landed.
      return { kind: 'unknown', message: `no answer from the provider: ${(error as Error).message}` };
    }
    const text = await response.text();
    maybeCrash('after-apply', send);
    if (response.ok) return committed(operation, JSON.parse(text) as { id: string; etag: string });
    const retryAfter = Number(response.headers.get('retry-after'));
    if (response.status === 429 || response.status >= 500) {
      return { kind: 'retryable', httpStatus: response.status, message: text, ...(Number.isFinite(retryAfter) && response.headers.has('retry-after') && { retryAfterMs: retryAfter * 1000 }) };
    }
    if (response.status === 401) return { kind: 'auth', httpStatus: 401, message: text };
    return { kind: 'fatal', httpStatus: response.status, message: text };
  },
  async reconcile({ operation, signal }) {
    // Look the write up by what every send carried: the deterministic event id.
    const response = await fetch(`${providerURL}/items?eventID=${encodeURIComponent(operation.deterministicEventID)}`, { signal });
    if (response.status === 404) return { kind: 'not-landed' };
    if (!response.ok) return { kind: 'retryable', httpStatus: response.status, message: await response.text() };
    return committed(operation, (await response.json()) as { id: string; etag: string });
  },
};

const client = await storeClientFromKeyFile(env('KEY_FILE'), { url: env('STORE_URL'), audience: env('AUDIENCE', 'connector-store') });
const worker = runWorker({
  client,
  connector: env('CONNECTOR', 'example'),
  concurrency: Number(env('CONCURRENCY', '4')),
  leaseMs: Number(env('LEASE_MS', '30000')),
  subscribe: env('SUBSCRIBE', '1') !== '0',
  handler,
});
process.stderr.write(`${JSON.stringify({ worker: 'started', pid: process.pid, did: client.did })}\n`);
await worker.done;
client.dispose();
process.stdout.write(`${JSON.stringify({ counters: worker.counters })}\n`);
