/** `document` / `documents`: a document's connector state, through yoga.fetch on both dialects. */
import { describe, expect, it } from 'vitest';
import type { ConnectorOperationState } from '../../src/store/operations/index.js';
import { describeGraphQL } from '../helpers/graphql.js';
import { DOCUMENT, DOCUMENTS } from '../helpers/graphql-documents.js';
import { nodeID, seedFinalized, seedTrim, seedWatch } from '../helpers/graphql-seed.js';
import { insertCandidateRow, insertOperationRow } from '../helpers/row-fixtures.js';

const EMPTY = { operations: [], watch: null, entityTrim: null, hasConnectorWork: false };

describeGraphQL('graphql documents', (suite) => {
  /** An operation row naming `documentID` in `state` (default owner and caller alice); returns its global id. */
  async function insertOperation(documentID: string, state: ConnectorOperationState, who: { caller?: string; owner?: string } = {}) {
    const nodeKey = suite.store.getRandomID();
    await insertOperationRow(suite.store, {
      node_key: nodeKey,
      document_id: documentID,
      state,
      caller_did: who.caller ?? suite.keys.alice.did,
      owner_did: who.owner ?? suite.keys.alice.did,
    });
    return nodeID('ConnectorOperation', nodeKey);
  }

  describe('document', () => {
    it('returns the operations (newest first), watch, trim and hasConnectorWork', async () => {
      const finalized = await seedFinalized(suite, { documentID: 'doc-1', watchSourceID: 'provider-1' });
      suite.clock.advance(1_000);
      const live = await insertOperation('doc-1', 'attempted');
      await seedTrim(suite, { documentID: 'doc-1' });
      await insertOperation('doc-2', 'attempted');

      const res = await suite.gql(DOCUMENT, { documentID: 'doc-1' });
      expect(res.errors).toBeUndefined();
      expect(res.data.document).toEqual({
        documentID: 'doc-1',
        operations: [
          { id: live, state: 'ATTEMPTED', ownerDID: suite.keys.alice.did, callerDID: suite.keys.alice.did },
          { id: finalized.id, state: 'COMMITTED', ownerDID: suite.keys.alice.did, callerDID: suite.keys.alice.did },
        ],
        watch: { id: finalized.watchID, sourceID: 'provider-1', ownerDID: suite.keys.alice.did },
        entityTrim: { documentID: 'doc-1', ownerDID: suite.keys.alice.did, connectorName: 'google', trimmedFields: { description: 'x'.repeat(10) } },
        hasConnectorWork: true,
      });
    });

    it('answers a document the store knows nothing about with empty state', async () => {
      const res = await suite.gql(DOCUMENT, { documentID: 'never-seen' });
      expect(res).toEqual({ data: { document: { documentID: 'never-seen', ...EMPTY } } });
    });

    it('rejects an empty document id', async () => {
      const res = await suite.gql(DOCUMENT, { documentID: '' });
      expect(res.data ?? null).toBeNull();
      expect(res.errors?.[0]?.message).toMatch(/must not be empty/);
    });
  });

  describe('hasConnectorWork', () => {
    const work = async (documentID: string) => (await suite.gql(DOCUMENT, { documentID })).data.document.hasConnectorWork;

    it('is true for a watch alone', async () => {
      await seedWatch(suite, { documentID: 'doc-w' });
      expect(await work('doc-w')).toBe(true);
    });

    it('is true for a trim record alone', async () => {
      await seedTrim(suite, { documentID: 'doc-t' });
      expect(await work('doc-t')).toBe(true);
    });

    it('is true for a sweep candidate alone', async () => {
      await insertCandidateRow(suite.store, { document_id: 'doc-c', owner_did: suite.keys.alice.did });
      expect(await work('doc-c')).toBe(true);
    });

    it.each(['attempted', 'reconcile_only'] as const)('is true for an unfinished (%s) operation alone', async (state) => {
      await insertOperation('doc-o', state);
      expect(await work('doc-o')).toBe(true);
    });

    it('is false when only finished (committed, dead) operations name the document', async () => {
      await insertOperation('doc-f', 'committed');
      await insertOperation('doc-f', 'dead');
      const res = await suite.gql(DOCUMENT, { documentID: 'doc-f' });
      expect(res.data.document.operations.map((o: { state: string }) => o.state).sort()).toEqual(['COMMITTED', 'DEAD']);
      expect(res.data.document.hasConnectorWork).toBe(false);
    });

    it('counts only what the viewer may see', async () => {
      // Bob called an operation for alice's document: he sees it, not her watch or trim.
      await insertOperation('doc-shared', 'committed', { caller: suite.keys.bob.did, owner: suite.keys.alice.did });
      await seedWatch(suite, { documentID: 'doc-shared' });
      await seedTrim(suite, { documentID: 'doc-shared' });
      await insertCandidateRow(suite.store, { document_id: 'doc-shared', owner_did: suite.keys.alice.did });

      const alice = await suite.gql(DOCUMENT, { documentID: 'doc-shared' });
      expect(alice.data.document).toMatchObject({ hasConnectorWork: true, watch: { ownerDID: suite.keys.alice.did }, entityTrim: { ownerDID: suite.keys.alice.did } });
      const bob = await suite.gql(DOCUMENT, { documentID: 'doc-shared' }, { as: 'bob' });
      expect(bob.data.document).toMatchObject({ operations: [{ callerDID: suite.keys.bob.did }], watch: null, entityTrim: null, hasConnectorWork: false });
      const mallory = await suite.gql(DOCUMENT, { documentID: 'doc-shared' }, { as: 'mallory' });
      expect(mallory.data.document).toEqual({ documentID: 'doc-shared', ...EMPTY });
    });

    it('another owner’s newer watch of the same document id hides neither the owner’s watch nor their work', async () => {
      const { watch: mine } = await seedWatch(suite, { documentID: 'doc-twice' });
      suite.clock.advance(60_000);
      const { watch: bobs } = await seedWatch(suite, { documentID: 'doc-twice', ownerDID: suite.keys.bob.did });
      const q = `{ document(documentID: "doc-twice") { watch { id ownerDID } hasConnectorWork } }`;
      const alice = await suite.gql(q);
      expect(alice.data.document).toEqual({ watch: { id: nodeID('ProjectionWatch', mine.nodeKey), ownerDID: suite.keys.alice.did }, hasConnectorWork: true });
      const bob = await suite.gql(q, {}, { as: 'bob' });
      expect(bob.data.document).toEqual({ watch: { id: nodeID('ProjectionWatch', bobs.nodeKey), ownerDID: suite.keys.bob.did }, hasConnectorWork: true });
      const mallory = await suite.gql(q, {}, { as: 'mallory' });
      expect(mallory.data.document).toEqual({ watch: null, hasConnectorWork: false });
    });
  });

  describe('documents', () => {
    it('answers each document in the order asked, repeats included', async () => {
      await seedWatch(suite, { documentID: 'doc-1' });
      await seedTrim(suite, { documentID: 'doc-3' });
      const res = await suite.gql(DOCUMENTS, { documentIDs: ['doc-3', 'doc-2', 'doc-1', 'doc-3'] });
      expect(res.errors).toBeUndefined();
      const docs = res.data.documents as { documentID: string; hasConnectorWork: boolean; watch: unknown; entityTrim: unknown }[];
      expect(docs.map((d) => [d.documentID, d.hasConnectorWork])).toEqual([
        ['doc-3', true],
        ['doc-2', false],
        ['doc-1', true],
        ['doc-3', true],
      ]);
      expect(docs[2]?.watch).not.toBeNull();
      expect(docs[0]?.entityTrim).not.toBeNull();
      expect(docs[1]).toEqual({ documentID: 'doc-2', ...EMPTY });
    });

    it('accepts 100 ids and refuses 101 with a validation error', async () => {
      const ids = (n: number) => Array.from({ length: n }, (_, i) => `doc-${i}`);
      const ok = await suite.gql(DOCUMENTS, { documentIDs: ids(100) });
      expect(ok.errors).toBeUndefined();
      expect(ok.data.documents).toHaveLength(100);
      const tooMany = await suite.gql(DOCUMENTS, { documentIDs: ids(101) });
      expect(tooMany.data ?? null).toBeNull();
      expect(tooMany.errors).toHaveLength(1);
      expect(tooMany.errors?.[0]?.message).toMatch(/at most 100 documents/);
    });

    it('rejects an empty id among others', async () => {
      const res = await suite.gql(DOCUMENTS, { documentIDs: ['doc-1', ''] });
      expect(res.data ?? null).toBeNull();
      expect(res.errors?.[0]?.message).toMatch(/must not be empty/);
    });
  });
});
