/** Deletion candidates: due work, outcomes, apply failures with backoff, batched reads. */
import type { ExpressionBuilder } from 'kysely';
import type { Database } from '../../db/tables.js';
import { SWEEP_CANDIDATE_COLUMNS } from '../../db/tables.js';
import type { StoreContext } from '../context.js';
import { MAX_PREPARED_KEYS } from '../node-keys.js';
import { preparedForList } from '../prepared.js';
import { forUpdate, inTransaction } from '../context.js';
import { InvalidStateError, NotFoundError, StaleVersionError } from '../errors.js';
import { rowToSweepCandidate } from './row.js';
import { SWEEP_OUTCOMES, type SweepCandidate, type SweepCandidateKey, type SweepOutcome, type SweepReceiptKey } from './types.js';
import { requireOneOf, requirePositiveInteger } from '../validate.js';
import { requireCandidateKey } from './validate.js';

/** Failed apply attempts after which a candidate becomes `failed` and is no longer due. */
export const MAX_SWEEP_APPLY_ATTEMPTS = 5;

/** Delay after the first failed apply; each further failure doubles it. */
export const SWEEP_APPLY_BACKOFF_BASE_MS = 30_000;

/** Upper bound of the apply backoff. */
export const SWEEP_APPLY_BACKOFF_MAX_MS = 30 * 60_000;

/** `last_error` is cut to this many characters. */
export const SWEEP_LAST_ERROR_MAX_LENGTH = 2_000;

/** Delay before the next apply after `applyFailures` failures (1 → base, doubling, capped). */
export function sweepApplyBackoffMs(applyFailures: number): number {
  const exponent = Math.max(0, applyFailures - 1);
  return Math.min(SWEEP_APPLY_BACKOFF_MAX_MS, SWEEP_APPLY_BACKOFF_BASE_MS * 2 ** exponent);
}

function whereCandidateKey(key: SweepCandidateKey) {
  return (eb: ExpressionBuilder<Database, 'kubun_connector_sweep_candidate'>) =>
    eb.and({
      owner_did: key.ownerDID,
      connector_name: key.connectorName,
      partition: key.partition,
      provenance: key.provenance,
      document_id: key.documentID,
    });
}

/** Options of {@link listDueSweepCandidates}. */
export interface ListDueSweepCandidatesOptions {
  ownerDID: string;
  connectorName: string;
  /** At most this many candidates (a positive integer). */
  limit: number;
  /** Due at or before this instant. Default `store.now()`. */
  now?: number;
}

/**
 * Pending candidates of one owner's connector whose `next_attempt_at <= now`,
 * earliest due first (then by partition, provenance, document id).
 */
export async function listDueSweepCandidates(store: StoreContext, options: ListDueSweepCandidatesOptions): Promise<SweepCandidate[]> {
  requirePositiveInteger('limit', options.limit);
  const now = options.now ?? store.now();
  const rows = await store.db
    .selectFrom('kubun_connector_sweep_candidate')
    .selectAll()
    .where('owner_did', '=', options.ownerDID)
    .where('connector_name', '=', options.connectorName)
    .where('state', '=', 'pending')
    .where('next_attempt_at', '<=', now)
    .orderBy('next_attempt_at')
    .orderBy('partition')
    .orderBy('provenance')
    .orderBy('document_id')
    .limit(options.limit)
    .execute();
  return rows.map(rowToSweepCandidate);
}

/** Reads one candidate, or null. */
export async function getSweepCandidate(store: StoreContext, key: SweepCandidateKey): Promise<SweepCandidate | null> {
  const row = await store.db.selectFrom('kubun_connector_sweep_candidate').selectAll().where(whereCandidateKey(key)).executeTakeFirst();
  return row === undefined ? null : rowToSweepCandidate(row);
}

/** Every candidate of one receipt, by document id. */
export async function listSweepCandidatesOfReceipt(store: StoreContext, key: SweepReceiptKey): Promise<SweepCandidate[]> {
  const rows = await store.db
    .selectFrom('kubun_connector_sweep_candidate')
    .selectAll()
    .where((eb) =>
      eb.and({ owner_did: key.ownerDID, connector_name: key.connectorName, partition: key.partition, provenance: key.provenance }),
    )
    .orderBy('document_id')
    .execute();
  return rows.map(rowToSweepCandidate);
}

const CANDIDATES_BY_DOCUMENT_IDS = preparedForList(MAX_PREPARED_KEYS, (db, documentIDs: readonly string[]) =>
  db
    .selectFrom('kubun_connector_sweep_candidate')
    .select(SWEEP_CANDIDATE_COLUMNS)
    .where('document_id', 'in', documentIDs)
    .orderBy('owner_did')
    .orderBy('connector_name')
    .orderBy('partition')
    .orderBy('provenance')
    .orderBy('document_id'),
);

