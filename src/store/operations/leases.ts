/** Fenced leases of an operation: acquire (epoch + 1), renew and release (epoch unchanged). */
import type { StoreContext } from '../context.js';
import { InvalidStateError, NotFoundError, StaleVersionError } from '../errors.js';
import { preparedFencedUpdate, type FenceRule, type OperationEB, type OperationUpdate } from './fence.js';
import { runFencedStep, type FencedStepAnswer, type FencedStepCall, type FencedStepDefinition } from './fenced-step.js';
import { OPERATION_ANSWER, withToken, withoutToken, type AnswerCodec, type RowAnswerCodec } from './requests.js';
import { isLeaseLive, isLiveState, isSendWindowOpen, rowToOperation, selectOperationRow } from './row.js';
import { takeOverLease } from './takeover.js';
import { LIVE_OPERATION_STATES, OPERATION_STATES, type ConnectorOperation, type OperationFence, type OperationKey, type OperationLease } from './types.js';
import { requirePositiveMs } from '../validate.js';
import { requireFence, requireKey } from './validate.js';

/**
 * `acquired: true`: the caller now holds the lease (version advanced by one).
 * `acquired: false`: another holder's lease is live; nothing changed.
 */
export type AcquireOperationLeaseResult =
  | { acquired: true; operation: ConnectorOperation; lease: OperationLease }
  | { acquired: false; operation: ConnectorOperation };

/** Rounds of reload-and-re-evaluate after a lost takeover CAS. */
const MAX_ACQUIRE_ROUNDS = 5;

/**
 * Takes the absent or expired lease of a live operation by CAS on its
 * version (version + 1, new token; an attempted row with a send marker
 * becomes `reconcile_only`). A live lease held by anyone, the caller
 * included, gives `acquired: false`. A terminal operation is an
 * {@link InvalidStateError}, an unknown key a {@link NotFoundError}.
 */
export async function acquireOperationLease(
  store: StoreContext,
  input: { key: OperationKey; leaseMs: number },
): Promise<AcquireOperationLeaseResult> {
  requireKey(input.key);
  requirePositiveMs('leaseMs', input.leaseMs);
  const now = store.now();
  for (let round = 0; round < MAX_ACQUIRE_ROUNDS; round++) {
    const row = await selectOperationRow(store, input.key);
    if (row === undefined) throw new NotFoundError('operation');
    if (!isLiveState(row.state)) throw new InvalidStateError(`cannot acquire a lease: operation is ${row.state}`);
    if (isLeaseLive(row, now) || isSendWindowOpen(row, now)) return { acquired: false, operation: rowToOperation(row) };
    const taken = await takeOverLease(store, row, input.leaseMs, now);
    if (taken !== undefined) {
      const operation = rowToOperation(taken.row);
      return { acquired: true, operation, lease: { token: taken.token, expiresAt: operation.leaseExpiresAt as number, version: operation.version } };
    }
  }
  throw new StaleVersionError('operation');
}

const RENEW: FenceRule = { action: 'renew the lease', states: LIVE_OPERATION_STATES, requireLiveLease: true };
const RELEASE: FenceRule = { action: 'release the lease', states: OPERATION_STATES, requireLiveLease: false };
const RENEW_SET = (_eb: OperationEB, v: { expiresAt: number; now: number }): OperationUpdate => ({ lease_expires_at: v.expiresAt, updated_at: v.now });
const RELEASE_SET = (_eb: OperationEB, v: { now: number }): OperationUpdate => ({ lease_token: null, lease_expires_at: null, updated_at: v.now });
const RENEW_UPDATE = preparedFencedUpdate<{ expiresAt: number }>(RENEW, RENEW_SET);
const RELEASE_UPDATE = preparedFencedUpdate<object>(RELEASE, RELEASE_SET);

type Renewal = { operation: ConnectorOperation; lease: OperationLease };

