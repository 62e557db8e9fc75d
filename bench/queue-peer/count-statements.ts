/**
 * Counts the statements a process sends to Postgres through node-postgres,
 * loaded into it with `--import` (after tsx's loader): every
 * `pg.Client#query` call (a pool's query goes through one), tallied by the
 * statement's text (whitespace collapsed; of a long one its first 60 and last
 * 40 characters). Postgres on the test server has no `pg_stat_statements` (it
 * is not in `shared_preload_libraries`, and loading it needs a restart of a
 * server other suites share), so the benchmark counts on the client side, in
 * every process that talks to the measured database.
 *
 * Environment: STATEMENT_COUNT_FILE, where the tally is written as JSON
 * (`{ total, byText, writes }`, `writes` counting the writes) when the process exits; STATEMENT_COUNT_SIGNAL=SIGUSR2
 * also writes it on that signal (not for graphile-worker, which stops on
 * SIGUSR2).
 */
import { renameSync, writeFileSync } from 'node:fs';
import pg from 'pg';

/** What {@link countStatements} tallied. */
export interface StatementTally {
  total: number;
  byText: Record<string, number>;
}

/** A statement's text, whitespace collapsed, and if longer than 100 characters its first 60 and last 40 (the table and the filter): the key of its tally. */
export function statementKey(text: string): string {
  const collapsed = text.replace(/\s+/g, ' ').trim();
  return collapsed.length <= 100 ? collapsed : `${collapsed.slice(0, 60)} … ${collapsed.slice(-40)}`;
}

/** Tallies `text` (a statement's text, or a query config with one) in `tally`. */
function tallyStatement(tally: StatementTally, first: unknown): void {
  const text = typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '(no text)');
  const key = statementKey(text);
  tally.total++;
  tally.byText[key] = (tally.byText[key] ?? 0) + 1;
}

/** Wraps `pg.Client#query` so every statement sent from this process is tallied in `tally`. */
export function countStatements(tally: StatementTally = { total: 0, byText: {} }): StatementTally {
  const query = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  pg.Client.prototype.query = function countedQuery(this: pg.Client, ...args: unknown[]) {
    tallyStatement(tally, args[0]);
    return query.apply(this, args);
  } as typeof pg.Client.prototype.query;
  return tally;
}

/** Tallies in `tally` every statement sent through `pool` (its clients' `query`), and nothing else of this process. */
export function countPoolStatements(pool: pg.Pool, tally: StatementTally = { total: 0, byText: {} }): StatementTally {
  pool.on('connect', (client) => {
    const query = client.query.bind(client) as (...args: unknown[]) => unknown;
    client.query = ((...args: unknown[]) => {
      tallyStatement(tally, args[0]);
      return query(...args);
    }) as typeof client.query;
  });
  return tally;
}

/** `after` − `before`: what was sent between two readings of one process's tally. */
export function tallySince(after: StatementTally, before: StatementTally = { total: 0, byText: {} }): StatementTally {
  const byText: Record<string, number> = {};
  for (const [key, count] of Object.entries(after.byText)) {
    const since = count - (before.byText[key] ?? 0);
    if (since !== 0) byText[key] = since;
  }
  return { total: after.total - before.total, byText };
}

/** Tallies summed. */
export function tallySum(tallies: readonly StatementTally[]): StatementTally {
  const byText: Record<string, number> = {};
  for (const tally of tallies) for (const [key, count] of Object.entries(tally.byText)) byText[key] = (byText[key] ?? 0) + count;
  return { total: tallies.reduce((sum, tally) => sum + tally.total, 0), byText };
}

const file = process.env.STATEMENT_COUNT_FILE;
if (file !== undefined) {
  const tally = countStatements();
  let writes = 0;
  // Written whole (a rename), with a sequence number the reader waits on.
  const write = () => {
    writeFileSync(`${file}.tmp`, JSON.stringify({ ...tally, writes: ++writes }));
    renameSync(`${file}.tmp`, file);
  };
  process.on('exit', write);
  const signal = process.env.STATEMENT_COUNT_SIGNAL;
  if (signal !== undefined) process.on(signal, write);
}
