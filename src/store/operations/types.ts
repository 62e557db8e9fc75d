/** Domain types of write-back operations (SPEC §3.3). */

/** Every state an operation can be in. */
export const OPERATION_STATES = ['attempted', 'reconcile_only', 'committed', 'dead'] as const;

/**
 * `attempted`: live, may be sent. `reconcile_only`: a request may have reached
 * the provider with its outcome unknown; the next holder must ask the provider
 * before sending again. `committed`: landed, result recorded. `dead`: given up.
 */
export type ConnectorOperationState = (typeof OPERATION_STATES)[number];

/** States an operation can still leave: a lease can be taken on these. */
export const LIVE_OPERATION_STATES = ['attempted', 'reconcile_only'] as const satisfies readonly ConnectorOperationState[];

/** States an operation never leaves. */
export const TERMINAL_OPERATION_STATES = ['committed', 'dead'] as const satisfies readonly ConnectorOperationState[];

/** The provider write an operation performs: one write-back create or update. */
export type ConnectorOperationOp = 'create' | 'update';

export const OPERATION_OPS = ['create', 'update'] as const satisfies readonly ConnectorOperationOp[];

/** Why an operation was pushed out without spending an attempt; each lapses on its own. */
/** Why work was deferred without spending an attempt. */
export const OPERATION_DEFER_REASONS = ['offline', 'auth'] as const;
export type OperationDeferReason = (typeof OPERATION_DEFER_REASONS)[number];

/**
 * How an attempt ended short of success (success is recorded by finalize):
 * `retryable` (try again after backoff), `unknown` (a request may have reached
 * the provider: reconcile before resending), `fatal` (give up), `offline`
 * (device offline) and `auth` (owner must authorize): the last two defer
 * without spending the attempt.
 */
export type OperationOutcomeKind = 'retryable' | 'unknown' | 'fatal' | 'offline' | 'auth';

export const OPERATION_OUTCOME_KINDS = ['retryable', 'unknown', 'fatal', 'offline', 'auth'] as const satisfies readonly OperationOutcomeKind[];

/** The caller's idempotency key: the primary key of an operation. */
export interface OperationKey {
  callerDID: string;
  operationID: string;
}

/**
 * One write-back operation. The lease token and send marker are secrets of
 * the lease holder and are never part of this type: only whether a send
 * marker is set, and when the lease expires, are visible.
 */
export interface ConnectorOperation {
  callerDID: string;
  operationID: string;
  /** Opaque public identity, assigned at claim time, never reused. */
  nodeKey: string;
  ownerDID: string;
  connectorName: string;
  model: string;
  op: ConnectorOperationOp;
  accountKey: string;
  target: string;
  sourceID: string | null;
  deterministicEventID: string;
  payloadHash: string;
  reissueIntent: string;
  providerEtag: string | null;
  /** The local document the write produced or updated: named at claim, or set by finalize. */
  documentID: string | null;
  /** Set by finalize: the decoded JSON result entity, `null` when none. */
  resultEntity: unknown;
  state: ConnectorOperationState;
  /** Attempts started (offline / auth deferrals give theirs back). */
  attempts: number;
  /** When the operation is next due (ms epoch); `null` once dead (finalize leaves a committed one as it was). */
  nextAttemptAt: number | null;
  deferReason: OperationDeferReason | null;
  /** Whether the current attempt marked a provider request as sent. */
  sendMarkerSet: boolean;
  /** Outcome kind of the last recorded attempt; `null` while an attempt is open or before the first. */
  lastKind: OperationOutcomeKind | null;
  lastHTTPStatus: number | null;
  /** The message of the latest recorded outcome (bounded, redacted); `null` when none was given, and once committed. */
  lastError: string | null;
  /** Lease epoch: advances only when a lease is acquired or taken over. */
  version: number;
  incarnation: string | null;
  /** When the current lease lapses (ms epoch); `null` when no lease is held. */
  leaseExpiresAt: number | null;
  createdAt: number;
  updatedAt: number;
}

/**
 * A lease as its holder sees it. `token` is the holder's secret: pass it
 * (with `version`) to every fenced write, never log or list it.
 */
export interface OperationLease {
  token: string;
  expiresAt: number;
  /** The operation's version (lease epoch) this lease belongs to. */
  version: number;
}

/** Fencing credentials every holder write carries. */
export interface OperationFence {
  key: OperationKey;
  /** The version the lease was granted at. */
  version: number;
  leaseToken: string;
}
