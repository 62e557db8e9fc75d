/**
 * The server's own plugins' per-request hooks run as one hook per kind.
 *
 * Yoga runs each plugin's `onRequest`, `onResponse` and `onExecute` (and
 * each `onExecuteDone` they return) one step at a time through
 * `@whatwg-node/promise-helpers`, which builds a fresh payload with its
 * closures and a chain of promise-like objects per plugin per step, even
 * when every hook is synchronous. With a dozen guards that was the largest
 * share of what a dashboard list allocates beyond the jit floor (issue 21:
 * `ALLOCATION_CALLERS_OF=@whatwg-node/promise-helpers npx tsx
 * bench/allocation.ts list`). {@link fuseHooks} gives each run of adjacent
 * plugins one hook of each kind, which calls theirs in the same order with
 * one payload, waiting only for a hook that returns a promise.
 *
 * What each hook sees is what yoga would give it: the request, response,
 * request handler, execute function or result as the hooks before it left
 * them; `endResponse` and `setResultAndStopExecution` end the run as they
 * end yoga's loop; every setter also reaches yoga's own payload. A plugin
 * with `onPluginInit` may add plugins right after itself, so it is left as
 * it is and ends a run: the order of every hook, fused or not, is unchanged.
 */
import type { Plugin } from 'graphql-yoga';

type AnyPlugin = Plugin<any>;
type Hook = (payload: any) => unknown;

/** The hooks fused: yoga's server hooks and envelop's execute hook. */
const FUSED = ['onRequest', 'onResponse', 'onExecute'] as const;

const isPromise = (value: unknown): value is PromiseLike<unknown> => typeof (value as { then?: unknown } | null)?.then === 'function';

/**
 * Runs `hooks[from..]` with `payload`, in order, until `stopped()`;
 * `each` sees every hook's result. Synchronous while the hooks are.
 */
function runFrom(hooks: readonly Hook[], from: number, payload: unknown, stopped: () => boolean, each?: (result: unknown) => void): void | Promise<void> {
  for (let i = from; i < hooks.length; i++) {
    const result = hooks[i]!(payload);
    if (isPromise(result)) {
      return Promise.resolve(result).then((value) => {
        each?.(value);
        if (!stopped()) return runFrom(hooks, i + 1, payload, stopped, each);
      });
    }
    each?.(result);
    if (stopped()) return;
  }
}

function fusedOnRequest(hooks: readonly Hook[]): Hook {
  return (outer) => {
    let ended = false;
    const payload = {
      request: outer.request,
      url: outer.url,
      serverContext: outer.serverContext,
      fetchAPI: outer.fetchAPI,
      requestHandler: outer.requestHandler,
      setRequest(request: Request) {
        payload.request = request;
        outer.setRequest(request);
      },
      setRequestHandler(handler: unknown) {
        payload.requestHandler = handler;
        outer.setRequestHandler(handler);
      },
      endResponse(response: Response | undefined) {
        outer.endResponse(response);
        if (response) ended = true;
      },
    };
    return runFrom(hooks, 0, payload, () => ended);
  };
}

function fusedOnResponse(hooks: readonly Hook[]): Hook {
  return (outer) => {
    const payload = {
      request: outer.request,
      response: outer.response,
      serverContext: outer.serverContext,
      fetchAPI: outer.fetchAPI,
      setResponse(response: Response) {
        payload.response = response;
        outer.setResponse(response);
      },
    };
    return runFrom(hooks, 0, payload, () => false);
  };
}

interface ExecuteDoneHooks {
  onNext?: Hook;
  onEnd?: () => void;
}

/** One `onExecuteDone` result for several: each stream item through every `onNext`, then every `onEnd`. */
function fusedDone(results: readonly ExecuteDoneHooks[]): ExecuteDoneHooks | undefined {
  const onNext = results.flatMap((r) => (r.onNext ? [r.onNext] : []));
  const onEnd = results.flatMap((r) => (r.onEnd ? [r.onEnd] : []));
  if (onNext.length === 0 && onEnd.length === 0) return undefined;
  return {
    ...(onNext.length > 0 && { onNext: fusedResultHooks(onNext) }),
    ...(onEnd.length > 0 && { onEnd: () => onEnd.forEach((end) => end()) }),
  };
}

