/**
 * Pending OAuth authorizations (SPEC §3.2): `createPendingAuthorization` for
 * an owner starting a flow, `consumePendingAuthorization` for the service
 * principal completing it. The code verifier is readable only in the consume
 * payload, which only a service can obtain.
 */
import { InputValidationError } from '@pothos/plugin-validation';
import { z } from 'zod';
import { ForbiddenError, InvalidInputError } from '../resolvers/errors.js';
import * as resolve from '../resolvers/pending-auth.js';
import type { PendingAuthRecord, PendingAuthSummary } from '../resolvers/pending-auth.js';
import { builder } from './builder.js';
import { resultUnion } from './errors.js';
import { nameInput, redirectURLInput, textInput } from './inputs.js';

const PendingAuthorization = builder.objectRef<PendingAuthSummary>('PendingAuthorization').implement({
  description: 'An OAuth authorization between redirect and callback. The code verifier is not here.',
  fields: (t) => ({
    state: t.exposeString('state', { description: 'The OAuth `state` parameter: the record’s key, consumable once.' }),
    provider: t.exposeString('provider', { description: 'The OAuth provider, as recorded (e.g. `google`).' }),
    ownerDID: t.expose('ownerDID', { type: 'DID', description: 'Who is authorizing: the creator, or the owner a service named.' }),
    ownerWrappableDID: t.expose('ownerWrappableDID', {
      type: 'DID',
      nullable: true,
      description: 'The owner’s wrappable DID recorded with the authorization, if any (stored as given).',
    }),
    controllerWrappableDID: t.expose('controllerWrappableDID', {
      type: 'DID',
      nullable: true,
      description: 'The controller’s wrappable DID recorded with the authorization, if any (stored as given).',
    }),
    redirectURL: t.exposeString('redirectURL', { description: 'Where the provider sends the owner back.' }),
    scopes: t.exposeStringList('scopes', { description: 'The OAuth scopes requested.' }),
    isIncremental: t.exposeBoolean('isIncremental', { description: 'Whether only the scopes not yet granted were requested.' }),
    createdAt: t.expose('createdAt', { type: 'DateTime', description: 'When it was recorded (server clock).' }),
    expiresAt: t.expose('expiresAt', { type: 'DateTime', description: 'Consumable up to and including this instant; expired after it.' }),
  }),
});

const ConsumedPendingAuthorization = builder.objectRef<PendingAuthRecord>('ConsumedPendingAuthorization').implement({
  description: 'A pending authorization as its single consume returns it, code verifier included (service principals only).',
  fields: (t) => ({
    authorization: t.field({ type: PendingAuthorization, description: 'The consumed authorization.', resolve: (record) => record }),
    codeVerifier: t.exposeString('codeVerifier', { description: 'The PKCE code verifier, for the token exchange. Never readable anywhere else.' }),
  }),
});

const CreatePendingAuthorizationInput = builder.inputType('CreatePendingAuthorizationInput', {
  description: 'Record an authorization the owner is about to be redirected for.',
  fields: (t) => ({
    state: t.string({ validate: z.string().min(16, 'must be at least 16 characters').max(512), description: 'The OAuth state parameter: unguessable, single use.' }),
    codeVerifier: t.string({
      description: 'The PKCE code verifier (RFC 7636). A secret: readable only in the service principal’s consume.',
      validate: z.string().regex(/^[A-Za-z0-9._~-]{43,128}$/, 'must be an RFC 7636 code verifier (43–128 unreserved characters)'),
    }),
    provider: t.string({ validate: nameInput, description: 'The OAuth provider (e.g. `google`).' }),
    ownerDID: t.field({ type: 'DID', required: false, description: 'Default: the viewer; only a service may name another owner.' }),
    ownerWrappableDID: t.field({ type: 'DID', required: false, description: 'The owner’s wrappable DID to keep with the authorization (stored as given).' }),
    controllerWrappableDID: t.field({
      type: 'DID',
      required: false,
      description: 'The controller’s wrappable DID to keep with the authorization (stored as given).',
    }),
    redirectURL: t.string({
      validate: redirectURLInput,
      description: 'Where the provider sends the owner back: an https URL, http to a loopback host, or a reverse-domain app scheme (`com.example.app:/callback`).',
    }),
    scopes: t.stringList({ validate: z.array(textInput).max(100), description: 'The OAuth scopes requested (at most 100).' }),
    isIncremental: t.boolean({ required: false, description: 'Whether only the scopes not yet granted are requested. Default: false.' }),
    expiresAt: t.field({ type: 'DateTime', description: 'Within the next hour.' }),
  }),
});

const ConsumePendingAuthorizationInput = builder.inputType('ConsumePendingAuthorizationInput', {
  description: 'Consume a pending authorization by its OAuth state, at the callback.',
  fields: (t) => ({ state: t.string({ validate: textInput, description: 'The OAuth `state` the provider’s callback carried.' }) }),
});

const ConsumePendingAuthorizationPayload = builder.objectRef<{ consumed: PendingAuthRecord | null }>('ConsumePendingAuthorizationPayload').implement({
  description: 'What the consume found.',
  fields: (t) => ({
    consumed: t.field({
      type: ConsumedPendingAuthorization,
      nullable: true,
      description: 'Null when the state is unknown, already consumed or expired (each state is consumable once).',
      resolve: (r) => r.consumed,
    }),
  }),
});

builder.mutationFields((t) => ({
  createPendingAuthorization: t.field({
    authScopes: { authenticated: true },
    description: 'Record a pending OAuth authorization (PKCE) for the viewer, or for an owner when called by a service.',
    type: PendingAuthorization,
    args: { input: t.arg({ type: CreatePendingAuthorizationInput, required: true, description: 'The authorization to record.' }) },
    errors: {
      types: [InputValidationError, InvalidInputError, ForbiddenError],
      directResult: true,
      union: resultUnion('CreatePendingAuthorizationResult'),
    },
    resolve: (_root, { input }, ctx) => resolve.createPendingAuthorization(input, ctx),
  }),
  consumePendingAuthorization: t.field({
    authScopes: { authenticated: true },
    description: 'Consume a pending authorization once, with its code verifier (service principals only; anyone else gets ForbiddenError).',
    type: ConsumePendingAuthorizationPayload,
    args: { input: t.arg({ type: ConsumePendingAuthorizationInput, required: true, description: 'The OAuth `state` to consume.' }) },
    errors: { types: [InputValidationError, ForbiddenError], directResult: true, union: resultUnion('ConsumePendingAuthorizationResult') },
    resolve: async (_root, { input }, ctx) => ({ consumed: await resolve.consumePendingAuthorization(input.state, ctx) }),
  }),
}));
