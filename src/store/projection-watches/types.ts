/**
 * Domain types of projection watches (SPEC §3.5): a provider document tracked
 * for verification against the local converged state.
 */

/** Where a watch stands: waiting for (another) verification, confirmed, or given up. */
export type ProjectionWatchVerificationStatus = 'pending_verification' | 'verified' | 'failed';

/** Every status, in the order a watch normally passes through them. */
export const PROJECTION_WATCH_VERIFICATION_STATUSES: readonly ProjectionWatchVerificationStatus[] = [
  'pending_verification',
  'verified',
  'failed',
];

/** Why a pending attempt was pushed out without spending an attempt. */
export type WatchDeferReason = 'offline';

/** A watch's primary key: one provider document under one connector account. */
export interface ProjectionWatchIdentity {
  ownerDID: string;
  connectorName: string;
  model: string;
  accountKey: string;
  sourceID: string;
}

/** One `kubun_connector_projection_watch` row, decoded. Times are ms since the epoch. */
export interface ProjectionWatch extends ProjectionWatchIdentity {
  /** Opaque public identity (the GraphQL node id); a delete + recreate gets a new one. */
  nodeKey: string;
  documentID: string;
  /** Digest of the local state the last successful verification confirmed. */
  verifiedStateDigest: string | null;
  /** Digest of the winner last observed at the provider (or written by finalize). */
  observedWinnerDigest: string | null;
  verificationStatus: ProjectionWatchVerificationStatus;
  /** Mismatches spent in the current generation. */
  verificationAttempts: number;
  /** Advances every time a new round of verification is opened (write, repull, repair). */
  repairGeneration: number;
  /** When the next verification attempt is due; null when nothing is pending. */
  nextAttemptAt: number | null;
  /** Until when a verifier holds the current attempt; kept apart from `nextAttemptAt`. */
  claimedUntil: number | null;
  deferReason: WatchDeferReason | null;
  /** CAS counter: advances on every generation-opening arm, claim and verification result. */
  version: number;
  createdAt: number;
  updatedAt: number;
}

/**
 * Names one watch: by identity, by node key, or by both (then both must
 * match). A node key is immune to a delete + recreate of the same identity,
 * which resets `version` and `repairGeneration` to 0.
 */
export type WatchRef =
  | { identity: ProjectionWatchIdentity; nodeKey?: string }
  | { identity?: undefined; nodeKey: string };

/** Why a watch is (re-)armed. `write` is what finalize does. */
export type ArmWatchReason = 'write' | 'ingest' | 'manual' | 'repair';

/** What an arm did: made a new watch, opened a new generation, or only moved the due time. */
export type ArmWatchOutcome = 'created' | 'rearmed' | 'coalesced';

/** The outcome of one verification attempt, as the verifier found it. */
export type VerificationOutcome =
  | { kind: 'match'; digest: string }
  | { kind: 'mismatch'; observedDigest?: string }
  | { kind: 'offline' };
