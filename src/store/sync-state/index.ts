/** Sync state area (SPEC §3.1): checkpoints, the progress CAS, node-key reads and the API listing. */
export { countSyncStates, listSyncStates } from './list.js';
export type { ListSyncStatesOptions, SyncStatePage, SyncStateScope } from './list.js';
export { getSyncStateByNodeKey, getSyncStatesByKeys, getSyncStatesByNodeKeys, type SyncStateKey } from './read.js';
export { compareAndSetSyncProgress, updateSyncProgress } from './progress.js';
export type { CompareAndSetSyncProgressInput, CompareAndSetSyncProgressResult, UpdateSyncProgressOptions } from './progress.js';
export { deleteSyncState, deleteSyncStateByNodeKey, getSyncState, listSyncStatesForConnector, setSyncState } from './sync-state.js';
export type {
  SyncProgress,
  SyncProgressRecompute,
  SyncState,
  SyncStateCursor,
  SyncStateFilter,
  SyncStateInput,
  SyncStatus,
} from './types.js';
