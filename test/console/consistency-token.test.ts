/**
 * The console's read-your-writes (issue 24 item 2, console/src/consistency-token.ts):
 * an urql client wired as console/src/graphql.ts wires it sends no token
 * before this tab's first write, then the latest of its mutations' tokens on
 * every request; a query's answer never sets one; a reload of the page (the
 * module loaded afresh, the tab's sessionStorage kept) still sends it.
 */
import { Client, fetchExchange, type Exchange } from '@urql/core';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

/** The module's exports; typed here because console/tsconfig.json, not the root tsc (NodeNext, no DOM), checks console/src. */
interface ConsistencyTokenModule {
  keepConsistencyTokenExchange: Exchange;
  sendConsistencyToken(headers: Headers): void;
}

// A path the root tsc does not follow (see above); vitest transforms it as it does any source.
const MODULE = new URL('../../console/src/consistency-token.ts', import.meta.url).pathname;
/**
 * The module as a page (re)load gets it: evaluated afresh under a query of its own
 * (resetting vitest's module registry would also drop every other file's modules in a
 * worker the suite runs without isolation: test/architecture/shared-workers.test.ts).
 */
let loads = 0;
const load = async () => (await import(/* @vite-ignore */ `${MODULE}?load=${++loads}`)) as ConsistencyTokenModule;

/** sessionStorage of one tab. */
function tabStorage(): Pick<Storage, 'getItem' | 'setItem' | 'removeItem'> {
  const items = new Map<string, string>();
  return {
    getItem: (key) => items.get(key) ?? null,
    setItem: (key, value) => void items.set(key, String(value)),
    removeItem: (key) => void items.delete(key),
  };
}

/** An urql client as the console's (the exchange before fetch, the header added in fetch), answering `answers` in turn. */
function consoleClient(module: ConsistencyTokenModule, answers: object[], sent: (string | null)[]): Client {
  return new Client({
    url: 'http://localhost/graphql',
    preferGetMethod: false,
    exchanges: [module.keepConsistencyTokenExchange, fetchExchange],
    fetch: async (_input, init) => {
      const headers = new Headers(init?.headers);
      module.sendConsistencyToken(headers);
      sent.push(headers.get('consistency-token'));
      return new Response(JSON.stringify(answers.shift() ?? { data: { ok: true } }), { headers: { 'content-type': 'application/json' } });
    },
  });
}

const written = (token: string) => ({ data: { ok: true }, extensions: { consistencyToken: token } });

describe('console: consistency token', () => {
  beforeEach(() => {
    vi.stubGlobal('sessionStorage', tabStorage());
  });
  afterEach(() => {
    vi.unstubAllGlobals();
  });

  it('sends the latest token of this tab’s mutations on later requests, never one a query answered', async () => {
    const sent: (string | null)[] = [];
    const client = consoleClient(await load(), [written('0/9'), written('0/10'), written('0/A'), written('0/FFFFFFFF')], sent);
    await client.query('query Read { ok }', {}, { requestPolicy: 'network-only' }).toPromise();
    await client.mutation('mutation Write { ok }', {}).toPromise();
    // 0/A is before 0/10 (hex): the later one stays.
    await client.mutation('mutation Write { ok }', {}).toPromise();
    // Not a mutation: whatever a query's answer carries is not this tab's write.
    await client.query('query Read { ok }', {}, { requestPolicy: 'network-only' }).toPromise();
    await client.query('query Read { ok }', {}, { requestPolicy: 'network-only' }).toPromise();
    expect(sent).toEqual([null, null, '0/10', '0/10', '0/10']);
  });

  it('a reload of the tab keeps it; another tab has its own', async () => {
    const before: (string | null)[] = [];
    await consoleClient(await load(), [written('0/3000148')], before).mutation('mutation Write { ok }', {}).toPromise();

    const reloaded: (string | null)[] = [];
    await consoleClient(await load(), [], reloaded).query('query Read { ok }', {}).toPromise();
    expect(reloaded).toEqual(['0/3000148']);

    vi.stubGlobal('sessionStorage', tabStorage());
    const otherTab: (string | null)[] = [];
    await consoleClient(await load(), [], otherTab).query('query Read { ok }', {}).toPromise();
    expect(otherTab).toEqual([null]);
  });
});
