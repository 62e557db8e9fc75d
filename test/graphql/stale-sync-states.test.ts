/**
 * Stale sync states as data (issue 11 item 6): `progressedAt` on the store's
 * clock, and `syncStates(filter: { staleForMs })` for "no progress for that
 * long, or a lease that expired", on both dialects through yoga.fetch.
 */
import { expect, it } from 'vitest';
import { compareAndSetSyncProgress, setSyncState } from '../../src/store/sync-state/index.js';
import { describeGraphQL } from '../helpers/graphql.js';

const QUERY = `query S($filter: SyncStateFilter) { syncStates(first: 50, filter: $filter) { totalCount edges { node { connectorName progressedAt } } } }`;
const MINUTE = 60_000;

describeGraphQL('graphql sync states: stale', (suite) => {
  it('lists the states without progress for the given time, or with a lapsed lease; progress makes one fresh again', async () => {
    const owner = suite.keys.alice.did;
    const progress = { checkpoint: { page: 1 }, lastSyncedAt: 'yesterday, says the connector', entityCount: 1, status: 'syncing' };
    const old = await setSyncState(suite.store, 'old', owner, progress);
    suite.clock.advance(10 * MINUTE);
    await setSyncState(suite.store, 'fresh', owner, progress);
    await setSyncState(suite.store, 'leased', owner, progress);
    await suite.store.db.updateTable('kubun_connector_sync_state').set({ lease_expires_at: suite.clock.current - 1 }).where('connector_name', '=', 'leased').execute();
    suite.clock.advance(MINUTE);

    const list = async (filter: Record<string, unknown>, as: 'alice' | 'bob' = 'alice') => {
      const res = await suite.gql(QUERY, { filter }, { as });
      expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
      return res.data.syncStates as { totalCount: number; edges: { node: { connectorName: string; progressedAt: string } }[] };
    };
    const stale = await list({ staleForMs: 5 * MINUTE });
    expect(stale.edges.map((e) => e.node.connectorName)).toEqual(['leased', 'old']);
    expect(stale.totalCount).toBe(2);
    expect(stale.edges.find((e) => e.node.connectorName === 'old')!.node.progressedAt).toBe(new Date(suite.clock.current - 11 * MINUTE).toISOString());
    expect((await list({ staleForMs: 5 * MINUTE }, 'bob')).edges).toEqual([]);

    // A progress write (CAS) makes it fresh.
    const written = await compareAndSetSyncProgress(suite.store, { connectorName: 'old', ownerDID: owner, expectedVersion: old.version, expectedIncarnation: old.incarnation, ...progress, entityCount: 2 });
    expect(written.applied).toBe(true);
    expect((await list({ staleForMs: 5 * MINUTE })).edges.map((e) => e.node.connectorName)).toEqual(['leased']);
    expect((await list({ staleForMs: 30 * MINUTE })).edges.map((e) => e.node.connectorName)).toEqual(['leased']);
    expect((await list({})).totalCount).toBe(3);
  });

  it('refuses a threshold under a second', async () => {
    const res = await suite.gql(QUERY, { filter: { staleForMs: 10 } });
    expect(res.data).toBeNull();
    expect(res.errors?.[0]?.message).toMatch(/staleForMs/);
  });
});
