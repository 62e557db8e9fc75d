/**
 * The development banner's reminder (issue 39 item 4, dev-banner.ts): printed
 * once, after the first burst of requests or after so many request lines
 * while they keep coming, never before the banner is out.
 */
import { describe, expect, it } from 'vitest';
import { bannerReminder, createBannerReminder } from '../../src/server/dev-banner.js';

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('banner reminder', () => {
  it('prints once when a burst ends, not while it lasts, and never again', async () => {
    const printed: string[] = [];
    const reminder = createBannerReminder({ print: (text) => printed.push(text), quietMs: 60 });
    reminder.arm('again');
    for (let i = 0; i < 5; i++) {
      reminder.noteRequest();
      await pause(10);
    }
    expect(printed).toEqual([]);
    await pause(120);
    expect(printed).toEqual(['again']);
    reminder.noteRequest();
    await pause(120);
    expect(printed).toEqual(['again']);
  });

  it('prints after maxRequests lines when requests never pause (a polling worker)', () => {
    const printed: string[] = [];
    const reminder = createBannerReminder({ print: (text) => printed.push(text), quietMs: 60_000, maxRequests: 10 });
    reminder.arm('again');
    for (let i = 0; i < 9; i++) reminder.noteRequest();
    expect(printed).toEqual([]);
    reminder.noteRequest();
    expect(printed).toEqual(['again']);
    reminder.stop();
  });

  it('says nothing before it is armed or after it is stopped', async () => {
    const printed: string[] = [];
    const reminder = createBannerReminder({ print: (text) => printed.push(text), quietMs: 20 });
    reminder.noteRequest();
    await pause(60);
    expect(printed).toEqual([]);
    reminder.arm('again');
    reminder.stop();
    reminder.noteRequest();
    await pause(60);
    expect(printed).toEqual([]);
  });

  it('names the console and GraphiQL at a browsable address, and how to get a token, without one', () => {
    const text = bannerReminder({ host: '0.0.0.0', graphiql: true, console: true }, 4000);
    expect(text).toContain('Console:    http://127.0.0.1:4000/console/');
    expect(text).toContain('GraphiQL:   http://127.0.0.1:4000/graphql');
    expect(text).toContain('npm run -s token');
  });
});
