/**
 * The demo's week before today, for the overview's charts: hourly activity
 * (commits, retries, deferrals, the odd unknown and fatal outcome) and the
 * due backlog sampled once an hour, from seven days ago up to the hour
 * before the demo's anchor; the demo items add their own events of the last
 * few hours on top.
 *
 * Written into the counters as an import (`importActivity`,
 * `importBacklogSamples`), not replayed as operations: a week of write-backs
 * would leave hundreds of operations and watches in the demo's lists, which
 * are there to show one of each case. So the charts count more commits than
 * the lists hold, as they would after retention (24 h for committed work). Every figure is a
 * function of the absolute UTC hour, so a later run writes the same hours
 * the same way (and an import adds each hour once).
 */
import { HOUR_MS, hourOf, MAX_ACTIVITY_HOURS, type ImportedActivity } from '../store/activity/index.js';

/** The imported week ends this many hours before the anchor's hour (the current hour is the demo items' alone). */
const STORY_HOURS = 1;

/** A number in [0, 1) fixed by `k` and `salt` (a 32-bit integer hash). */
function noise(k: number, salt: number): number {
  let x = (Math.imul(k, 2_654_435_761) + Math.imul(salt, 40_503)) >>> 0;
  x = (x ^ (x >>> 16)) >>> 0;
  x = Math.imul(x, 0x45d9f3b) >>> 0;
  x = (x ^ (x >>> 16)) >>> 0;
  return x / 2 ** 32;
}

/** How busy an hour of the (UTC) day is: a working-day bell around 13:00, never quite idle. */
const busy = (hourOfDay: number) => 0.15 + 0.85 * Math.exp(-((hourOfDay - 13) ** 2) / 18);

/** Who the week's rows belong to. */
export interface DemoWeekDIDs {
  owner: string;
  worker: string;
  neighbour: string;
}

/** The week's hourly activity and backlog samples for hours before `anchor`. */
export function demoWeek(anchor: number, dids: DemoWeekDIDs): { activity: ImportedActivity[]; backlog: { sampledAt: number; due: number }[] } {
  const activity: ImportedActivity[] = [];
  const backlog: { sampledAt: number; due: number }[] = [];
  const current = hourOf(anchor);
  for (let ago = MAX_ACTIVITY_HOURS - 1; ago >= STORY_HOURS; ago--) {
    const hour = current - ago * HOUR_MS;
    const k = hour / HOUR_MS;
    const level = busy(k % 24);
    // A provider incident every few days: GitHub answers 502 for three hours.
    const incident = k % 97 < 3;
    // Evenings, the owner's laptop is often offline.
    const evening = k % 24 >= 19 && k % 24 <= 22;
    const add = (callerDID: string, ownerDID: string, connectorName: string, outcome: ImportedActivity['outcome'], count: number) => {
      const whole = Math.round(count);
      if (whole > 0) activity.push({ at: hour, callerDID, ownerDID, connectorName, outcome, count: whole });
    };
    const { owner, worker, neighbour } = dids;
    add(worker, owner, 'google', 'committed', 2 + 10 * level * (0.7 + 0.6 * noise(k, 1)));
    add(worker, owner, 'github', 'committed', (incident ? 0.3 : 1) * (1 + 5 * level * (0.6 + 0.8 * noise(k, 2))));
    add(owner, owner, 'google', 'committed', 3 * level * noise(k, 3));
    add(worker, owner, 'google', 'retryable', 2 * level * noise(k, 4));
    add(worker, owner, 'github', 'retryable', incident ? 12 + 10 * noise(k, 5) : 1.5 * level * noise(k, 6));
    add(worker, owner, 'github', 'unknown', incident ? 1 + 2 * noise(k, 7) : noise(k, 8) > 0.97 ? 1 : 0);
    add(owner, owner, 'google', 'offline', evening ? 1 + 3 * noise(k, 9) : 0);
    add(worker, owner, 'google', 'auth', k % 131 === 5 ? 6 : 0);
    add(worker, owner, 'github', 'fatal', k % 53 === 7 ? 1 : 0);
    add(neighbour, neighbour, 'google', 'committed', 1 + 4 * level * noise(k, 10));
    add(neighbour, neighbour, 'github', 'retryable', incident ? 4 : 0);
    backlog.push({ sampledAt: hour + HOUR_MS / 2, due: Math.round(3 * level * noise(k, 11) + (incident ? 25 + 20 * noise(k, 12) : 0)) });
  }
  return { activity, backlog };
}
