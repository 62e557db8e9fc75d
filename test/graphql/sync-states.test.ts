/** The `syncStates` connection and `updateSyncProgress`, through yoga.fetch on both dialects. */
import { describe, expect, it } from 'vitest';
import { deleteSyncState, getSyncState } from '../../src/store/sync-state/index.js';
import { describeGraphQL, type GraphQLResponse, type Principal } from '../helpers/graphql.js';
import { SYNC_STATE_FIELDS, SYNC_STATES, UPDATE_SYNC_PROGRESS } from '../helpers/graphql-documents.js';
import { seedSyncState, unknownNodeID } from '../helpers/graphql-seed.js';

describeGraphQL('graphql sync states', (suite) => {
  const names = (res: GraphQLResponse): string[] =>
    (res.data.syncStates.edges as { node: { connectorName: string; ownerDID: string } }[]).map((e) => `${e.node.connectorName}/${e.node.ownerDID === suite.keys.alice.did ? 'alice' : 'bob'}`);

  async function seedStates() {
    await seedSyncState(suite, { connectorName: 'google', status: 'syncing' });
    await seedSyncState(suite, { connectorName: 'github' });
    await seedSyncState(suite, { connectorName: 'notion', status: 'error' });
    await seedSyncState(suite, { connectorName: 'google', ownerDID: suite.keys.bob.did });
    await seedSyncState(suite, { connectorName: 'dropbox', ownerDID: suite.keys.bob.did });
  }

  describe('syncStates connection', () => {
    it('lists the viewer’s sync states by connector with every field and totalCount', async () => {
      await seedStates();
      const res = await suite.gql(SYNC_STATES, { first: 10 });
      expect(res.errors).toBeUndefined();
      expect(names(res)).toEqual(['github/alice', 'google/alice', 'notion/alice']);
      expect(res.data.syncStates.totalCount).toBe(3);
      const stored = await getSyncState(suite.store, 'google', suite.keys.alice.did);
      expect(res.data.syncStates.edges[1].node).toEqual({
        id: expect.any(String),
        connectorName: 'google',
        ownerDID: suite.keys.alice.did,
        checkpoint: { cursor: 'c-0' },
        lastSyncedAt: '2026-01-01T00:00:00Z',
        entityCount: 0,
        status: 'syncing',
        error: null,
        recovery: null,
        version: 0,
        incarnation: stored!.incarnation,
      });
    });

    it('shows a service every owner’s rows by (connector, owner), and a stranger none', async () => {
      await seedStates();
      const worker = await suite.gql(SYNC_STATES, { first: 10 }, { as: 'worker' });
      expect(worker.data.syncStates.totalCount).toBe(5);
      const expected = [
        'dropbox/bob',
        'github/alice',
        ...[suite.keys.alice.did, suite.keys.bob.did].sort().map((did) => `google/${did === suite.keys.alice.did ? 'alice' : 'bob'}`),
        'notion/alice',
      ];
      expect(names(worker)).toEqual(expected);
      const mallory = await suite.gql(SYNC_STATES, { first: 10 }, { as: 'mallory' });
      expect(mallory.data.syncStates).toMatchObject({ totalCount: 0, edges: [] });
    });

    it('filters by connector, owner and status', async () => {
      await seedStates();
      const google = await suite.gql(SYNC_STATES, { first: 10, filter: { connectorName: 'google' } }, { as: 'worker' });
      expect(google.data.syncStates.totalCount).toBe(2);
      const bobs = await suite.gql(SYNC_STATES, { first: 10, filter: { ownerDID: suite.keys.bob.did } }, { as: 'worker' });
      expect(names(bobs)).toEqual(['dropbox/bob', 'google/bob']);
      const errored = await suite.gql(SYNC_STATES, { first: 10, filter: { status: 'error' } });
      expect(names(errored)).toEqual(['notion/alice']);
      expect(errored.data.syncStates.totalCount).toBe(1);
      // A user's owner filter never widens what they see.
      const bobsAsAlice = await suite.gql(SYNC_STATES, { first: 10, filter: { ownerDID: suite.keys.bob.did } });
      expect(bobsAsAlice.data.syncStates).toMatchObject({ totalCount: 0, edges: [] });
    });

    it('pages forward by cursor', async () => {
      await seedStates();
      const seen: string[] = [];
      let after: string | null = null;
      for (let page = 0; page < 5; page++) {
        const res: any = await suite.gql(SYNC_STATES, { first: 2, after }, { as: 'worker' });
        expect(res.data.syncStates.edges.length).toBeLessThanOrEqual(2);
        seen.push(...names(res));
        if (!res.data.syncStates.pageInfo.hasNextPage) break;
        after = res.data.syncStates.pageInfo.endCursor;
      }
      const all = await suite.gql(SYNC_STATES, { first: 10 }, { as: 'worker' });
      expect(seen).toEqual(names(all));
      expect(seen).toHaveLength(5);
    });

    for (const who of ['alice', 'worker'] as const) {
      it(`pages backward (last/before) and forward (first/after) over the same rows, at every page size (${who})`, async () => {
        await seedStates();
        for (const connectorName of ['asana', 'box', 'zoom']) await seedSyncState(suite, { connectorName });
        await seedSyncState(suite, { connectorName: 'asana', ownerDID: suite.keys.bob.did });
        const full = names(await suite.gql(SYNC_STATES, { first: 100 }, { as: who }));
        expect(full).toHaveLength(who === 'alice' ? 6 : 9);
        for (let size = 1; size <= 4; size++) {
          const forward: string[] = [];
          let after: string | null = null;
          for (let guard = 0; guard < 20; guard++) {
            const res: any = await suite.gql(SYNC_STATES, { first: size, after }, { as: who });
            expect(res.errors).toBeUndefined();
            expect(res.data.syncStates.pageInfo.hasPreviousPage).toBe(after !== null);
            forward.push(...names(res));
            if (!res.data.syncStates.pageInfo.hasNextPage) break;
            after = res.data.syncStates.pageInfo.endCursor;
          }
          expect(forward, `forward, size ${size}`).toEqual(full);

          const backward: string[] = [];
          let before: string | null = null;
          for (let guard = 0; guard < 20; guard++) {
            const res: any = await suite.gql(SYNC_STATES, { last: size, before }, { as: who });
            expect(res.errors).toBeUndefined();
            expect(res.data.syncStates.totalCount).toBe(full.length);
            expect(res.data.syncStates.pageInfo.hasNextPage).toBe(before !== null);
            backward.unshift(...names(res));
            if (!res.data.syncStates.pageInfo.hasPreviousPage) break;
            expect(res.data.syncStates.edges).toHaveLength(size);
            expect(res.data.syncStates.pageInfo.startCursor).toBe(res.data.syncStates.edges[0].cursor);
            before = res.data.syncStates.pageInfo.startCursor;
          }
          expect(backward, `backward, size ${size}`).toEqual(full);
        }
      });
    }

    it('bounds a page by both after and before, in either direction, with the filter applied', async () => {
      await seedStates();
      const all = await suite.gql(SYNC_STATES, { first: 100 }, { as: 'worker' });
      const order = names(all);
      const after = all.data.syncStates.edges[0].cursor;
      const before = all.data.syncStates.edges[4].cursor;
      expect(names(await suite.gql(SYNC_STATES, { first: 100, after, before }, { as: 'worker' }))).toEqual(order.slice(1, 4));
      expect(names(await suite.gql(SYNC_STATES, { last: 2, after, before }, { as: 'worker' }))).toEqual(order.slice(2, 4));
      expect(names(await suite.gql(SYNC_STATES, { last: 1, filter: { ownerDID: suite.keys.bob.did } }, { as: 'worker' }))).toEqual(['google/bob']);
    });

    it('refuses first with last, and a bad cursor', async () => {
      for (const variables of [{ first: 1, last: 1 }, { first: 1, after: '!!!' }, { last: 1, before: '!!!' }]) {
        const res = await suite.gql(SYNC_STATES, variables);
        expect(res.data).toBeNull();
        expect(res.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
      }
    });
  });

  describe('setSyncState', () => {
    const SET = `mutation($input: SetSyncStateInput!) {
      setSyncState(input: $input) {
        __typename
        ... on SyncStatePayload { syncState { id connectorName ownerDID status entityCount checkpoint version incarnation } }
        ... on Error { code }
        ... on InputValidationError { issues { path } }
      }
    }`;
    const input = (overrides: Record<string, unknown> = {}) => ({
      connectorName: 'google',
      checkpoint: { cursor: 'a' },
      lastSyncedAt: '2026-01-01T00:00:00Z',
      entityCount: 3,
      status: 'idle',
      ...overrides,
    });

    it('creates at version 0 for the viewer, then overwrites fields keeping version, incarnation and id', async () => {
      const created = (await suite.gql(SET, { input: input() })).data.setSyncState.syncState;
      expect(created).toMatchObject({ connectorName: 'google', ownerDID: suite.keys.alice.did, status: 'idle', entityCount: 3, checkpoint: { cursor: 'a' }, version: 0 });
      const updated = (await suite.gql(SET, { input: input({ status: 'syncing', entityCount: 7 }) })).data.setSyncState.syncState;
      expect(updated).toEqual({ ...created, status: 'syncing', entityCount: 7 });
    });

    it('lets only a service name another owner', async () => {
      expect((await suite.gql(SET, { input: input({ ownerDID: suite.keys.bob.did }) })).data.setSyncState).toMatchObject({ __typename: 'ForbiddenError' });
      expect(await getSyncState(suite.store, 'google', suite.keys.bob.did)).toBeNull();
      const byService = await suite.gql(SET, { input: input({ ownerDID: suite.keys.bob.did }) }, { as: 'worker' });
      expect(byService.data.setSyncState.syncState.ownerDID).toBe(suite.keys.bob.did);
    });

    it('refuses bad input and writes nothing', async () => {
      const res = await suite.gql(SET, { input: input({ entityCount: -1 }) });
      expect(res.data.setSyncState).toMatchObject({ __typename: 'InputValidationError', issues: [{ path: ['input', 'entityCount'] }] });
      expect(await getSyncState(suite.store, 'google', suite.keys.alice.did)).toBeNull();
    });
  });

  describe('updateSyncProgress', () => {
    const progress = (input: Record<string, unknown>, as: Principal = 'alice') => suite.gql(UPDATE_SYNC_PROGRESS, { input }, { as });
    const write = { checkpoint: { cursor: 'c-1' }, lastSyncedAt: '2026-01-01T01:00:00Z', entityCount: 42, error: null, recovery: { retry: 1 } };

    it('applies at the expected version and incarnation: version + 1, status untouched', async () => {
      const { id, syncState } = await seedSyncState(suite, { connectorName: 'google', status: 'syncing' });
      const res = await progress({ id, expectedVersion: 0, expectedIncarnation: syncState.incarnation, ...write });
      expect(res.errors).toBeUndefined();
      expect(res.data.updateSyncProgress).toMatchObject({
        __typename: 'UpdateSyncProgressPayload',
        applied: true,
        syncState: { id, version: 1, checkpoint: { cursor: 'c-1' }, entityCount: 42, status: 'syncing', recovery: { retry: 1 }, incarnation: syncState.incarnation },
      });
      const stored = await getSyncState(suite.store, 'google', suite.keys.alice.did);
      expect(stored).toMatchObject({ version: 1, entityCount: 42, status: 'syncing' });
    });

    it.each([
      ['version', (s: { incarnation: string | null }) => ({ expectedVersion: 7, expectedIncarnation: s.incarnation })],
      ['incarnation', () => ({ expectedVersion: 0, expectedIncarnation: 'another-life' })],
    ])('returns applied: false and the current row for a wrong expected %s', async (_name, expected) => {
      const { id, syncState } = await seedSyncState(suite, { connectorName: 'google' });
      const res = await progress({ id, ...expected(syncState), ...write });
      expect(res.data.updateSyncProgress).toMatchObject({
        applied: false,
        syncState: { id, version: 0, entityCount: 0, checkpoint: { cursor: 'c-0' }, incarnation: syncState.incarnation },
      });
      expect(await getSyncState(suite.store, 'google', suite.keys.alice.did)).toEqual(syncState);
    });

    it('a row written before incarnations existed (incarnation null) takes expectedIncarnation null; a current row refuses null or an omitted one', async () => {
      const { id, syncState } = await seedSyncState(suite, { connectorName: 'google' });
      const omitted = await progress({ id, expectedVersion: 0, ...write });
      expect(omitted.data.updateSyncProgress).toMatchObject({ applied: false, syncState: { incarnation: syncState.incarnation } });
      await suite.store.db.updateTable('kubun_connector_sync_state').set({ incarnation: null }).where('connector_name', '=', 'google').execute();
      const legacy = await progress({ id, expectedVersion: 0, expectedIncarnation: null, ...write });
      expect(legacy.data.updateSyncProgress).toMatchObject({ applied: true, syncState: { version: 1, incarnation: null } });
    });

    it('lets the service write any owner’s progress', async () => {
      const { id, syncState } = await seedSyncState(suite, { connectorName: 'google' });
      const res = await progress({ id, expectedVersion: 0, expectedIncarnation: syncState.incarnation, ...write }, 'worker');
      expect(res.data.updateSyncProgress).toMatchObject({ applied: true, syncState: { version: 1 } });
    });

    it('gives a stranger NotFoundError exactly as for an unknown id, and changes nothing', async () => {
      const { id, syncState } = await seedSyncState(suite, { connectorName: 'google' });
      const input = { expectedVersion: 0, expectedIncarnation: syncState.incarnation, ...write };
      const stranger = await progress({ id, ...input }, 'mallory');
      const unknown = await progress({ id: unknownNodeID('SyncState'), ...input }, 'mallory');
      expect(stranger.data.updateSyncProgress).toMatchObject({ __typename: 'NotFoundError', code: 'NOT_FOUND' });
      expect(stranger).toEqual(unknown);
      expect(await getSyncState(suite.store, 'google', suite.keys.alice.did)).toEqual(syncState);
    });

    it('gives NotFoundError for a row deleted and recreated (new node id)', async () => {
      const { id, syncState } = await seedSyncState(suite, { connectorName: 'google' });
      await deleteSyncState(suite.store, 'google', suite.keys.alice.did);
      const again = await seedSyncState(suite, { connectorName: 'google' });
      expect(again.id).not.toBe(id);
      const res = await progress({ id, expectedVersion: 0, expectedIncarnation: syncState.incarnation, ...write });
      expect(res.data.updateSyncProgress.__typename).toBe('NotFoundError');
      expect(await getSyncState(suite.store, 'google', suite.keys.alice.did)).toEqual(again.syncState);
    });

    it.each([
      [{ entityCount: -1 }, 'input.entityCount'],
      [{ expectedVersion: -1 }, 'input.expectedVersion'],
      [{ expectedIncarnation: '' }, 'input.expectedIncarnation'],
      [{ lastSyncedAt: '' }, 'input.lastSyncedAt'],
    ])('rejects %j with a field-level issue', async (bad, path) => {
      const { id, syncState } = await seedSyncState(suite, { connectorName: 'google' });
      const res = await progress({ id, expectedVersion: 0, expectedIncarnation: syncState.incarnation, ...write, ...bad });
      expect(res.data.updateSyncProgress).toMatchObject({ __typename: 'InputValidationError', issues: [{ path: path.split('.') }] });
      expect(await getSyncState(suite.store, 'google', suite.keys.alice.did)).toEqual(syncState);
    });
  });

  describe('syncState lookup', () => {
    const LOOKUP = /* GraphQL */ `
      query($c: String!, $o: DID) { syncState(connectorName: $c, ownerDID: $o) { ...SyncStateFields } }
      ${SYNC_STATE_FIELDS}
    `;

    it('finds the viewer’s own by connector; ownerDID names another owner, visible only to a service', async () => {
      const { id } = await seedSyncState(suite, { connectorName: 'google' });
      await seedSyncState(suite, { connectorName: 'google', ownerDID: suite.keys.bob.did, status: 'error' });
      expect((await suite.gql(LOOKUP, { c: 'google' })).data.syncState).toMatchObject({ id, ownerDID: suite.keys.alice.did });
      expect((await suite.gql(LOOKUP, { c: 'google', o: suite.keys.bob.did })).data.syncState).toBeNull();
      expect((await suite.gql(LOOKUP, { c: 'google', o: suite.keys.bob.did }, { as: 'worker' })).data.syncState).toMatchObject({ status: 'error' });
      expect((await suite.gql(LOOKUP, { c: 'dropbox' })).data.syncState).toBeNull();
    });
  });

  describe('deleteSyncState', () => {
    const DELETE = /* GraphQL */ `
      mutation($input: DeleteSyncStateInput!) {
        deleteSyncState(input: $input) { __typename ... on DeleteSyncStatePayload { deletedID } ... on Error { code } }
      }
    `;

    it('deletes the row; setting it again gives a new id, version 0 and a new incarnation', async () => {
      const { id, syncState } = await seedSyncState(suite, { connectorName: 'google' });
      const res = await suite.gql(DELETE, { input: { id } });
      expect(res.data.deleteSyncState).toEqual({ __typename: 'DeleteSyncStatePayload', deletedID: id });
      expect(await getSyncState(suite.store, 'google', suite.keys.alice.did)).toBeNull();
      expect((await suite.gql(DELETE, { input: { id } })).data.deleteSyncState.__typename).toBe('NotFoundError');
      const recreated = await seedSyncState(suite, { connectorName: 'google' });
      expect(recreated.id).not.toBe(id);
      expect(recreated.syncState.version).toBe(0);
      expect(recreated.syncState.incarnation).not.toBe(syncState.incarnation);
    });

    it('a stranger gets the same NotFoundError as for an unknown id, and nothing is deleted; a service deletes any', async () => {
      const { id } = await seedSyncState(suite, { connectorName: 'google' });
      const stranger = await suite.gql(DELETE, { input: { id } }, { as: 'mallory' });
      const unknown = await suite.gql(DELETE, { input: { id: unknownNodeID('SyncState') } }, { as: 'mallory' });
      expect(stranger).toEqual(unknown);
      expect(stranger.data.deleteSyncState.__typename).toBe('NotFoundError');
      expect(await getSyncState(suite.store, 'google', suite.keys.alice.did)).not.toBeNull();
      expect((await suite.gql(DELETE, { input: { id } }, { as: 'worker' })).data.deleteSyncState.deletedID).toBe(id);
    });
  });
});
