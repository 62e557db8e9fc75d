/**
 * The console's live stream in a real headless Chromium against a development
 * server started with `--demo`: one browser and one server per dialect for
 * the whole file. All the console tabs of one browser share a single
 * graphql-sse stream (a SharedWorker), so twelve tabs open together each
 * render their first table within 2 s of their load (loads started one after
 * another: twelve at the same instant measure the machine's cores, not the
 * console) and are all live, thirty navigations in one tab (full loads and
 * back/forward, which the back/forward cache may restore) each render theirs
 * within 2 s, the browser never holds more than two event streams (counted by
 * a TCP proxy the pages load the console through, sampled every 200 ms; the
 * server's `connector_store_subscriptions_open{transport="sse"}` counts
 * subscriptions, which one stream multiplexes, so it is sampled beside it and
 * only asked to be non-zero) and, ~3 s after all tabs but one closed, at most
 * one stream and one subscription are left; GraphiQL still loads and runs its
 * query beside the twelve tabs. After a server restart
 * (SIGTERM, then the same port, working directory and database) the header's
 * `data-live-status` leaves `live`, comes back to `live` within 5 s of the
 * server answering, without a click, and the overview re-reads: it shows a
 * claim made through the store while the server was down (only a re-read can
 * show that) and one made over HTTP right after. Screenshots go to
 * test-output/screenshots/console-live-*.png (ignored by git).
 *
 * No request interception (keepOnLoopback): Chromium keeps a page that
 * intercepts requests out of the back/forward cache, which this file means to
 * exercise with Chrome's defaults. launchChromium's resolver rules already
 * keep the browser on 127.0.0.1; requests are only watched, and any to
 * another host fails the test.
 */
import { mkdirSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LocalKey } from '../../src/auth/index.js';
import { openDatabase, parseDatabaseURL, type DialectName } from '../../src/db/connect.js';
import { opsCommand } from '../../src/cli/ops.js';
import { createStoreContext } from '../../src/store/context.js';
import { browserForFile, findChromium } from '../helpers/browser.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { postGraphQL, startDemoServer, type DemoServer, type E2EServers } from '../helpers/e2e-server.js';
import { claimFresh } from '../helpers/operation-claim-fixtures.js';
import { CLAIM, claimInput } from '../helpers/operation-graphql.js';

const AUDIENCE = 'connector-store-console';
const CHROMIUM = findChromium();
const SCREENSHOTS = fileURLToPath(new URL('../../test-output/screenshots/', import.meta.url));
const dialects: DialectName[] = testDialects().filter(dialectAvailable);

/** How soon a console view must show its first table (or the overview its first card), from the start of its navigation. */
const RENDER_MS = 2_000;
/** How long a navigation is waited for before it counts as never rendered (longer than RENDER_MS, so a slow one reports its time). */
const GIVE_UP_MS = 5_000;

/** The views the tabs open, and what shows that each rendered (the selectors console-browser.test.ts waits for). */
const VIEWS = {
  overview: { path: '/console/', ready: '[data-testid=counts-by-state] .card' },
  operations: { path: '/console/operations', ready: '[data-testid=operations-table] tbody tr[data-operation-id]' },
  watches: { path: '/console/watches', ready: '[data-testid=watches-table] tbody tr' },
  // Every pass, as console-browser.test.ts opens it (the default shows only those in progress).
  sweeps: { path: '/console/sweeps?show=all', ready: '[data-testid=sweeps-table] tbody tr' },
} as const;
type ViewName = keyof typeof VIEWS;
const TAB_VIEWS: ViewName[] = ['overview', 'operations', 'watches', 'sweeps'];

/**
 * Thirty navigations as people make them in one tab that starts on the
 * overview: full loads between views, and back and forward through them.
 */
const STEPS: readonly (ViewName | 'back' | 'forward')[] = [
  ...(['operations', 'watches', 'back', 'forward', 'sweeps', 'back', 'back', 'forward', 'forward', 'overview'] as const),
  ...(['back', 'operations', 'back', 'forward', 'watches', 'sweeps', 'back', 'back', 'back', 'forward'] as const),
  ...(['forward', 'forward', 'overview', 'back', 'forward', 'operations', 'back', 'watches', 'back', 'forward'] as const),
];

const STATUS = '[data-live-status]';
type LiveStatus = 'live' | 'connecting' | 'limited' | 'reconnecting' | 'offline';

/** The header's live status, or why there is none. */
const statusOf = (page: Page) => page.$eval(STATUS, (el) => el.getAttribute('data-live-status')).catch(() => 'none: no [data-live-status] element in the page');

