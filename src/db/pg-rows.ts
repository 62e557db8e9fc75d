/**
 * Rows of a pg result built as plain objects of one shape per column list.
 *
 * pg builds each row by copying a per-result template object and setting
 * every column by name. In a process that reads many tables (this server
 * reads a dozen, each with its own column list) both sites go megamorphic:
 * every row was a slow object clone plus one generic keyed store per column,
 * about a tenth of a dashboard list's instructions (issue 21, measured with
 * bench/instructions.ts). Asked for arrays (`rowMode: 'array'`), pg parses
 * the values exactly as before; this module then builds each row with a
 * function made once per column list, whose object literal V8 creates in
 * one step with a fixed shape.
 *
 * Same result as pg's own objects: the same keys in column order, the later
 * of two columns of one name wins, ordinary prototype.
 */
import type pg from 'pg';

type RowFactory = (values: readonly unknown[]) => Record<string, unknown>;

/** Column lists seen; a process issues a fixed set of statements, so this stays small. Bounded anyway. */
const MAX_FACTORIES = 2_000;
/** By first column name and count, the column lists seen and their builders (compared name by name: no key string per result). */
const factories = new Map<string, { names: readonly string[]; factory: RowFactory }[]>();
let factoryCount = 0;

/** The builder of rows for these columns. */
export function rowFactory(fields: readonly { name: string }[]): RowFactory {
  const bucket = `${fields.length}\u0000${fields[0]?.name ?? ''}`;
  const candidates = factories.get(bucket);
  if (candidates !== undefined) {
    for (const candidate of candidates) if (sameNames(candidate.names, fields)) return candidate.factory;
  }
  if (factoryCount >= MAX_FACTORIES) {
    factories.clear();
    factoryCount = 0;
  }
  const names = fields.map((field) => field.name);
  const factory = makeFactory(names);
  const list = factories.get(bucket);
  if (list === undefined) factories.set(bucket, [{ names, factory }]);
  else list.push({ names, factory });
  factoryCount++;
  return factory;
}

function sameNames(names: readonly string[], fields: readonly { name: string }[]): boolean {
  for (let i = 0; i < names.length; i++) if (names[i] !== fields[i]!.name) return false;
  return true;
}

function makeFactory(names: readonly string[]): RowFactory {
  // `__proto__: x` in a literal would set the prototype, not a key: such a list is built key by key.
  if (names.includes('__proto__')) {
    return (values) => {
      const row: Record<string, unknown> = {};
      names.forEach((name, i) => Object.defineProperty(row, name, { value: values[i], enumerable: true, writable: true, configurable: true }));
      return row;
    };
  }
  // Keys are JSON string literals: any column name is safe in the generated source.
  const body = `return { ${names.map((name, i) => `${JSON.stringify(name)}: values[${i}]`).join(', ')} };`;
  return new Function('values', body) as RowFactory;
}

/** `result` (fetched with `rowMode: 'array'`) with its rows as objects, as pg would have built them. */
export function withObjectRows<R extends pg.QueryResult>(result: R): R {
  if (result.rows.length === 0 || result.fields.length === 0) return result;
  const make = rowFactory(result.fields);
  const rows = result.rows as unknown as unknown[][];
  for (let i = 0; i < rows.length; i++) (rows as unknown[])[i] = make(rows[i]!);
  return result;
}

/**
 * Whether a `client.query` call is a plain `(text, values?)` statement whose
 * rows this module may build (no callback, no row mode or cursor of the caller's).
 */
export function isPlainStatement(args: readonly unknown[]): args is [string] | [string, unknown[] | undefined] {
  return typeof args[0] === 'string' && args.length <= 2 && (args[1] === undefined || Array.isArray(args[1]));
}
