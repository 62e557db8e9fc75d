/**
 * Statements built with Kysely once per dialect, then run with new values.
 *
 * Kysely builds a statement as a tree of frozen nodes and compiles the tree
 * to SQL on every call: for the write-back sequence, about a tenth of the
 * server's CPU per request went to building statements whose text never
 * changes, only their values (issue 21, `npx tsx bench/profile.ts sequence`).
 * A prepared statement is built by the same Kysely code, once per dialect,
 * with a stand-in for each value the caller passes; each run copies the
 * compiled SQL and puts the values in the stand-ins' places.
 *
 * The rule for a builder: its values object may only be read for values
 * that go into the statement, never to decide its shape (no `if`,
 * `.length`, spreading or defaults other than `?? null` on them: a run binds
 * an omitted value as NULL). Every value read must reach the statement, or
 * building fails. With `STORE_CHECK_PREPARED=1` (the test
 * suite sets it) every run also builds the statement from its real values
 * and fails unless the SQL and the parameters are the same. A handle with
 * Kysely plugins (none in the server; the tests' statement recorders)
 * builds every time, so each plugin sees every statement.
 *
 * On Postgres the text is also registered as a named statement
 * (src/db/named-statements.ts): each connection parses it once, if it
 * lists its columns rather than `*` (the suite's check refuses a builder
 * that selects or returns `*`).
 */
import { createQueryId, type Compilable, type CompiledQuery, type Kysely, type QueryResult } from 'kysely';
import type { DialectName } from '../db/connect.js';
import { keepsResultType, nameStatement } from '../db/named-statements.js';
import type { Database } from '../db/tables.js';
import type { StoreContext } from './context.js';

/** Stands in for the value named `name` while a statement is built. */
class Slot {
  constructor(readonly name: string) {}
}

/** What a statement's values are passed as: one object, read by name. */
type Values = object;

interface Template {
  sql: string;
  query: CompiledQuery['query'];
  /** The compiled parameters: a slot where a run's value goes, else the constant the builder wrote. */
  parameters: readonly unknown[];
}

const CHECK = process.env.STORE_CHECK_PREPARED === '1';

/** A statement `build` makes from `values`, built once per dialect; runs in `store` (its transaction, if any). */
export type PreparedStatement<V extends Values, R> = (store: StoreContext, values: V) => Promise<QueryResult<R>>;

/** Prepares the statement `build` makes (see the module's rule for builders). */
export function prepared<V extends Values, R>(build: (db: Kysely<Database>, values: V) => Compilable<R>): PreparedStatement<V, R> {
  const templates = new Map<DialectName, Template>();
  return async (store, values) => {
    // Kysely plugins transform each statement's tree as it is compiled: with any, the statement is built every time.
    if (store.db.getExecutor().plugins.length > 0) return store.db.executeQuery(build(store.db, values));
    let template = templates.get(store.dialect);
    if (template === undefined) {
      template = prepare(store.db, build);
      templates.set(store.dialect, template);
      // Postgres then parses it once per connection (src/db/named-statements.ts).
      if (store.dialect === 'postgres') nameStatement(template.sql);
    }
    const parameters = new Array<unknown>(template.parameters.length);
    for (let i = 0; i < parameters.length; i++) {
      const parameter = template.parameters[i];
      // undefined is no SQL value (better-sqlite3 refuses it): an omitted optional value is NULL, as pg binds it.
      parameters[i] = parameter instanceof Slot ? ((values as Record<string, unknown>)[parameter.name] ?? null) : parameter;
    }
    if (CHECK) checkAgainstBuilt(store.db, build, values, template.sql, parameters);
    return store.db.executeQuery<R>({ sql: template.sql, query: template.query, parameters, queryId: createQueryId() });
  };
}

