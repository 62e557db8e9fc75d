/**
 * `Promise.withResolvers` (Node 22) for the PostGraphile peer, which needs
 * nothing else of Node 22 (docs/benchmarks.md, "Throughput against the floors
 * and PostGraphile"). Imported first by server.ts and only
 * there: neither the app nor another baseline runs with it.
 */
declare global {
  interface PromiseConstructor {
    withResolvers<T>(): { promise: Promise<T>; resolve: (value: T | PromiseLike<T>) => void; reject: (reason?: unknown) => void };
  }
}

Promise.withResolvers ??= <T>() => {
  let resolve!: (value: T | PromiseLike<T>) => void;
  let reject!: (reason?: unknown) => void;
  const promise = new Promise<T>((a, b) => {
    resolve = a;
    reject = b;
  });
  return { promise, resolve, reject };
};

export {};
