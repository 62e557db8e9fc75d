import { describe, expect, it } from 'vitest';
import { IdempotencyConflictError, InvalidInputError, ObservationRecordTypeError } from '../../src/store/errors.js';
import {
  deleteObservationRepair,
  getObservationRepair,
  getObservationRepairsByDocumentIDs,
  listObservationRecords,
  listRepairsWrittenSince,
  putObservationRecord,
  upsertObservationRepair,
  type ObservationRecordInput,
  type ObservationRepairInput,
  type RepairCursor,
} from '../../src/store/observations/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { OWNER } from '../helpers/row-fixtures.js';
import { withStatementCounter } from '../helpers/statement-counter.js';

const SIGNER = 'did:key:z6MkSigner';

function record(overrides: Partial<ObservationRecordInput> = {}): ObservationRecordInput {
  return {
    type: 'connector.observation',
    owner: OWNER,
    id: 'doc-1',
    opHash: 'hash-1',
    hlc: '0001:0000:node',
    opJWT: 'eyJhbGciOiJFZERTQSJ9.e30.sig',
    ...overrides,
  };
}

function repair(documentID: string, overrides: Partial<ObservationRepairInput> = {}): ObservationRepairInput {
  return { documentID, owner: OWNER, fetchHLC: 'f1', decisionHLC: 'd1', present: true, ...overrides };
}