/**
 * A statement over a list of values (`in (…)`), prepared once per dialect
 * and list length up to `maxLength`; longer lists are built each time. The
 * builder gets a real array of stand-ins: it may use its length, and must
 * treat the list as a set read by `in (…)` (a value may be NULL).
 *
 * A list is run without its repeated values, at the next of a few lengths
 * (1, 2, 4, 8, … and `maxLength`), padded with NULLs: `in ($1, $2, NULL)`
 * reads what `in ($1, $2)` reads (NULL equals nothing), and a builder is
 * then prepared a handful of times rather than once per length. On
 * Postgres each length is a named statement on every connection, about 44
 * KiB of the backend's memory each (`pg_backend_memory_contexts`): 8
 * lengths rather than 100 per builder. NULLs rather than the last value
 * again: the watch read of a 50-row page cost Postgres 0.44 ms padded with
 * 14 repeats, 0.34 with 14 NULLs, same plan and buffers
 * (`npx tsx bench/id-list-plans.ts`, docs/benchmarks.md).
 */
export function preparedForList<T, R>(maxLength: number, build: (db: Kysely<Database>, items: readonly T[]) => Compilable<R>): (store: StoreContext, items: readonly T[]) => Promise<QueryResult<R>> {
  const byLength: PreparedStatement<readonly (T | null)[], R>[] = [];
  return (store, items) => {
    const unique = new Set(items).size === items.length ? items : [...new Set(items)];
    if (unique.length > maxLength || unique.length === 0) return store.db.executeQuery(build(store.db, unique));
    const length = Math.min(maxLength, 2 ** Math.ceil(Math.log2(unique.length)));
    const values = length === unique.length ? unique : padded(unique, length);
    // An array is read by index: its stand-ins are named "0", "1", …
    const statement = (byLength[length] ??= prepared((db, values: readonly (T | null)[]) => build(db, Array.from({ length }, (_, i) => values[i] as T))));
    return statement(store, values);
  };
}

/** `items` followed by NULLs up to `length`. */
function padded<T>(items: readonly T[], length: number): (T | null)[] {
  const values: (T | null)[] = items.slice();
  while (values.length < length) values.push(null);
  return values;
}

function prepare<V extends Values, R>(db: Kysely<Database>, build: (db: Kysely<Database>, values: V) => Compilable<R>): Template {
  const slots = new Map<string, Slot>();
  const standIns = new Proxy({} as V, {
    get: (_target, name) => {
      if (typeof name !== 'string') return undefined;
      let slot = slots.get(name);
      if (slot === undefined) slots.set(name, (slot = new Slot(name)));
      return slot;
    },
  });
  const compiled = build(db, standIns).compile();
  const used = new Set(compiled.parameters.filter((parameter) => parameter instanceof Slot));
  for (const slot of slots.values()) {
    // Read but not in the statement: the builder decided something with it, which a prepared statement cannot repeat.
    if (!used.has(slot)) throw new Error(`prepared statement: the value "${slot.name}" was read but is not a parameter of ${compiled.sql}`);
  }
  // Postgres would run it unnamed, parsed on every run (src/db/named-statements.ts): the suite holds builders to their columns.
  if (CHECK && !keepsResultType(compiled.sql)) throw new Error(`prepared statement: list the columns (OPERATION_COLUMNS, …), not *: ${compiled.sql}`);
  return { sql: compiled.sql, query: compiled.query, parameters: compiled.parameters };
}

function checkAgainstBuilt<V extends Values, R>(db: Kysely<Database>, build: (db: Kysely<Database>, values: V) => Compilable<R>, values: V, sql: string, parameters: readonly unknown[]): void {
  const built = build(db, values).compile();
  const same = built.sql === sql && built.parameters.length === parameters.length && built.parameters.every((parameter, i) => Object.is(parameter ?? null, parameters[i]));
  if (!same) {
    throw new Error(`prepared statement differs from the one its values build:\n  prepared: ${sql} ${JSON.stringify(parameters)}\n  built:    ${built.sql} ${JSON.stringify(built.parameters)}`);
  }
}
