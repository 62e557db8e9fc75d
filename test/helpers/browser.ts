/**
 * A real headless browser for the tests that need one: Debian's Chromium
 * (`apt-get install chromium`, or CHROMIUM_PATH) driven by puppeteer-core,
 * which never downloads a browser of its own. Locally a missing Chromium
 * skips those tests with a loud notice; under CI=true it fails the run, as a
 * missing PostgreSQL does (global-setup.ts).
 *
 * The browser is kept on this machine twice over: its resolver knows no host
 * but 127.0.0.1, and {@link keepOnLoopback} aborts and records every request a
 * page makes anywhere else, so a test can fail on it.
 */
import { accessSync, constants } from 'node:fs';
import { open, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import { afterAll, beforeAll } from 'vitest';
import { processAlive } from '../../src/db/sqlite-lock.js';

/** Where Chromium is looked for: `CHROMIUM_PATH`, default Debian's `/usr/bin/chromium`. */
export function chromiumPath(): string {
  return process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
}

/**
 * The Chromium executable to drive, or `undefined` when there is none (then,
 * locally, a loud notice says the browser tests are skipped). Under CI=true a
 * missing Chromium throws: the test file fails instead of skipping.
 */
export function findChromium(): string | undefined {
  const path = chromiumPath();
  try {
    accessSync(path, constants.X_OK);
    return path;
  } catch (error) {
    const reason = `${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`;
    if (process.env.CI === 'true') {
      throw new Error(`CI=true but Chromium is not available (${reason}); install it (apt-get install chromium) or set CHROMIUM_PATH`);
    }
    const bar = '!'.repeat(78);
    console.warn(`\n${bar}\n!! Chromium not found (${reason}).\n!! SKIPPING the browser tests. apt-get install chromium, or set CHROMIUM_PATH;\n!! under CI=true this is a failure.\n${bar}\n`);
    return undefined;
  }
}

/** Launches headless Chromium with nothing that reaches past 127.0.0.1 (no sync, updates, QUIC or other hosts' names). */
export function launchChromium(executablePath: string): Promise<Browser> {
  return puppeteer.launch({
    executablePath,
    headless: true,
    args: [
      // Tests run as root in containers, where Chromium's sandbox cannot start.
      '--no-sandbox',
      '--disable-gpu',
      '--disable-dev-shm-usage',
      '--disable-quic',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1',
    ],
  });
}

/** What {@link keepOnLoopback} saw on a page. */
export interface LoopbackGuard {
  /** Every URL the page requested (data: URLs shortened). */
  readonly requests: string[];
  /** Requests to anywhere but 127.0.0.1 (aborted), and WebSockets opened anywhere but there. */
  readonly foreign: string[];
}

/**
 * Intercepts every request of `page` (documents, scripts, styles, fonts,
 * images, fetches, workers' scripts) and every WebSocket it opens: loopback
 * (`http://127.0.0.1:…`) and in-page URLs (`data:`, `blob:`) go on, anything
 * else is aborted and recorded in `foreign`. Call before the first `goto`.
 */
export async function keepOnLoopback(page: Page): Promise<LoopbackGuard> {
  const requests: string[] = [];
  const foreign: string[] = [];
  await page.setRequestInterception(true);
  page.on('request', (request) => {
    const url = request.url();
    requests.push(url.startsWith('data:') ? `${url.slice(0, 40)}…` : url);
    if (onLoopback(url)) {
      void request.continue();
    } else {
      foreign.push(url);
      void request.abort('blockedbyclient');
    }
  });
  // Request interception does not see WebSockets; the network domain does.
  const cdp = await page.createCDPSession();
  await cdp.send('Network.enable');
  cdp.on('Network.webSocketCreated', ({ url }) => {
    if (!onLoopback(url)) foreign.push(url);
  });
  return { requests, foreign };
}

function onLoopback(url: string): boolean {
  if (url.startsWith('data:') || url.startsWith('blob:')) return true;
  try {
    const parsed = new URL(url);
    return ['http:', 'https:', 'ws:', 'wss:'].includes(parsed.protocol) && parsed.hostname === '127.0.0.1';
  } catch {
    return false;
  }
}

/** Where {@link takeBrowserTurn}'s lock lives: one per machine user, beside the test run. */
const TURN_LOCK = join(tmpdir(), 'connector-store-browser-tests.lock');

/**
 * Waits until no other browser test file runs, then holds the turn until the
 * returned release is called. The suite runs two files at once (two cores):
 * a file that drives twelve tabs beside another's timed renders ("within a
 * second") made the latter measure the machine, not the console. Files that
 * start a browser take turns; the other worker meanwhile runs the rest of the
 * suite. The lock file names its holder's pid, so one left by a crashed
 * worker is taken over.
 */
export async function takeBrowserTurn(): Promise<() => Promise<void>> {
  for (;;) {
    try {
      const handle = await open(TURN_LOCK, 'wx');
      await handle.writeFile(String(process.pid));
      await handle.close();
      return async () => {
        if ((await readFile(TURN_LOCK, 'utf8').catch(() => '')) === String(process.pid)) await rm(TURN_LOCK, { force: true });
      };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const holder = Number(await readFile(TURN_LOCK, 'utf8').catch(() => ''));
    if (holder > 0 && !processAlive(holder)) await rm(TURN_LOCK, { force: true });
    else await new Promise((resolve) => setTimeout(resolve, 250));
  }
}


/**
 * A browser for the whole of the calling `describe`: once this file's turn
 * has come ({@link takeBrowserTurn}), Chromium starts; after the file it
 * closes and the turn passes on. Returns the browser's getter.
 */
export function browserForFile(executablePath: string): () => Browser {
  let browser: Browser | undefined;
  let releaseTurn: (() => Promise<void>) | undefined;
  // Waiting for the turn may take as long as the other browser files run.
  beforeAll(async () => {
    releaseTurn = await takeBrowserTurn();
    browser = await launchChromium(executablePath);
  }, 900_000);
  afterAll(async () => {
    await browser?.close();
    await releaseTurn?.();
  });
  return () => browser!;
}
