/** setEntityTrim and clearEntityTrim, and the trim as document(id) shows it, through yoga.fetch on both dialects. */
import { describe, expect, it } from 'vitest';
import { getEntityTrim } from '../../src/store/entity-trim/index.js';
import { describeGraphQL, type Principal } from '../helpers/graphql.js';
import { iso, seedTrim } from '../helpers/graphql-seed.js';

const SET_TRIM = /* GraphQL */ `
  mutation SetTrim($input: SetEntityTrimInput!) {
    setEntityTrim(input: $input) {
      __typename
      ... on EntityTrimPayload { entityTrim { documentID ownerDID connectorName trimmedFields updatedAt } }
      ... on Error { code message }
      ... on InputValidationError { issues { path message } }
    }
  }
`;

const CLEAR_TRIM = /* GraphQL */ `
  mutation ClearTrim($input: ClearEntityTrimInput!) {
    clearEntityTrim(input: $input) { __typename ... on ClearEntityTrimPayload { cleared } ... on Error { code } }
  }
`;

const DOCUMENT_TRIM = /* GraphQL */ `
  query($id: String!) { document(documentID: $id) { entityTrim { ownerDID trimmedFields } hasConnectorWork } }
`;

describeGraphQL('graphql entity trim', (suite) => {
  const setTrim = (input: Record<string, unknown>, as: Principal = 'alice') =>
    suite.gql(SET_TRIM, { input: { documentID: 'doc-trim-1', connectorName: 'google', trimmedFields: { description: 'cut' }, ...input } }, { as });

  describe('setEntityTrim', () => {
    it('records the trim for the viewer, and a second set replaces the fields (owner and connector kept)', async () => {
      const first = await setTrim({});
      expect(first.errors).toBeUndefined();
      expect(first.data.setEntityTrim).toEqual({
        __typename: 'EntityTrimPayload',
        entityTrim: { documentID: 'doc-trim-1', ownerDID: suite.keys.alice.did, connectorName: 'google', trimmedFields: { description: 'cut' }, updatedAt: iso(suite.clock.now()) },
      });
      suite.clock.advance(1_000);
      const second = await setTrim({ connectorName: 'github', trimmedFields: { title: 'x', body: { length: 9000 } } });
      expect(second.data.setEntityTrim.entityTrim).toMatchObject({ connectorName: 'google', trimmedFields: { title: 'x', body: { length: 9000 } }, updatedAt: iso(suite.clock.now()) });
      const doc = await suite.gql(DOCUMENT_TRIM, { id: 'doc-trim-1' });
      expect(doc.data.document).toEqual({ entityTrim: { ownerDID: suite.keys.alice.did, trimmedFields: { title: 'x', body: { length: 9000 } } }, hasConnectorWork: true });
    });

    it('a service records for any owner; a user may not name another owner or replace another owner’s record', async () => {
      const asService = await setTrim({ ownerDID: suite.keys.bob.did }, 'worker');
      expect(asService.data.setEntityTrim.entityTrim.ownerDID).toBe(suite.keys.bob.did);
      const forOther = await setTrim({ documentID: 'doc-trim-2', ownerDID: suite.keys.bob.did });
      expect(forOther.data.setEntityTrim).toMatchObject({ __typename: 'ForbiddenError', code: 'FORBIDDEN' });
      expect(await getEntityTrim(suite.store, 'doc-trim-2')).toBeNull();
      // bob's record of doc-trim-1 stays bob's, untouched.
      const overwrite = await setTrim({ trimmedFields: { stolen: true } });
      expect(overwrite.data.setEntityTrim.__typename).toBe('ForbiddenError');
      expect(await getEntityTrim(suite.store, 'doc-trim-1')).toMatchObject({ ownerDID: suite.keys.bob.did, trimmedFields: { description: 'cut' } });
    });

    it('refuses trimmed fields that are not a bounded JSON object, and writes nothing', async () => {
      let deep: unknown = 'leaf';
      for (let i = 0; i < 100; i++) deep = { deep };
      const cases: [unknown, RegExp][] = [
        [['not', 'an', 'object'], /JSON object/],
        ['a string', /JSON object/],
        [{ big: 'x'.repeat(300 * 1024) }, /at most 262144 bytes/],
        [deep, /at most 64 levels/],
      ];
      for (const [trimmedFields, message] of cases) {
        const res = await setTrim({ trimmedFields });
        expect(res.errors).toBeUndefined();
        expect(res.data.setEntityTrim.__typename).toBe('InputValidationError');
        expect(res.data.setEntityTrim.issues[0]).toMatchObject({ path: ['input', 'trimmedFields'], message: expect.stringMatching(message) });
      }
      expect(await getEntityTrim(suite.store, 'doc-trim-1')).toBeNull();
    });
  });

  describe('clearEntityTrim', () => {
    it('removes the viewer’s record; a stranger’s clear answers false like a missing record and removes nothing', async () => {
      await seedTrim(suite, { documentID: 'doc-trim-3' });
      const stranger = await suite.gql(CLEAR_TRIM, { input: { documentID: 'doc-trim-3' } }, { as: 'mallory' });
      expect(stranger.data.clearEntityTrim).toEqual({ __typename: 'ClearEntityTrimPayload', cleared: false });
      const missing = await suite.gql(CLEAR_TRIM, { input: { documentID: 'doc-nothing' } }, { as: 'mallory' });
      expect(missing.data.clearEntityTrim).toEqual(stranger.data.clearEntityTrim);
      expect(await getEntityTrim(suite.store, 'doc-trim-3')).not.toBeNull();
      const owner = await suite.gql(CLEAR_TRIM, { input: { documentID: 'doc-trim-3' } });
      expect(owner.data.clearEntityTrim.cleared).toBe(true);
      expect(await getEntityTrim(suite.store, 'doc-trim-3')).toBeNull();
      const again = await suite.gql(CLEAR_TRIM, { input: { documentID: 'doc-trim-3' } });
      expect(again.data.clearEntityTrim.cleared).toBe(false);
    });

    it('a service clears any owner’s record; anonymous callers are refused', async () => {
      await seedTrim(suite, { documentID: 'doc-trim-4', ownerDID: suite.keys.bob.did });
      expect((await suite.gql(CLEAR_TRIM, { input: { documentID: 'doc-trim-4' } }, { as: 'anonymous' })).errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
      expect((await suite.gql(CLEAR_TRIM, { input: { documentID: 'doc-trim-4' } }, { as: 'worker' })).data.clearEntityTrim.cleared).toBe(true);
    });
  });
});
