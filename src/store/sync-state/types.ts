/** Domain types of a connector's sync state (SPEC §3.1). */
import type { CursorOfKeyset, SYNC_STATE_ORDER } from '../page.js';

/**
 * Where the connector's sync workflow stands. The workflow owns this value;
 * the store only seeds `'idle'` when the progress path creates a row.
 */
export type SyncStatus = string;

/** One connector's sync checkpoint for one owner. */
export interface SyncState {
  connectorName: string;
  ownerDID: string;
  /** Opaque public identity; a delete + recreate gets a new one. */
  nodeKey: string;
  /** Decoded JSON checkpoint, `null` when none. */
  checkpoint: unknown;
  /** As the connector wrote it (the column is text). */
  lastSyncedAt: string;
  entityCount: number;
  status: SyncStatus;
  error: string | null;
  /** Unused by this store (kept from the reference schema); ms epoch or `null`. */
  leaseExpiresAt: number | null;
  /** Decoded JSON recovery data, `null` when none. */
  recovery: unknown;
  /** Advances by one on every successful progress CAS write. */
  version: number;
  /** Random per row life: a delete + recreate gets a new one, so a CAS cannot rebase across it. */
  incarnation: string | null;
  /** When the store last wrote its progress (ms epoch, the store's clock); null before tracking. */
  progressedAt: number | null;
}

/** What `setSyncState` writes. `error` and `recovery` default to `null`. */
export interface SyncStateInput {
  checkpoint: unknown;
  lastSyncedAt: string;
  entityCount: number;
  status: SyncStatus;
  error?: string | null;
  recovery?: unknown;
}

/**
 * What a progress write stores. `status` is absent on purpose: the progress
 * path never writes it. `error` and `recovery` default to `null` (omitting
 * them clears them).
 */
export interface SyncProgress {
  checkpoint: unknown;
  lastSyncedAt: string;
  entityCount: number;
  error?: string | null;
  recovery?: unknown;
}

/**
 * Computes the next progress from the current row (`null` when there is no
 * row yet). May run several times: it must be free of side effects that
 * cannot be repeated.
 */
export type SyncProgressRecompute = (current: SyncState | null) => SyncProgress | Promise<SyncProgress>;

/** Keyset cursor of {@link listSyncStates}: the last row of the previous page. */
export type SyncStateCursor = CursorOfKeyset<typeof SYNC_STATE_ORDER>;

/** Filters of {@link listSyncStates} and {@link countSyncStates}; all optional, combined with AND. */
export interface SyncStateFilter {
  connectorName?: string;
  ownerDID?: string;
  status?: SyncStatus;
  /**
   * Stale: no progress written for at least this many ms, or a lease that
   * expired (`leaseExpiresAt` in the past). For dashboards' "stuck syncs".
   */
  staleForMs?: number;
}
