/**
 * GraphiQL in a real headless Chromium against a real development server
 * started with `--demo` (issue 12 item 4): the page renders from the installed
 * package with no request leaving 127.0.0.1, opens with the example query and
 * a token of the local key in its headers, and running it shows the demo data
 * as that key; after a reload the stored tab runs again with the new page's
 * token. A screenshot goes to test-output/screenshots/ (ignored by git).
 * Chromium: CHROMIUM_PATH or /usr/bin/chromium (helpers/browser.ts).
 */
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HTTPResponse, Page } from 'puppeteer-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyBearerToken, type LocalKey } from '../../src/auth/index.js';
import type { DialectName } from '../../src/db/connect.js';
import { browserForFile, findChromium, keepOnLoopback } from '../helpers/browser.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { startDemoServer, type DemoServer, type E2EServers } from '../helpers/e2e-server.js';

const AUDIENCE = 'connector-store-graphiql';
const CHROMIUM = findChromium();
const SCREENSHOTS = fileURLToPath(new URL('../../test-output/screenshots/', import.meta.url));
const VERSION = (JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string }).version;
const dialects: DialectName[] = testDialects().filter(dialectAvailable);

/** The text of a GraphiQL editor (Monaco renders spaces as no-break spaces), whitespace collapsed. */
const editorText = (page: Page, selector: string) =>
  page.$eval(selector, (element) => (element.textContent ?? '').replace(/\s+/g, ' '));

/** Resolves with the answer to the next POST of the example query (GraphiQL also POSTs its introspection). */
const exampleQueryAnswer = (page: Page) =>
  page.waitForResponse((response) => response.request().method() === 'POST' && (response.request().postData() ?? '').includes('serverInfo'), { timeout: 15_000 });

describe.skipIf(CHROMIUM === undefined)('GraphiQL in a real browser', () => {
  // One browser file at a time (takeBrowserTurn): another's tabs would slow this file's timed renders.
  const browser = browserForFile(CHROMIUM!);

  describe.each(dialects)('%s', (dialect) => {
    let demo: DemoServer | undefined;
    let localKey: LocalKey;
    let servers: E2EServers | undefined;
    beforeAll(async () => {
      // The server's working directory holds the local key, so the test knows whose token the page must carry.
      demo = await startDemoServer(dialect, { audience: AUDIENCE, name: 'graphiql' });
      ({ localKey, servers } = demo);
    }, 60_000);
    afterAll(async () => {
      await demo?.dispose();
    });

    it('opens with the example query and the local key’s token, runs it and shows the data; every request stays on 127.0.0.1', async () => {
      const { server } = servers!;
      const page = await browser().newPage();
      try {
        await page.setViewport({ width: 1600, height: 1000 });
        const guard = await keepOnLoopback(page);
        const pageErrors: string[] = [];
        page.on('pageerror', (error) => pageErrors.push(String(error)));

        await page.goto(`${server.origin}/graphql`, { waitUntil: 'load' });
        await page.waitForFunction(() => document.querySelector('.graphiql-query-editor')?.textContent?.includes('serverInfo'), { timeout: 20_000 });
        expect(await page.title()).toBe('Connector store');
        expect(await editorText(page, '.graphiql-query-editor')).toContain('operations(first: 5)');
        expect(await editorText(page, '.graphiql-editor-tool')).toMatch(/"Authorization": "Bearer ey/);

        // Run it with the button.
        const answer = exampleQueryAnswer(page);
        await page.click('.graphiql-execute-button');
        const token = await expectDemoDataAs(await answer, localKey, dialect);
        await page.waitForFunction((did) => document.querySelector('.graphiql-response')?.textContent?.includes(did), { timeout: 10_000 }, localKey.did);
        const pane = await editorText(page, '.graphiql-response');
        expect(pane).toContain(`"version": "${VERSION}"`);
        expect(pane).toContain(`"viewerDID": "${localKey.did}"`);
        expect(pane).toContain('"totalCount":');
        expect(pane).not.toContain('"errors"');
        mkdirSync(SCREENSHOTS, { recursive: true });
        await page.screenshot({ path: join(SCREENSHOTS, `graphiql-${dialect}.png`) });

        // A reload brings a new page (and token); the stored tab with the example query runs again, by keyboard.
        await page.reload({ waitUntil: 'load' });
        await page.waitForSelector('.graphiql-tab-button');
        await page.click('.graphiql-tab:first-child .graphiql-tab-button');
        await page.waitForFunction(() => document.querySelector('.graphiql-query-editor')?.textContent?.includes('serverInfo'), { timeout: 20_000 });
        await page.click('.graphiql-query-editor .view-lines');
        const again = exampleQueryAnswer(page);
        await page.keyboard.down('Control');
        await page.keyboard.press('Enter');
        await page.keyboard.up('Control');
        await expectDemoDataAs(await again, localKey, dialect);

        expect(guard.foreign).toEqual([]);
        expect(guard.requests.filter((url) => url.startsWith(`${server.origin}/`)).length).toBeGreaterThanOrEqual(4);
        expect(pageErrors).toEqual([]);
        // The banner (stderr) shows a token by design; the JSON log, which has a line for each of these requests, never does.
        expect(server.logs.filter((line) => line.msg === 'request' && line.method === 'POST' && line.viewer === 'user').length).toBeGreaterThanOrEqual(2);
        expect(JSON.stringify(server.logs)).not.toContain(token);
      } finally {
        await page.close();
      }
    }, 90_000);
  });
});

/** Checks the example query's answer: no errors, the demo data as `key` (a plain user); returns the bearer token the page sent. */
async function expectDemoDataAs(response: HTTPResponse, key: LocalKey, dialect: DialectName): Promise<string> {
  const body = (await response.json()) as { data?: any; errors?: unknown[] };
  expect(response.status()).toBe(200);
  expect(body.errors).toBeUndefined();
  expect(body.data.serverInfo).toEqual({ version: VERSION, dialect, viewerDID: key.did, viewerIsService: false });
  expect(body.data.operations.totalCount).toBeGreaterThan(0);
  expect(body.data.operations.edges.length).toBe(5);
  expect(body.data.operationCounts.length).toBeGreaterThan(0);
  const token = /^Bearer (\S+)$/.exec(response.request().headers().authorization ?? '')?.[1];
  expect(token).toBeDefined();
  expect((await verifyBearerToken(token!, { audience: AUDIENCE })).did).toBe(key.did);
  return token!;
}
