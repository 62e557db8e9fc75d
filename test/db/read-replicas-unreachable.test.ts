/**
 * A read standby that does not answer (a closed port on 127.0.0.1, as a
 * standby that is down at start would be): the router still starts, keeps it
 * out of rotation with the reason, and every read uses the primary. No
 * standby needed, so this runs wherever Postgres does.
 */
import { sql } from 'kysely';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, parseDatabaseURL, type OpenDatabase, type PostgresTarget } from '../../src/db/connect.js';
import { createReadRouter, type ReadRouter, type RouteReason } from '../../src/db/read-replicas.js';
import { testDialects } from '../helpers/databases.js';
import { adminPostgresURL } from '../helpers/postgres.js';
import { freeLoopbackPort } from '../helpers/processes.js';

const runs = testDialects().includes('postgres') && inject('postgresAvailable');

describe.skipIf(!runs)('postgres: a read standby that does not answer', () => {
  let primary: OpenDatabase;
  let router: ReadRouter;
  const routes: [string, RouteReason][] = [];

  beforeAll(async () => {
    primary = openDatabase(parseDatabaseURL(adminPostgresURL()));
    const port = await freeLoopbackPort();
    router = await createReadRouter({
      primary,
      standbys: [parseDatabaseURL(`postgres://postgres:s3cret@127.0.0.1:${port}/postgres`) as PostgresTarget],
      maxLagMs: 1_000,
      checkIntervalMs: 100,
      readYourWritesWaitMs: 200,
      poolOptions: { poolMax: 2, connectionTimeoutMs: 500 },
      logger: pino({ level: 'silent' }),
    });
    router.onRoute((target, reason) => routes.push([target, reason]));
  });

  afterAll(async () => {
    await router?.close();
    await primary?.close();
  });

  it('starts with it out of rotation, saying why, without its password', () => {
    const [status] = router.standbys();
    expect(status).toMatchObject({ inRotation: false, lagMs: null });
    expect(status!.lastError).toMatch(/ECONNREFUSED|connect/i);
    expect(status!.name).not.toContain('s3cret');
  });

  it('reads, with a token or without, use the primary', async () => {
    for (const readAfter of [null, 1n]) {
      const db = await router.readerFor(readAfter);
      expect(db).toBe(primary.db);
      expect((await sql<{ r: boolean }>`select pg_is_in_recovery() as r`.execute(db)).rows[0]!.r).toBe(false);
    }
    expect(routes).toEqual([
      ['primary', 'no_standby_in_rotation'],
      ['primary', 'no_standby_in_rotation'],
    ]);
  });

  it('the consistency token is the primary’s WAL position', async () => {
    expect(await router.currentToken()).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
  });
});

