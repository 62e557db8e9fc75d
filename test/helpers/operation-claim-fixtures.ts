/**
 * Fixtures for the write-back operation tests: claim inputs, claims through
 * the store, direct column writes, and interleaving hooks. Raw reads of the
 * row are `getOperationRow` in row-fixtures.ts.
 */
import type { OperationRow } from '../../src/db/tables.js';
import type { StoreContext } from '../../src/store/context.js';
import { encodeJSONColumn } from '../../src/store/json.js';
import { claimOperation, type ClaimOperationInput, type ConnectorOperation, type OperationFence, type OperationKey, type OperationLease } from '../../src/store/operations/index.js';
import { DEFAULT_SEND_TIMEOUT_MS, SEND_WINDOW_MARGIN_MS } from '../../src/store/operations/row.js';
import { CALLER, CONNECTOR, OWNER } from './row-fixtures.js';

/** The lease of {@link claimInput} (and of the GraphQL claim input in operation-graphql.ts). */
export const LEASE_MS = 30_000;

/**
 * Past the send window of a send marked now with the default timeout
 * (issue 37): only then may anyone take a marked operation over. Longer than
 * {@link LEASE_MS}, so it also lapses the lease.
 */
export const PAST_SEND_WINDOW_MS = DEFAULT_SEND_TIMEOUT_MS + SEND_WINDOW_MARGIN_MS;

/** A claim input with sensible defaults. */
export function claimInput(overrides: Partial<ClaimOperationInput> = {}): ClaimOperationInput {
  return {
    callerDID: CALLER,
    operationID: 'op-1',
    ownerDID: OWNER,
    connectorName: CONNECTOR,
    model: 'contact',
    op: 'create',
    accountKey: 'account-1',
    target: 'contacts',
    sourceID: null,
    deterministicEventID: 'event-1',
    payloadHash: 'hash-1',
    reissueIntent: 'none',
    leaseMs: LEASE_MS,
    ...overrides,
  };
}

/** The idempotency key of a claim input. */
export function keyOf(input: { callerDID: string; operationID: string }): OperationKey {
  return { callerDID: input.callerDID, operationID: input.operationID };
}

/** Claims a fresh operation and returns it with its lease and fence. */
export async function claimFresh(
  store: StoreContext,
  overrides: Partial<ClaimOperationInput> = {},
): Promise<{ operation: ConnectorOperation; lease: OperationLease; fence: OperationFence }> {
  const input = claimInput(overrides);
  const result = await claimOperation(store, input);
  if (result.outcome !== 'CLAIMED' || result.lease === undefined) throw new Error(`expected CLAIMED, got ${result.outcome}`);
  return { operation: result.operation, lease: result.lease, fence: { key: keyOf(input), version: result.lease.version, leaseToken: result.lease.token } };
}

/** What finalize (another module) does to the row, for tests that need a committed operation. */
export async function commitDirectly(store: StoreContext, key: OperationKey, documentID: string, resultEntity: unknown): Promise<void> {
  await store.db
    .updateTable('kubun_connector_operation')
    .set({ state: 'committed', document_id: documentID, result_entity: encodeJSONColumn(resultEntity), updated_at: store.now() })
    .where('caller_did', '=', key.callerDID)
    .where('operation_id', '=', key.operationID)
    .execute();
}

/** Sets columns directly (test set-up only). */
export async function setColumns(store: StoreContext, key: OperationKey, values: Partial<Omit<OperationRow, 'caller_did' | 'operation_id'>>): Promise<void> {
  await store.db
    .updateTable('kubun_connector_operation')
    .set(values)
    .where('caller_did', '=', key.callerDID)
    .where('operation_id', '=', key.operationID)
    .execute();
}

/**
 * A store whose SELECTs call `hook(n)` (n = 1, 2, …) after their result
 * arrived and their connection was released, before the caller sees it:
 * a deterministic way to slip a competing write between a read and the
 * write that depends on it, on either dialect.
 */
export function withHookAfterSelects(store: StoreContext, hook: (selectNumber: number) => Promise<void>): StoreContext {
  return withStatementHook(store, { kind: 'SelectQueryNode', when: 'after' }, hook);
}

/** Like {@link withHookAfterSelects}, for the statements of another kind (`InsertQueryNode`, …), before or after each runs. */
export function withStatementHook(
  store: StoreContext,
  at: { kind: string; when: 'before' | 'after' },
  hook: (statementNumber: number) => Promise<void>,
): StoreContext {
  let count = 0;
  const wrap = <T extends object>(target: T): T =>
    new Proxy(target, {
      get(real, property) {
        const value = Reflect.get(real, property, real) as unknown;
        if (typeof value !== 'function') return value;
        // A builder's execute, or a compiled statement run by the handle (src/store/prepared.ts).
        if (property === 'execute' || property === 'executeTakeFirst' || property === 'executeTakeFirstOrThrow' || property === 'executeQuery') {
          return async (...args: unknown[]) => {
            const node =
              property === 'executeQuery'
                ? (args[0] as { query?: { kind: string } }).query
                : (real as { toOperationNode?: () => { kind: string } }).toOperationNode?.();
            const matches = node?.kind === at.kind;
            if (matches && at.when === 'before') await hook(++count);
            const result = await (value as (...a: unknown[]) => Promise<unknown>).apply(real, args);
            if (matches && at.when === 'after') await hook(++count);
            return result;
          };
        }
        return (...args: unknown[]) => {
          const out = (value as (...a: unknown[]) => unknown).apply(real, args);
          return out !== null && typeof out === 'object' && !(out instanceof Promise) ? wrap(out) : out;
        };
      },
    });
  return { ...store, db: wrap(store.db) };
}
