/**
 * Calls of one store write made in the same turn of the event loop, run
 * together (issue 40 item 4): the items of a batch request (`Promise.all`
 * over its items) and the single requests the server handles in that turn
 * reach the write one by one; gathered, they are one statement on Postgres
 * instead of one each, so the statement's fixed costs (parse and plan, the
 * statement-level counting trigger, the commit and its WAL flush, the
 * notification queue's lock) are paid once per batch, as graphile-worker
 * pays them once per batch of jobs.
 *
 * A gathering belongs to one database handle and one clock (tests inject
 * their own): calls on another pool or clock are never mixed.
 */
import type { Kysely } from 'kysely';
import type { Database } from '../db/tables.js';
import type { StoreContext } from './context.js';

interface Waiting<C, R> {
  call: C;
  resolve: (result: R) => void;
  reject: (error: unknown) => void;
}

/**
 * `run` for calls gathered until the event loop's current turn ends
 * (`setImmediate`: every request whose data arrived in this turn has reached
 * its write by then), at most `max` at a time; `run` answers one result per
 * call, in order, and runs in the first call's store.
 */
export function gathered<C, R>(max: number, run: (store: StoreContext, calls: C[]) => Promise<R[]>): (store: StoreContext, call: C) => Promise<R> {
  const pending = new WeakMap<Kysely<Database>, Map<() => number, { store: StoreContext; waiting: Waiting<C, R>[] }>>();
  const flush = (db: Kysely<Database>, now: () => number) => {
    const byClock = pending.get(db)!;
    const { store, waiting } = byClock.get(now)!;
    byClock.delete(now);
    for (let first = 0; first < waiting.length; first += max) {
      const batch = waiting.slice(first, first + max);
      run(
        store,
        batch.map((entry) => entry.call),
      ).then(
        (results) => batch.forEach((entry, i) => entry.resolve(results[i]!)),
        (error: unknown) => batch.forEach((entry) => entry.reject(error)),
      );
    }
  };
  return (store, call) =>
    new Promise<R>((resolve, reject) => {
      let byClock = pending.get(store.db);
      if (byClock === undefined) pending.set(store.db, (byClock = new Map()));
      let gathering = byClock.get(store.now);
      if (gathering === undefined) {
        byClock.set(store.now, (gathering = { store, waiting: [] }));
        setImmediate(flush, store.db, store.now);
      }
      gathering.waiting.push({ call, resolve, reject });
    });
}

/**
 * A gathered batch's per-call column, named after the value it carries
 * (`leaseToken` → `in_lease_token`): prefixed, so that it never shadows a
 * column of the tables the batch's statement updates and reads beside it.
 */
export const gatheredColumn = (name: string): string => `in_${name.replace(/[A-Z]+/g, (c) => `_${c.toLowerCase()}`)}`;

/**
 * The calls of a batch that one statement may carry: the first call per
 * `key` (an UPDATE … FROM updates a row once, whatever the rows naming it).
 * The others are left to run alone, after.
 */
export function firstPerKey<C>(calls: readonly C[], key: (call: C) => string): number[] {
  const seen = new Set<string>();
  const first: number[] = [];
  calls.forEach((call, i) => {
    const k = key(call);
    if (seen.has(k)) return;
    seen.add(k);
    first.push(i);
  });
  return first;
}
