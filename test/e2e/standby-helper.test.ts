/**
 * The standby helper itself (test/helpers/standby.ts, issue 24's test
 * infrastructure): a streaming hot standby of the test server sees the
 * primary's writes, stops seeing them while replay is paused (its replay
 * position behind the primary's), catches up on resume, refuses connections
 * at once when stopped, catches up again after a restart, and leaves neither
 * directory nor replication slot behind.
 *
 * Needs pg_basebackup and pg_ctl of the server's version and a replication
 * connection the server's pg_hba.conf allows: skipped with a loud notice
 * when either is missing, a failure under CI=true.
 */
import { existsSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { adminPostgresURL, createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';
import { describeWithStandby, startStandby, type Standby } from '../helpers/standby.js';

await describeWithStandby('postgres: a streaming standby of the test server', () => {
  let scratch: ScratchPostgresDatabase | undefined;
  let standby: Standby | undefined;

  beforeAll(async () => {
    scratch = await createScratchPostgresDatabase('cs_standby');
    standby = await startStandby({ database: new URL(scratch.url).pathname.slice(1) });
  }, 60_000);

  afterAll(async () => {
    // The standby first: dropping the database replays as a drop there too.
    await standby?.destroy();
    await scratch?.drop();
  });

  async function rows<T extends pg.QueryResultRow>(url: string, text: string, values: unknown[] = []): Promise<T[]> {
    const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 5_000 });
    await client.connect();
    try {
      return (await client.query<T>(text, values)).rows;
    } finally {
      await client.end();
    }
  }
  const primaryLsn = async () => (await rows<{ lsn: string }>(adminPostgresURL(), 'select pg_current_wal_lsn()::text as lsn'))[0]!.lsn;
  const notes = async (url: string) => (await rows<{ note: string }>(url, 'select note from standby_note order by id')).map((r) => r.note);

  it('is a hot standby that sees the primary’s writes, and none while replay is paused', async () => {
    const s = standby!;
    const url = new URL(s.url);
    expect([url.hostname, url.port, url.pathname]).toEqual(['127.0.0.1', String(s.port), new URL(scratch!.url).pathname]);
    expect(await rows(s.url, 'select pg_is_in_recovery() as recovering')).toEqual([{ recovering: true }]);
    await expect(rows(s.url, 'create table refused (id int)')).rejects.toThrow(/read-only transaction/);

    await rows(scratch!.url, 'create table standby_note (id int primary key, note text not null)');
    await rows(scratch!.url, "insert into standby_note values (1, 'before the pause')");
    await s.waitForReplay(await primaryLsn(), 10_000);
    expect(await notes(s.url)).toEqual(['before the pause']);

    await s.pauseReplay();
    await rows(scratch!.url, "insert into standby_note values (2, 'during the pause')");
    const written = await primaryLsn();
    expect(await notes(s.url)).toEqual(['before the pause']);
    const replayed = await s.replayLsn();
    const behind = await rows<{ bytes: string }>(adminPostgresURL(), 'select pg_wal_lsn_diff(pg_current_wal_lsn(), $1) as bytes', [replayed]);
    expect(Number(behind[0]!.bytes)).toBeGreaterThan(0);
    await expect(s.waitForReplay(written, 300)).rejects.toThrow(/did not replay/);

    await s.resumeReplay();
    await s.waitForReplay(written, 10_000);
    expect(await notes(s.url)).toEqual(['before the pause', 'during the pause']);
  });

  it('refuses connections at once when stopped, and catches up after starting again', async () => {
    const s = standby!;
    await s.stop();
    await s.stop(); // idempotent
    const asked = Date.now();
    await expect(rows(s.url, 'select 1')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(Date.now() - asked).toBeLessThan(1_000);

    // Written while it is down: the slot keeps the WAL for it.
    await rows(scratch!.url, "insert into standby_note values (3, 'while stopped')");
    const written = await primaryLsn();
    await s.start();
    await s.waitForReplay(written, 10_000);
    expect(await notes(s.url)).toEqual(['before the pause', 'during the pause', 'while stopped']);
  });

  it('destroy removes the directory and the replication slot, and may be called again', async () => {
    const s = standby!;
    expect(s.slotName).toBeDefined();
    await s.destroy();
    await s.destroy();
    expect(existsSync(s.directory)).toBe(false);
    expect(await rows(adminPostgresURL(), 'select 1 from pg_replication_slots where slot_name = $1', [s.slotName])).toEqual([]);
    await expect(rows(s.url, 'select 1')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    await expect(s.start()).rejects.toThrow(/destroyed/);
  });
});
