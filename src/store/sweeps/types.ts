/**
 * Domain types of deletion sweeps: a listing pass over one partition of a
 * connector's provider data (a receipt), the local documents that pass did
 * not keep (candidates), and the last pass fully applied (the checkpoint).
 */

/** One partition of one owner's connector: what a listing pass covers. */
export interface SweepKey {
  ownerDID: string;
  connectorName: string;
  partition: string;
}

/** One listing pass of a partition; `provenance` names the pass (e.g. its run id). */
export interface SweepReceiptKey extends SweepKey {
  provenance: string;
}

/** One deletion candidate: a document a listing pass did not keep. */
export interface SweepCandidateKey extends SweepReceiptKey {
  documentID: string;
}

/**
 * Where a candidate stands. `pending`: not yet resolved, due at
 * `nextAttemptAt`. `applied`: deleted locally. `kept`: checked and kept.
 * `failed`: applying it failed `MAX_SWEEP_APPLY_ATTEMPTS` times; given up.
 * Every state but `pending` is terminal.
 */
export const SWEEP_CANDIDATE_STATES = ['pending', 'applied', 'kept', 'failed'] as const;
export type SweepCandidateState = (typeof SWEEP_CANDIDATE_STATES)[number];

/** The terminal candidate states (retention may delete these once their receipt is committed). */
export const TERMINAL_SWEEP_CANDIDATE_STATES = ['applied', 'kept', 'failed'] as const satisfies readonly SweepCandidateState[];

/** How a candidate was resolved by the worker that applied it. */
export const SWEEP_OUTCOMES = ['applied', 'kept'] as const;
export type SweepOutcome = (typeof SWEEP_OUTCOMES)[number];

/** A recorded listing pass. `scope`, `keep` and `predicate` are opaque to the store. */
export interface SweepReceipt extends SweepReceiptKey {
  /** Public identity for the API: random, unique, never reused. */
  nodeKey: string;
  sequence: number;
  modelID: string;
  scope: string;
  keep: string;
  sourceFetchHLC: string;
  predicate: string | null;
  kind: string;
  /** Whether the pass listed the whole partition. */
  complete: boolean;
  createdAt: number;
  /** When the receipt was committed; null while its candidates are being applied. */
  committedAt: number | null;
}

/** A deletion candidate and its apply progress. */
export interface SweepCandidate extends SweepCandidateKey {
  sourceID: string;
  modelID: string;
  state: SweepCandidateState;
  /** Apply results recorded so far (outcomes and failures). */
  attempts: number;
  /** Failed apply attempts so far. */
  applyFailures: number;
  lastError: string | null;
  nextAttemptAt: number;
  updatedAt: number;
}

/** The last receipt sequence committed for a partition. */
export interface SweepCheckpoint extends SweepKey {
  /** Provenance of the receipt that last advanced the checkpoint. */
  provenance: string;
  receiptSequence: number;
  updatedAt: number;
}