/** The answer of a renewal: the operation and the lease. */
export const RENEW_ANSWER: RowAnswerCodec<{ operation: ConnectorOperation; lease: OperationLease }> = {
  encode: ({ operation, lease }) => ({ answer: { operation, lease: withoutToken(lease) }, leaseToken: lease.token }),
  decode: (answer, token) => {
    const { operation, lease } = answer as { operation: ConnectorOperation; lease: { expiresAt: number; version: number } };
    return { operation, lease: withToken(lease, token) };
  },
  fromRow: (row, token) => {
    const operation = rowToOperation(row);
    return { operation, lease: withToken({ expiresAt: operation.leaseExpiresAt as number, version: operation.version }, token) };
  },
};


/** The answer of an acquire that took the lease (a refused one wrote nothing and is judged afresh). */
export const ACQUIRE_ANSWER: AnswerCodec<AcquireOperationLeaseResult> = {
  encode: (result) => ({ answer: { operation: result.operation, lease: result.acquired ? withoutToken(result.lease) : null }, leaseToken: result.acquired ? result.lease.token : null }),
  decode: (answer, token) => {
    const { operation, lease } = answer as { operation: ConnectorOperation; lease: { expiresAt: number; version: number } };
    return { acquired: true, operation, lease: withToken(lease, token) };
  },
  wrote: (result) => result.acquired,
};


/** {@link renewOperationLease} as the API's step: by node key, one statement on Postgres (src/store/operations/fenced-step.ts). */
export const RENEW_STEP: FencedStepDefinition<{ leaseMs: number; expiresAt: number }, Renewal> = {
  step: 'renewOperationLease',
  rule: RENEW,
  set: RENEW_SET,
  valueTypes: { leaseMs: 'bigint', expiresAt: 'bigint' },
  grantsLease: true,
  codec: RENEW_ANSWER,
  inTransaction: (tx, fence, v) => renewOperationLease(tx, { ...fence, leaseMs: v.leaseMs }),
};

/** {@link releaseOperationLease} as the API's step (see {@link RENEW_STEP}). */
export const RELEASE_STEP: FencedStepDefinition<object, ConnectorOperation> = {
  step: 'releaseOperationLease',
  rule: RELEASE,
  set: RELEASE_SET,
  valueTypes: {},
  grantsLease: false,
  codec: OPERATION_ANSWER,
  inTransaction: (tx, fence) => releaseOperationLease(tx, fence),
};

/** Renews the lease of the operation `call` names (the API's `renewOperationLease`; checks as {@link renewOperationLease}). */
export function renewLeaseStep(store: StoreContext, call: FencedStepCall, input: { leaseMs: number }): Promise<FencedStepAnswer<Renewal>> {
  requirePositiveMs('leaseMs', input.leaseMs);
  return runFencedStep(store, RENEW_STEP, call, { leaseMs: input.leaseMs, expiresAt: store.now() + input.leaseMs });
}

/** Releases the lease of the operation `call` names (the API's `releaseOperationLease`). */
export function releaseLeaseStep(store: StoreContext, call: FencedStepCall): Promise<FencedStepAnswer<ConnectorOperation>> {
  return runFencedStep(store, RELEASE_STEP, call, {});
}

/**
 * Extends the holder's live lease to `now + leaseMs`; the version stays.
 * An expired lease cannot be renewed (acquire a new one): that and a lost
 * fence are a {@link StaleLeaseError}; a terminal operation an {@link InvalidStateError}.
 */
export async function renewOperationLease(
  store: StoreContext,
  input: OperationFence & { leaseMs: number },
): Promise<{ operation: ConnectorOperation; lease: OperationLease }> {
  requireFence(input);
  requirePositiveMs('leaseMs', input.leaseMs);
  const now = store.now();
  const { row } = await RENEW_UPDATE(store, input, now, { expiresAt: now + input.leaseMs });
  const operation = rowToOperation(row);
  return { operation, lease: { token: input.leaseToken, expiresAt: operation.leaseExpiresAt as number, version: operation.version } };
}

/**
 * Gives the lease up (token and expiry cleared; the version stays), so the
 * operation is immediately claimable and, if live and due, listed as due.
 * Works in any state and on an expired lease nobody took over yet; after a
 * takeover it is a {@link StaleLeaseError}.
 */
export async function releaseOperationLease(store: StoreContext, input: OperationFence): Promise<ConnectorOperation> {
  requireFence(input);
  const now = store.now();
  const { row } = await RELEASE_UPDATE(store, input, now, {});
  return rowToOperation(row);
}