/** `{ args, result, setResult }` through each hook in turn, each seeing the result the ones before it set. */
function fusedResultHooks(hooks: readonly Hook[], collect?: (result: unknown) => void): Hook {
  return (outer) => {
    const payload = {
      args: outer.args,
      result: outer.result,
      setResult(result: unknown) {
        payload.result = result;
        outer.setResult(result);
      },
    };
    return runFrom(hooks, 0, payload, () => false, collect);
  };
}

function fusedOnExecute(hooks: readonly Hook[]): Hook {
  return (outer) => {
    let stopped = false;
    const afters: { onExecuteDone?: Hook }[] = [];
    const payload = {
      args: outer.args,
      context: outer.context,
      extendContext: outer.extendContext,
      executeFn: outer.executeFn,
      setExecuteFn(fn: unknown) {
        payload.executeFn = fn;
        outer.setExecuteFn(fn);
      },
      setResultAndStopExecution(result: unknown) {
        stopped = true;
        outer.setResultAndStopExecution(result);
      },
    };
    const collectAfter = (after: unknown) => {
      if (after) afters.push(after as { onExecuteDone?: Hook });
    };
    const done = (): { onExecuteDone: Hook } | undefined => {
      const onDone = afters.flatMap((after) => (after.onExecuteDone ? [after.onExecuteDone] : []));
      if (onDone.length === 0) return undefined;
      return {
        onExecuteDone: (outerDone) => {
          const results: ExecuteDoneHooks[] = [];
          const ran = fusedResultHooks(onDone, (result) => {
            if (result) results.push(result as ExecuteDoneHooks);
          })(outerDone);
          return isPromise(ran) ? Promise.resolve(ran).then(() => fusedDone(results)) : fusedDone(results);
        },
      };
    };
    const ran = runFrom(hooks, 0, payload, () => stopped, collectAfter);
    return isPromise(ran) ? Promise.resolve(ran).then(done) : done();
  };
}

const FUSERS: Record<(typeof FUSED)[number], (hooks: readonly Hook[]) => Hook> = {
  onRequest: fusedOnRequest,
  onResponse: fusedOnResponse,
  onExecute: fusedOnExecute,
};

/**
 * `plugins` with each run of adjacent plugins (between plugins that have
 * `onPluginInit`) sharing one `onRequest`, `onResponse` and `onExecute`,
 * placed on the run's first plugin; the plugins keep every other hook.
 */
export function fuseHooks(plugins: readonly AnyPlugin[]): AnyPlugin[] {
  const out: AnyPlugin[] = [];
  let run: AnyPlugin[] = [];
  const flush = () => {
    if (run.length > 1) {
      const fused: Record<string, Hook> = {};
      for (const name of FUSED) {
        const hooks = run.flatMap((plugin) => (plugin[name] ? [plugin[name] as Hook] : []));
        if (hooks.length === 1) fused[name] = hooks[0]!;
        else if (hooks.length > 1) fused[name] = FUSERS[name](hooks);
      }
      const rest = run.map((plugin) => {
        const copy: Record<string | symbol, unknown> = {};
        // Own keys, symbols too (dispose hooks are symbol-keyed).
        for (const key of Reflect.ownKeys(plugin)) if (!(FUSED as readonly (string | symbol)[]).includes(key)) copy[key] = (plugin as Record<string | symbol, unknown>)[key];
        return copy as AnyPlugin;
      });
      out.push(fused as AnyPlugin, ...rest);
    } else out.push(...run);
    run = [];
  };
  for (const plugin of plugins) {
    if (plugin.onPluginInit) {
      flush();
      out.push(plugin);
    } else run.push(plugin);
  }
  flush();
  return out;
}
