import { describe, expect, it } from 'vitest';
import { createStoreContext, type StoreContext } from '../../src/store/context.js';
import { InvalidInputError, SyncProgressConflictError } from '../../src/store/errors.js';
import {
  compareAndSetSyncProgress,
  countSyncStates,
  deleteSyncState,
  getSyncState,
  getSyncStateByNodeKey,
  getSyncStatesByNodeKeys,
  listSyncStates,
  listSyncStatesForConnector,
  setSyncState,
  updateSyncProgress,
  type SyncState,
  type SyncStateInput,
} from '../../src/store/sync-state/index.js';
import { describeEachDialect } from '../helpers/databases.js';
import { withStatementCounter } from '../helpers/statement-counter.js';

const OWNER = 'did:key:z6MkOwnerA';
const OTHER = 'did:key:z6MkOwnerB';
const CONNECTOR = 'google';

function input(overrides: Partial<SyncStateInput> = {}): SyncStateInput {
  return {
    checkpoint: { cursor: 'c1', counter: 0 },
    lastSyncedAt: '2026-01-01T00:00:00.000Z',
    entityCount: 3,
    status: 'syncing',
    ...overrides,
  };
}

function counterOf(state: SyncState | null): number {
  return (state?.checkpoint as { counter?: number } | null)?.counter ?? 0;
}

/** Adds one to the checkpoint counter: the progress every concurrent writer makes. */
function increment(current: SyncState | null) {
  return {
    checkpoint: { counter: counterOf(current) + 1 },
    lastSyncedAt: '2026-01-01T00:00:01.000Z',
    entityCount: (current?.entityCount ?? 0) + 1,
  };
}

