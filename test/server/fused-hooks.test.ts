/**
 * Fused hooks (src/server/fused-hooks.ts): a run of plugins sharing one
 * onRequest, onResponse and onExecute behaves as yoga running them one by
 * one. Each case runs the same plugins through a bare yoga twice, as given
 * and fused, and compares what every hook saw, in order, and the response.
 * No database: this is yoga's plugin plumbing.
 */
import { createSchema, createYoga, type Plugin } from 'graphql-yoga';
import { describe, expect, it } from 'vitest';
import { fuseHooks } from '../../src/server/fused-hooks.js';

const schema = createSchema({
  typeDefs: 'type Query { hello: String! slow: String! }',
  resolvers: { Query: { hello: () => 'world', slow: async () => 'later' } },
});

type Trace = string[];
type Plugins = (trace: Trace) => Plugin<any>[];

/** The response and the trace of `plugins` over `query`, as given or fused. */
async function run(plugins: Plugins, fused: boolean, query = '{ hello }', path = '/graphql') {
  const trace: Trace = [];
  const given = plugins(trace);
  const yoga = createYoga({ schema, logging: false, plugins: fused ? fuseHooks(given) : given });
  const response = await yoga.fetch(`http://localhost${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ query }),
  });
  return { status: response.status, header: response.headers.get('x-seen'), body: await response.text(), trace };
}

/** Both ways the same, and the trace as expected. */
async function expectSame(plugins: Plugins, expected: Trace, query?: string, path?: string) {
  const plain = await run(plugins, false, query, path);
  const fused = await run(plugins, true, query, path);
  expect(fused).toEqual(plain);
  expect(plain.trace).toEqual(expected);
  return fused;
}

describe('fused hooks', () => {
  it('one hook per kind per run, the others kept; a plugin with onPluginInit ends a run', () => {
    const marker = Symbol('dispose');
    const plugins: Plugin<any>[] = [
      { onRequest: () => undefined, onParams: () => undefined },
      { onResponse: () => undefined, [marker]: 'kept' } as Plugin<any>,
      { onPluginInit: () => undefined, onRequest: () => undefined },
      { onRequest: () => undefined, onExecute: () => undefined },
      { onExecute: () => undefined },
    ];
    const out = fuseHooks(plugins);
    const hooks = (p: Plugin<any>) => ['onRequest', 'onResponse', 'onExecute', 'onParams', 'onPluginInit'].filter((name) => name in p);
    expect(out.map(hooks)).toEqual([
      ['onRequest', 'onResponse'],
      ['onParams'],
      [],
      ['onRequest', 'onPluginInit'],
      ['onRequest', 'onExecute'],
      [],
      [],
    ]);
    expect((out[2] as Record<symbol, unknown>)[marker]).toBe('kept');
    // A single plugin's hooks are its own, not wrapped.
    expect(out[0]!.onResponse).toBe(plugins[1]!.onResponse);
    expect(fuseHooks([plugins[0]!])).toEqual([plugins[0]]);
  });

  it('onRequest: in order, each seeing the request the ones before it set; async hooks are waited for', async () => {
    const step = (request: Request) => new URL(request.url).searchParams.get('step') ?? '-';
    const plugins: Plugins = (trace) => [
      { onRequest: ({ request }) => void trace.push(`a ${step(request)}`) },
      {
        onRequest: async ({ request, setRequest, fetchAPI }) => {
          await new Promise((resolve) => setTimeout(resolve, 5));
          setRequest(new fetchAPI.Request(`${request.url}?step=b`, { method: request.method, headers: request.headers, body: await request.text() }));
          trace.push('b');
        },
      },
      { onRequest: ({ request }) => void trace.push(`c ${step(request)}`) },
      { onResponse: ({ request, response }) => response.headers.set('x-seen', step(request)) },
    ];
    const result = await expectSame(plugins, ['a -', 'b', 'c b']);
    expect(result.header).toBe('b');
    expect(JSON.parse(result.body)).toEqual({ data: { hello: 'world' } });
  });

  it('onRequest: endResponse answers and no later hook runs; a later request handler set is used', async () => {
    const ending: Plugins = (trace) => [
      { onRequest: () => void trace.push('a') },
      {
        onRequest: ({ url, endResponse, fetchAPI }) => {
          trace.push(`b ${url.pathname}`);
          if (url.pathname === '/stop') endResponse(new fetchAPI.Response('stopped', { status: 418 }));
        },
      },
      { onRequest: () => void trace.push('c') },
      { onResponse: ({ response }) => void trace.push(`response ${response.status}`) },
    ];
    const stopped = await expectSame(ending, ['a', 'b /stop', 'response 418'], undefined, '/stop');
    expect(stopped).toMatchObject({ status: 418, body: 'stopped' });
    await expectSame(ending, ['a', 'b /graphql', 'c', 'response 200']);

    const handler: Plugins = (trace) => [
      { onRequest: ({ setRequestHandler, fetchAPI }) => setRequestHandler(async () => new fetchAPI.Response('handled', { status: 202 })) },
      { onRequest: ({ requestHandler }) => void trace.push(`handler ${typeof requestHandler}`) },
    ];
    expect(await expectSame(handler, ['handler function'])).toMatchObject({ status: 202, body: 'handled' });
  });

  it('onResponse: each sees the response the ones before it set', async () => {
    const plugins: Plugins = (trace) => [
      {
        onResponse: ({ response, setResponse, fetchAPI }) => {
          trace.push(`a ${response.status}`);
          setResponse(new fetchAPI.Response('replaced', { status: 299, headers: response.headers }));
        },
      },
      { onResponse: async ({ response }) => void trace.push(`b ${response.status} ${await response.clone().text()}`) },
      { onResponse: ({ response }) => response.headers.set('x-seen', String(response.status)) },
    ];
    const result = await expectSame(plugins, ['a 200', 'b 299 replaced']);
    expect(result).toMatchObject({ status: 299, header: '299', body: 'replaced' });
  });

  it('onExecute: the execute function the ones before set, done hooks in order each seeing the result set before', async () => {
    const plugins: Plugins = (trace) => [
      {
        onExecute: ({ executeFn, setExecuteFn }) => {
          trace.push('a');
          setExecuteFn(async (args: any) => {
            trace.push('wrapped execute');
            return executeFn(args);
          });
          return { onExecuteDone: ({ result }) => void trace.push(`a done ${JSON.stringify((result as any).data)}`) };
        },
      },
      {
        onExecute: async ({ executeFn, extendContext }) => {
          await new Promise((resolve) => setTimeout(resolve, 5));
          extendContext({ extended: true });
          trace.push(`b ${executeFn.name === '' ? 'sees the wrapper' : executeFn.name}`);
          return {
            onExecuteDone: async ({ result, setResult }) => {
              trace.push(`b done ${JSON.stringify((result as any).data)}`);
              setResult({ data: { hello: 'changed' } });
            },
          };
        },
      },
      { onExecute: ({ context }) => void trace.push(`c ${(context as { extended?: boolean }).extended}`) },
      {
        onExecute: () => ({
          onExecuteDone: ({ result }) => void trace.push(`d done ${JSON.stringify((result as any).data)}`),
        }),
      },
    ];
    const result = await expectSame(plugins, [
      'a',
      'b sees the wrapper',
      'c true',
      'wrapped execute',
      'a done {"hello":"world"}',
      'b done {"hello":"world"}',
      'd done {"hello":"changed"}',
    ]);
    expect(JSON.parse(result.body)).toEqual({ data: { hello: 'changed' } });
  });

  it('onExecute: setResultAndStopExecution stops the run; its own done hook still runs, no execution', async () => {
    const plugins: Plugins = (trace) => [
      { onExecute: () => ({ onExecuteDone: () => void trace.push('a done') }) },
      {
        onExecute: ({ setResultAndStopExecution }) => {
          trace.push('b stops');
          setResultAndStopExecution({ data: { hello: 'stopped' } });
          return { onExecuteDone: ({ result }) => void trace.push(`b done ${JSON.stringify((result as any).data)}`) };
        },
      },
      { onExecute: () => void trace.push('c') },
    ];
    const result = await expectSame(plugins, ['b stops', 'a done', 'b done {"hello":"stopped"}'], '{ slow }');
    expect(JSON.parse(result.body)).toEqual({ data: { hello: 'stopped' } });
  });

  it('a hook that throws fails the request as it would unfused', async () => {
    const plugins: Plugins = (trace) => [
      { onExecute: () => void trace.push('a') },
      {
        onExecute: () => {
          throw new Error('hook failed');
        },
      },
      { onExecute: () => void trace.push('c') },
    ];
    const result = await expectSame(plugins, ['a']);
    expect(JSON.parse(result.body).errors).toHaveLength(1);
  });
});
