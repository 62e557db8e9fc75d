/** Row → domain mapping of `kubun_connector_pending_auth`. */
import type { PendingAuthRow } from '../../db/tables.js';
import { decodeJSONColumn } from '../json.js';
import type { PendingAuthRecord, PendingAuthSummary } from './types.js';

/** Maps a row to the full record (code verifier included: service principal only). */
export function rowToPendingAuth(row: PendingAuthRow): PendingAuthRecord {
  return {
    state: row.state,
    codeVerifier: row.code_verifier,
    provider: row.provider,
    ownerDID: row.owner_did,
    ownerWrappableDID: row.owner_wrappable_did,
    controllerWrappableDID: row.controller_wrappable_did,
    createdAt: Number(row.created_at),
    redirectURL: row.redirect_url,
    scopes: decodeJSONColumn<string[]>(row.scopes) ?? [],
    isIncremental: Number(row.is_incremental) === 1,
    expiresAt: Number(row.expires_at),
  };
}

/** The record without its code verifier, for any reader other than the service principal. */
export function toPendingAuthSummary(record: PendingAuthRecord): PendingAuthSummary {
  const { codeVerifier: _secret, ...summary } = record;
  return summary;
}