/** Waits up to `timeout` ms for the header's status to be one of `wanted`; else throws saying what it is. */
async function waitForStatus(page: Page, wanted: LiveStatus[], timeout: number): Promise<void> {
  try {
    // Polled on a timer, not per animation frame: a background tab draws no frames.
    await page.waitForFunction((accepted: string[]) => accepted.includes(document.querySelector('[data-live-status]')?.getAttribute('data-live-status') ?? ''), { timeout, polling: 100 }, wanted);
  } catch {
    throw new Error(`the console's status is ${await statusOf(page)} after ${timeout} ms, not ${wanted.join(' or ')}`);
  }
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * `connector_store_subscriptions_open{transport="sse"}` from /metrics (no
 * METRICS_TOKEN in this set-up, as in console-browser.test.ts): the
 * subscriptions open over SSE, however many streams carry them.
 */
async function openSSESubscriptions(origin: string): Promise<number> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  const value = /^connector_store_subscriptions_open\{transport="sse"\} (\d+)$/m.exec(text)?.[1];
  if (value === undefined) throw new Error('no connector_store_subscriptions_open{transport="sse"} sample in /metrics');
  return Number(value);
}

/** `connector_store_event_streams_open` from /metrics: the single-connection event streams the server holds, however they reach it. */
async function serverEventStreams(origin: string): Promise<number> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  const value = /^connector_store_event_streams_open (\d+)$/m.exec(text)?.[1];
  if (value === undefined) throw new Error('no connector_store_event_streams_open sample in /metrics');
  return Number(value);
}

/** Polls `/readyz` until it answers 200; resolves to when it did. */
async function readyAt(origin: string, withinMs = 15_000): Promise<number> {
  for (const deadline = Date.now() + withinMs; ; await sleep(25)) {
    if (Date.now() > deadline) throw new Error(`/readyz did not answer 200 within ${withinMs} ms`);
    const ready = await fetch(`${origin}/readyz`).then((response) => response.status, () => 0);
    if (ready === 200) return Date.now();
  }
}

/**
 * Every ~200 ms until stopped: the event streams open through `proxy` and
 * the server's SSE subscriptions gauge, each sample tagged with the phase of
 * the test it fell in.
 */
function sampleStreams(origin: string, proxy: { open(): number }) {
  const samples: { phase: string; streams: number; subscriptions: number }[] = [];
  const failures: string[] = [];
  let phase = 'before the tabs';
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const sampledIn = phase;
      const streams = proxy.open();
      try {
        samples.push({ phase: sampledIn, streams, subscriptions: await openSSESubscriptions(origin) });
      } catch (error) {
        failures.push(`${sampledIn}: ${String(error)}`);
      }
      await sleep(200);
    }
  })();
  const max = (of: 'streams' | 'subscriptions', inPhases?: string[]) =>
    Math.max(0, ...samples.filter((s) => inPhases === undefined || inPhases.includes(s.phase)).map((s) => s[of]));
  return {
    failures,
    max,
    setPhase: (next: string) => void (phase = next),
    stop: async () => {
      stopped = true;
      await loop;
    },
    /** Per phase: samples, most streams and most subscriptions open at once, for messages. */
    summary: () =>
      [...new Set(samples.map((s) => s.phase))]
        .map((p) => `${p}: ${samples.filter((s) => s.phase === p).length} samples, streams ≤ ${max('streams', [p])}, subscriptions ≤ ${max('subscriptions', [p])}`)
        .join('; '),
  };
}

/**
 * A TCP proxy on 127.0.0.1 in front of the server that counts the event
 * streams open through it: HTTP/1.1 responses of type `text/event-stream`
 * (graphql-sse's stream, in either mode) that have not ended (their last
 * chunk, the next request on the connection, or the connection's close). The
 * pages load the console through it, so this is what the browser holds open,
 * whoever in it (a tab, a SharedWorker) opened it.
 * `connector_store_subscriptions_open` cannot tell: it counts subscriptions,
 * and one stream carries every subscription of every tab.
 */
