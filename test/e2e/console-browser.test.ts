/**
 * The operations console in a real headless Chromium (issue 13 item 5)
 * against a development server started with `--demo`: one browser and one
 * server per dialect for the whole file. The console signs in with the
 * development key by itself (loopback page), the overview shows the demo
 * counts, a claim made over HTTP appears in the operations table within a
 * second without a reload, filtering by state and keyset paging both ways
 * work, retrying a dead operation from its detail page changes its state, a
 * stranger's token sees none of the owner's rows, and a refused token sends
 * the user back to sign-in with the server's message. The overview's charts
 * draw the API's hourly activity and (for a service) backlog to scale (SQLite). Every request of every
 * page stays on 127.0.0.1. Screenshots of each view go to
 * test-output/screenshots/console-*.png (ignored by git). SQLite runs every
 * scenario; PostgreSQL the overview and the live claim.
 */
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { BrowserContext, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { generateLocalKey, mintToken, type LocalKey } from '../../src/auth/index.js';
import type { DialectName } from '../../src/db/connect.js';
import { browserForFile, findChromium, keepOnLoopback, type LoopbackGuard } from '../helpers/browser.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { postGraphQL, startDemoServer, type DemoServer, type E2EServers } from '../helpers/e2e-server.js';
import { CLAIM, claimInput } from '../helpers/operation-graphql.js';
import { operationRowValues } from '../helpers/row-fixtures.js';
import { openDatabase, parseDatabaseURL } from '../../src/db/connect.js';
import { createStoreContext } from '../../src/store/context.js';
import { retentionCommand } from '../../src/cli/retention.js';

const AUDIENCE = 'connector-store-console';
const CHROMIUM = findChromium();
const SCREENSHOTS = fileURLToPath(new URL('../../test-output/screenshots/', import.meta.url));
const dialects: DialectName[] = testDialects().filter(dialectAvailable);
/** The list views and their tables: each fits at 1 200–1 920 px and folds on a phone (issue 38 item 5). */
const LIST_VIEWS = [
  ['operations', 'operations-table'],
  ['watches', 'watches-table'],
  ['sync-states', 'sync-states-table'],
  ['sweeps?show=all', 'sweeps-table'],
] as const;

/** Puts `text` in a field at once, as a paste does (typing a 300-character token key by key takes seconds). */
const paste = (page: Page, selector: string, text: string) => page.$eval(selector, (field, value) => void ((field as HTMLTextAreaElement).value = value), text);

interface OpenPage {
  page: Page;
  guard: LoopbackGuard;
  errors: string[];
}

describe.skipIf(CHROMIUM === undefined)('the console in a real browser', () => {
  // One browser file at a time (takeBrowserTurn): another's tabs would slow this file's timed renders.
  const browser = browserForFile(CHROMIUM!);

  describe.each(dialects)('%s', (dialect) => {
    const full = dialect === 'sqlite';
    let demo: DemoServer | undefined;
    let owner: LocalKey;
    let ownerToken: string;
    let servers: E2EServers | undefined;
    const contexts: BrowserContext[] = [];
    const opened: OpenPage[] = [];
    let origin = '';

    beforeAll(async () => {
      // The server's local key owns the demo rows and is the key the console signs in with.
      demo = await startDemoServer(dialect, { audience: AUDIENCE, name: 'console' });
      ({ localKey: owner, localToken: ownerToken, servers, origin } = demo);
      mkdirSync(SCREENSHOTS, { recursive: true });
    }, 90_000);

    afterAll(async () => {
      for (const { guard, errors } of opened) {
        expect(guard.foreign).toEqual([]);
        expect(errors).toEqual([]);
      }
      for (const context of contexts) await context.close().catch(() => {});
      await demo?.dispose();
    });

    /** A page in its own browser context (its own sessionStorage), on the loopback guard. */
    async function openPage(width = 1280, height = 900): Promise<OpenPage> {
      const context = await browser().createBrowserContext();
      contexts.push(context);
      const page = await context.newPage();
      await page.setViewport({ width, height });
      const guard = await keepOnLoopback(page);
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(String(error)));
      const entry = { page, guard, errors };
      opened.push(entry);
      return entry;
    }

    const api = async <T = any>(query: string, variables: Record<string, unknown> = {}, token = ownerToken) => {
      const { status, body } = await postGraphQL<T>(servers!.server, token, query, variables);
      expect(status).toBe(200);
      expect(body.errors).toBeUndefined();
      return body.data!;
    };
    const shot = (page: Page, name: string, fullPage = true) => (full ? page.screenshot({ path: join(SCREENSHOTS, `console-${name}.png`), fullPage }) : Promise.resolve());
    const openSubscriptions = async () => Number((await (await fetch(`${origin}/metrics`)).text()).match(/^connector_store_subscriptions_open\{transport="sse"\} (\d+)$/m)?.[1] ?? 0);
    const rowIDs = (page: Page) => page.$$eval('[data-testid=operations-table] tbody tr[data-operation-id]', (rows) => rows.map((row) => row.getAttribute('data-operation-id')));

    it('signs in with the development key by itself and the overview shows the demo counts', async () => {
      const { page } = await openPage();
      await page.goto(`${origin}/console/`, { waitUntil: 'load' });
      await page.waitForSelector('[data-testid=counts-by-state] .card');
      const expected = await api<{ operationCounts: { state: string; count: number }[] }>('{ operationCounts { state count } }');
      const shown = await page.$$eval('[data-testid=counts-by-state] [data-state]', (cards) =>
        cards.map((card) => ({ state: card.getAttribute('data-state'), count: Number(card.querySelector('.card-count')?.textContent?.replace(/\D/g, '')) })),
      );
      expect(shown).toEqual(expected.operationCounts);
      expect(expected.operationCounts.reduce((sum, row) => sum + row.count, 0)).toBeGreaterThan(5);
      const stuck = await api<{ operationCounts: { count: number }[] }>('{ operationCounts(filter: { stuck: true }, groupBy: []) { count } }');
      expect(await page.$eval('[data-testid=stuck-count] .card-count', (el) => el.textContent)).toBe(String(stuck.operationCounts[0]!.count));
      // Signed in as the local key (a user), and the token never left this tab's sessionStorage for localStorage.
      expect(await page.$eval('.who .did', (el) => el.getAttribute('title'))).toBe(owner.did);
      expect(await page.evaluate(() => ({ local: localStorage.length, session: Object.keys(sessionStorage) }))).toEqual({ local: 0, session: ['connector-store-console.session'] });
      await page.waitForSelector('[data-testid=counts-by-connector] tbody tr');
      await shot(page, 'overview');
    });

    /** What the overview's charts drew, read off the SVG: every bar and point with its hour and value, and each chart's scale. */
    const drawn = (page: Page) =>
      page.evaluate(() => {
        const chart = document.querySelector('[data-testid=outcome-chart]')!;
        const backlog = document.querySelector('[data-testid=backlog-chart]');
        return {
          hours: [...chart.querySelectorAll(':scope > g[data-start]')].map((g) => g.getAttribute('data-start')),
          yMax: Number(chart.getAttribute('data-y-max')),
          plotHeight: Number(chart.getAttribute('data-plot-height')),
          topLabel: [...chart.querySelectorAll('[data-testid=y-label]')].at(-1)?.textContent,
          bars: [...chart.querySelectorAll('[data-testid=activity-bar]')].map((bar) => ({
            start: bar.getAttribute('data-start'),
            outcome: bar.getAttribute('data-outcome'),
            count: Number(bar.getAttribute('data-count')),
            height: Number(bar.getAttribute('height')),
          })),
          backlog:
            backlog === null
              ? null
              : {
                  yMax: Number(backlog.getAttribute('data-y-max')),
                  plotHeight: Number(backlog.getAttribute('data-plot-height')),
                  points: [...backlog.querySelectorAll('[data-testid=backlog-point]')].map((point) => ({
                    start: point.getAttribute('data-start'),
                    count: Number(point.getAttribute('data-count')),
                    cy: Number(point.getAttribute('cy')),
                  })),
                },
          backlogNote: document.querySelector('[data-testid=backlog-not-included]') !== null,
        };
      });
    type Activity = { from: string; backlogIncluded: boolean; buckets: ({ start: string; dueBacklog: number | null } & Record<string, number | string | null>)[] };
    const OUTCOMES = ['committed', 'retryable', 'unknown', 'fatal', 'offline', 'auth'] as const;
    /** Checks the drawn charts against the API's answer for `window` as `token`; an hour turning between the two reads is read again. */
    async function expectChartsMatchAPI(page: Page, window: 'LAST_24_HOURS' | 'LAST_7_DAYS', token: string) {
      for (let attempt = 0; ; attempt++) {
        const shown = await drawn(page);
        const { operationActivity: api } = await (async () => {
          const { status, body } = await postGraphQL<{ operationActivity: Activity }>(
            servers!.server,
            token,
            `query($window: ActivityWindow!) { operationActivity(window: $window) { from backlogIncluded buckets { start dueBacklog ${OUTCOMES.join(' ')} } } }`,
            { window },
          );
          expect(status).toBe(200);
          return body.data!;
        })();
        if (shown.hours[0] !== api.from && attempt === 0) {
          await page.reload({ waitUntil: 'load' });
          await page.waitForSelector('[data-testid=outcome-chart] [data-testid=activity-bar]');
          continue;
        }
        expect(shown.hours).toEqual(api.buckets.map((b) => b.start));
        const expected = api.buckets.flatMap((b) => OUTCOMES.filter((o) => Number(b[o]) > 0).map((o) => ({ start: b.start, outcome: o, count: Number(b[o]) })));
        expect(shown.bars.map(({ start, outcome, count }) => ({ start, outcome, count })).sort((x, y) => `${x.start}${x.outcome}`.localeCompare(`${y.start}${y.outcome}`))).toEqual(
          expected.sort((x, y) => `${x.start}${x.outcome}`.localeCompare(`${y.start}${y.outcome}`)),
        );
        // Drawn to scale: the scale covers the busiest hour, is labelled, and every bar's height is its count on it.
        const busiest = Math.max(...api.buckets.map((b) => OUTCOMES.reduce((sum, o) => sum + Number(b[o]), 0)));
        expect(shown.yMax).toBeGreaterThanOrEqual(busiest);
        expect(shown.yMax).toBeLessThanOrEqual(Math.max(1, busiest * 2.5));
        expect(shown.topLabel?.replace(/\D/g, '')).toBe(String(shown.yMax));
        for (const bar of shown.bars) expect(bar.height).toBeCloseTo((bar.count / shown.yMax) * shown.plotHeight, 3);
        expect(shown.backlogNote).toBe(!api.backlogIncluded);
        if (api.backlogIncluded) {
          const points = api.buckets.filter((b) => b.dueBacklog !== null).map((b) => ({ start: b.start, count: b.dueBacklog }));
          expect(shown.backlog?.points.map(({ start, count }) => ({ start, count }))).toEqual(points);
          for (const point of shown.backlog!.points) expect(8 + shown.backlog!.plotHeight - point.cy).toBeCloseTo((point.count / shown.backlog!.yMax) * shown.backlog!.plotHeight, 1);
        } else {
          expect(shown.backlog).toBeNull();
        }
        return { bars: shown.bars.length, hours: shown.hours.length, points: shown.backlog?.points.length ?? 0 };
      }
    }

    it.skipIf(!full)('draws outcomes per hour (24 h and 7 days) as the API counts them; the due backlog for a service, a note for a user (issue 22 item 7)', async () => {
      const { page } = await openPage();
      await page.goto(`${origin}/console/`, { waitUntil: 'load' });
      await page.waitForSelector('[data-testid=outcome-chart] [data-testid=activity-bar]');
      const day = await expectChartsMatchAPI(page, 'LAST_24_HOURS', ownerToken);
      expect(day.hours).toBe(24);
      expect(day.bars).toBeGreaterThan(10);
      await page.click('[data-window="7d"]');
      await page.waitForFunction(() => document.querySelectorAll('[data-testid=outcome-chart] > g[data-start]').length === 168);
      expect(new URL(page.url()).searchParams.get('activity')).toBe('7d');
      const week = await expectChartsMatchAPI(page, 'LAST_7_DAYS', ownerToken);
      expect(week.bars).toBeGreaterThanOrEqual(167);
      await shot(page, 'overview-7d', false);
      // The numbers as a table, newest hour first.
      await page.click('.activity button.link');
      expect(await page.$$eval('[data-testid=activity-table] tbody tr', (rows) => rows.length)).toBe(168);

      // A service sees the backlog over time; reloading keeps the window (it is in the URL).
      const service = await openPage();
      const serviceToken = await mintToken({ privateKey: demo!.serviceKey.privateKey, audience: AUDIENCE, ttlSeconds: 3600 });
      await service.page.goto(`${origin}/console/?activity=7d`, { waitUntil: 'load' });
      await service.page.waitForSelector('.who button');
      await service.page.click('.who button');
      await service.page.waitForSelector('textarea[name=token]');
      await paste(service.page, 'textarea[name=token]', serviceToken);
      await service.page.click('form[aria-labelledby=with-token] button[type=submit]');
      await service.page.waitForSelector('[data-testid=backlog-chart] [data-testid=backlog-point]');
      if (!new URL(service.page.url()).searchParams.has('activity')) {
        await service.page.goto(`${origin}/console/?activity=7d`, { waitUntil: 'load' });
        await service.page.waitForSelector('[data-testid=backlog-chart] [data-testid=backlog-point]');
      }
      const serviceWeek = await expectChartsMatchAPI(service.page, 'LAST_7_DAYS', serviceToken);
      expect(serviceWeek.points).toBeGreaterThanOrEqual(167);
      await shot(service.page, 'overview-service-7d');
    });

    it('a claim made over HTTP appears in the operations table within a second, without a reload', async () => {
      const { page } = await openPage();
      await page.goto(`${origin}/console/operations`, { waitUntil: 'load' });
      await page.waitForSelector('[data-testid=operations-table] tbody tr[data-operation-id]');
      const before = await rowIDs(page);
      await expect.poll(openSubscriptions, { timeout: 5_000 }).toBeGreaterThan(0);
      const operationID = `console-live-${dialect}`;
      const claimed = Date.now();
      const { claimOperation } = await api(CLAIM, { input: claimInput({ operationID, connectorName: 'google', model: 'calendar.event' }) });
      expect(claimOperation.outcome).toBe('CLAIMED');
      // Announced in the table, not pushed in under the reader's eyes.
      await page.waitForFunction((id) => document.querySelector('[data-testid=new-rows]')?.textContent?.includes(id), { timeout: 1_000 }, operationID);
      const seenAfterMs = Date.now() - claimed;
      expect(seenAfterMs).toBeLessThan(1_000);
      expect(await rowIDs(page)).toEqual(before);
      // The viewport only: what the reader sees when the bar appears.
      await shot(page, 'operations-live', false);
      await page.click('[data-testid=new-rows]');
      await page.waitForFunction((id) => document.querySelector(`[data-testid=operations-table] tr[data-operation-id="${id}"]`) !== null, { timeout: 5_000 }, operationID);
      expect((await rowIDs(page))[0]).toBe(operationID);
      expect(await page.url()).toBe(`${origin}/console/operations`);
      await shot(page, 'operations');
    });

    it.skipIf(!full)('an operation retention deletes leaves the open table within a second, without a reload (storeChanged, issue 38 item 4)', async () => {
      // An operation of the owner's that finished two days ago: the newest row of the table, and past the idempotency window.
      const database = openDatabase(parseDatabaseURL(servers!.databaseURL), { poolMax: 1 });
      const operationID = `console-retention-${dialect}`;
      try {
        const store = createStoreContext(database.db, database.dialect);
        const values = operationRowValues(store, { operation_id: operationID, caller_did: owner.did, owner_did: owner.did, state: 'committed', lease_token: null, lease_expires_at: null, created_at: Date.now(), updated_at: Date.now() - 2 * 86_400_000 });
        await store.db.insertInto('kubun_connector_operation').values(values).execute();
      } finally {
        await database.close();
      }
      const { page } = await openPage();
      await page.goto(`${origin}/console/operations`, { waitUntil: 'load' });
      await page.waitForSelector(`[data-testid=operations-table] tr[data-operation-id="${operationID}"]`, { timeout: 5_000 });
      await page.waitForFunction(() => document.querySelector('[data-live-status]')?.getAttribute('data-live-status') === 'live', { timeout: 5_000, polling: 100 });
      let out = '';
      const ranAt = Date.now();
      expect(await retentionCommand.run({ argv: [], env: { DATABASE_URL: servers!.databaseURL }, cwd: demo!.cwd, stdout: (t) => (out += t), stderr: (t) => (out += t) }), out).toBe(0);
      await page.waitForFunction((id) => document.querySelector(`[data-testid=operations-table] tr[data-operation-id="${id}"]`) === null, { timeout: 1_500, polling: 50 }, operationID);
      console.info(`[${dialect}] a deleted operation left the open table ${Date.now() - ranAt} ms after npm run retention started`);
    });

    it.skipIf(!full)('filters by state, and pages both ways by cursor', async () => {
      const { page } = await openPage();
      await page.goto(`${origin}/console/operations`, { waitUntil: 'load' });
      await page.waitForSelector('[data-testid=operations-table] tbody tr[data-operation-id]');
      await page.click('.chips input[name=state][value=DEAD]');
      await page.waitForFunction(() => location.search === '?state=DEAD');
      const dead = await api<{ operations: { totalCount: number; edges: { node: { operationID: string } }[] } }>(
        '{ operations(first: 25, filter: { states: [DEAD] }) { totalCount edges { node { operationID } } } }',
      );
      await page.waitForFunction((n) => document.querySelector('[data-testid=operations-total]')?.textContent === `${n} operation${n === 1 ? '' : 's'}`, {}, dead.operations.totalCount);
      expect(await rowIDs(page)).toEqual(dead.operations.edges.map((edge) => edge.node.operationID));
      expect(await page.$$eval('[data-testid=operations-table] tbody tr[data-operation-id] td:nth-child(3) .badge', (badges) => [...new Set(badges.map((b) => b.textContent))])).toEqual(['dead']);
      await shot(page, 'operations-filtered');

      // Keyset pages of 3: older, older, then newer again gives the same rows as before.
      const all = await api<{ operations: { edges: { node: { operationID: string } }[] } }>('{ operations(first: 9) { edges { node { operationID } } } }');
      const ids = all.operations.edges.map((edge) => edge.node.operationID);
      await page.goto(`${origin}/console/operations?size=3`, { waitUntil: 'load' });
      await page.waitForFunction(() => document.querySelectorAll('[data-testid=operations-table] tbody tr[data-operation-id]').length === 3);
      expect(await rowIDs(page)).toEqual(ids.slice(0, 3));
      const pageTo = async (label: string, expected: string[]) => {
        const [button] = await page.$$(`xpath/.//nav[@aria-label="Pages"]//button[contains(., "${label}")]`);
        await button!.click();
        await page.waitForFunction((first) => document.querySelector('[data-testid=operations-table] tbody tr[data-operation-id]')?.getAttribute('data-operation-id') === first, {}, expected[0]);
        expect(await rowIDs(page)).toEqual(expected);
      };
      await pageTo('Older', ids.slice(3, 6));
      await pageTo('Older', ids.slice(6, 9));
      expect(new URL(page.url()).searchParams.get('after')).not.toBeNull();
      await pageTo('Newer', ids.slice(3, 6));
      expect(new URL(page.url()).searchParams.get('before')).not.toBeNull();
      await pageTo('Newer', ids.slice(0, 3));
    });

    it.skipIf(!full)('retrying a dead operation from its detail page makes it live again, recorded in its history; cancelling it with a reason makes it dead', async () => {
      const found = await api<{ operations: { edges: { node: { id: string; operationID: string } }[] } }>('{ operations(first: 1, filter: { states: [DEAD] }) { edges { node { id operationID } } } }');
      const dead = found.operations.edges[0]!.node;
      const { page } = await openPage();
      await page.goto(`${origin}/console/operations/${encodeURIComponent(dead.id)}`, { waitUntil: 'load' });
      await page.waitForSelector('[data-testid=attempt-history]');
      expect(await page.$eval('.detail-head .badge', (el) => el.textContent)).toBe('dead');
      // At the top: what is happening now, the latest attempt and the provider's words (issue 22 item 5).
      const top = await page.$eval('[data-testid=operation-now]', (el) => el.textContent ?? '');
      expect(top).toMatch(/Given up after \d+ attempts?/);
      expect(await page.$eval('[data-testid=latest-attempt]', (el) => el.textContent ?? '')).toMatch(/Latest attempt \(#\d+\): started .*ended after [\d.]+ (s|min)/);
      expect(await page.$eval('[data-testid=operation-now] .last-error pre', (el) => el.textContent ?? '')).toMatch(/\d{3} [A-Z]/);
      // The history is a timeline: each attempt's steps with how long they took.
      expect(await page.$$eval('[data-testid=attempt-history] .tl-attempt .tl-steps', (steps) => steps.map((s) => s.textContent ?? ''))).toContainEqual(expect.stringMatching(/started.*ended \+/));
      await shot(page, 'operation-detail');
      // Retry asks first, and "keep it dead" changes nothing (issue 22 item 9).
      await page.click('[data-testid=retry]');
      await page.waitForSelector('[data-testid=retry-confirm]');
      expect(await page.$eval('.confirm', (el) => el.textContent ?? '')).toContain(dead.operationID);
      await page.click('.confirm button.link');
      await page.waitForSelector('[data-testid=retry]');
      expect((await api<{ node: { state: string } }>('query($id: ID!) { node(id: $id) { ... on ConnectorOperation { state } } }', { id: dead.id })).node.state).toBe('DEAD');
      await page.click('[data-testid=retry]');
      await page.click('[data-testid=retry-confirm]');
      await page.waitForFunction(() => document.querySelector('[data-testid=action-outcome]')?.textContent?.startsWith('Retried'), { timeout: 5_000 });
      const now = await api<{ node: { state: string; sendMarkerSet: boolean } }>('query($id: ID!) { node(id: $id) { ... on ConnectorOperation { state sendMarkerSet } } }', { id: dead.id });
      // Live again; this demo operation's request may have reached the provider, so it reconciles first (never a blind resend).
      expect(now.node.state).toBe(now.node.sendMarkerSet ? 'RECONCILE_ONLY' : 'ATTEMPTED');
      const shown = now.node.state.replace(/_/g, ' ').toLowerCase();
      await page.waitForFunction((text) => document.querySelector('.detail-head .badge')?.textContent === text, { timeout: 5_000 }, shown);
      await page.waitForFunction(() => [...document.querySelectorAll('[data-testid=attempt-history] .badge')].some((b) => b.textContent === 'retry'), { timeout: 5_000 });
      await shot(page, 'operation-retried');

      // Live again, so it can be cancelled, with a reason that lands in its last error and history.
      await page.click('.actions button.danger');
      await page.waitForSelector('.cancel-form input[name=reason]');
      await page.type('.cancel-form input[name=reason]', 'duplicate of another event');
      await page.click('.cancel-form button[type=submit]');
      await page.waitForFunction(() => document.querySelector('[data-testid=action-outcome]')?.textContent?.startsWith('Cancelled'), { timeout: 5_000 });
      await page.waitForFunction(() => document.querySelector('.detail-head .badge')?.textContent === 'dead', { timeout: 5_000 });
      await page.waitForFunction(() => document.querySelector('.last-error pre')?.textContent?.includes('duplicate of another event'), { timeout: 5_000 });
      const cancelled = await api<{ node: { state: string; lastError: string } }>('query($id: ID!) { node(id: $id) { ... on ConnectorOperation { state lastError } } }', { id: dead.id });
      expect(cancelled.node).toEqual({ state: 'DEAD', lastError: expect.stringContaining('duplicate of another event') });
    });

    it.skipIf(!full)('searches by operation ID, document ID and owner DID from the header of any page (issue 22 item 3)', async () => {
      const { page } = await openPage();
      await page.goto(`${origin}/console/sweeps`, { waitUntil: 'load' });
      const search = async (text: string) => {
        await page.waitForSelector('[data-testid=search-input]');
        await page.$eval('[data-testid=search-input]', (input) => void ((input as HTMLInputElement).value = ''));
        await page.type('[data-testid=search-input]', text);
        await page.keyboard.press('Enter');
        await page.waitForFunction((q) => new URLSearchParams(location.search).get('q') === q && document.querySelector('[data-testid=search-results] h2')?.textContent?.includes(q), { timeout: 5_000 }, text);
        return page.$$eval('[data-testid=search-section]', (sections) => sections.map((s) => ({ title: s.querySelector('h3')?.textContent ?? '', rows: [...s.querySelectorAll('[data-operation-id]')].map((r) => r.getAttribute('data-operation-id')) })));
      };
      const byKey = await search('demo-event-invalid-recurrence-create');
      expect(byKey).toEqual([{ title: expect.stringContaining('Operations with this ID'), rows: ['demo-event-invalid-recurrence-create'] }]);
      await shot(page, 'search');
      const byDocument = await search('demo-doc-event-planning');
      expect(byDocument.map((s) => s.title), JSON.stringify(byDocument)).toEqual([expect.stringContaining('Operations of this document'), expect.stringContaining('Watches of this document')]);
      expect(byDocument[0]!.rows.length).toBeGreaterThan(0);
      const byOwner = await search(owner.did);
      expect(byOwner.some((s) => s.title.includes('Operations this DID owns') && s.rows.length > 0)).toBe(true);
      expect(await search('no-such-thing-anywhere')).toEqual([]);
      expect(await page.$eval('[data-testid=search-results]', (el) => el.textContent ?? '')).toContain('Nothing you may see');
      // A user (the demo's owner) is offered no prefix matches (a service is: operationsByIDPrefix), and is told so.
      expect(await search('demo-event-')).toEqual([]);
      expect(await page.$eval('[data-testid=search-results]', (el) => el.textContent ?? '')).toContain('(search matches whole IDs)');
      // A result opens its operation.
      await search('demo-event-invalid-recurrence-create');
      await page.click('[data-testid=search-section] a');
      await page.waitForSelector('[data-testid=operation-now]');
    });

    it.skipIf(!full)('bulk actions: on selected rows (skipping those the action does not apply to, and saying why) and on everything a filter matches, after a confirmation with the count and the cap (issue 22 item 4)', async () => {
      const found = await api<{ live: { edges: { node: { operationID: string } }[] }; committed: { edges: { node: { operationID: string } }[] } }>(
        '{ live: operations(first: 1, filter: { states: [ATTEMPTED], stuck: false }) { edges { node { operationID } } } committed: operations(first: 1, filter: { states: [COMMITTED] }) { edges { node { operationID } } } }',
      );
      const live = found.live.edges[0]!.node.operationID;
      const committed = found.committed.edges[0]!.node.operationID;
      const { page } = await openPage();
      await page.goto(`${origin}/console/operations`, { waitUntil: 'load' });
      await page.waitForSelector('[data-testid=operations-table] tbody tr[data-operation-id]');
      for (const id of [live, committed]) await page.click(`[data-testid=operations-table] tr[data-operation-id="${id}"] td.select input`);
      await page.waitForSelector('[data-testid=bulk-requeue-selected]');
      await page.click('[data-testid=bulk-requeue-selected]');
      await page.waitForSelector('[data-testid=bulk-confirm]');
      expect(await page.$eval('[data-testid=bulk-confirm]', (el) => el.textContent ?? '')).toMatch(/Requeue now the 2 selected operations \(1 of them live; the others are skipped\)/);
      expect(await page.$eval('[data-testid=bulk-confirm-yes]', (el) => el.textContent ?? '')).toBe('Requeue them now');
      await page.click('[data-testid=bulk-confirm-yes]');
      await page.waitForSelector('[data-testid=bulk-result]');
      expect(await page.$eval('[data-testid=bulk-result]', (el) => el.textContent ?? '')).toMatch(/^Requeued 1 of 2 selected\. Skipped 1: 1 not live\. This action applies to live operations: /);
      await shot(page, 'bulk-selected');

      // Everything a filter matches: the dead ones, retried in one call.
      const dead = await api<{ operations: { totalCount: number } }>('{ operations(first: 1, filter: { states: [DEAD] }) { totalCount } }');
      expect(dead.operations.totalCount).toBeGreaterThan(0);
      await page.goto(`${origin}/console/operations?state=DEAD`, { waitUntil: 'load' });
      await page.waitForSelector('[data-testid=bulk-retry-filter]');
      await page.click('[data-testid=bulk-retry-filter]');
      const asked = await page.$eval('[data-testid=bulk-confirm]', (el) => el.textContent ?? '');
      expect(asked).toContain(`${dead.operations.totalCount} match, at most 1000 change in one go`);
      // "Keep them" changes nothing.
      await page.click('[data-testid=bulk-confirm] button.link');
      expect((await api<{ operations: { totalCount: number } }>('{ operations(first: 1, filter: { states: [DEAD] }) { totalCount } }')).operations.totalCount).toBe(dead.operations.totalCount);
      await page.click('[data-testid=bulk-retry-filter]');
      await page.click('[data-testid=bulk-confirm-yes]');
      await page.waitForSelector('[data-testid=bulk-result]');
      expect(await page.$eval('[data-testid=bulk-result]', (el) => el.textContent ?? '')).toBe(`Retried ${dead.operations.totalCount} of the ${dead.operations.totalCount} matching.`);
      expect((await api<{ operations: { totalCount: number } }>('{ operations(first: 1, filter: { states: [DEAD] }) { totalCount } }')).operations.totalCount).toBe(0);
      await shot(page, 'bulk-filter');
    });

    it.skipIf(!full)('watches, sync states and sweeps list the demo rows, and a watch opens with its repull action', async () => {
      const { page } = await openPage();
      for (const [path, table] of [
        ['watches', 'watches-table'],
        ['sync-states', 'sync-states-table'],
        ['sweeps?show=all', 'sweeps-table'],
      ] as const) {
        await page.goto(`${origin}/console/${path}`, { waitUntil: 'load' });
        await page.waitForSelector(`[data-testid=${table}] tbody tr`);
        await shot(page, path.split('?')[0]!);
      }
      await page.goto(`${origin}/console/watches`, { waitUntil: 'load' });
      await page.waitForSelector('[data-testid=watches-table] tbody tr a');
      await page.click('[data-testid=watches-table] tbody tr a');
      await page.waitForSelector('[data-testid=request-repull]');
      await page.click('[data-testid=request-repull]');
      await page.waitForFunction(() => document.querySelector('.actions .notice')?.textContent?.startsWith('Repull requested'), { timeout: 5_000 });
      await shot(page, 'watch-detail');

      // A sweep opens with its candidates: state, attempts, apply failures, last error; filtered by state (issue 22 item 6).
      await page.goto(`${origin}/console/sweeps?show=all`, { waitUntil: 'load' });
      await page.waitForSelector('[data-testid=sweeps-table] tbody tr a');
      await page.click('[data-testid=sweeps-table] tbody tr a');
      await page.waitForSelector('[data-testid=candidates-table] tbody tr');
      const candidates = () => page.$$eval('[data-testid=candidates-table] tbody tr', (rows) => rows.map((row) => row.querySelector('td:nth-child(2) .badge')?.textContent));
      expect((await candidates()).sort()).toEqual(['applied', 'kept', 'pending']);
      await shot(page, 'sweep-detail');
      await page.click('[data-testid=sweep-detail] .chips input[value=PENDING]');
      await page.waitForFunction(() => document.querySelectorAll('[data-testid=candidates-table] tbody tr').length === 1);
      expect(await candidates()).toEqual(['pending']);
      expect(new URL(page.url()).searchParams.getAll('state')).toEqual(['PENDING']);
    });

    it.skipIf(!full)('a pasted token that expires under an open page: its stream ends at "exp", the page never stays Live on it and goes back to sign-in saying why (issue 38 item 2)', async () => {
      const stranger = generateLocalKey();
      const ttlSeconds = 6;
      const shortLived = await mintToken({ privateKey: stranger.privateKey, audience: AUDIENCE, ttlSeconds });
      const expiresAt = (JSON.parse(Buffer.from(shortLived.split('.')[1]!, 'base64url').toString()) as { exp: number }).exp * 1000;
      const { page } = await openPage();
      await page.goto(`${origin}/console/operations`, { waitUntil: 'load' });
      await page.waitForSelector('.who button');
      await page.click('.who button');
      await page.waitForSelector('textarea[name=token]');
      await paste(page, 'textarea[name=token]', shortLived);
      await page.click('form[aria-labelledby=with-token] button[type=submit]');
      await page.waitForFunction(() => document.querySelector('[data-live-status]')?.getAttribute('data-live-status') === 'live', { timeout: 5_000, polling: 100 });
      // At "exp" the server ends the subscriptions (TOKEN_EXPIRED); the hub's new stream is refused (401): sign-in, with the server's reason.
      await page.waitForSelector('[data-testid=sign-in-message]', { timeout: Math.max(1, expiresAt - Date.now()) + 5_000 });
      expect(Date.now()).toBeGreaterThanOrEqual(expiresAt - 1_000);
      expect(await page.$eval('[data-testid=sign-in-message]', (el) => el.textContent)).toMatch(/expired/i);
      expect(await page.evaluate(() => sessionStorage.length)).toBe(0);
      await shot(page, 'token-expired');
    });

    it.skipIf(!full)('a stranger’s token sees none of the owner’s rows; a refused token goes back to sign-in with the server’s message; a private key signs in with tokens minted in the page', async () => {
      const stranger = generateLocalKey();
      const strangerToken = await mintToken({ privateKey: stranger.privateKey, audience: AUDIENCE, ttlSeconds: 3600 });
      const { page } = await openPage();
      await page.goto(`${origin}/console/`, { waitUntil: 'load' });
      await page.waitForSelector('.who button');
      await page.click('.who button');
      await page.waitForSelector('textarea[name=token]');
      await shot(page, 'sign-in');
      await paste(page, 'textarea[name=token]', strangerToken);
      await page.click('form[aria-labelledby=with-token] button[type=submit]');
      await page.waitForSelector('[data-testid=counts-by-state] .card');
      expect(await page.$eval('.who .did', (el) => el.getAttribute('title'))).toBe(stranger.did);
      expect(await page.$$eval('[data-testid=counts-by-state] [data-state] .card-count', (counts) => counts.map((c) => c.textContent))).toEqual(['0', '0', '0', '0']);
      await page.goto(`${origin}/console/operations`, { waitUntil: 'load' });
      await page.waitForSelector('.state-empty');
      expect(await page.$('[data-testid=operations-table]')).toBeNull();
      expect(await page.$eval('.who .did', (el) => el.getAttribute('title'))).toBe(stranger.did);

      // A token the server refuses (a forged signature): back to sign-in, with why.
      await page.click('.who button');
      await page.waitForSelector('textarea[name=token]');
      await paste(page, 'textarea[name=token]', `${strangerToken.slice(0, -6)}AAAAAA`);
      await page.click('form[aria-labelledby=with-token] button[type=submit]');
      await page.waitForSelector('[data-testid=sign-in-message]', { timeout: 5_000 });
      expect(await page.$eval('[data-testid=sign-in-message]', (el) => el.textContent)).toMatch(/^The server refused the token: .*signature/i);
      expect(await page.evaluate(() => sessionStorage.length)).toBe(0);

      // A private key instead: the page mints its own tokens (client/token.ts) for the server's audience.
      const keyed = generateLocalKey();
      await paste(page, 'textarea[name=jwk]', JSON.stringify(keyed.privateKeyJWK));
      await page.click('form[aria-labelledby=with-key] button[type=submit]');
      await page.waitForFunction((did) => document.querySelector('.who .did')?.getAttribute('title') === did, { timeout: 5_000 }, keyed.did);
      await page.waitForSelector('.state-empty');
      const stored = await page.evaluate(() => JSON.parse(sessionStorage.getItem('connector-store-console.session') ?? '{}') as { token: string; source: string });
      expect(stored.source).toBe('private key');
      const claims = JSON.parse(Buffer.from(stored.token.split('.')[1]!, 'base64url').toString()) as { iss: string; aud: string; iat: number; exp: number };
      expect(claims).toMatchObject({ iss: keyed.did, aud: AUDIENCE });
      expect(claims.exp - claims.iat).toBe(900);
      expect(JSON.stringify(await page.evaluate(() => ({ ...sessionStorage, ...localStorage })))).not.toContain(String(keyed.privateKeyJWK.d));
    });

    it.skipIf(!full)('is usable on a phone', async () => {
      const { page } = await openPage(390, 844);
      await page.goto(`${origin}/console/operations`, { waitUntil: 'load' });
      await page.waitForSelector('[data-testid=operations-table] tbody tr[data-operation-id]');
      // Nothing wider than the screen but the table's own scroller.
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      // On a short screen the filter panel starts folded (it took 40 % of an 800 px screen); it opens on demand.
      expect(await page.$eval('[data-testid=filter-panel]', (el) => (el as HTMLDetailsElement).open)).toBe(false);
      await shot(page, 'phone-operations');
      await page.click('[data-testid=filter-panel] > summary');
      expect(await page.$eval('[data-testid=filter-panel]', (el) => (el as HTMLDetailsElement).open)).toBe(true);
      await page.goto(`${origin}/console/`, { waitUntil: 'load' });
      await page.waitForSelector('[data-testid=counts-by-state] .card');
      await page.waitForSelector('[data-testid=outcome-chart] [data-testid=activity-bar]');
      await page.waitForSelector('[data-testid=counts-by-connector] tbody tr');
      // The charts are drawn at the phone's width (text at its size), not scaled down from a desktop's.
      expect(await page.$eval('[data-testid=outcome-chart]', (svg) => svg.getBoundingClientRect().width)).toBeLessThanOrEqual(390);
      expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390);
      // The by-connector table is folded, not scrolled: every state's count is on screen (issue 38 item 5).
      expect(await page.$eval('[data-testid=counts-by-connector]', (table) => table.scrollWidth <= (table.parentElement?.clientWidth ?? 0))).toBe(true);
      expect(await page.$$eval('[data-testid=counts-by-connector] tbody tr:first-child td[data-label]', (cells) => cells.every((cell) => cell.getBoundingClientRect().right <= 390))).toBe(true);
      await shot(page, 'phone-overview');
    });

    it.skipIf(!full)('the header stays on one line and the overview’s panels fit their tables at 1 200, 1 400 and 1 920 px (issue 38 item 5)', async () => {
      for (const width of [1200, 1400, 1920]) {
        const { page } = await openPage(width, 1000);
        await page.goto(`${origin}/console/`, { waitUntil: 'load' });
        await page.waitForSelector('[data-testid=counts-by-connector] tbody tr');
        const header = await page.$eval('header.top', (el) => el.getBoundingClientRect().height);
        expect(header, `header height at ${width} px`).toBeLessThan(60);
        // Every column of the by-connector table is visible: nothing scrolls inside its panel.
        const fits = await page.$eval('[data-testid=counts-by-connector]', (table) => ({ table: table.scrollWidth, panel: table.parentElement?.clientWidth ?? 0 }));
        expect(fits.table, `by-connector table at ${width} px`).toBeLessThanOrEqual(fits.panel);
        // Two panels side by side, the table's the wider.
        const [byConnector, byOutcome] = await page.$$eval('.panels > .panel', (panels) => panels.slice(0, 2).map((panel) => panel.getBoundingClientRect().width));
        expect(byConnector!, `panels at ${width} px`).toBeGreaterThan(byOutcome!);
        expect(await page.$eval('[data-testid=search-input]', (input) => (input as HTMLInputElement).placeholder)).toBe('Exact operation ID, document ID or owner DID');
        await shot(page, `overview-${width}`);
        // Every list view's table shows every column without scrolling (the operations table's last column scrolled at 1 200 px).
        for (const [path, table] of LIST_VIEWS) {
          await page.goto(`${origin}/console/${path}`, { waitUntil: 'load' });
          await page.waitForSelector(`[data-testid=${table}] tbody tr`);
          const scroll = await page.$eval(`[data-testid=${table}]`, (el) => ({ table: el.scrollWidth, wrap: el.parentElement?.clientWidth ?? 0 }));
          expect(scroll.table, `${table} at ${width} px`).toBeLessThanOrEqual(scroll.wrap);
          await shot(page, `${table}-${width}`);
        }
      }
    });

    it.skipIf(!full)('on a phone every list view’s table is folded into labelled blocks, nothing scrolled out of sight (issue 38 item 5)', async () => {
      const { page } = await openPage(390, 844);
      for (const [path, table] of LIST_VIEWS) {
        await page.goto(`${origin}/console/${path}`, { waitUntil: 'load' });
        await page.waitForSelector(`[data-testid=${table}] tbody tr td[data-label]`);
        const folded = await page.$eval(`[data-testid=${table}]`, (el) => ({
          scrolls: el.scrollWidth > (el.parentElement?.clientWidth ?? 0),
          head: getComputedStyle(el.querySelector('thead')!).display,
          offscreen: [...el.querySelectorAll('tbody td')].filter((cell) => getComputedStyle(cell).display !== 'none' && cell.getBoundingClientRect().right > 390).length,
          labels: [...el.querySelectorAll('tbody tr:first-child td[data-label]')].map((cell) => cell.getAttribute('data-label')),
        }));
        expect(folded, `${table} on a phone`).toMatchObject({ scrolls: false, head: 'none', offscreen: 0 });
        expect(folded.labels.length, `${table}'s labelled cells`).toBeGreaterThan(1);
        await shot(page, `phone-${table}`);
      }
    });
  });
});