describeEachDialect('sync state', (suite) => {
  describe('get / set / delete', () => {
    it('returns null for a missing row', async () => {
      expect(await getSyncState(suite.store, CONNECTOR, OWNER)).toBeNull();
    });

    it('a fresh insert seeds version 0, an incarnation and a node key, and round-trips JSON', async () => {
      const written = await setSyncState(suite.store, CONNECTOR, OWNER, input({ error: 'boom', recovery: { retry: [1, 2] } }));
      const read = await getSyncState(suite.store, CONNECTOR, OWNER);
      expect(read).toEqual(written);
      expect(read).toMatchObject({
        connectorName: CONNECTOR,
        ownerDID: OWNER,
        checkpoint: { cursor: 'c1', counter: 0 },
        lastSyncedAt: '2026-01-01T00:00:00.000Z',
        entityCount: 3,
        status: 'syncing',
        error: 'boom',
        recovery: { retry: [1, 2] },
        leaseExpiresAt: null,
        version: 0,
      });
      expect(read?.incarnation).toEqual(expect.any(String));
      expect(read?.nodeKey).toEqual(expect.any(String));
      expect(read?.nodeKey).not.toBe(read?.incarnation);
    });

    it('stores absent checkpoint, error and recovery as null', async () => {
      await setSyncState(suite.store, CONNECTOR, OWNER, input({ checkpoint: null }));
      expect(await getSyncState(suite.store, CONNECTOR, OWNER)).toMatchObject({ checkpoint: null, error: null, recovery: null });
    });

    it('the conflict path updates the data and keeps version, incarnation, lease expiry and node key', async () => {
      const first = await setSyncState(suite.store, CONNECTOR, OWNER, input());
      await updateSyncProgress(suite.store, CONNECTOR, OWNER, increment); // version 1
      await suite.store.db.updateTable('kubun_connector_sync_state').set({ lease_expires_at: 1234 }).execute();
      const second = await setSyncState(
        suite.store,
        CONNECTOR,
        OWNER,
        input({ checkpoint: { cursor: 'c2' }, entityCount: 9, status: 'error', error: 'rate limited', recovery: { at: 5 } }),
      );
      expect(second).toMatchObject({
        checkpoint: { cursor: 'c2' },
        entityCount: 9,
        status: 'error',
        error: 'rate limited',
        recovery: { at: 5 },
        version: 1,
        incarnation: first.incarnation,
        nodeKey: first.nodeKey,
        leaseExpiresAt: 1234,
      });
      expect(await getSyncState(suite.store, CONNECTOR, OWNER)).toEqual(second);
    });

    it('the conflict path clears error and recovery when they are omitted', async () => {
      await setSyncState(suite.store, CONNECTOR, OWNER, input({ error: 'x', recovery: { a: 1 } }));
      const again = await setSyncState(suite.store, CONNECTOR, OWNER, input());
      expect(again).toMatchObject({ error: null, recovery: null });
    });

    it('delete removes the row and reports whether it existed', async () => {
      await setSyncState(suite.store, CONNECTOR, OWNER, input());
      expect(await deleteSyncState(suite.store, CONNECTOR, OWNER)).toBe(true);
      expect(await getSyncState(suite.store, CONNECTOR, OWNER)).toBeNull();
      expect(await deleteSyncState(suite.store, CONNECTOR, OWNER)).toBe(false);
    });

    it('delete + recreate gives a new node key and incarnation, and the old node key resolves to nothing', async () => {
      const before = await setSyncState(suite.store, CONNECTOR, OWNER, input());
      await deleteSyncState(suite.store, CONNECTOR, OWNER);
      const after = await setSyncState(suite.store, CONNECTOR, OWNER, input());
      expect(after.nodeKey).not.toBe(before.nodeKey);
      expect(after.incarnation).not.toBe(before.incarnation);
      expect(after.version).toBe(0);
      expect(await getSyncStateByNodeKey(suite.store, before.nodeKey)).toBeNull();
      expect(await getSyncStateByNodeKey(suite.store, after.nodeKey)).toEqual(after);
    });

    it('lists one connector’s states ordered by owner, not other connectors’', async () => {
      await setSyncState(suite.store, CONNECTOR, OTHER, input());
      await setSyncState(suite.store, CONNECTOR, OWNER, input());
      await setSyncState(suite.store, 'github', OWNER, input());
      const states = await listSyncStatesForConnector(suite.store, CONNECTOR);
      expect(states.map((s) => [s.connectorName, s.ownerDID])).toEqual([
        [CONNECTOR, OWNER],
        [CONNECTOR, OTHER],
      ]);
    });
  });

  describe('updateSyncProgress', () => {
    it('creates a missing row with status idle, version 0, an incarnation and a node key', async () => {
      const seen: (SyncState | null)[] = [];
      const state = await updateSyncProgress(suite.store, CONNECTOR, OWNER, (current) => {
        seen.push(current);
        return { checkpoint: { counter: 1 }, lastSyncedAt: 't1', entityCount: 1, recovery: { r: 1 } };
      });
      expect(seen).toEqual([null]);
      expect(state).toMatchObject({ status: 'idle', version: 0, checkpoint: { counter: 1 }, recovery: { r: 1 }, error: null });
      expect(state.incarnation).toEqual(expect.any(String));
      expect(state.nodeKey).toEqual(expect.any(String));
      expect(await getSyncState(suite.store, CONNECTOR, OWNER)).toEqual(state);
    });

    it('updates an existing row, bumps the version and never writes status', async () => {
      const seeded = await setSyncState(suite.store, CONNECTOR, OWNER, input({ status: 'syncing' }));
      const state = await updateSyncProgress(suite.store, CONNECTOR, OWNER, (current) => {
        expect(current).toEqual(seeded);
        return { checkpoint: { cursor: 'c9' }, lastSyncedAt: 't2', entityCount: 10, error: 'partial' };
      });
      expect(state).toMatchObject({
        checkpoint: { cursor: 'c9' },
        lastSyncedAt: 't2',
        entityCount: 10,
        error: 'partial',
        status: 'syncing',
        version: 1,
        incarnation: seeded.incarnation,
        nodeKey: seeded.nodeKey,
      });
      await setSyncState(suite.store, CONNECTOR, OWNER, input({ status: 'error' }));
      const again = await updateSyncProgress(suite.store, CONNECTOR, OWNER, increment);
      expect(again).toMatchObject({ status: 'error', version: 2 });
    });

    it('a lost insert race falls through to the update path', async () => {
      const seen: (SyncState | null)[] = [];
      const state = await updateSyncProgress(suite.store, CONNECTOR, OWNER, async (current) => {
        seen.push(current);
        // Another writer creates the row between our read and our insert.
        if (current === null) await setSyncState(suite.store, CONNECTOR, OWNER, input({ status: 'syncing' }));
        return increment(current);
      });
      expect(seen).toHaveLength(2);
      expect(seen[0]).toBeNull();
      expect(seen[1]).toMatchObject({ version: 0, status: 'syncing' });
      expect(state).toMatchObject({ version: 1, status: 'syncing', checkpoint: { counter: 1 } });
    });

    it('a delete + recreate between read and write fails the CAS on incarnation; the retry rebases on the new row', async () => {
      const original = await setSyncState(suite.store, CONNECTOR, OWNER, input());
      // On Postgres the interfering writer uses an independent pool (closed by the suite's teardown).
      const other = suite.dialect === 'postgres' ? suite.database.connectAgain() : undefined;
      const otherStore: StoreContext = other ? createStoreContext(other.db, 'postgres', { now: suite.clock.now }) : suite.store;
      const seen: SyncState[] = [];
      let recreated: SyncState | undefined;
      const state = await updateSyncProgress(suite.store, CONNECTOR, OWNER, async (current) => {
        if (current === null) throw new Error('row unexpectedly missing');
        seen.push(current);
        if (seen.length === 1) {
          await deleteSyncState(otherStore, CONNECTOR, OWNER);
          // Same version (0) as the row we read: only the incarnation tells them apart.
          recreated = await setSyncState(otherStore, CONNECTOR, OWNER, input({ checkpoint: { counter: 100 } }));
        }
        return increment(current);
      });
      expect(seen).toHaveLength(2);
      expect(seen[0]?.incarnation).toBe(original.incarnation);
      expect(recreated?.version).toBe(0);
      expect(seen[1]?.incarnation).toBe(recreated?.incarnation);
      expect(seen[1]?.incarnation).not.toBe(original.incarnation);
      expect(state).toMatchObject({ version: 1, incarnation: recreated?.incarnation, checkpoint: { counter: 101 } });
    });

    it('throws SyncProgressConflictError after maxRetries + 1 lost rounds', async () => {
      await setSyncState(suite.store, CONNECTOR, OWNER, input());
      let rounds = 0;
      let interfering = false;
      const attempt = updateSyncProgress(
        suite.store,
        CONNECTOR,
        OWNER,
        async (current) => {
          if (!interfering) {
            rounds++;
            // A competing writer wins every round.
            interfering = true;
            await updateSyncProgress(suite.store, CONNECTOR, OWNER, increment);
            interfering = false;
          }
          return increment(current);
        },
        { maxRetries: 2 },
      );
      await expect(attempt).rejects.toBeInstanceOf(SyncProgressConflictError);
      await expect(attempt).rejects.toMatchObject({ code: 'SYNC_PROGRESS_CONFLICT', attempts: 3 });
      expect(rounds).toBe(3);
      // Only the three competing writes landed.
      expect(await getSyncState(suite.store, CONNECTOR, OWNER)).toMatchObject({ version: 3, checkpoint: { counter: 3 } });
    });

    it('rejects a negative maxRetries', async () => {
      await expect(updateSyncProgress(suite.store, CONNECTOR, OWNER, increment, { maxRetries: -1 })).rejects.toBeInstanceOf(InvalidInputError);
    });

    it.runIf(suite.dialect === 'postgres')('20 concurrent writers on parallel connections lose no update', async () => {
      await setSyncState(suite.store, CONNECTOR, OWNER, input({ checkpoint: { counter: 0 } }));
      let recomputes = 0;
      await Promise.all(
        Array.from({ length: 20 }, () =>
          updateSyncProgress(
            suite.store,
            CONNECTOR,
            OWNER,
            async (current) => {
              recomputes++;
              // Widen the window between read and write so rounds really collide.
              await new Promise((resolve) => setTimeout(resolve, Math.random() * 5));
              return increment(current);
            },
            { maxRetries: 1000 },
          ),
        ),
      );
      const final = await getSyncState(suite.store, CONNECTOR, OWNER);
      expect(final).toMatchObject({ version: 20, checkpoint: { counter: 20 }, entityCount: 23, status: 'syncing' });
      // Contention really happened (some writers had to retry).
      expect(recomputes).toBeGreaterThan(20);
    });

    it.runIf(suite.dialect === 'postgres')('20 concurrent writers on a missing row: one insert, the rest update', async () => {
      await Promise.all(
        Array.from({ length: 20 }, () => updateSyncProgress(suite.store, CONNECTOR, OWNER, increment, { maxRetries: 1000 })),
      );
      expect(await getSyncState(suite.store, CONNECTOR, OWNER)).toMatchObject({ version: 19, checkpoint: { counter: 20 }, status: 'idle' });
    });
  });

  describe('compareAndSetSyncProgress', () => {
    const progress = { checkpoint: { cursor: 'cas' }, lastSyncedAt: 't9', entityCount: 42 };

    it('applies when version and incarnation match, bumps the version, keeps status', async () => {
      const seeded = await setSyncState(suite.store, CONNECTOR, OWNER, input({ status: 'syncing' }));
      const result = await compareAndSetSyncProgress(suite.store, {
        connectorName: CONNECTOR,
        ownerDID: OWNER,
        expectedVersion: 0,
        expectedIncarnation: seeded.incarnation,
        ...progress,
        recovery: { r: true },
      });
      expect(result.applied).toBe(true);
      expect(result.state).toMatchObject({ ...progress, recovery: { r: true }, version: 1, status: 'syncing', nodeKey: seeded.nodeKey });
      expect(await getSyncState(suite.store, CONNECTOR, OWNER)).toEqual(result.state);
    });

    it('a stale version is not applied and returns the current row', async () => {
      const seeded = await setSyncState(suite.store, CONNECTOR, OWNER, input());
      await updateSyncProgress(suite.store, CONNECTOR, OWNER, increment);
      const current = await getSyncState(suite.store, CONNECTOR, OWNER);
      const result = await compareAndSetSyncProgress(suite.store, {
        connectorName: CONNECTOR,
        ownerDID: OWNER,
        expectedVersion: 0,
        expectedIncarnation: seeded.incarnation,
        ...progress,
      });
      expect(result).toEqual({ applied: false, state: current });
    });

    it('a stale incarnation is not applied even at the same version', async () => {
      const old = await setSyncState(suite.store, CONNECTOR, OWNER, input());
      await deleteSyncState(suite.store, CONNECTOR, OWNER);
      const fresh = await setSyncState(suite.store, CONNECTOR, OWNER, input());
      const result = await compareAndSetSyncProgress(suite.store, {
        connectorName: CONNECTOR,
        ownerDID: OWNER,
        expectedVersion: 0,
        expectedIncarnation: old.incarnation,
        ...progress,
      });
      expect(result).toEqual({ applied: false, state: fresh });
    });

    it('a missing row is not created', async () => {
      const result = await compareAndSetSyncProgress(suite.store, {
        connectorName: CONNECTOR,
        ownerDID: OWNER,
        expectedVersion: 0,
        expectedIncarnation: 'whatever',
        ...progress,
      });
      expect(result).toEqual({ applied: false, state: null });
      expect(await getSyncState(suite.store, CONNECTOR, OWNER)).toBeNull();
    });

    it.runIf(suite.dialect === 'postgres')('of 20 concurrent CAS writes with the same expectation exactly one applies', async () => {
      const seeded = await setSyncState(suite.store, CONNECTOR, OWNER, input());
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          compareAndSetSyncProgress(suite.store, {
            connectorName: CONNECTOR,
            ownerDID: OWNER,
            expectedVersion: 0,
            expectedIncarnation: seeded.incarnation,
            checkpoint: { writer: i },
            lastSyncedAt: 't',
            entityCount: i,
          }),
        ),
      );
      expect(results.filter((r) => r.applied)).toHaveLength(1);
      expect(await getSyncState(suite.store, CONNECTOR, OWNER)).toMatchObject({ version: 1 });
    });
  });

  describe('node keys', () => {
    it('batched read is aligned with the input, null for unknown keys, repeated keys allowed', async () => {
      const a = await setSyncState(suite.store, CONNECTOR, OWNER, input());
      const b = await setSyncState(suite.store, 'github', OTHER, input());
      const { store: counted, statements } = withStatementCounter(suite.store);
      const result = await getSyncStatesByNodeKeys(counted, [b.nodeKey, 'nope', a.nodeKey, b.nodeKey]);
      expect(result).toEqual([b, null, a, b]);
      expect(statements).toHaveLength(1);
      expect(await getSyncStatesByNodeKeys(suite.store, [])).toEqual([]);
    });
  });

  describe('listSyncStates', () => {
    async function seed(): Promise<void> {
      for (const connector of ['github', 'google', 'notion']) {
        for (const owner of [OWNER, OTHER, 'did:key:z6MkOwnerC']) {
          await setSyncState(suite.store, connector, owner, input({ status: owner === OTHER ? 'error' : 'idle' }));
        }
      }
    }

    async function pageAll(options: Omit<Parameters<typeof listSyncStates>[1], 'after'>): Promise<string[][]> {
      const pages: string[][] = [];
      let after: { connectorName: string; ownerDID: string } | undefined;
      for (;;) {
        const page = await listSyncStates(suite.store, { ...options, after });
        pages.push(page.syncStates.map((s) => `${s.connectorName}|${s.ownerDID}`));
        const last = page.syncStates.at(-1);
        if (!page.hasMore || last === undefined) break;
        if (pages.length > 100) throw new Error('paging does not terminate');
        after = { connectorName: last.connectorName, ownerDID: last.ownerDID };
      }
      return pages;
    }

    it('the service sees every row in (connector, owner) order, paged without gaps or duplicates', async () => {
      await seed();
      const pages = await pageAll({ visibleTo: null, first: 2 });
      expect(pages.map((p) => p.length)).toEqual([2, 2, 2, 2, 1]);
      const all = pages.flat();
      const expected = ['github', 'google', 'notion'].flatMap((c) => [OWNER, OTHER, 'did:key:z6MkOwnerC'].sort().map((o) => `${c}|${o}`));
      expect(all).toEqual(expected);
      expect(await countSyncStates(suite.store, { visibleTo: null })).toEqual({ count: 9, capped: false });
    });

    it('an owner sees only its own rows, whatever the filter asks', async () => {
      await seed();
      const pages = await pageAll({ visibleTo: OWNER, first: 2 });
      expect(pages.flat()).toEqual(['github', 'google', 'notion'].map((c) => `${c}|${OWNER}`));
      expect(await countSyncStates(suite.store, { visibleTo: OWNER })).toEqual({ count: 3, capped: false });
      const foreign = await listSyncStates(suite.store, { visibleTo: OWNER, filter: { ownerDID: OTHER }, first: 10 });
      expect(foreign).toEqual({ syncStates: [], hasMore: false });
      expect(await countSyncStates(suite.store, { visibleTo: OWNER, filter: { ownerDID: OTHER } })).toEqual({ count: 0, capped: false });
    });

    it('filters by connector, owner and status', async () => {
      await seed();
      const byConnector = await listSyncStates(suite.store, { visibleTo: null, filter: { connectorName: 'google' }, first: 10 });
      expect(byConnector.syncStates.map((s) => s.connectorName)).toEqual(['google', 'google', 'google']);
      const byStatus = await listSyncStates(suite.store, { visibleTo: null, filter: { status: 'error' }, first: 10 });
      expect(byStatus.syncStates.map((s) => s.ownerDID)).toEqual([OTHER, OTHER, OTHER]);
      expect(await countSyncStates(suite.store, { visibleTo: null, filter: { status: 'error', connectorName: 'notion' } })).toEqual({ count: 1, capped: false });
      const byOwner = await listSyncStates(suite.store, { visibleTo: null, filter: { ownerDID: OTHER }, first: 1 });
      expect(byOwner).toMatchObject({ hasMore: true, syncStates: [{ connectorName: 'github', ownerDID: OTHER }] });
    });

    it('first: 0 returns nothing but reports more; a bad page size is an input error', async () => {
      await seed();
      expect(await listSyncStates(suite.store, { visibleTo: null, first: 0 })).toEqual({ syncStates: [], hasMore: true });
      await expect(listSyncStates(suite.store, { visibleTo: null, first: -1 })).rejects.toBeInstanceOf(InvalidInputError);
      await expect(listSyncStates(suite.store, { visibleTo: null, first: 1.5 })).rejects.toBeInstanceOf(InvalidInputError);
    });
  });
});
