/**
 * client/runtime/signals.ts: a linked signal aborts with the first source's
 * reason or on its timeout, and however many linked signals follow one
 * source (a worker's stop signal, followed by every operation in flight and
 * every request they make), the source carries one `abort` listener, so Node
 * never prints a MaxListenersExceededWarning at a worker's concurrency.
 */
import { getEventListeners } from 'node:events';
import { afterEach, expect, it } from 'vitest';
import { linkedSignal } from '../../client/runtime/signals.js';

const warnings: Error[] = [];
const onWarning = (warning: Error) => warnings.push(warning);
process.on('warning', onWarning);
afterEach(() => {
  warnings.length = 0;
});

it('64 linked signals on one source: one listener on it, each aborts with its reason, and no leak warning', async () => {
  const stop = new AbortController();
  const other = new AbortController();
  const guards = Array.from({ length: 64 }, () => linkedSignal([stop.signal, other.signal], 60_000));
  expect(getEventListeners(stop.signal, 'abort')).toHaveLength(1);
  expect(getEventListeners(other.signal, 'abort')).toHaveLength(1);
  const reason = new Error('stopped');
  stop.abort(reason);
  expect(guards.every((guard) => guard.signal.aborted && guard.signal.reason === reason && !guard.timedOut())).toBe(true);
  for (const guard of guards) guard.dispose();
  // Warnings are emitted on the next tick.
  await new Promise((resolve) => setImmediate(resolve));
  expect(warnings.filter((warning) => warning.name === 'MaxListenersExceededWarning')).toEqual([]);
  process.off('warning', onWarning);
});

it('a disposed signal no longer follows its source; the others still do', () => {
  const stop = new AbortController();
  const kept = linkedSignal([stop.signal]);
  const dropped = linkedSignal([stop.signal]);
  dropped.dispose();
  stop.abort(new Error('now'));
  expect(kept.signal.aborted).toBe(true);
  expect(dropped.signal.aborted).toBe(false);
});

it('a source already aborted aborts the linked signal at once; a timeout aborts it as timed out', async () => {
  const done = new AbortController();
  done.abort(new Error('before'));
  expect(linkedSignal([done.signal]).signal.reason).toEqual(new Error('before'));
  const timed = linkedSignal([new AbortController().signal], 5);
  await new Promise((resolve) => setTimeout(resolve, 30));
  expect(timed.signal.aborted).toBe(true);
  expect(timed.timedOut()).toBe(true);
  expect((timed.signal.reason as DOMException).name).toBe('TimeoutError');
});
