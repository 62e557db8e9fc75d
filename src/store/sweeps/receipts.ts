/** Recording and reading sweep receipts (one listing pass and its deletion candidates). */
import { createHash } from 'node:crypto';
import type { StoreContext } from '../context.js';
import { changedAny, inTransaction } from '../context.js';
import { IdempotencyConflictError, InvalidInputError } from '../errors.js';
import { getSweepReceiptsByKeys } from './read.js';
import type { SweepReceipt, SweepReceiptKey } from './types.js';
import { requireNonEmptyString, requireNonNegativeInteger } from '../validate.js';
import { requireReceiptKey } from './validate.js';

/** A document the listing pass did not keep. */
export interface SweepCandidateInput {
  documentID: string;
  sourceID: string;
  modelID: string;
}

/** Input of {@link recordSweepReceipt}. */
export interface RecordSweepReceiptInput {
  key: SweepReceiptKey;
  /** The pass's position in the partition's order of passes; the checkpoint never moves back past it. */
  sequence: number;
  modelID: string;
  scope: string;
  keep: string;
  sourceFetchHLC: string;
  /** Default null. */
  predicate?: string | null;
  kind: string;
  complete: boolean;
  /** The partition's local documents the pass did not keep; each becomes a `pending` candidate due now. */
  candidates: readonly SweepCandidateInput[];
}

/** What {@link recordSweepReceipt} did. */
export interface RecordSweepReceiptResult {
  /** False when the receipt already existed (a replay): nothing was written. */
  created: boolean;
  receipt: SweepReceipt;
}

// 13 bound values per candidate row: 500 rows stay far below both dialects' parameter limits.
const CANDIDATE_INSERT_CHUNK = 500;

/**
 * Records one listing pass and its deletion candidates in one transaction.
 * Idempotent on the receipt key: re-recording an identical receipt (the same
 * fields and the same candidates, in any order) writes nothing and returns
 * the stored one, whose candidates keep their progress. The same key with
 * other fields or other candidates is an {@link IdempotencyConflictError}
 * naming every differing field (`candidates` for the list, compared by a
 * digest kept since migration 0012), and nothing is written.
 */
export async function recordSweepReceipt(store: StoreContext, input: RecordSweepReceiptInput): Promise<RecordSweepReceiptResult> {
  requireReceiptKey('key', input.key);
  requireNonNegativeInteger('sequence', input.sequence);
  const seen = new Set<string>();
  for (const [index, candidate] of input.candidates.entries()) {
    requireNonEmptyString(`candidates[${index}].documentID`, candidate.documentID);
    if (seen.has(candidate.documentID)) {
      throw new InvalidInputError(`candidates[${index}].documentID`, 'names a document already listed in this receipt');
    }
    seen.add(candidate.documentID);
  }

  const { key } = input;
  const predicate = input.predicate ?? null;
  return inTransaction(store, async (tx) => {
    const now = tx.now();
    const inserted = await tx.db
      .insertInto('kubun_connector_sweep_receipt')
      .values({
        owner_did: key.ownerDID,
        connector_name: key.connectorName,
        partition: key.partition,
        provenance: key.provenance,
        node_key: tx.getRandomID(),
        sequence: input.sequence,
        model_id: input.modelID,
        scope: input.scope,
        keep: input.keep,
        source_fetch_hlc: input.sourceFetchHLC,
        predicate,
        kind: input.kind,
        complete: input.complete ? 1 : 0,
        created_at: now,
        committed_at: null,
        candidates_digest: candidatesDigest(input.candidates),
      })
      // A concurrent record of the same key waits for the first to commit and then does nothing.
      .onConflict((oc) => oc.columns(['owner_did', 'connector_name', 'partition', 'provenance']).doNothing())
      .executeTakeFirst();

    if (!changedAny(inserted)) {
      const existing = await getSweepReceipt(tx, key);
      if (existing === null) throw new Error('sweep receipt vanished between insert and read');
      const differing = differingFields(existing, { ...input, predicate });
      const stored = await tx.db
        .selectFrom('kubun_connector_sweep_receipt')
        .select('candidates_digest')
        .where('owner_did', '=', key.ownerDID)
        .where('connector_name', '=', key.connectorName)
        .where('partition', '=', key.partition)
        .where('provenance', '=', key.provenance)
        .executeTakeFirst();
      // Receipts recorded before migration 0012 kept no digest: their lists cannot be compared.
      if (stored?.candidates_digest != null && stored.candidates_digest !== candidatesDigest(input.candidates)) differing.push('candidates');
      if (differing.length > 0) throw new IdempotencyConflictError(differing);
      return { created: false, receipt: existing };
    }

    for (let start = 0; start < input.candidates.length; start += CANDIDATE_INSERT_CHUNK) {
      const chunk = input.candidates.slice(start, start + CANDIDATE_INSERT_CHUNK);
      await tx.db
        .insertInto('kubun_connector_sweep_candidate')
        .values(
          chunk.map((candidate) => ({
            owner_did: key.ownerDID,
            connector_name: key.connectorName,
            partition: key.partition,
            provenance: key.provenance,
            document_id: candidate.documentID,
            source_id: candidate.sourceID,
            model_id: candidate.modelID,
            state: 'pending',
            attempts: 0,
            apply_failures: 0,
            last_error: null,
            next_attempt_at: now,
            updated_at: now,
          })),
        )
        .execute();
    }
    const receipt = await getSweepReceipt(tx, key);
    if (receipt === null) throw new Error('sweep receipt missing right after insert');
    return { created: true, receipt };
  });
}

/** Reads one receipt, or null. */
export async function getSweepReceipt(store: StoreContext, key: SweepReceiptKey): Promise<SweepReceipt | null> {
  return (await getSweepReceiptsByKeys(store, [key]))[0] ?? null;
}

/** A digest of a candidate list that does not depend on its order (document ids are unique in a receipt). */
function candidatesDigest(candidates: readonly SweepCandidateInput[]): string {
  const sorted = [...candidates].sort((a, b) => (a.documentID < b.documentID ? -1 : a.documentID > b.documentID ? 1 : 0));
  return createHash('sha256')
    .update(JSON.stringify(sorted.map((c) => [c.documentID, c.sourceID, c.modelID])))
    .digest('base64url');
}

/** Every receipt field of `input` that differs from the stored receipt. */
function differingFields(stored: SweepReceipt, input: RecordSweepReceiptInput & { predicate: string | null }): string[] {
  const pairs: [string, unknown, unknown][] = [
    ['sequence', stored.sequence, input.sequence],
    ['modelID', stored.modelID, input.modelID],
    ['scope', stored.scope, input.scope],
    ['keep', stored.keep, input.keep],
    ['sourceFetchHLC', stored.sourceFetchHLC, input.sourceFetchHLC],
    ['predicate', stored.predicate, input.predicate],
    ['kind', stored.kind, input.kind],
    ['complete', stored.complete, input.complete],
  ];
  return pairs.filter(([, a, b]) => a !== b).map(([field]) => field);
}