/**
 * The candidates naming each document (a document may be a candidate of
 * several receipts), in one statement. Every requested id is in the map,
 * with an empty list when nothing names it.
 */
export async function getSweepCandidatesByDocumentIDs(store: StoreContext, documentIDs: readonly string[]): Promise<Map<string, SweepCandidate[]>> {
  const result = new Map<string, SweepCandidate[]>();
  for (const id of documentIDs) result.set(id, []);
  if (result.size === 0) return result;
  const { rows } = await CANDIDATES_BY_DOCUMENT_IDS(store, [...result.keys()]);
  for (const row of rows) result.get(row.document_id)?.push(rowToSweepCandidate(row));
  return result;
}

/** Input of {@link recordSweepOutcome}. */
export interface SweepOutcomeInput {
  candidateKey: SweepCandidateKey;
  outcome: SweepOutcome;
}

/**
 * Resolves a pending candidate as `applied` (deleted locally) or `kept`.
 * Recording the outcome the candidate already has is a no-op that returns it
 * (a worker retrying after a lost reply); any other non-pending state is an
 * {@link InvalidStateError}, a missing candidate a {@link NotFoundError}.
 */
export async function recordSweepOutcome(store: StoreContext, input: SweepOutcomeInput): Promise<SweepCandidate> {
  requireCandidateKey('candidateKey', input.candidateKey);
  requireOneOf('outcome', input.outcome, SWEEP_OUTCOMES);
  return inTransaction(store, async (tx) => {
    const updated = await tx.db
      .updateTable('kubun_connector_sweep_candidate')
      .set((eb) => ({ state: input.outcome, attempts: eb('attempts', '+', 1), updated_at: tx.now() }))
      .where(whereCandidateKey(input.candidateKey))
      .where('state', '=', 'pending')
      .returningAll()
      .executeTakeFirst();
    if (updated !== undefined) return rowToSweepCandidate(updated);
    const current = await getSweepCandidate(tx, input.candidateKey);
    if (current === null) throw new NotFoundError('sweep candidate');
    if (current.state === input.outcome) return current;
    throw new InvalidStateError(`sweep candidate is ${current.state}, not pending`);
  });
}

/** Input of {@link recordSweepApplyFailure}. */
export interface SweepApplyFailureInput {
  candidateKey: SweepCandidateKey;
  /** Why applying failed; stored as `last_error` (cut to {@link SWEEP_LAST_ERROR_MAX_LENGTH}). */
  error: string;
}

/**
 * Records a failed apply of a pending candidate: `apply_failures + 1`,
 * `last_error`, and `next_attempt_at = now + backoff` (see
 * {@link sweepApplyBackoffMs}); the failure that reaches
 * {@link MAX_SWEEP_APPLY_ATTEMPTS} makes the candidate `failed`.
 * A non-pending candidate is an {@link InvalidStateError}, a missing one a
 * {@link NotFoundError}.
 */
export async function recordSweepApplyFailure(store: StoreContext, input: SweepApplyFailureInput): Promise<SweepCandidate> {
  requireCandidateKey('candidateKey', input.candidateKey);
  const lastError = String(input.error).slice(0, SWEEP_LAST_ERROR_MAX_LENGTH);
  return inTransaction(store, async (tx) => {
    const row = await forUpdate(
      tx,
      tx.db.selectFrom('kubun_connector_sweep_candidate').select(['state', 'apply_failures']).where(whereCandidateKey(input.candidateKey)),
    ).executeTakeFirst();
    if (row === undefined) throw new NotFoundError('sweep candidate');
    if (row.state !== 'pending') throw new InvalidStateError(`sweep candidate is ${row.state}, not pending`);

    const now = tx.now();
    const applyFailures = row.apply_failures + 1;
    const exhausted = applyFailures >= MAX_SWEEP_APPLY_ATTEMPTS;
    const updated = await tx.db
      .updateTable('kubun_connector_sweep_candidate')
      .set((eb) => ({
        state: exhausted ? 'failed' : 'pending',
        attempts: eb('attempts', '+', 1),
        apply_failures: applyFailures,
        last_error: lastError,
        next_attempt_at: exhausted ? now : now + sweepApplyBackoffMs(applyFailures),
        updated_at: now,
      }))
      .where(whereCandidateKey(input.candidateKey))
      .where('state', '=', 'pending')
      // The row is locked on Postgres and SQLite serializes writers; the guard keeps it a CAS anyway.
      .where('apply_failures', '=', row.apply_failures)
      .returningAll()
      .executeTakeFirst();
    if (updated === undefined) throw new StaleVersionError('sweep candidate');
    return rowToSweepCandidate(updated);
  });
}
