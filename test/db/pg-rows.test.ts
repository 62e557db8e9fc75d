/**
 * src/db/pg-rows.ts: the server's Postgres pool fetches plain statements as
 * arrays and builds the row objects itself. The rows must be exactly what
 * pg would have built: same keys in column order, same parsed values (int8
 * as numbers, json parsed, timestamps, nulls), the later of two columns of
 * one name winning, an ordinary prototype, and `__proto__` as a plain key.
 * Checked against pg's own objects from a second, unwrapped client on the
 * same database.
 */
import pg from 'pg';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { openDatabase, parseDatabaseURL, type OpenDatabase } from '../../src/db/connect.js';
import { rowFactory } from '../../src/db/pg-rows.js';
import { createScratchPostgresDatabase, type ScratchPostgresDatabase } from '../helpers/postgres.js';
import { testDialects } from '../helpers/databases.js';

const runs = testDialects().includes('postgres') && inject('postgresAvailable');

describe('rowFactory', () => {
  it('builds one object per row with the columns in order; a repeated name keeps the later value', () => {
    const make = rowFactory([{ name: 'a' }, { name: 'b' }, { name: 'a' }]);
    const row = make([1, 'two', 3]);
    expect(row).toEqual({ a: 3, b: 'two' });
    expect(Object.keys(row)).toEqual(['a', 'b']);
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
  });

  it('names that are not identifiers are keys like any other, and `__proto__` is a key, never the prototype', () => {
    const row = rowFactory([{ name: '__proto__' }, { name: 'x"); throw 1; ("' }, { name: 'count(*)' }])([{ polluted: true }, 2, 3]);
    expect(Object.getPrototypeOf(row)).toBe(Object.prototype);
    expect(Object.keys(row)).toEqual(['__proto__', 'x"); throw 1; ("', 'count(*)']);
    expect(Object.getOwnPropertyDescriptor(row, '__proto__')?.value).toEqual({ polluted: true });
    expect((row as Record<string, unknown>)['x"); throw 1; ("']).toBe(2);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('reuses the builder of a column list', () => {
    expect(rowFactory([{ name: 'p' }, { name: 'q' }])).toBe(rowFactory([{ name: 'p' }, { name: 'q' }]));
    expect(rowFactory([{ name: 'p' }, { name: 'q' }])).not.toBe(rowFactory([{ name: 'q' }, { name: 'p' }]));
    // Same first column and count, another column after it: another list, another builder, each kept.
    const pq = rowFactory([{ name: 'p' }, { name: 'q' }]);
    const pr = rowFactory([{ name: 'p' }, { name: 'r' }]);
    expect(pr).not.toBe(pq);
    expect(pr(['1', '2'])).toEqual({ p: '1', r: '2' });
    expect(rowFactory([{ name: 'p' }, { name: 'q' }])).toBe(pq);
    expect(rowFactory([{ name: 'p' }, { name: 'r' }])).toBe(pr);
    expect(rowFactory([{ name: 'p' }])).not.toBe(pq);
  });
});

describe.skipIf(!runs)('postgres: the pool builds the rows pg would have built', () => {
  let scratch: ScratchPostgresDatabase;
  let database: OpenDatabase;
  let plain: pg.Client;

  beforeAll(async () => {
    scratch = await createScratchPostgresDatabase('cs_pgrows');
    database = openDatabase(parseDatabaseURL(scratch.url), { poolMax: 2 });
    plain = new pg.Client({ connectionString: scratch.url });
    await plain.connect();
  });
  afterAll(async () => {
    await plain?.end().catch(() => {});
    await database?.close().catch(() => {});
    await scratch?.drop();
  });

  const statement = `select 1::int4 as n, 9007199254740991::int8 as big, null::text as nothing, 'x'::text as s, '{"a":[1,2]}'::json as j,
    true as flag, 2::int4 as n, 'p'::text as "__proto__", now() - now() as gap
    from generate_series(1, 3) as i`;

  it('a Kysely statement: same keys, order and values as pg; int8 as a number', async () => {
    const ours = (await sql.raw<Record<string, unknown>>(statement).execute(database.db)).rows;
    const theirs = (await plain.query(statement)).rows;
    expect(ours).toHaveLength(3);
    expect(ours.map((r) => Object.keys(r))).toEqual(theirs.map((r) => Object.keys(r)));
    // The pool reads int8 as numbers (connect.ts); pg's default is a string. Everything else is equal.
    expect(ours.map((r) => ({ ...r, big: String(r.big) }))).toEqual(theirs.map((r) => ({ ...r })));
    expect(ours[0]!.big).toBe(9007199254740991);
    expect(ours[0]!.n).toBe(2);
    expect(Object.getPrototypeOf(ours[0])).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(ours[0], '__proto__')?.value).toBe('p');
  });

  it("a plain statement on the pool's clients goes the array way (pg's result says so) and still comes back as objects", async () => {
    const client = await database.pgPool!.connect();
    try {
      const result = (await client.query('select $1::int4 as a, $2::text as b', [7, 'x'])) as pg.QueryResult & { rowAsArray?: boolean };
      expect(result.rowAsArray).toBe(true);
      expect(result.rows).toEqual([{ a: 7, b: 'x' }]);
      expect(Array.isArray(result.rows[0])).toBe(false);
    } finally {
      client.release();
    }
  });

  it('no rows, and a write without RETURNING, answer as before', async () => {
    await sql`create table pg_rows_probe (id int primary key, note text)`.execute(database.db);
    const insert = await sql`insert into pg_rows_probe values (1, 'a'), (2, null)`.execute(database.db);
    expect(insert.numAffectedRows).toBe(2n);
    expect(insert.rows).toEqual([]);
    expect((await sql`select * from pg_rows_probe where id < 0`.execute(database.db)).rows).toEqual([]);
    expect((await sql`select * from pg_rows_probe order by id`.execute(database.db)).rows).toEqual([
      { id: 1, note: 'a' },
      { id: 2, note: null },
    ]);
  });

  it('callers that pass a callback, a config object or their own row mode get pg untouched', async () => {
    const client = await database.pgPool!.connect();
    try {
      const arrays = await client.query({ text: 'select 1 as a, 2 as b', rowMode: 'array' });
      expect(arrays.rows).toEqual([[1, 2]]);
      const objects = await client.query({ text: 'select 1 as a' });
      expect(objects.rows).toEqual([{ a: 1 }]);
      const viaCallback = await new Promise<pg.QueryResult>((resolve, reject) => client.query('select 3 as c', [], (error, result) => (error ? reject(error) : resolve(result))));
      expect(viaCallback.rows).toEqual([{ c: 3 }]);
    } finally {
      client.release();
    }
    // pg-pool's own query (callback inside) too.
    expect((await database.pgPool!.query('select 4 as d')).rows).toEqual([{ d: 4 }]);
  });

  it('a failing statement still rejects with the database error', async () => {
    await expect(sql.raw('select * from no_such_table').execute(database.db)).rejects.toMatchObject({ code: '42P01' });
  });
});
