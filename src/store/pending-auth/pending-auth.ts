/** Create, consume and sweep pending OAuth authorizations (SPEC §3.2). */
import type { StoreContext } from '../context.js';
import { InvalidInputError } from '../errors.js';
import { rowToPendingAuth, toPendingAuthSummary } from './row.js';
import type { NewPendingAuth, PendingAuthRecord, PendingAuthSummary } from './types.js';
import { requireBoolean, requireMsEpoch, requireNonEmptyString, requireOptionalString, requirePositiveInteger, requireStringArray } from '../validate.js';

/**
 * Stores a new pending authorization and returns its summary (no code
 * verifier). A `state` already in use is an {@link InvalidInputError}; the
 * existing record is untouched. Driver failures are rethrown without the
 * driver's detail, which can quote the whole row, verifier included.
 */
export async function createPendingAuth(store: StoreContext, input: NewPendingAuth): Promise<PendingAuthSummary> {
  validate(input);
  const record: PendingAuthRecord = {
    state: input.state,
    codeVerifier: input.codeVerifier,
    provider: input.provider,
    ownerDID: input.ownerDID,
    ownerWrappableDID: input.ownerWrappableDID ?? null,
    controllerWrappableDID: input.controllerWrappableDID ?? null,
    createdAt: input.createdAt ?? store.now(),
    redirectURL: input.redirectURL,
    scopes: [...input.scopes],
    isIncremental: input.isIncremental ?? false,
    expiresAt: input.expiresAt,
  };
  let inserted: boolean;
  try {
    const result = await store.db
      .insertInto('kubun_connector_pending_auth')
      .values({
        state: record.state,
        code_verifier: record.codeVerifier,
        provider: record.provider,
        owner_did: record.ownerDID,
        owner_wrappable_did: record.ownerWrappableDID,
        controller_wrappable_did: record.controllerWrappableDID,
        created_at: record.createdAt,
        redirect_url: record.redirectURL,
        scopes: JSON.stringify(record.scopes),
        is_incremental: record.isIncremental ? 1 : 0,
        expires_at: record.expiresAt,
      })
      .onConflict((oc) => oc.column('state').doNothing())
      .returning('state')
      .executeTakeFirst();
    inserted = result !== undefined;
  } catch (error) {
    throw scrubbed(error);
  }
  if (!inserted) throw new InvalidInputError('state', 'a pending authorization with this state already exists');
  return toPendingAuthSummary(record);
}

/**
 * Consumes a pending authorization: removes and returns it in one
 * `DELETE … RETURNING`, so of any number of concurrent consumes of one state
 * exactly one gets the record. An expired record (`expiresAt < now`) is
 * removed all the same but not returned: its state is spent either way, and
 * deleting it makes the first consume attempt final even between replicas
 * whose clocks disagree. A record expiring exactly now is still returned.
 * Returns the code verifier: for the service principal only.
 */
export async function consumePendingAuth(store: StoreContext, state: string): Promise<PendingAuthRecord | null> {
  const now = store.now();
  const row = await store.db.deleteFrom('kubun_connector_pending_auth').where('state', '=', state).returningAll().executeTakeFirst();
  if (row === undefined) return null;
  const record = rowToPendingAuth(row);
  return record.expiresAt < now ? null : record;
}

/** Reads a pending authorization without its code verifier (and without consuming it), or `null`. */
export async function getPendingAuthSummary(store: StoreContext, state: string): Promise<PendingAuthSummary | null> {
  const row = await store.db.selectFrom('kubun_connector_pending_auth').selectAll().where('state', '=', state).executeTakeFirst();
  return row === undefined ? null : toPendingAuthSummary(rowToPendingAuth(row));
}

/** Options of {@link deleteExpiredPendingAuth}. */
export interface DeleteExpiredPendingAuthOptions {
  /** Rows deleted per statement, so no statement holds many locks for long. Default 500. */
  batchSize?: number;
}

/**
 * Deletes pending authorizations with `expiresAt < cutoff` (strict: one that
 * expires exactly at the cutoff is still consumable and stays), in batches of
 * `batchSize`, each its own statement. Returns how many were deleted.
 */
export async function deleteExpiredPendingAuth(
  store: StoreContext,
  cutoff: number,
  options: DeleteExpiredPendingAuthOptions = {},
): Promise<number> {
  const batchSize = options.batchSize ?? 500;
  requirePositiveInteger('batchSize', batchSize);
  let total = 0;
  for (;;) {
    const result = await store.db
      .deleteFrom('kubun_connector_pending_auth')
      .where('state', 'in', (eb) => {
        const batch = eb
          .selectFrom('kubun_connector_pending_auth')
          .select('state')
          .where('expires_at', '<', cutoff)
          .orderBy('expires_at')
          .limit(batchSize);
        // Concurrent sweepers on Postgres take disjoint batches instead of waiting on each other.
        return store.dialect === 'postgres' ? batch.forUpdate().skipLocked() : batch;
      })
      .executeTakeFirst();
    const deleted = Number(result.numDeletedRows);
    total += deleted;
    if (deleted < batchSize) return total;
  }
}

function validate(input: NewPendingAuth): void {
  for (const field of ['state', 'codeVerifier', 'provider', 'ownerDID', 'redirectURL'] as const) requireNonEmptyString(field, input[field]);
  for (const field of ['ownerWrappableDID', 'controllerWrappableDID'] as const) requireOptionalString(field, input[field]);
  requireStringArray('scopes', input.scopes);
  for (const field of ['expiresAt', 'createdAt'] as const) if (input[field] !== undefined) requireMsEpoch(field, input[field]);
  if (input.isIncremental !== undefined) requireBoolean('isIncremental', input.isIncremental);
}

/**
 * A driver error without its detail: Postgres quotes the failing row (code
 * verifier included) in `detail`, and the original error would carry it as
 * `cause`. Only the SQLSTATE / SQLite code survives.
 */
function scrubbed(error: unknown): Error {
  const code = typeof error === 'object' && error !== null && 'code' in error ? String((error as { code: unknown }).code) : undefined;
  const scrubbedError = new Error(`could not store the pending authorization${code === undefined ? '' : ` (${code})`}`);
  scrubbedError.name = 'PendingAuthWriteError';
  return scrubbedError;
}
