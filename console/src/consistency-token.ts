/**
 * Read-your-writes for the console (docs/operations.md, "Read standbys"):
 * the latest consistency token of this tab's mutation answers goes back in
 * the `Consistency-Token` header of every later request, so a query after a
 * retry or a cancel reads a standby only once it has replayed that write.
 * Subscriptions (the shared stream) read the primary and need none.
 *
 * Kept in sessionStorage rather than in memory: a reload right after a write
 * (to see it) still sends the token, where a fresh module would read a
 * lagging standby. Per tab, as the writes it vouches for are this tab's
 * (issue 24: "after their own writes"): another tab's re-read after a stream
 * event may still read a standby a moment behind, as after any writer's change.
 */
import { mapExchange, type Exchange } from 'urql';
import { CONSISTENCY_TOKEN_HEADER, laterConsistencyToken } from '../../client/consistency-token';

const STORAGE_KEY = 'connector-store-console.consistency-token';

/** Keeps the latest consistency token of the mutation answers that pass by. */
export const keepConsistencyTokenExchange: Exchange = mapExchange({
  onResult(result) {
    if (result.operation.kind !== 'mutation') return;
    const kept = sessionStorage.getItem(STORAGE_KEY);
    const later = laterConsistencyToken(kept, result.extensions);
    if (later !== null && later !== kept) sessionStorage.setItem(STORAGE_KEY, later);
  },
});

/** Adds the kept token, if any, to a request's headers. */
export function sendConsistencyToken(headers: Headers): void {
  const kept = sessionStorage.getItem(STORAGE_KEY);
  if (kept !== null) headers.set(CONSISTENCY_TOKEN_HEADER, kept);
}
