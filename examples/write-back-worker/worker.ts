/**
 * The example write-back worker: one process running `runWorker` for one
 * connector against the fake provider (provider.ts). In your project the
 * imports are `connector-store-client/runtime` and
 * `connector-store-client/key-file`; the handler is all a connector writes.
 *
 * Environment: STORE_URL (…/graphql), KEY_FILE, AUDIENCE, PROVIDER_URL,
 * CONNECTOR (default `example`), CONCURRENCY (4), LEASE_MS (30 000),
 * SEND_TIMEOUT_MS (the runtime's default, 30 000),
 * SUBSCRIBE (1; 0: poll only),
 * and for the fault test CRASH_AT=`point@n`: SIGKILL this process at its n-th
 * send, at `before-mark`, `after-mark` (marked, not yet sent), `during-send`
 * (the request is at the provider, which applies it only just before the send
 * window closes, SEND_TIMEOUT_MS − 500 ms after it arrived) or `after-apply`
 * (the provider applied and answered; nothing recorded yet), and
 * LOG_EVENTS=1: every step of every operation (runWorker's `onEvent`, never a
 * lease token) and every request the client resent, one JSON line each on
 * stderr, for the scenario's account of takeovers, attempts and retries.
 * On SIGTERM it drains and prints its counters as one JSON line.
 */
import { storeClientFromKeyFile } from '../../client/key-file.js';
import { runWorker } from '../../client/runtime/index.js';
import { createProviderHandler, type HandlerStep } from './handler.js';

const env = (name: string, fallback?: string): string => {
  const value = process.env[name] ?? fallback;
  if (value === undefined) throw new Error(`${name} is required`);
  return value;
};

const providerURL = env('PROVIDER_URL');
const [crashPoint, crashAtSend] = (process.env.CRASH_AT ?? '').split('@');

/** Dies here, at once and without a word to the server, if this run was told to. */
function maybeCrash(point: HandlerStep, send: number): void {
  if (point === crashPoint && send === Number(crashAtSend)) {
    process.stderr.write(`${JSON.stringify({ crash: point, send })}\n`);
    process.kill(process.pid, 'SIGKILL');
  }
}

// The send this process dies during is one the provider takes nearly the whole send window to apply:
// the request is still being applied when the next holder takes the operation over.
const sendTimeoutMs = Number(process.env.SEND_TIMEOUT_MS ?? 30_000);
const handler = createProviderHandler(providerURL, {
  atStep: maybeCrash,
  applyAfterMs: (send) => (crashPoint === 'during-send' && send === Number(crashAtSend) ? Math.max(100, sendTimeoutMs - 500) : undefined),
});

const logEvents = process.env.LOG_EVENTS === '1';
// stderr is a pipe here: Node writes to it synchronously on Linux, so a line is out before a SIGKILL.
const line = (record: object) => process.stderr.write(`${JSON.stringify(record)}\n`);

const client = await storeClientFromKeyFile(env('KEY_FILE'), {
  url: env('STORE_URL'),
  audience: env('AUDIENCE', 'connector-store'),
  ...(logEvents && { onRetry: (retry) => line({ retry: retry.operationName, code: retry.code, attempt: retry.attempt }) }),
});
const worker = runWorker({
  client,
  connector: env('CONNECTOR', 'example'),
  concurrency: Number(env('CONCURRENCY', '4')),
  leaseMs: Number(env('LEASE_MS', '30000')),
  ...(process.env.SEND_TIMEOUT_MS !== undefined && { sendTimeoutMs: Number(process.env.SEND_TIMEOUT_MS) }),
  subscribe: env('SUBSCRIBE', '1') !== '0',
  handler,
  ...(logEvents && {
    onEvent: (event) => {
      if (event.type !== 'finished' && 'operationID' in event) line({ event: event.type, operationID: event.operationID, ...(event.version !== undefined && { version: event.version }) });
    },
  }),
});
process.stderr.write(`${JSON.stringify({ worker: 'started', pid: process.pid, did: client.did })}\n`);
await worker.done;
client.dispose();
process.stdout.write(`${JSON.stringify({ counters: worker.counters })}\n`);
