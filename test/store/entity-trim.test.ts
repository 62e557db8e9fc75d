import { describe, expect, it } from 'vitest';
import {
  clearEntityTrim,
  getEntityTrim,
  getEntityTrimsByDocumentIDs,
  setEntityTrim,
  type EntityTrimInput,
} from '../../src/store/entity-trim/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { OWNER } from '../helpers/row-fixtures.js';
import { withStatementCounter } from '../helpers/statement-counter.js';

function trim(documentID: string, overrides: Partial<EntityTrimInput> = {}): EntityTrimInput {
  return {
    documentID,
    ownerDID: OWNER,
    connectorName: 'google',
    trimmedFields: { description: 'x'.repeat(20), attendees: [{ email: 'a@example.com' }] },
    ...overrides,
  };
}

describeEachDialect('entity trim', (suite) => {
  describe('get / set / clear', () => {
    it('returns null for a document without a record', async () => {
      expect(await getEntityTrim(suite.store, 'doc-1')).toBeNull();
    });

    it('set stores the record with the clock time and get reads it back', async () => {
      const stored = await setEntityTrim(suite.store, trim('doc-1'));
      expect(stored).toEqual({
        documentID: 'doc-1',
        ownerDID: OWNER,
        connectorName: 'google',
        trimmedFields: { description: 'x'.repeat(20), attendees: [{ email: 'a@example.com' }] },
        updatedAt: suite.clock.now(),
      });
      expect(await getEntityTrim(suite.store, 'doc-1')).toEqual(stored);
    });

    it('set again replaces the fields (not merges) and the time, keeping owner and connector', async () => {
      const first = await setEntityTrim(suite.store, trim('doc-1'));
      suite.clock.advance(5_000);
      const second = await setEntityTrim(
        suite.store,
        trim('doc-1', { trimmedFields: { title: 'long' }, ownerDID: 'did:key:z6MkSomeoneElse', connectorName: 'github' }),
      );
      expect(second).toEqual({ ...first, trimmedFields: { title: 'long' }, updatedAt: first.updatedAt + 5_000 });
      expect(await getEntityTrim(suite.store, 'doc-1')).toEqual(second);
    });

    it('clear removes the record and reports whether there was one', async () => {
      await setEntityTrim(suite.store, trim('doc-1'));
      await setEntityTrim(suite.store, trim('doc-2'));
      expect(await clearEntityTrim(suite.store, 'doc-1')).toBe(true);
      expect(await clearEntityTrim(suite.store, 'doc-1')).toBe(false);
      expect(await getEntityTrim(suite.store, 'doc-1')).toBeNull();
      expect(await getEntityTrim(suite.store, 'doc-2')).not.toBeNull();
    });
  });

  describe('getEntityTrimsByDocumentIDs', () => {
    it('returns a map of the documents that have a record, in one statement', async () => {
      const a = await setEntityTrim(suite.store, trim('doc-a'));
      const b = await setEntityTrim(suite.store, trim('doc-b', { trimmedFields: { b: true } }));
      await setEntityTrim(suite.store, trim('doc-c'));
      const { store: counted, statements } = withStatementCounter(suite.store);
      const map = await getEntityTrimsByDocumentIDs(counted, ['doc-b', 'missing', 'doc-a', 'doc-b']);
      expect(statements).toHaveLength(1);
      expect([...map.keys()].sort()).toEqual(['doc-a', 'doc-b']);
      expect(map.get('doc-a')).toEqual(a);
      expect(map.get('doc-b')).toEqual(b);
      expect(map.has('missing')).toBe(false);
    });

    it('an empty list reads nothing', async () => {
      expect((await getEntityTrimsByDocumentIDs(suite.store, [])).size).toBe(0);
    });
  });
});
