/**
 * OAuth hand-offs over the API (SPEC §3.2): an owner (or a service for them)
 * records a pending authorization; only a service principal consumes it, and
 * only that consume returns the PKCE code verifier.
 */
import { createPendingAuth, consumePendingAuth, type PendingAuthRecord, type PendingAuthSummary } from '../src/store/pending-auth/index.js';
import { InvalidInputError } from '../src/store/errors.js';
import type { GraphQLContext } from './context.js';
import { actingOwner, requireService } from './viewer.js';

export type { PendingAuthRecord, PendingAuthSummary } from '../src/store/pending-auth/index.js';

/** Longest a pending authorization may live: an OAuth redirect round trip, not a standing credential. */
export const MAX_PENDING_AUTH_LIFETIME_MS = 60 * 60 * 1000;

/** Input of `createPendingAuthorization`. */
export interface CreatePendingAuthArgs {
  state: string;
  codeVerifier: string;
  provider: string;
  ownerDID?: string | null;
  ownerWrappableDID?: string | null;
  controllerWrappableDID?: string | null;
  redirectURL: string;
  scopes: string[];
  isIncremental?: boolean | null;
  expiresAt: Date;
}

/** `createPendingAuthorization`: for the viewer (a service may name the owner); expiry within the hour. */
export function createPendingAuthorization(input: CreatePendingAuthArgs, ctx: GraphQLContext): Promise<PendingAuthSummary> {
  const ownerDID = actingOwner(ctx.viewer, input.ownerDID);
  const now = ctx.store.now();
  const expiresAt = input.expiresAt.getTime();
  if (expiresAt <= now) throw new InvalidInputError('expiresAt', 'must be in the future');
  if (expiresAt > now + MAX_PENDING_AUTH_LIFETIME_MS) throw new InvalidInputError('expiresAt', 'must be at most one hour from now');
  return createPendingAuth(ctx.store, {
    state: input.state,
    codeVerifier: input.codeVerifier,
    provider: input.provider,
    ownerDID,
    ownerWrappableDID: input.ownerWrappableDID ?? null,
    controllerWrappableDID: input.controllerWrappableDID ?? null,
    redirectURL: input.redirectURL,
    scopes: input.scopes,
    isIncremental: input.isIncremental ?? false,
    expiresAt,
  });
}

/** `consumePendingAuthorization` (service only): single use; an unknown, spent or expired state gives null. */
export async function consumePendingAuthorization(state: string, ctx: GraphQLContext): Promise<PendingAuthRecord | null> {
  requireService(ctx.viewer, 'consume a pending authorization');
  return consumePendingAuth(ctx.store, state);
}
