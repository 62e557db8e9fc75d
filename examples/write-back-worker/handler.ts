/**
 * The connector's part of the example: how one operation is sent to the fake
 * provider (provider.ts) and looked up there. This is all a connector author
 * writes; the runtime does the rest. In your project the import is
 * `connector-store-client/runtime`.
 */
import type { CommittedOutcome, WriteBackHandler, WriteBackOperation } from '../../client/runtime/index.js';

/** The steps of a send, in order, as `atStep` names them. */
export type HandlerStep = 'before-mark' | 'after-mark' | 'during-send' | 'after-apply';

/** What the provider's item becomes in the store: the local document and the provider's id. */
function committed(operation: WriteBackOperation, item: { id: string; etag: string }): CommittedOutcome {
  return { kind: 'committed', documentID: `doc-${operation.operationID}`, sourceID: item.id, providerEtag: item.etag, resultEntity: { id: item.id, etag: item.etag } };
}

/**
 * A handler for the provider at `providerURL`. `atStep(step, n)` is called at
 * each step of this handler's n-th send (the fault test kills the process
 * there); `applyAfterMs(n)`, when it gives a number, asks the fake provider to
 * apply the n-th send only that long after it arrived (so a kill `during-send`
 * finds the provider still applying it).
 */
export function createProviderHandler(
  providerURL: string,
  options: { atStep?: (step: HandlerStep, send: number) => void; applyAfterMs?: (send: number) => number | undefined } = {},
): WriteBackHandler {
  let sends = 0;
  const atStep = options.atStep ?? (() => {});
  return {
    async send({ operation, signal, markSent }) {
      const send = ++sends;
      atStep('before-mark', send);
      // From here on a crash is reconciled by the next holder, never resent blindly.
      await markSent();
      atStep('after-mark', send);
      let response: Response;
      let text: string;
      const applyAfterMs = options.applyAfterMs?.(send);
      // Once the request has had time to reach the provider (loopback), while its answer is not yet back.
      const duringSend = setTimeout(() => atStep('during-send', send), 50);
      try {
        response = await fetch(`${providerURL}/events`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...(applyAfterMs !== undefined && { 'x-apply-after-ms': String(applyAfterMs) }) },
          // The deterministic event id goes with every attempt: a reconcile finds the write by it.
          body: JSON.stringify({ eventID: operation.deterministicEventID, operationID: operation.operationID, op: operation.op, model: operation.model, target: operation.target }),
          signal,
        });
        text = await response.text();
      } catch (error) {
        // Sent, and no (whole) answer: it may have landed.
        return { kind: 'unknown', message: `no answer from the provider: ${(error as Error).message}` };
      } finally {
        clearTimeout(duringSend);
      }
      atStep('after-apply', send);
      if (response.ok) return committed(operation, JSON.parse(text) as { id: string; etag: string });
      const retryAfter = response.headers.get('retry-after');
      if (response.status === 429 || response.status >= 500) {
        return { kind: 'retryable', httpStatus: response.status, message: text, ...(retryAfter !== null && Number.isFinite(Number(retryAfter)) && { retryAfterMs: Number(retryAfter) * 1000 }) };
      }
      if (response.status === 401) return { kind: 'auth', httpStatus: 401, message: text };
      return { kind: 'fatal', httpStatus: response.status, message: text };
    },
    async reconcile({ operation, signal }) {
      // Look the write up by what every send carried: the deterministic event id.
      const response = await fetch(`${providerURL}/events/${encodeURIComponent(operation.deterministicEventID)}`, { signal });
      if (response.status === 404) return { kind: 'not-landed' };
      if (!response.ok) return { kind: 'retryable', httpStatus: response.status, message: await response.text() };
      return committed(operation, (await response.json()) as { id: string; etag: string });
    },
  };
}