describeEachDialect('observations', (suite) => {
  describe('observation records', () => {
    it('refuses any type but connector.observation, storing nothing', async () => {
      for (const type of ['connector.other', 'CONNECTOR.OBSERVATION', '']) {
        const error = await putObservationRecord(suite.store, record({ type })).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(ObservationRecordTypeError);
        expect(error).toMatchObject({ code: 'OBSERVATION_RECORD_TYPE', type });
      }
      const rows = await suite.store.db.selectFrom('kubun_connector_observation_records').selectAll().execute();
      expect(rows).toEqual([]);
    });

    it('stores and lists a record; the payload comes back as a plain Uint8Array', async () => {
      const payload = new Uint8Array([0, 1, 2, 250, 255]);
      expect(await putObservationRecord(suite.store, record({ payload }))).toBe(true);
      const [stored, ...rest] = await listObservationRecords(suite.store, { documentID: 'doc-1' });
      expect(rest).toEqual([]);
      expect(stored?.payload).toBeInstanceOf(Uint8Array);
      expect(Buffer.isBuffer(stored?.payload)).toBe(false);
      expect(stored).toStrictEqual({
        type: 'connector.observation',
        owner: OWNER,
        id: 'doc-1',
        opHash: 'hash-1',
        hlc: '0001:0000:node',
        opJWT: 'eyJhbGciOiJFZERTQSJ9.e30.sig',
        payload,
      });
    });

    it('accepts a payload that is a view into a larger buffer, an empty payload and none', async () => {
      const backing = new Uint8Array([9, 9, 7, 8, 9, 9]);
      await putObservationRecord(suite.store, record({ opHash: 'view', payload: backing.subarray(2, 4) }));
      await putObservationRecord(suite.store, record({ opHash: 'empty', payload: new Uint8Array(0) }));
      await putObservationRecord(suite.store, record({ opHash: 'none' }));
      const byHash = new Map((await listObservationRecords(suite.store, { documentID: 'doc-1' })).map((r) => [r.opHash, r.payload]));
      expect(byHash.get('view')).toStrictEqual(new Uint8Array([7, 8]));
      expect(byHash.get('empty')).toStrictEqual(new Uint8Array(0));
      expect(byHash.get('none')).toBeNull();
    });

    it('is idempotent on (type, owner, id, op hash): the same record again changes nothing, other values under the key are a conflict naming each', async () => {
      expect(await putObservationRecord(suite.store, record({ payload: new Uint8Array([1]) }))).toBe(true);
      expect(await putObservationRecord(suite.store, record({ payload: new Uint8Array([1]) }))).toBe(false);
      const conflict = await putObservationRecord(suite.store, record({ hlc: 'later', opJWT: 'other', payload: new Uint8Array([2]) })).catch((error: unknown) => error);
      expect(conflict).toBeInstanceOf(IdempotencyConflictError);
      expect((conflict as IdempotencyConflictError).fields).toEqual(['hlc', 'opJWT', 'payload']);
      await expect(putObservationRecord(suite.store, record({ payload: null }))).rejects.toMatchObject({ fields: ['payload'] });
      const records = await listObservationRecords(suite.store, { documentID: 'doc-1' });
      expect(records).toHaveLength(1);
      expect(records[0]).toMatchObject({ hlc: '0001:0000:node', opJWT: 'eyJhbGciOiJFZERTQSJ9.e30.sig', payload: new Uint8Array([1]) });
      // Another owner or op hash is another record.
      expect(await putObservationRecord(suite.store, record({ owner: SIGNER }))).toBe(true);
      expect(await putObservationRecord(suite.store, record({ opHash: 'hash-2' }))).toBe(true);
      expect(await listObservationRecords(suite.store, { documentID: 'doc-1' })).toHaveLength(3);
    });

    it('lists one document’s records in HLC order, optionally for one owner', async () => {
      await putObservationRecord(suite.store, record({ opHash: 'h3', hlc: '0003' }));
      await putObservationRecord(suite.store, record({ opHash: 'h1', hlc: '0001', owner: SIGNER }));
      await putObservationRecord(suite.store, record({ opHash: 'h2', hlc: '0002' }));
      await putObservationRecord(suite.store, record({ id: 'doc-2', opHash: 'hx', hlc: '0000' }));
      const all = await listObservationRecords(suite.store, { documentID: 'doc-1' });
      expect(all.map((r) => r.opHash)).toEqual(['h1', 'h2', 'h3']);
      const mine = await listObservationRecords(suite.store, { documentID: 'doc-1', owner: OWNER });
      expect(mine.map((r) => r.opHash)).toEqual(['h2', 'h3']);
      expect(await listObservationRecords(suite.store, { documentID: 'doc-none' })).toEqual([]);
    });

    it.runIf(suite.dialect === 'postgres')('concurrent puts of one key insert it once', async () => {
      const results = await Promise.all(Array.from({ length: 20 }, () => putObservationRecord(suite.store, record())));
      expect(results.filter(Boolean)).toHaveLength(1);
    });
  });

  describe('repairs', () => {
    it('upsert stores a repair with writtenAt from the clock; get reads it back', async () => {
      const stored = await upsertObservationRepair(suite.store, repair('doc-1', { valueDigest: 'sha256:abc' }));
      expect(stored).toEqual({
        documentID: 'doc-1',
        owner: OWNER,
        fetchHLC: 'f1',
        decisionHLC: 'd1',
        present: true,
        valueDigest: 'sha256:abc',
        writtenAt: suite.clock.now(),
      });
      expect(await getObservationRepair(suite.store, 'doc-1')).toEqual(stored);
      expect(await getObservationRepair(suite.store, 'doc-2')).toBeNull();
    });

    it('a rewrite replaces every field and the written time', async () => {
      await upsertObservationRepair(suite.store, repair('doc-1', { valueDigest: 'sha256:abc' }));
      suite.clock.advance(10);
      const rewritten = await upsertObservationRepair(
        suite.store,
        repair('doc-1', { owner: SIGNER, fetchHLC: 'f2', decisionHLC: 'd2', present: false }),
      );
      expect(rewritten).toEqual({
        documentID: 'doc-1',
        owner: SIGNER,
        fetchHLC: 'f2',
        decisionHLC: 'd2',
        present: false,
        valueDigest: null,
        writtenAt: suite.clock.now(),
      });
      expect(await getObservationRepair(suite.store, 'doc-1')).toEqual(rewritten);
    });

    it('batched read returns a map of the documents that have a repair, in one statement', async () => {
      const a = await upsertObservationRepair(suite.store, repair('doc-a'));
      const b = await upsertObservationRepair(suite.store, repair('doc-b', { present: false }));
      const { store, statements } = withStatementCounter(suite.store);
      const map = await getObservationRepairsByDocumentIDs(store, ['doc-b', 'doc-a', 'missing', 'doc-a']);
      expect(statements).toHaveLength(1);
      expect(map).toEqual(new Map([['doc-a', a], ['doc-b', b]]));
      expect((await getObservationRepairsByDocumentIDs(suite.store, [])).size).toBe(0);
    });

    it('delete removes a repair and reports whether there was one', async () => {
      await upsertObservationRepair(suite.store, repair('doc-1'));
      expect(await deleteObservationRepair(suite.store, 'doc-1')).toBe(true);
      expect(await deleteObservationRepair(suite.store, 'doc-1')).toBe(false);
      expect(await getObservationRepair(suite.store, 'doc-1')).toBeNull();
    });
  });

  describe('listRepairsWrittenSince', () => {
    /** Reads the whole feed from `after` in pages of `limit`. */
    async function drain(after: RepairCursor | null, limit: number): Promise<{ ids: string[]; next: RepairCursor | null; pages: number }> {
      const ids: string[] = [];
      let cursor = after;
      let pages = 0;
      for (;;) {
        const page = await listRepairsWrittenSince(suite.store, { after: cursor, limit });
        pages++;
        ids.push(...page.repairs.map((r) => r.documentID));
        cursor = page.next;
        if (!page.hasMore) return { ids, next: cursor, pages };
        // A cursor that does not advance would loop forever: fail instead.
        if (pages > 100) throw new Error('paging does not terminate');
      }
    }

    it('pages by (writtenAt, documentID) with ties on writtenAt: no duplicates, no gaps', async () => {
      // Three instants with several repairs each, written out of id order.
      const t0 = suite.clock.now();
      for (const id of ['doc-c', 'doc-a', 'doc-e', 'doc-b']) await upsertObservationRepair(suite.store, repair(id));
      suite.clock.advance(1);
      for (const id of ['doc-d', 'doc-0']) await upsertObservationRepair(suite.store, repair(id));
      suite.clock.advance(5);
      for (const id of ['doc-z', 'doc-f', 'doc-y']) await upsertObservationRepair(suite.store, repair(id));
      suite.clock.advance(1);
      const expected = ['doc-a', 'doc-b', 'doc-c', 'doc-e', 'doc-0', 'doc-d', 'doc-f', 'doc-y', 'doc-z'];
      for (const limit of [1, 2, 3, 4, 9, 10]) {
        const { ids, next } = await drain(null, limit);
        expect(ids, `limit ${limit}`).toEqual(expected);
        expect(next).toEqual({ writtenAt: t0 + 6, documentID: 'doc-z' });
      }
      const firstPage = await listRepairsWrittenSince(suite.store, { limit: 3 });
      expect(firstPage.next).toEqual({ writtenAt: t0, documentID: 'doc-c' });
      expect(firstPage.hasMore).toBe(true);
    });

    it('a cursor in the middle of a tie continues with the rest of that instant', async () => {
      const t0 = suite.clock.now();
      for (const id of ['doc-a', 'doc-b', 'doc-c']) await upsertObservationRepair(suite.store, repair(id));
      suite.clock.advance(1);
      const page = await listRepairsWrittenSince(suite.store, { after: { writtenAt: t0, documentID: 'doc-a' }, limit: 10 });
      expect(page.repairs.map((r) => r.documentID)).toEqual(['doc-b', 'doc-c']);
    });

    it('a rewrite moves a repair after the cursor, and the reader sees it again exactly once', async () => {
      for (const id of ['doc-a', 'doc-b', 'doc-c']) await upsertObservationRepair(suite.store, repair(id));
      suite.clock.advance(1);
      const first = await drain(null, 2);
      expect(first.ids).toEqual(['doc-a', 'doc-b', 'doc-c']);
      // doc-a sorts before the cursor (writtenAt t0, doc-c); its rewrite gets a later writtenAt.
      const rewritten = await upsertObservationRepair(suite.store, repair('doc-a', { decisionHLC: 'd2' }));
      suite.clock.advance(1);
      const page = await listRepairsWrittenSince(suite.store, { after: first.next, limit: 10 });
      expect(page.repairs).toEqual([rewritten]);
      expect(page.hasMore).toBe(false);
      expect((await listRepairsWrittenSince(suite.store, { after: page.next, limit: 10 })).repairs).toEqual([]);
    });

    it('a repair written in the current millisecond waits for the next one, so no cursor can pass it', async () => {
      await upsertObservationRepair(suite.store, repair('doc-m'));
      // Had this read returned doc-m, its cursor (now, doc-m) would sort after doc-a written below
      // in the same millisecond, and the reader would never see doc-a.
      const early = await listRepairsWrittenSince(suite.store, { limit: 10 });
      expect(early).toEqual({ repairs: [], next: null, hasMore: false });
      await upsertObservationRepair(suite.store, repair('doc-a'));
      suite.clock.advance(1);
      const later = await listRepairsWrittenSince(suite.store, { after: early.next, limit: 10 });
      expect(later.repairs.map((r) => r.documentID)).toEqual(['doc-a', 'doc-m']);
    });

    it('an empty page keeps the cursor; a deleted repair is not listed', async () => {
      await upsertObservationRepair(suite.store, repair('doc-a'));
      await upsertObservationRepair(suite.store, repair('doc-b'));
      await deleteObservationRepair(suite.store, 'doc-a');
      suite.clock.advance(1);
      expect((await listRepairsWrittenSince(suite.store, { limit: 10 })).repairs.map((r) => r.documentID)).toEqual(['doc-b']);
      const cursor = { writtenAt: suite.clock.now() + 100, documentID: 'zzz' };
      expect(await listRepairsWrittenSince(suite.store, { after: cursor, limit: 5 })).toEqual({ repairs: [], next: cursor, hasMore: false });
      expect(await listRepairsWrittenSince(suite.store, { limit: 5, after: null })).toMatchObject({ hasMore: false });
      await deleteObservationRepair(suite.store, 'doc-b');
      expect(await listRepairsWrittenSince(suite.store, { limit: 5 })).toEqual({ repairs: [], next: null, hasMore: false });
    });

    it('rejects a limit below one', async () => {
      await expect(listRepairsWrittenSince(suite.store, { limit: 0 })).rejects.toBeInstanceOf(InvalidInputError);
    });
  });
});
