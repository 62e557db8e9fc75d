/**
 * Prepared statements (src/store/prepared.ts), on both dialects: built once
 * per dialect, run with new values each time; a builder that reads a value
 * without binding it is refused when it is built; a builder whose statement
 * depends on its values is caught by the check the test suite turns on
 * (STORE_CHECK_PREPARED=1); a handle with Kysely plugins builds every time.
 */
import type { KyselyPlugin } from 'kysely';
import { expect, it } from 'vitest';
import * as operations from '../../src/store/operations/index.js';
import { prepared, preparedForList } from '../../src/store/prepared.js';
import { describeEachDialect } from '../helpers/databases.js';
import { recordingStatements } from '../helpers/query-plans.js';
import { claimFresh } from '../helpers/operation-claim-fixtures.js';
import { CALLER, OWNER } from '../helpers/row-fixtures.js';

const TABLE = 'kubun_connector_operation';

describeEachDialect('prepared statements', (suite) => {
  it('is built once and runs with each call’s values, in a transaction too', async () => {
    await claimFresh(suite.store, { operationID: 'one', callerDID: CALLER, ownerDID: OWNER });
    await claimFresh(suite.store, { operationID: 'two', callerDID: CALLER, ownerDID: OWNER });
    let builds = 0;
    const byKey = prepared((db, v: { callerDID: string; operationID: string }) => {
      builds++;
      return db.selectFrom(TABLE).select(['operation_id', 'attempts']).where('caller_did', '=', v.callerDID).where('operation_id', '=', v.operationID);
    });
    const first = await byKey(suite.store, { callerDID: CALLER, operationID: 'one' });
    const second = await byKey(suite.store, { callerDID: CALLER, operationID: 'two' });
    const none = await byKey(suite.store, { callerDID: CALLER, operationID: 'three' });
    const inTransaction = await suite.store.db.transaction().execute((tx) => byKey({ ...suite.store, db: tx }, { callerDID: CALLER, operationID: 'one' }));
    expect(first.rows).toEqual([{ operation_id: 'one', attempts: 0 }]);
    expect(second.rows).toEqual([{ operation_id: 'two', attempts: 0 }]);
    expect(none.rows).toEqual([]);
    expect(inTransaction.rows).toEqual(first.rows);
    // Once to prepare; the suite's check (STORE_CHECK_PREPARED=1) builds each run again from its values.
    expect(builds).toBe(1 + (process.env.STORE_CHECK_PREPARED === '1' ? 4 : 0));
  });

  it('prepares a list statement per length, and builds lists longer than its maximum each time', async () => {
    for (const id of ['a', 'b', 'c']) await claimFresh(suite.store, { operationID: id, callerDID: CALLER, ownerDID: OWNER });
    const lengths: number[] = [];
    const byIDs = preparedForList(2, (db, ids: readonly string[]) => {
      lengths.push(ids.length);
      return db.selectFrom(TABLE).select('operation_id').where('operation_id', 'in', ids).orderBy('operation_id');
    });
    const ids = async (list: string[]) => (await byIDs(suite.store, list)).rows.map((row) => row.operation_id);
    expect(await ids(['a'])).toEqual(['a']);
    expect(await ids(['c', 'a'])).toEqual(['a', 'c']);
    expect(await ids(['b'])).toEqual(['b']);
    expect(await ids(['b', 'x'])).toEqual(['b']);
    expect(await ids(['a', 'b', 'c'])).toEqual(['a', 'b', 'c']);
    // Prepared once for 1 and once for 2 (the check builds each run again); 3 is over the maximum: built.
    const check = process.env.STORE_CHECK_PREPARED === '1';
    expect(lengths.filter((n) => n === 1)).toHaveLength(1 + (check ? 2 : 0));
    expect(lengths.filter((n) => n === 2)).toHaveLength(1 + (check ? 2 : 0));
    expect(lengths.filter((n) => n === 3)).toHaveLength(1);
  });

  it('runs a list at the next power of two (or the maximum), without repeats and padded with NULLs: the same rows, a few statements per builder', async () => {
    for (const id of ['a', 'b', 'c', 'd', 'e']) await claimFresh(suite.store, { operationID: id, callerDID: CALLER, ownerDID: OWNER });
    const lengths: number[] = [];
    const byIDs = preparedForList(6, (db, ids: readonly string[]) => {
      lengths.push(ids.length);
      return db.selectFrom(TABLE).select('operation_id').where('operation_id', 'in', ids).orderBy('operation_id');
    });
    const ids = async (list: string[]) => (await byIDs(suite.store, list)).rows.map((row) => row.operation_id);
    expect(await ids(['c', 'a', 'e'])).toEqual(['a', 'c', 'e']);
    expect(await ids(['d', 'b', 'x', 'a'])).toEqual(['a', 'b', 'd']);
    expect(await ids(['e', 'd', 'c', 'b', 'a'])).toEqual(['a', 'b', 'c', 'd', 'e']);
    expect(await ids(['e', 'd', 'c', 'b', 'a', 'a'])).toEqual(['a', 'b', 'c', 'd', 'e']);
    // Three and four values ran as four; five and six as six (the maximum): two statements, each prepared once.
    const check = process.env.STORE_CHECK_PREPARED === '1';
    expect(lengths.filter((n) => n === 4)).toHaveLength(1 + (check ? 2 : 0));
    expect(lengths.filter((n) => n === 6)).toHaveLength(1 + (check ? 2 : 0));
    expect(lengths.filter((n) => n !== 4 && n !== 6)).toEqual([]);
    // What is bound: each value once, then NULLs (the statements recorded build with the values they run with).
    const { store, statements } = recordingStatements(suite.store);
    const recorded = preparedForList(6, (db, ids: readonly string[]) => db.selectFrom(TABLE).select('operation_id').where('operation_id', 'in', ids));
    expect((await recorded(store, ['c', 'a', 'c', 'a', 'e'])).rows.map((row) => row.operation_id).sort()).toEqual(['a', 'c', 'e']);
    expect(statements.at(-1)!.parameters).toEqual(['c', 'a', 'e', null]);
  });

  it('binds an omitted optional value as NULL, and keeps the constants the builder wrote', async () => {
    await claimFresh(suite.store, { operationID: 'one', callerDID: CALLER, ownerDID: OWNER });
    const touch = prepared((db, v: { operationID: string; error?: string | null }) =>
      db.updateTable(TABLE).set((eb) => ({ last_error: v.error ?? null, attempts: eb('attempts', '+', 2) })).where('operation_id', '=', v.operationID).returning(['last_error', 'attempts']),
    );
    expect((await touch(suite.store, { operationID: 'one', error: 'boom' })).rows).toEqual([{ last_error: 'boom', attempts: 2 }]);
    expect((await touch(suite.store, { operationID: 'one' })).rows).toEqual([{ last_error: null, attempts: 4 }]);
  });

  it('refuses a builder that reads a value it does not bind (it decided something with it)', async () => {
    const deciding = prepared((db, v: { operationID: string; newest: boolean }) =>
      db.selectFrom(TABLE).selectAll().where('operation_id', '=', v.operationID).orderBy('created_at', v.newest ? 'desc' : 'asc'),
    );
    await expect(deciding(suite.store, { operationID: 'one', newest: true })).rejects.toThrow(/the value "newest" was read but is not a parameter/);
  });

  it.runIf(process.env.STORE_CHECK_PREPARED === '1')('the suite’s check catches a statement whose shape depends on its values', async () => {
    // `.length` of a stand-in is undefined: prepared with one key, run with two.
    const shaped = prepared((db, v: { keys: string[] }) => db.selectFrom(TABLE).select('operation_id').where('operation_id', 'in', v.keys.length > 1 ? v.keys : [v.keys as unknown as string]));
    await expect(shaped(suite.store, { keys: ['a', 'b'] })).rejects.toThrow(/prepared statement differs from the one its values build/);
  });

  it.runIf(process.env.STORE_CHECK_PREPARED === '1')('the suite’s check refuses a builder that selects or returns * (Postgres could not keep it parsed)', async () => {
    const starred = prepared((db, v: { operationID: string }) => db.selectFrom(TABLE).selectAll().where('operation_id', '=', v.operationID));
    await expect(starred(suite.store, { operationID: 'one' })).rejects.toThrow(/list the columns/);
    const returning = prepared((db, v: { operationID: string }) => db.updateTable(TABLE).set({ attempts: 1 }).where('operation_id', '=', v.operationID).returningAll());
    await expect(returning(suite.store, { operationID: 'one' })).rejects.toThrow(/list the columns/);
  });

  it('builds every time on a handle with Kysely plugins, so each plugin transforms each statement it runs', async () => {
    // A statement's result is matched to its transformed tree by query id: counted only when the statement run was the one transformed.
    const transformed = new Set<unknown>();
    let resultsOfTransformed = 0;
    const plugin: KyselyPlugin = {
      transformQuery: (args) => {
        transformed.add(args.queryId);
        return args.node;
      },
      transformResult: async (args) => {
        if (transformed.has(args.queryId)) resultsOfTransformed++;
        return args.result;
      },
    };
    const count = prepared((db, v: { callerDID: string }) => db.selectFrom(TABLE).select((eb) => eb.fn.countAll().as('n')).where('caller_did', '=', v.callerDID));
    await count(suite.store, { callerDID: CALLER });
    const withPlugin = { ...suite.store, db: suite.store.db.withPlugin(plugin) };
    await count(withPlugin, { callerDID: CALLER });
    await count(withPlugin, { callerDID: OWNER });
    expect(resultsOfTransformed).toBe(2);
  });

  it('the first page of operations is prepared when the filter sets nothing, as the API passes it (`{}`), and built when it filters', async () => {
    for (const id of ['a', 'b', 'c']) await claimFresh(suite.store, { operationID: id, callerDID: CALLER, ownerDID: OWNER });
    // The statement trees run: a prepared statement passes its one template each time.
    const ran: unknown[] = [];
    const db = new Proxy(suite.store.db, {
      get: (target, property) => {
        if (property === 'executeQuery') {
          return (query: Parameters<typeof target.executeQuery>[0]) => {
            ran.push('query' in query ? query.query : query);
            return target.executeQuery(query);
          };
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const store = { ...suite.store, db };
    const keys = async (filter: operations.OperationFilter | undefined, visibleTo: string | null = null) =>
      (await operations.listOperations(store, { visibleTo, first: 3, ...(filter !== undefined && { filter }) })).operations.map((op) => op.operationID).sort();
    expect(await keys(undefined)).toEqual(['a', 'b', 'c']);
    expect(await keys({})).toEqual(['a', 'b', 'c']);
    expect(await keys({ states: undefined, ownerDID: undefined })).toEqual(['a', 'b', 'c']);
    expect(await keys({ states: ['attempted'] })).toEqual(['a', 'b', 'c']);
    expect(ran[1]).toBe(ran[0]);
    expect(ran[2]).toBe(ran[0]);
    expect(ran[3]).not.toBe(ran[0]);
    expect(await keys({}, CALLER)).toEqual(['a', 'b', 'c']);
    expect(await keys(undefined, CALLER)).toEqual(['a', 'b', 'c']);
    expect(ran[5]).toBe(ran[4]);
    expect(ran[4]).not.toBe(ran[0]);
  });
});
