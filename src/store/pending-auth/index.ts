/** Pending OAuth authorizations (SPEC §3.2): create, single-use consume, expiry sweep. */
export { consumePendingAuth, createPendingAuth, deleteExpiredPendingAuth, getPendingAuthSummary } from './pending-auth.js';
export type { DeleteExpiredPendingAuthOptions } from './pending-auth.js';
export { toPendingAuthSummary } from './row.js';
export type { NewPendingAuth, PendingAuthRecord, PendingAuthSummary } from './types.js';
