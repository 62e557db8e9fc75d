/**
 * Shared pieces of watch statements: key predicates, the one-watch-per-document
 * rule, the values of a freshly inserted watch and of a new verification
 * generation. Internal to the store.
 */
import { CompiledQuery, type ExpressionBuilder, type Insertable, type QueryCreator } from 'kysely';
import { nameStatement } from '../../db/named-statements.js';
import type { Database, ProjectionWatchTable } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { prepared } from '../prepared.js';
import type { ProjectionWatchIdentity, WatchRef } from './types.js';

type WatchExpressions = ExpressionBuilder<Database, 'kubun_connector_projection_watch'>;

/** `WHERE` the row is the watch of `identity` (its primary key). */
export function matchesIdentity(identity: ProjectionWatchIdentity) {
  return (eb: WatchExpressions) =>
    eb.and([
      eb('owner_did', '=', identity.ownerDID),
      eb('connector_name', '=', identity.connectorName),
      eb('model', '=', identity.model),
      eb('account_key', '=', identity.accountKey),
      eb('source_id', '=', identity.sourceID),
    ]);
}

/** `WHERE` the row is the watch `ref` names (identity, node key, or both). */
export function matchesRef(ref: WatchRef) {
  return (eb: WatchExpressions) => {
    const parts = [];
    if (ref.identity !== undefined) parts.push(matchesIdentity(ref.identity)(eb));
    if (ref.nodeKey !== undefined) parts.push(eb('node_key', '=', ref.nodeKey));
    return eb.and(parts);
  };
}

/**
 * Advisory-lock namespace of a document's watch slot (first key of
 * `pg_advisory_xact_lock(int, int)`); an arbitrary constant ("PWAT").
 */
export const WATCH_SLOT_LOCK_CLASS = 0x50574154;

/** A watch's identity columns: its primary key, which `INSERT … ON CONFLICT` arbitrates. */
export const WATCH_IDENTITY_COLUMNS = ['owner_did', 'connector_name', 'model', 'account_key', 'source_id'] as const;

/** The text a document's watch slot lock is keyed by (hashed by Postgres). */
export function watchSlotKey(slot: { ownerDID: string; model: string; documentID: string }): string {
  return JSON.stringify([slot.ownerDID, slot.model, slot.documentID]);
}

/**
 * Serializes, until the transaction ends, every writer that may create the
 * watch of one (owner, model, document) on Postgres. `INSERT … ON CONFLICT`
 * arbitrates only the primary key; two transactions creating a watch of the
 * same document at once would otherwise fail on the second unique index
 * (`uq_connector_watch_ingress`) instead of one updating the other's row, and
 * two identities superseding each other could deadlock. SQLite's single
 * connection already serializes the transaction. A hash collision only makes
 * two unrelated documents wait for each other.
 */
export async function lockDocumentWatchSlot(
  store: StoreContext,
  slot: { ownerDID: string; model: string; documentID: string },
): Promise<void> {
  if (store.dialect !== 'postgres') return;
  const key = watchSlotKey(slot);
  // Written out, not built: Postgres only, and on the write-back path of every finalize.
  await store.db.executeQuery(CompiledQuery.raw(LOCK_WATCH_SLOT, [WATCH_SLOT_LOCK_CLASS, key]));
}
const LOCK_WATCH_SLOT = 'select pg_advisory_xact_lock($1, hashtext($2))';
nameStatement(LOCK_WATCH_SLOT);

/**
 * One watch per (owner, model, document): deletes the document's watch under
 * any other identity (connector, account or source differ), which the watch
 * about to be written supersedes. Runs inside the caller's transaction.
 */
export async function deleteSupersededWatches(
  store: StoreContext,
  identity: ProjectionWatchIdentity,
  documentID: string,
): Promise<void> {
  await DELETE_SUPERSEDED(store, { ...identity, documentID });
}

/** The DELETE of the document's watches under another identity (also a CTE of a finalize's single statement). */
export function supersededWatches(qc: QueryCreator<Database>, v: ProjectionWatchIdentity & { documentID: string }) {
  return qc
    .deleteFrom('kubun_connector_projection_watch')
    .where('owner_did', '=', v.ownerDID)
    .where('model', '=', v.model)
    .where('document_id', '=', v.documentID)
    .where((eb) => eb.or([eb('connector_name', '!=', v.connectorName), eb('account_key', '!=', v.accountKey), eb('source_id', '!=', v.sourceID)]));
}

const DELETE_SUPERSEDED = prepared((db, v: ProjectionWatchIdentity & { documentID: string }) => supersededWatches(db, v));

/** Column values of a brand-new watch: generation 0, version 0, pending and due at `dueAt`. */
export function newWatchValues(
  input: {
    identity: ProjectionWatchIdentity;
    /** A fresh node key (`store.getRandomID()`). */
    nodeKey: string;
    documentID: string;
    observedWinnerDigest: string | null;
    dueAt: number;
    now: number;
  },
): Insertable<ProjectionWatchTable> {
  const { identity } = input;
  return {
    owner_did: identity.ownerDID,
    connector_name: identity.connectorName,
    model: identity.model,
    account_key: identity.accountKey,
    source_id: identity.sourceID,
    node_key: input.nodeKey,
    document_id: input.documentID,
    verified_state_digest: null,
    observed_winner_digest: input.observedWinnerDigest,
    verification_status: 'pending_verification',
    verification_attempts: 0,
    repair_generation: 0,
    next_attempt_at: input.dueAt,
    claimed_until: null,
    defer_reason: null,
    version: 0,
    created_at: input.now,
    updated_at: input.now,
  };
}

/** What a new verification generation writes besides the schedule. */
export interface NewGenerationInput {
  /** When its first attempt is due. */
  dueAt: number;
  now: number;
  /** The winner digest the caller observed; undefined keeps the stored one. */
  observedWinnerDigest?: string | null;
  /** Whether the verified digest is cleared: the local state it described has just changed (a write). */
  clearVerifiedDigest: boolean;
}

/**
 * The one rule of "open a new generation" (SPEC §3.5): repair_generation + 1,
 * attempts 0, `pending_verification`, due at `dueAt`, claim and defer reason
 * cleared, version + 1. Column references are table-qualified so the same
 * values serve a plain UPDATE and an `ON CONFLICT DO UPDATE`.
 */
export function newGenerationValues(eb: WatchExpressions, input: NewGenerationInput) {
  return {
    repair_generation: eb('kubun_connector_projection_watch.repair_generation', '+', 1),
    verification_attempts: 0,
    verification_status: 'pending_verification',
    next_attempt_at: input.dueAt,
    claimed_until: null,
    defer_reason: null,
    version: eb('kubun_connector_projection_watch.version', '+', 1),
    updated_at: input.now,
    ...(input.observedWinnerDigest !== undefined && { observed_winner_digest: input.observedWinnerDigest }),
    ...(input.clearVerifiedDigest && { verified_state_digest: null }),
  } as const;
}

/** The identity columns of a watch, as a domain identity. */
export function identityOf(watch: ProjectionWatchIdentity): ProjectionWatchIdentity {
  return {
    ownerDID: watch.ownerDID,
    connectorName: watch.connectorName,
    model: watch.model,
    accountKey: watch.accountKey,
    sourceID: watch.sourceID,
  };
}
