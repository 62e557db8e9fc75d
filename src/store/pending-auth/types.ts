/** Domain types of a pending OAuth authorization (SPEC §3.2). */

/**
 * An OAuth authorization between redirect and callback (PKCE). Holds the
 * code verifier, a secret: only the service principal's consume may see it.
 */
export interface PendingAuthRecord {
  /** The OAuth `state` parameter; the record's key. */
  state: string;
  /** PKCE code verifier. Secret: never in a query result, log line or error. */
  codeVerifier: string;
  provider: string;
  ownerDID: string;
  ownerWrappableDID: string | null;
  controllerWrappableDID: string | null;
  /** ms epoch. */
  createdAt: number;
  redirectURL: string;
  scopes: string[];
  /** Whether only the scopes the owner had not yet granted were requested. */
  isIncremental: boolean;
  /** ms epoch; the record is expired once `expiresAt < now`. */
  expiresAt: number;
}

/** A pending authorization as any reader other than the service principal may see it: no code verifier. */
export type PendingAuthSummary = Omit<PendingAuthRecord, 'codeVerifier'>;

/**
 * What `createPendingAuth` takes. `createdAt` defaults to the store clock,
 * the wrappable DIDs to `null`, `isIncremental` to `false`.
 */
export interface NewPendingAuth {
  state: string;
  codeVerifier: string;
  provider: string;
  ownerDID: string;
  ownerWrappableDID?: string | null;
  controllerWrappableDID?: string | null;
  createdAt?: number;
  redirectURL: string;
  scopes: string[];
  isIncremental?: boolean;
  expiresAt: number;
}