async function eventStreamCounter(target: string): Promise<{ origin: string; open(): number; opened(): string[]; freeze(): void; close(): Promise<void> }> {
  const port = Number(new URL(target).port);
  /** Open streams: their connection, and the request that opened each. */
  const streaming = new Map<Socket, string>();
  const opened: string[] = [];
  const sockets = new Set<Socket>();
  const started = Date.now();
  const server = createServer((client) => {
    const upstream = connect(port, '127.0.0.1');
    sockets.add(client).add(upstream);
    // Requests of this connection, one after another (Chrome does not pipeline): a head, then its body; the
    // response to the last one, a head, then its body.
    let head = '';
    let bodyLeft = 0;
    let request = '';
    let responseHead: string | undefined;
    client.on('data', (chunk: Buffer) => {
      let rest = chunk.toString('latin1');
      while (rest.length > 0) {
        if (bodyLeft > 0) {
          const skipped = Math.min(bodyLeft, rest.length);
          bodyLeft -= skipped;
          rest = rest.slice(skipped);
          continue;
        }
        head += rest;
        rest = '';
        const end = head.indexOf('\r\n\r\n');
        if (end < 0) break;
        const lines = head.slice(0, end);
        rest = head.slice(end + 4);
        head = '';
        bodyLeft = Number(/^content-length:\s*(\d+)/im.exec(lines)?.[1] ?? 0);
        // A new request means the response before it ended.
        streaming.delete(client);
        request = lines.split('\r\n')[0]!.replace(/ HTTP\/1\.1$/, '').replace(/token=[^&\s]+/, 'token=…');
        responseHead = '';
      }
    });
    upstream.on('data', (chunk: Buffer) => {
      const text = chunk.toString('latin1');
      if (responseHead !== undefined) {
        responseHead += text;
        const end = responseHead.indexOf('\r\n\r\n');
        if (end < 0) return;
        const lines = responseHead.slice(0, end);
        responseHead = undefined;
        if (/^content-type:\s*text\/event-stream/im.test(lines)) {
          streaming.set(client, request);
          opened.push(`+${Date.now() - started} ms ${request}`);
        }
      }
      // The last chunk of a chunked response: the stream ended, the connection stays for the next request.
      if (/(^|\r\n)0\r\n\r\n$/.test(text)) streaming.delete(client);
    });
    const gone = () => {
      streaming.delete(client);
      sockets.delete(client);
      sockets.delete(upstream);
      client.destroy();
      upstream.destroy();
    };
    client.on('close', gone).on('error', gone);
    upstream.on('close', gone).on('error', gone);
    client.pipe(upstream);
    upstream.pipe(client);
    pairs.add([client, upstream]);
    client.once('close', () => pairs.forEach((pair) => pair[0] === client && pairs.delete(pair)));
  });
  /** Connections open now, each with its upstream. */
  const pairs = new Set<[Socket, Socket]>();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('the proxy has no port');
  return {
    origin: `http://127.0.0.1:${address.port}`,
    open: () => streaming.size,
    opened: () => opened,
    /** The event streams open now go silent both ways without closing (a dead connection, a dropped NAT entry); the rest pass. */
    freeze: () => {
      for (const [client, upstream] of pairs) {
        if (!streaming.has(client)) continue;
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
        streaming.delete(client);
      }
    },
    close: async () => {
      for (const socket of sockets) socket.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

describe.skipIf(CHROMIUM === undefined)('the console’s live stream in a real browser', () => {
  // One browser file at a time (takeBrowserTurn): another's tabs would slow this file's timed renders.
  const browser = browserForFile(CHROMIUM!);

  describe.each(dialects)('%s', (dialect) => {
    const shoot = dialect === dialects[0];
    let demo: DemoServer | undefined;
    let owner: LocalKey;
    let ownerToken: string;
    let servers: E2EServers | undefined;
    const contexts: BrowserContext[] = [];
    /** Requests any page made to a host but 127.0.0.1, and uncaught errors of any page. */
    const foreign: string[] = [];
    const pageErrors: string[] = [];
    let origin = '';

    beforeAll(async () => {
      // The server's local key owns the demo rows and is the key the console signs in with.
      demo = await startDemoServer(dialect, { audience: AUDIENCE, name: 'console_live' });
      ({ localKey: owner, localToken: ownerToken, servers, origin } = demo);
      mkdirSync(SCREENSHOTS, { recursive: true });
    }, 90_000);

    afterAll(async () => {
      for (const context of contexts) await context.close().catch(() => {});
      await demo?.dispose();
      expect(foreign).toEqual([]);
      expect(pageErrors).toEqual([]);
    });

    /** A new tab of `context`, its requests watched (never intercepted) and its uncaught errors recorded. */
    async function newTab(context: BrowserContext): Promise<Page> {
      const page = await context.newPage();
      await page.setViewport({ width: 1280, height: 900 });
      page.on('request', (request) => {
        const url = request.url();
        if (!url.startsWith('data:') && !url.startsWith('blob:') && !url.startsWith('http://127.0.0.1:')) foreign.push(url);
      });
      page.on('pageerror', (error) => pageErrors.push(`${page.url()}: ${String(error)}`));
      // Whether the last show of each document was a restore from the back/forward cache.
      await page.evaluateOnNewDocument(() => {
        addEventListener('pageshow', (event) => void ((window as unknown as { __restored: boolean }).__restored = event.persisted));
      });
      return page;
    }

    async function newContext(): Promise<BrowserContext> {
      const context = await browser().createBrowserContext();
      contexts.push(context);
      return context;
    }

    /**
     * Runs `navigation` (a goto, back or forward) and waits until `page` is on
     * `view` (under `base`) and shows its first table; returns the milliseconds
     * from the start of the navigation, or why it never rendered within
     * {@link GIVE_UP_MS}.
     */
    async function rendered(page: Page, base: string, view: ViewName, navigation: (timeout: number) => Promise<unknown>): Promise<number | string> {
      const started = Date.now();
      const left = () => Math.max(1, GIVE_UP_MS - (Date.now() - started));
      try {
        await navigation(left());
        const url = page.url();
        if (url !== `${base}${VIEWS[view].path}`) return `on ${url} instead of ${VIEWS[view].path}`;
        await page.waitForSelector(VIEWS[view].ready, { timeout: left() });
        return Date.now() - started;
      } catch (error) {
        return `not rendered within ${GIVE_UP_MS} ms (${String(error).split('\n')[0]})`;
      }
    }

    const api = async <T = any>(query: string, variables: Record<string, unknown> = {}) => {
      const { status, body } = await postGraphQL<T>(servers!.server, ownerToken, query, variables);
      expect(status).toBe(200);
      expect(body.errors).toBeUndefined();
      return body.data!;
    };

    it('any number of tabs share one stream: twelve tabs and thirty navigations each render within 2 s, the browser holds at most two event streams, GraphiQL still loads', async () => {
      // The pages go through the counting proxy, /metrics and the API straight to the server.
      const proxy = await eventStreamCounter(origin);
      const front = proxy.origin;
      const streams = sampleStreams(origin, proxy);
      try {
        // One tab goes through the four views first and closes: the server compiles and plans their queries (the
        // first overview on a fresh Postgres takes ~2 s), the context caches the bundle.
        streams.setPhase('warm-up');
        const context = await newContext();
        const first = await newTab(context);
        for (const view of TAB_VIEWS) {
          await first.goto(`${front}${VIEWS[view].path}`, { waitUntil: 'domcontentloaded' });
          await first.waitForSelector(VIEWS[view].ready, { timeout: 15_000 });
        }
        await first.close();
        // Chrome tears the closed tab's worker down on its own schedule: under the full suite's load it took over
        // 3 s once in four runs (a stream opened by the tab's last view was still open), never 8 s.
        for (const until = Date.now() + 8_000; Date.now() < until && proxy.open() > 0; ) await sleep(100);
        expect(proxy.open(), `event streams open 8 s after the warm-up tab closed (${proxy.opened().join('; ')})`).toBe(0);

        // Twelve tabs open at once, three of each view. Their loads start one after another, each once the one
        // before has rendered: twelve cold renderers compiling the bundle together take 4-7 s on a 2-core machine
        // whatever the console does, while the fault this catches does not depend on it: tabs that each hold a
        // stream of their own use up Chrome's six connections per host, and the seventh tab never renders.
        streams.setPhase('12 tabs');
        const tabs = await Promise.all(Array.from({ length: 12 }, () => newTab(context)));
        const views = tabs.map((_, i) => TAB_VIEWS[i % TAB_VIEWS.length]!);
        const times: (number | string)[] = [];
        for (const [i, tab] of tabs.entries()) {
          const load = (timeout: number) => tab.goto(`${front}${VIEWS[views[i]!].path}`, { waitUntil: 'domcontentloaded', timeout });
          let ms = await rendered(tab, front, views[i]!, load);
          // The machine's two cores are shared with another test file: a load that was merely slow renders in time
          // when loaded again, while a tab the browser's connection limit blocks never renders at all (it hung 20-36 s).
          if (typeof ms !== 'number' || ms > RENDER_MS) {
            console.log(`[${dialect}] tab ${i} (${views[i]}) first rendered in ${ms} ms; loading it again`);
            ms = await rendered(tab, front, views[i]!, load);
          }
          times.push(ms);
        }
        const slowTabs = times.map((ms, i) => ({ tab: i, view: views[i], ms })).filter(({ ms }) => typeof ms !== 'number' || ms > RENDER_MS);
        expect(slowTabs, `tabs that did not render within ${RENDER_MS} ms (${streams.summary()})`).toEqual([]);
        // All twelve are live together (on the one shared stream).
        const notLive: string[] = [];
        for (const [i, tab] of tabs.entries()) {
          await waitForStatus(tab, ['live'], 5_000).catch(async () => notLive.push(`tab ${i} (${views[i]}): ${await statusOf(tab)}`));
        }
        expect(notLive, `tabs whose header is not live with all twelve open (${streams.summary()})`).toEqual([]);

        // Thirty navigations in the first tab (on the overview), tracked against a model of its history.
        streams.setPhase('30 navigations');
        const tab = tabs[0]!;
        const history: ViewName[] = [views[0]!];
        let at = 0;
        const steps: { step: string; view: ViewName; ms: number | string; restored: boolean }[] = [];
        for (const step of STEPS) {
          let view: ViewName;
          let ms: number | string;
          if (step === 'back' || step === 'forward') {
            at += step === 'back' ? -1 : 1;
            view = history[at]!;
            if (view === undefined) throw new Error(`STEPS goes ${step} past the ends of the history`);
            ms = await rendered(tab, front, view, (timeout) => (step === 'back' ? tab.goBack({ waitUntil: 'domcontentloaded', timeout }) : tab.goForward({ waitUntil: 'domcontentloaded', timeout })));
          } else {
            if (step === history[at]) throw new Error(`STEPS loads ${step} on itself`);
            history.splice(at + 1, Infinity, step);
            at += 1;
            view = step;
            ms = await rendered(tab, front, view, (timeout) => tab.goto(`${front}${VIEWS[view].path}`, { waitUntil: 'domcontentloaded', timeout }));
          }
          const restored = await tab.evaluate(() => (window as unknown as { __restored?: boolean }).__restored === true).catch(() => false);
          steps.push({ step, view, ms, restored });
        }
        expect(steps).toHaveLength(30);
        const slowSteps = steps.map((s, i) => ({ n: i + 1, ...s })).filter(({ ms }) => typeof ms !== 'number' || ms > RENDER_MS);
        expect(slowSteps, `navigations that did not render within ${RENDER_MS} ms (${streams.summary()})`).toEqual([]);

        // GraphiQL in a new tab beside the twelve: it loads and its query is answered.
        streams.setPhase('GraphiQL');
        const graphiql = await newTab(context);
        // As wide as graphiql-browser.test.ts's: narrower, the response editor wraps the DID.
        await graphiql.setViewport({ width: 1600, height: 1000 });
        await graphiql.goto(`${front}/graphql`, { waitUntil: 'load' });
        await graphiql.waitForFunction(() => document.querySelector('.graphiql-query-editor')?.textContent?.includes('serverInfo'), { timeout: 20_000 });
        expect(await graphiql.title()).toBe('Connector store');
        const answer = graphiql.waitForResponse((response) => response.request().method() === 'POST' && (response.request().postData() ?? '').includes('serverInfo'), { timeout: 15_000 });
        await graphiql.click('.graphiql-execute-button');
        const response = await answer;
        expect(response.status()).toBe(200);
        const body = (await response.json()) as { data?: { serverInfo: { viewerDID: string } }; errors?: unknown[] };
        expect(body.errors).toBeUndefined();
        expect(body.data?.serverInfo.viewerDID).toBe(owner.did);
        // Monaco renders spaces as no-break spaces and may wrap: compare without whitespace.
        await graphiql.waitForFunction((did) => (document.querySelector('.graphiql-response')?.textContent ?? '').replace(/\s+/g, '').includes(did), { timeout: 10_000 }, owner.did);

        // The server restarted twice under the twelve tabs (issue 38): each time every tab is live again within 5 s
        // of the server's readiness, having re-read what it shows; then the browser holds one stream, on the
        // server's own count, and a new tab still loads its first table within 2 s.
        // GraphiQL has shown what it must; left open, its page throws an uncaught error event when the server goes away
        // (seen once, from GraphiQL's own code), which this file counts against the console.
        await graphiql.close();
        streams.setPhase('two restarts');
        const restarts: string[] = [];
        for (let round = 1; round <= 2; round++) {
          const stopped = servers!.server;
          stopped.child.kill('SIGTERM');
          await stopped.exited;
          await servers!.restart(stopped);
          const answeredAt = await readyAt(origin);
          const claimed = `console-restart-${round}-${dialect}`;
          await api(CLAIM, { input: claimInput({ operationID: claimed, connectorName: 'google', model: 'calendar.event' }) });
          const counts = (await api<{ operationCounts: { state: string; count: number }[] }>('{ operationCounts { state count } }')).operationCounts;
          const late: string[] = [];
          for (const [i, other] of tabs.entries()) {
            await waitForStatus(other, ['live'], Math.max(1, 5_000 - (Date.now() - answeredAt))).catch(async () => late.push(`tab ${i} (${views[i]}): ${await statusOf(other)}`));
          }
          // Fresh data: the overview tabs show the counts with this round's claim.
          for (const [i, other] of tabs.entries()) {
            if (views[i] !== 'overview' || other === tab) continue;
            const shown = () =>
              other.$$eval('[data-testid=counts-by-state] [data-state]', (cards) =>
                cards.map((card) => ({ state: card.getAttribute('data-state'), count: Number(card.querySelector('.card-count')?.textContent?.replace(/\D/g, '')) })),
              );
            await other
              .waitForFunction(
                (wanted) =>
                  JSON.stringify(
                    [...document.querySelectorAll('[data-testid=counts-by-state] [data-state]')].map((card) => ({ state: card.getAttribute('data-state'), count: Number(card.querySelector('.card-count')?.textContent?.replace(/\D/g, '')) })),
                  ) === wanted,
                { timeout: Math.max(1, 5_000 - (Date.now() - answeredAt)), polling: 100 },
                JSON.stringify(counts),
              )
              .catch(async () => late.push(`tab ${i} (overview) shows ${JSON.stringify(await shown())}, the server counts ${JSON.stringify(counts)}`));
          }
          restarts.push(`restart ${round}: all tabs live and fresh ${Date.now() - answeredAt} ms after /readyz`);
          expect(late, `restart ${round}: tabs not live with fresh data within 5 s of the server's readiness (${streams.summary()}; streams opened: ${proxy.opened().join('; ')})`).toEqual([]);
        }
        await sleep(2_000);
        const afterRestarts = { server: await serverEventStreams(origin), browser: proxy.open() };
        expect(afterRestarts, `event streams 2 s after the second restart, on the server and through the proxy (${restarts.join('; ')}; streams opened: ${proxy.opened().join('; ')})`).toEqual({ server: 1, browser: 1 });
        const newcomer = await newTab(context);
        const newcomerMs = await rendered(newcomer, front, 'operations', (timeout) => newcomer.goto(`${front}${VIEWS.operations.path}`, { waitUntil: 'domcontentloaded', timeout }));
        expect(newcomerMs, `a new tab after the restarts (${restarts.join('; ')})`).toBeLessThanOrEqual(RENDER_MS);
        await newcomer.close();
        console.info(`[${dialect}] ${restarts.join('; ')}; then ${JSON.stringify(afterRestarts)} event streams (server, browser); a new tab rendered in ${newcomerMs} ms`);

        const kept = tabs[1]!;
        if (shoot) {
          await kept.bringToFront();
          await kept.screenshot({ path: join(SCREENSHOTS, 'console-live-tabs.png') });
        }
        const open = ['12 tabs', '30 navigations', 'GraphiQL', 'two restarts'];

        // All tabs but one (the operations list: two subscriptions) closed: ~3 s later the browser holds at most one
        // stream, and the server has let go of the closed tabs' subscriptions.
        streams.setPhase('one tab left');
        for (const other of tabs) if (other !== kept) await other.close();
        await sleep(3_000);
        const afterClosing = { streams: proxy.open(), subscriptions: await openSSESubscriptions(origin) };
        await streams.stop();

        const restores = steps.filter((s) => s.restored).length;
        console.info(
          `[${dialect}] tabs rendered in ${times.join(', ')} ms; navigations in ${steps.map((s) => `${s.step}:${s.ms}${s.restored ? '(bfcache)' : ''}`).join(' ')}; ` +
            `${restores} back/forward cache restores; ${streams.summary()}; after closing all tabs but one: ${JSON.stringify(afterClosing)}`,
        );
        // While the server restarts, its /metrics cannot answer.
        expect(streams.failures.filter((failure) => !failure.startsWith('two restarts:')), 'failed /metrics scrapes').toEqual([]);
        expect(streams.max('streams', open), `no event stream was ever open while the tabs were (${streams.summary()})`).toBeGreaterThanOrEqual(1);
        expect(streams.max('subscriptions', open), `the server never counted an SSE subscription while the tabs were open (${streams.summary()})`).toBeGreaterThanOrEqual(1);
        expect(streams.max('streams'), `most event streams open at once (${streams.summary()}; streams opened: ${proxy.opened().join('; ')})`).toBeLessThanOrEqual(2);
        expect(afterClosing, `event streams and SSE subscriptions ~3 s after closing all tabs but one, whose view holds two subscriptions (${streams.summary()}; streams opened: ${proxy.opened().join('; ')})`).toEqual({ streams: expect.toBeOneOf([0, 1]), subscriptions: expect.toBeOneOf([0, 2]) });
      } finally {
        await streams.stop();
        // The tabs first: left open, they would keep knocking on the closed proxy.
        for (const context of contexts) await context.close().catch(() => {});
        await proxy.close();
      }
    }, 120_000);

    it('reconnects on its own after a restart: the header leaves “live”, is live again within 5 s of the server answering, and the overview re-reads', async () => {
      const context = await newContext();
      const page = await newTab(context);
      await page.goto(`${origin}/console/`, { waitUntil: 'domcontentloaded' });
      await page.waitForSelector(VIEWS.overview.ready, { timeout: 10_000 });
      await waitForStatus(page, ['live'], 10_000);
      const shownCounts = () =>
        page.$$eval('[data-testid=counts-by-state] [data-state]', (cards) =>
          cards.map((card) => ({ state: card.getAttribute('data-state'), count: Number(card.querySelector('.card-count')?.textContent?.replace(/\D/g, '')) })),
        );
      const countsBefore = (await api<{ operationCounts: { state: string; count: number }[] }>('{ operationCounts { state count } }')).operationCounts;
      expect(await shownCounts()).toEqual(countsBefore);

      // Stopped: the header says so within 10 s.
      const stopped = servers!.server;
      const stopping = Date.now();
      stopped.child.kill('SIGTERM');
      await waitForStatus(page, ['reconnecting', 'offline'], 10_000);
      const noticedMs = Date.now() - stopping;
      expect((await stopped.exited).code).toBe(0);

      // While it is down, a claim straight into its database: no stream can carry it, only a re-read shows it.
      const database = openDatabase(parseDatabaseURL(servers!.databaseURL));
      try {
        await claimFresh(createStoreContext(database.db, database.dialect), {
          callerDID: owner.did,
          ownerDID: owner.did,
          operationID: `console-down-${dialect}`,
          connectorName: 'google',
          model: 'calendar.event',
          deterministicEventID: `console-down-${dialect}`,
        });
      } finally {
        await database.close();
      }
      const statusWhileDown = await statusOf(page);
      expect(['reconnecting', 'offline']).toContain(statusWhileDown);

      // The same port, working directory and database; as soon as /readyz answers, a claim over HTTP.
      const restarted = await servers!.restart(stopped);
      expect(restarted.origin).toBe(origin);
      let answeredAt = 0;
      for (const deadline = Date.now() + 10_000; answeredAt === 0; await sleep(25)) {
        if (Date.now() > deadline) throw new Error('/readyz did not answer 200 within 10 s of the restart');
        const ready = await fetch(`${origin}/readyz`).then((response) => response.status, () => 0);
        if (ready === 200) answeredAt = Date.now();
      }
      const { claimOperation } = await api(CLAIM, { input: claimInput({ operationID: `console-restarted-${dialect}`, connectorName: 'google', model: 'calendar.event' }) });
      expect(claimOperation.outcome).toBe('CLAIMED');
      const countsAfter = (await api<{ operationCounts: { state: string; count: number }[] }>('{ operationCounts { state count } }')).operationCounts;
      expect(countsAfter).not.toEqual(countsBefore);
      expect(countsAfter.reduce((sum, row) => sum + row.count, 0)).toBe(countsBefore.reduce((sum, row) => sum + row.count, 0) + 2);

      // Live again without a click, within 5 s of the server answering.
      const left = () => Math.max(1, 5_000 - (Date.now() - answeredAt));
      let liveMs: number | string;
      try {
        await waitForStatus(page, ['live'], left());
        liveMs = Date.now() - answeredAt;
      } catch {
        liveMs = `still ${await statusOf(page)} 5 s after the server answered`;
      }
      // And the overview re-read: both claims counted, within the same 5 s.
      let shownMs: number | string = 'not within 5 s';
      for (let shown = await shownCounts(); ; shown = await shownCounts()) {
        if (JSON.stringify(shown) === JSON.stringify(countsAfter)) {
          shownMs = Date.now() - answeredAt;
          break;
        }
        if (Date.now() - answeredAt > 5_000) {
          shownMs = `not within 5 s: shows ${JSON.stringify(shown)}, the server counts ${JSON.stringify(countsAfter)}`;
          break;
        }
        await sleep(50);
      }
      console.info(`[${dialect}] status left “live” ${noticedMs} ms after SIGTERM (${statusWhileDown}); live again ${liveMs} ms and counts shown ${shownMs} ms after /readyz answered`);
      if (shoot) await page.screenshot({ path: join(SCREENSHOTS, 'console-live-reconnected.png'), fullPage: true });
      expect({ liveMs, shownMs }).toEqual({ liveMs: expect.any(Number), shownMs: expect.any(Number) });
      expect(await page.url()).toBe(`${origin}/console/`);
    }, 60_000);

    it.skipIf(dialect !== dialects[0])('a stream that goes silent without closing (a sleep, a dead connection) is replaced: live again, and the page re-reads', async () => {
      const proxy = await eventStreamCounter(origin);
      const context = await newContext();
      try {
        const page = await newTab(context);
        await page.goto(`${proxy.origin}/console/`, { waitUntil: 'domcontentloaded' });
        await page.waitForSelector(VIEWS.overview.ready, { timeout: 10_000 });
        await waitForStatus(page, ['live'], 10_000);
        // Silence: nothing more reaches the browser on its event stream, and nothing closes it.
        const frozeAt = Date.now();
        proxy.freeze();
        const { claimOperation } = await api(CLAIM, { input: claimInput({ operationID: `console-silent-${dialect}`, connectorName: 'google', model: 'calendar.event' }) });
        expect(claimOperation.outcome).toBe('CLAIMED');
        const counts = (await api<{ operationCounts: { state: string; count: number }[] }>('{ operationCounts { state count } }')).operationCounts;
        // Found out within the silence limit (30 s: two of the server's 12 s pings missed) and the hub's 4 s sweep, and
        // replaced over a new connection. (The overview also re-reads every 30 s by itself, so the proof is the new stream.)
        for (const deadline = Date.now() + 45_000; proxy.opened().length < 2; await sleep(250)) {
          if (Date.now() > deadline) throw new Error(`no new event stream within 45 s of the freeze (streams opened: ${proxy.opened().join('; ')}; status ${await statusOf(page)})`);
        }
        const replacedMs = Date.now() - frozeAt;
        await waitForStatus(page, ['live'], 5_000);
        // And the page shows the claim made meanwhile.
        await page.waitForFunction(
          (wanted) =>
            JSON.stringify(
              [...document.querySelectorAll('[data-testid=counts-by-state] [data-state]')].map((card) => ({ state: card.getAttribute('data-state'), count: Number(card.querySelector('.card-count')?.textContent?.replace(/\D/g, '')) })),
            ) === wanted,
          { timeout: 5_000, polling: 100 },
          JSON.stringify(counts),
        );
        console.info(`[${dialect}] a silent stream replaced ${replacedMs} ms after the freeze, the page live and fresh ${Date.now() - frozeAt} ms after it; streams opened: ${proxy.opened().join('; ')}`);
        expect(replacedMs).toBeLessThan(40_000);
      } finally {
        await context.close().catch(() => {});
        await proxy.close();
      }
    }, 90_000);
  });

  // Once, on the first dialect (the hub's behaviour does not depend on it): a server whose per-viewer cap is 2.
  describe.each(dialects.slice(0, 1))('%s, MAX_SUBSCRIPTIONS_PER_VIEWER=3', (dialect) => {
    let demo: DemoServer | undefined;
    let context: BrowserContext | undefined;

    beforeAll(async () => {
      demo = await startDemoServer(dialect, { audience: AUDIENCE, name: 'console_cap', env: { MAX_SUBSCRIPTIONS_PER_VIEWER: '3' } });
      context = await browser().createBrowserContext();
    }, 90_000);
    afterAll(async () => {
      await context?.close().catch(() => {});
      await demo?.dispose();
    });

    it('tabs on any view share their subscriptions; a tab past the cap says why, shows it is not live and re-reads on its own', async () => {
      const { origin } = demo!;
      const tabOn = async (path: string, ready: string) => {
        const page = await context!.newPage();
        await page.setViewport({ width: 1280, height: 900 });
        await page.goto(`${origin}${path}`, { waitUntil: 'domcontentloaded' });
        await page.waitForSelector(ready, { timeout: 15_000 });
        return page;
      };
      // Six tabs on the overview and on filtered and unfiltered operation lists: two subscriptions on the server
      // (every view's operationsChanged and storeChanged, both unfiltered).
      const shared = [
        await tabOn('/console/', VIEWS.overview.ready),
        await tabOn('/console/operations?state=ATTEMPTED', '[data-testid=operations-table]'),
        await tabOn('/console/operations?state=ATTEMPTED&state=DEAD', '[data-testid=operations-table]'),
        await tabOn('/console/operations', VIEWS.operations.ready),
        await tabOn('/console/operations?state=ATTEMPTED', '[data-testid=operations-table]'),
        await tabOn('/console/', VIEWS.overview.ready),
      ];
      for (const page of shared) await waitForStatus(page, ['live'], 5_000);
      expect(await openSSESubscriptions(origin)).toBe(2);

      const { status, body } = await postGraphQL<{ operations: { edges: { node: { id: string } }[] } }>(demo!.servers.server, demo!.localToken, '{ operations(first: 2, filter: { states: [ATTEMPTED] }) { edges { node { id } } } }');
      expect(status).toBe(200);
      const [first, second] = body.data!.operations.edges.map((edge) => edge.node.id);
      // A detail page holds a subscription of its own: the first one fits, the second is refused.
      const fits = await tabOn(`/console/operations/${encodeURIComponent(first!)}`, '[data-testid=operation-now]');
      await waitForStatus(fits, ['live'], 5_000);
      const refused = await tabOn(`/console/operations/${encodeURIComponent(second!)}`, '[data-testid=operation-now]');
      await waitForStatus(refused, ['limited'], 5_000);
      const notice = await refused.$eval('[data-testid=live-refused]', (el) => el.textContent ?? '');
      expect(notice).toMatch(/too many open subscriptions \(at most 3 per viewer\)/);
      expect(notice).toMatch(/re-reads every 5 s/);
      // Not silently stale: it re-reads by itself (background pages draw nothing, but their timers run).
      let rereads = 0;
      refused.on('request', (request) => void (request.method() === 'POST' && request.url().endsWith('/graphql') && rereads++));
      await sleep(6_500);
      expect(rereads).toBeGreaterThanOrEqual(1);
      // The others are unaffected, and the server holds three subscriptions, one stream.
      for (const page of [...shared, fits]) expect(await statusOf(page)).toBe('live');
      expect(await openSSESubscriptions(origin)).toBe(3);
      expect(await serverEventStreams(origin)).toBe(1);
      await refused.bringToFront();
      await refused.screenshot({ path: join(SCREENSHOTS, 'console-live-refused.png') });

      // An operator's `npm run ops -- cancel` from a shell reaches the open detail page within a second (issue 38 item 4).
      await fits.bringToFront();
      const cancelledAt = Date.now();
      let out = '';
      const code = await opsCommand.run({ argv: ['cancel', first!, '--reason', 'from the CLI'], env: { DATABASE_URL: demo!.servers.databaseURL }, cwd: demo!.cwd, stdout: (t) => (out += t), stderr: (t) => (out += t) });
      expect(code, out).toBe(0);
      await fits.waitForFunction(() => document.querySelector('.detail-head h2 .badge')?.textContent === 'dead', { timeout: 1_000, polling: 50 });
      console.info(`[${dialect}] a CLI cancel shown in the open detail page ${Date.now() - cancelledAt} ms after the command started`);

      // A slot frees (the fitting detail page closes): the hub asks for the refused subscription again (every 30 s)
      // and the page past the cap becomes live, its notice gone.
      await fits.close();
      const freedAt = Date.now();
      await waitForStatus(refused, ['live'], 35_000);
      expect(await refused.$('[data-testid=live-refused]')).toBeNull();
      expect(await openSSESubscriptions(origin)).toBe(3);
      console.info(`[${dialect}] the refused subscription was granted ${Date.now() - freedAt} ms after a slot freed`);
    }, 130_000);
  });
});
