/**
 * What follows each source signal: one `abort` listener per source, however
 * many linked signals follow it. A worker's stop signal is followed by every
 * operation in flight and every request they make: one listener each would
 * pass Node's 10 per target at a concurrency of 16 and print a
 * `MaxListenersExceededWarning` (a leak warning for what is not one).
 */
const followers = new WeakMap<AbortSignal, Set<(source: AbortSignal) => void>>();

/** Calls `onAbort` when `source` aborts; the returned function stops following. */
function follow(source: AbortSignal, onAbort: (source: AbortSignal) => void): () => void {
  let set = followers.get(source);
  if (set === undefined) {
    const created = new Set<(source: AbortSignal) => void>();
    followers.set(source, (set = created));
    source.addEventListener(
      'abort',
      () => {
        followers.delete(source);
        for (const follower of [...created]) follower(source);
      },
      { once: true },
    );
  }
  set.add(onAbort);
  return () => set.delete(onAbort);
}

/**
 * One AbortSignal that aborts when any of `signals` does or after
 * `timeoutMs`, with the first reason. What `AbortSignal.any` and
 * `AbortSignal.timeout` do, without their cost on Node 20: both make a
 * transferable signal per call, which showed as the runtime's largest own
 * cost per request (`makeTransferable`). `dispose()` stops following the
 * sources and clears the timer once the work it guarded is over.
 */
export function linkedSignal(signals: readonly (AbortSignal | undefined)[], timeoutMs?: number): { signal: AbortSignal; timedOut(): boolean; dispose(): void } {
  const controller = new AbortController();
  let timedOut = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const sources = signals.filter((signal): signal is AbortSignal => signal !== undefined);
  const unfollow: (() => void)[] = [];
  const onAbort = (source: AbortSignal) => {
    dispose();
    controller.abort(source.reason);
  };
  const dispose = () => {
    clearTimeout(timer);
    for (const stop of unfollow) stop();
  };
  for (const source of sources) {
    if (source.aborted) {
      controller.abort(source.reason);
      return { signal: controller.signal, timedOut: () => false, dispose: () => {} };
    }
  }
  for (const source of sources) unfollow.push(follow(source, onAbort));
  if (timeoutMs !== undefined) {
    timer = setTimeout(() => {
      timedOut = true;
      dispose();
      controller.abort(new DOMException('The operation timed out.', 'TimeoutError'));
    }, timeoutMs);
  }
  return { signal: controller.signal, timedOut: () => timedOut, dispose };
}
