/**
 * Operation IDs by prefix (issue 38 item 5): exactly the keys that start with
 * the prefix, in code-point order (not the database's collation), every
 * caller's, at most `first`; and the read is one ordered range of an index,
 * with no sort, on both dialects, at 20 000 rows.
 */
import { CompiledQuery } from 'kysely';
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../src/store/errors.js';
import { listOperationsByIDPrefix, prefixUpperBound } from '../../src/store/operations/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { accessPaths, overSeries, recordingStatements } from '../helpers/query-plans.js';
import { insertOperationRow } from '../helpers/row-fixtures.js';

describe('prefixUpperBound', () => {
  it('is the prefix with its last code point incremented, past trailing U+10FFFF and over the surrogates', () => {
    expect(prefixUpperBound('ab')).toBe('ac');
    expect(prefixUpperBound('a\u{10FFFF}')).toBe('b');
    expect(prefixUpperBound('a\u{D7FF}')).toBe('a\u{E000}');
    expect(prefixUpperBound('x\u{1F600}')).toBe('x\u{1F601}');
    expect(prefixUpperBound('\u{10FFFF}\u{10FFFF}')).toBeNull();
  });
});

describeEachDialect('operations by idempotency-key prefix', (suite) => {
  it('returns exactly the keys that start with the prefix, in code-point order then caller, case-sensitive, with no LIKE wildcards', async () => {
    const { store } = suite;
    const keys = ['ab', 'ab-1', 'ab-2', 'abc', 'ab%_', 'ab\u{10FFFF}x', 'aC', 'AB', 'b', 'a', 'ab\u{E9}'];
    for (const key of keys) await insertOperationRow(store, { operation_id: key });
    // The same key of a second caller comes after the first caller's.
    await insertOperationRow(store, { operation_id: 'ab-1', caller_did: 'did:key:z6MkSecondCaller' });

    const found = await listOperationsByIDPrefix(store, { prefix: 'ab', first: 20 });
    expect(found.map((op) => op.operationID)).toEqual(['ab', 'ab%_', 'ab-1', 'ab-1', 'ab-2', 'abc', 'ab\u{E9}', 'ab\u{10FFFF}x']);
    const callers = found.filter((op) => op.operationID === 'ab-1').map((op) => op.callerDID);
    expect(callers).toEqual([...callers].sort());
    // `%` and `_` are characters, not wildcards.
    expect((await listOperationsByIDPrefix(store, { prefix: 'ab%', first: 20 })).map((op) => op.operationID)).toEqual(['ab%_']);
    expect((await listOperationsByIDPrefix(store, { prefix: 'a_', first: 20 })).map((op) => op.operationID)).toEqual([]);
    expect((await listOperationsByIDPrefix(store, { prefix: 'AB', first: 20 })).map((op) => op.operationID)).toEqual(['AB']);
    expect((await listOperationsByIDPrefix(store, { prefix: 'ab\u{10FFFF}', first: 20 })).map((op) => op.operationID)).toEqual(['ab\u{10FFFF}x']);
    expect((await listOperationsByIDPrefix(store, { prefix: 'ab', first: 3 })).map((op) => op.operationID)).toEqual(['ab', 'ab%_', 'ab-1']);
  });

  it('refuses an empty or overlong prefix and a bad page size', async () => {
    const { store } = suite;
    await expect(listOperationsByIDPrefix(store, { prefix: '', first: 10 })).rejects.toThrow(InvalidInputError);
    await expect(listOperationsByIDPrefix(store, { prefix: 'x'.repeat(257), first: 10 })).rejects.toThrow(InvalidInputError);
    await expect(listOperationsByIDPrefix(store, { prefix: 'x', first: 0 })).rejects.toThrow(InvalidInputError);
  });

  it('reads one ordered range of an index in byte order, with no sort, at 20 000 rows', { timeout: 120_000 }, async () => {
    await suite.store.db.executeQuery(
      overSeries(
        suite.dialect,
        20_000,
        `insert into kubun_connector_operation
          (caller_did, operation_id, node_key, owner_did, connector_name, model, op, account_key, target, deterministic_event_id,
           payload_hash, reissue_intent, state, attempts, version, next_attempt_at, created_at, updated_at)
          select 'did:key:z6MkCaller' || (i % 7), 'op-' || i, 'n' || i, 'did:key:z6MkOwner', 'google', 'calendar.event', 'create', 'a', 't',
            'e-' || i, 'h', 'none', 'committed', 1, 0, 1700000000000 + i, 1700000000000 + i, 1700000000000 + i`,
      ),
    );
    await suite.store.db.executeQuery(CompiledQuery.raw('analyze'));
    const { store, statements } = recordingStatements(suite.store);
    // 'op-1' starts 11 111 keys (op-1, op-10…, op-100…, op-1000…, op-10000…): a page reads 10 of them.
    expect(await listOperationsByIDPrefix(store, { prefix: 'op-1', first: 10 })).toHaveLength(10);
    expect(await listOperationsByIDPrefix(store, { prefix: 'op-19999', first: 10 })).toHaveLength(1);
    const index = suite.dialect === 'postgres' ? 'idx_connector_operation_operation_id_bytes' : 'idx_connector_operation_operation_id';
    for (const statement of statements) {
      const paths = await accessPaths(suite.store, statement, 'kubun_connector_operation');
      expect(paths, statement.sql).toHaveLength(1);
      expect(paths[0], statement.sql).toContain(index);
      expect(paths[0], statement.sql).not.toContain('Bitmap');
      expect(await planText(statement), statement.sql).not.toMatch(/\bSort\b|TEMP B-TREE/);
    }
  });

  /** The statement's plan as text (EXPLAIN on Postgres, EXPLAIN QUERY PLAN on SQLite). */
  async function planText(query: CompiledQuery): Promise<string> {
    const explain = suite.dialect === 'postgres' ? 'explain' : 'explain query plan';
    const { rows } = await suite.store.db.executeQuery<Record<string, unknown>>(CompiledQuery.raw(`${explain} ${query.sql}`, [...query.parameters]));
    return rows.map((row) => String(row['QUERY PLAN'] ?? row.detail)).join('\n');
  }
});
