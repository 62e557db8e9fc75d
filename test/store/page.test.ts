/**
 * Keyset paging has one owner (src/store/page.ts): every list's cursor is
 * parsed by its keyset, so the API and the store accept and refuse the same
 * cursors, and the first/last rule is one function.
 */
import { describe, expect, it } from 'vitest';
import { InvalidInputError } from '../../src/store/errors.js';
import { listRepairsWrittenSince } from '../../src/store/observations/index.js';
import { getAttemptHistories, listOperations } from '../../src/store/operations/index.js';
import {
  ATTEMPT_HISTORY_ORDER,
  connectionSize,
  DEFAULT_PAGE_SIZE,
  MAX_PAGE_SIZE,
  NEWEST_FIRST,
  pageDirection,
  REPAIR_WRITTEN_ORDER,
  SWEEP_CANDIDATE_ORDER,
  SYNC_STATE_ORDER,
} from '../../src/store/page.js';
import { listWatches } from '../../src/store/projection-watches/index.js';
import { getSweepCandidatePages, listSweepReceipts } from '../../src/store/sweeps/index.js';
import { listSyncStates } from '../../src/store/sync-state/index.js';
import { describeEachDialect } from '../helpers/databases.js';

/** Values no keyset accepts, whatever its fields. */
const NEVER_CURSORS: unknown[] = [undefined, null, 'a', 42, [], [1, 'a'], {}];

describe('keysets parse cursors', () => {
  const cases = [
    { keyset: NEWEST_FIRST, valid: { createdAt: 1_700_000_000_000, nodeKey: 'k' }, wrong: { createdAt: 1, nodeKey: '' } },
    { keyset: SYNC_STATE_ORDER, valid: { connectorName: 'google', ownerDID: 'did:key:z' }, wrong: { connectorName: '', ownerDID: 'did:key:z' } },
    { keyset: ATTEMPT_HISTORY_ORDER, valid: { seq: 3 }, wrong: { seq: -1 } },
    { keyset: SWEEP_CANDIDATE_ORDER, valid: { documentID: 'doc-1' }, wrong: { documentID: 'doc\u0000' } },
    { keyset: REPAIR_WRITTEN_ORDER, valid: { writtenAt: 5, documentID: 'doc-1' }, wrong: { writtenAt: 1.5, documentID: 'doc-1' } },
  ];

  it.each(cases)('$keyset.name: a cursor with exactly its fields, each a value a row could hold', ({ keyset, valid, wrong }) => {
    expect(keyset.parse(valid)).toEqual(valid);
    expect(keyset.parse(wrong)).toBeNull();
    expect(keyset.parse({ ...valid, extra: 1 })).toBeNull();
    for (const value of NEVER_CURSORS) expect(keyset.parse(value)).toBeNull();
    expect(() => keyset.require('after', wrong)).toThrow(InvalidInputError);
  });

  it('refuses what no row holds: an empty or NUL-bearing text, a negative, fractional or unsafe integer, a string for a number', () => {
    for (const nodeKey of ['', 'a\u0000b', 7]) expect(NEWEST_FIRST.parse({ createdAt: 1, nodeKey })).toBeNull();
    for (const createdAt of [-1, 0.5, Number.MAX_SAFE_INTEGER + 1, '1', Number.NaN]) expect(NEWEST_FIRST.parse({ createdAt, nodeKey: 'k' })).toBeNull();
  });

  it('cursorOf takes the keyset fields of an item and nothing else', () => {
    expect(NEWEST_FIRST.cursorOf({ createdAt: 9, nodeKey: 'n', state: 'committed' } as never)).toEqual({ createdAt: 9, nodeKey: 'n' });
  });
});

describe('the first/last rule', () => {
  it('connectionSize: the default page, either first or last, 0 to the maximum', () => {
    expect(connectionSize({})).toEqual({ first: DEFAULT_PAGE_SIZE });
    expect(connectionSize({ first: null, last: null })).toEqual({ first: DEFAULT_PAGE_SIZE });
    expect(connectionSize({ last: 0 })).toEqual({ last: 0 });
    expect(connectionSize({ first: MAX_PAGE_SIZE })).toEqual({ first: MAX_PAGE_SIZE });
    expect(() => connectionSize({ first: 1, last: 1 })).toThrow(/either first or last/);
    expect(() => connectionSize({ first: MAX_PAGE_SIZE + 1 })).toThrow(/first: must be between 0 and 100/);
    expect(() => connectionSize({ last: -1 })).toThrow(/last: must be between 0 and 100/);
    expect(() => connectionSize({ first: 1.5 })).toThrow(InvalidInputError);
    expect(() => connectionSize({ last: 2 }, true)).toThrow(/last: this connection pages forward only/);
    expect(() => connectionSize({ first: 2, before: 'c' }, true)).toThrow(/before: this connection pages forward only/);
  });

  it('pageDirection: exactly one of first and last, a non-negative integer (store callers may ask for more than the API maximum)', () => {
    expect(pageDirection({ first: 500 })).toEqual({ forward: true, size: 500 });
    expect(pageDirection({ last: 0 })).toEqual({ forward: false, size: 0 });
    expect(() => pageDirection({})).toThrow(InvalidInputError);
    expect(() => pageDirection({ first: 1, last: 1 })).toThrow(InvalidInputError);
    expect(() => pageDirection({ first: -1 })).toThrow(InvalidInputError);
  });
});

describeEachDialect('every list refuses a cursor its keyset does not parse', (suite) => {
  const receipt = { ownerDID: 'did:key:zOwner', connectorName: 'google', partition: 'p', provenance: 'x' };
  const lists: Record<string, (after: never) => Promise<unknown>> = {
    operations: (after) => listOperations(suite.store, { visibleTo: null, first: 1, after }),
    'operations, backward': (before) => listOperations(suite.store, { visibleTo: 'did:key:zViewer', last: 1, before }),
    watches: (after) => listWatches(suite.store, { visibleTo: null, first: 1, after }),
    'sync states': (after) => listSyncStates(suite.store, { visibleTo: null, first: 1, after }),
    'sweep receipts': (after) => listSweepReceipts(suite.store, { visibleTo: null, first: 1, after }),
    'repairs written since': (after) => listRepairsWrittenSince(suite.store, { after, limit: 1 }),
    'attempt histories': (after) => getAttemptHistories(suite.store, [{ key: { callerDID: 'did:key:zC', operationID: 'op' }, first: 1, after }]),
    'sweep candidates': (after) => getSweepCandidatePages(suite.store, [receipt], { first: 1, after }),
  };

  it.each(Object.keys(lists))('%s: an empty node key, a wrong type or an extra field is an InvalidInputError, never a silent page', async (name) => {
    const list = lists[name]!;
    for (const bad of [{ createdAt: 1, nodeKey: '' }, { seq: 0.5 }, { documentID: '' }, { connectorName: 1, ownerDID: 'x' }, { writtenAt: -1, documentID: 'd' }, 'x']) {
      await expect(list(bad as never), JSON.stringify(bad)).rejects.toBeInstanceOf(InvalidInputError);
    }
  });
});
