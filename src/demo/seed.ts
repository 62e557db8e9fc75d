/**
 * Writes the demo set (`data.ts`) through the store functions (never raw
 * SQL), so a dashboard author sees something at once.
 *
 * Idempotent: every row has a fixed key (idempotency keys, watch identities,
 * sync-state and receipt keys), and an item whose key already exists is
 * left alone, so running the demo twice writes nothing new. Two things are
 * refreshed on a re-run because they only make sense while live: the lease
 * of the in-flight operation and the claim of the claimed watch. The week
 * before the items (`week.ts`) goes into the activity counters and backlog
 * samples as an import, each hour once.
 */
import { createHash, createPrivateKey, createPublicKey } from 'node:crypto';
import { resolve } from 'node:path';
import { encodeDIDKey, LOCAL_KEY_PATH, loadOrCreateLocalKey } from '../auth/index.js';
import type { OpenDatabase } from '../db/connect.js';
import { createStoreContext, inTransaction, type StoreContext, type StoreDeps } from '../store/context.js';
import { getEntityTrim, setEntityTrim } from '../store/entity-trim/index.js';
import { finalizeOperationAndArmWatch } from '../store/finalize/index.js';
import * as operations from '../store/operations/index.js';
import type { OperationFence, OperationKey } from '../store/operations/index.js';
import * as watches from '../store/projection-watches/index.js';
import type { ProjectionWatchIdentity } from '../store/projection-watches/index.js';
import { getSweepReceipt, recordSweepApplyFailure, recordSweepOutcome, recordSweepReceipt } from '../store/sweeps/index.js';
import { getSyncState, setSyncState } from '../store/sync-state/index.js';
import { importActivity, importBacklogSamples } from '../store/activity/index.js';
import { DEMO_ITEMS, MinutesAgo, type DemoItem, type DemoRole, type DemoWatchIdentity, type DemoWrite } from './data.js';
import { demoWeek } from './week.js';

const MINUTE = 60_000;

/** Lease of the in-flight demo operation: long enough to still be live when someone looks. */
const LIVE_LEASE_MS = 30 * MINUTE;
/** Claim of the claimed demo watch. */
const WATCH_CLAIM_MS = 15 * MINUTE;
/** Lease the other demo operations run under (released when their attempt ends). */
const WORK_LEASE_MS = 2 * MINUTE;

/**
 * A fixed did:key derived from `label` (its Ed25519 seed is the SHA-256 of the
 * label): stable across runs and machines, and nobody's real identity.
 */
export function demoDID(label: string): string {
  const seed = createHash('sha256').update(`connector-store demo: ${label}`).digest();
  // PKCS#8 wrapping of a raw Ed25519 seed (RFC 8410).
  const der = Buffer.concat([Buffer.from('302e020100300506032b657004220420', 'hex'), seed]);
  return encodeDIDKey(createPublicKey(createPrivateKey({ key: der, format: 'der', type: 'pkcs8' })));
}

/** The worker DID that calls some demo operations on the owner's behalf. */
export const DEMO_WORKER_DID = demoDID('worker');
/** The other owner, whose demo rows the owner's token must not see. */
export const DEMO_NEIGHBOUR_DID = demoDID('neighbour');

/** Options of {@link seedDemoData}. */
export interface SeedDemoDataOptions {
  /** Who owns most of the set; `npm run demo` passes the local key's DID. */
  ownerDID: string;
}

/** What {@link seedDemoData} wrote. */
export interface SeedDemoDataResult {
  ownerDID: string;
  /** Items (operations, watches, sync states, trims, receipts) written by this run. */
  created: number;
  /** Items that already existed and were left alone (or only refreshed). */
  existing: number;
}

/** Fills the store with the demo set in one transaction; see the module comment. */
export async function seedDemoData(store: StoreContext, options: SeedDemoDataOptions): Promise<SeedDemoDataResult> {
  const anchor = store.now();
  let current = anchor;
  // The set's history is replayed on a clock of its own: each step happens
  // some minutes before `anchor`, as it would have in a real day.
  const demoStore: StoreContext = { ...store, now: () => current };
  const at = (minutesAgo: number) => {
    current = anchor - minutesAgo * MINUTE;
  };
  const dids: Record<DemoRole, string> = { owner: options.ownerDID, worker: DEMO_WORKER_DID, neighbour: DEMO_NEIGHBOUR_DID };
  const result: SeedDemoDataResult = { ownerDID: options.ownerDID, created: 0, existing: 0 };
  await inTransaction(demoStore, async (tx) => {
    const seeder = new DemoSeeder(tx, at, dids, anchor);
    for (const item of DEMO_ITEMS) {
      if (await seeder.write(item)) result.created += 1;
      else result.existing += 1;
    }
    // The week before, for the overview's charts (counters only; see week.ts).
    const week = demoWeek(anchor, dids);
    await importActivity(tx, week.activity);
    await importBacklogSamples(tx, week.backlog);
  });
  return result;
}

/** Throws {@link DemoRefusedError} with NODE_ENV=production: demo rows never go into a production database. */
export function assertDemoAllowed(env: string): void {
  if (env === 'production') throw new DemoRefusedError('demo data is refused with NODE_ENV=production');
}

/** Refuses demo data where it does not belong. */
export class DemoRefusedError extends Error {
  readonly code = 'DEMO_REFUSED';
  constructor(message: string) {
    super(message);
    this.name = 'DemoRefusedError';
  }
}

/**
 * Seeds the demo set into an open, migrated database for the local key kept
 * in `cwd`/data/local-key.json (created if missing). Idempotent. `deps`
 * (clock, ids) default to the real ones.
 */
export async function seedLocalDemo(
  database: OpenDatabase,
  cwd: string,
  deps: Partial<StoreDeps> = {},
): Promise<SeedDemoDataResult & { keyPath: string }> {
  const keyPath = resolve(cwd, LOCAL_KEY_PATH);
  const key = await loadOrCreateLocalKey(keyPath);
  const result = await seedDemoData(createStoreContext(database.db, database.dialect, deps), { ownerDID: key.did });
  return { ...result, keyPath };
}

/** Writes demo items, each skipping what exists; `write` says whether it created its item. */
class DemoSeeder {
  constructor(
    private readonly store: StoreContext,
    private readonly at: (minutesAgo: number) => void,
    private readonly dids: Record<DemoRole, string>,
    private readonly anchor: number,
  ) {}

  write(item: DemoItem): Promise<boolean> {
    switch (item.kind) {
      case 'committed':
        return this.committed(item);
      case 'in-flight':
        return this.inFlight(item);
      case 'attempt-ended':
        return this.attemptEnded(item);
      case 'verified-watch':
        return this.verifiedWatch(this.identity(item.watch), item.minutesAgo);
      case 'claimed-watch':
        return this.claimedWatch(this.identity(item.watch));
      case 'failed-watch':
        return this.failedWatch(this.identity(item.watch), item.documentID);
      case 'offline-watch':
        return this.offlineWatch(this.identity(item.watch), item.documentID);
      case 'sync-state':
        return this.syncState(item);
      case 'trim':
        return this.trim(item);
      case 'sweep':
        return this.sweep(item);
    }
  }

  private identity({ owner, ...rest }: DemoWatchIdentity): ProjectionWatchIdentity {
    return { ownerDID: this.dids[owner], ...rest };
  }

  /** Demo JSON with every {@link MinutesAgo} written as an ISO time. */
  private times(value: unknown): unknown {
    if (value instanceof MinutesAgo) return new Date(this.anchor - value.minutes * MINUTE).toISOString();
    if (Array.isArray(value)) return value.map((v) => this.times(v));
    if (typeof value === 'object' && value !== null) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, this.times(v)]));
    return value;
  }

  /** Claims a new operation `minutesAgo` with a lease; undefined when the key already exists. */
  private async claim(key: OperationKey, { owner, ...write }: DemoWrite, minutesAgo: number, leaseMs: number): Promise<OperationFence | undefined> {
    if ((await operations.getOperationByKey(this.store, key)) !== null) return undefined;
    this.at(minutesAgo);
    const claim = await operations.claimOperation(this.store, {
      ...key,
      ...write,
      ownerDID: this.dids[owner],
      deterministicEventID: `${key.operationID}:event`,
      payloadHash: createHash('sha256').update(key.operationID).digest('hex'),
      reissueIntent: write.op === 'create' ? 'create-once' : 'update-latest',
      leaseMs,
    });
    // Anything but a fresh claim means a concurrent demo run got there first.
    if (claim.outcome !== 'CLAIMED' || claim.lease === undefined) return undefined;
    return { key, version: claim.lease.version, leaseToken: claim.lease.token };
  }

  private keyOf(item: { caller: DemoRole; operationID: string }): OperationKey {
    return { callerDID: this.dids[item.caller], operationID: item.operationID };
  }

  private async committed(item: Extract<DemoItem, { kind: 'committed' }>): Promise<boolean> {
    const key = this.keyOf(item);
    const fence = await this.claim(key, item.write, item.startedMinutesAgo, WORK_LEASE_MS);
    if (fence === undefined) return false;
    await operations.startOperationAttempt(this.store, fence);
    await operations.markOperationSent(this.store, { ...fence, sendMarker: `${item.operationID}:send-1` });
    this.at(item.startedMinutesAgo - 1);
    const { owner, connectorName, model, accountKey, sourceID } = item.write;
    const finalized = await finalizeOperationAndArmWatch(this.store, {
      ...fence,
      documentID: item.documentID,
      resultEntity: item.resultEntity,
      currentWinnerDigest: digest(item.documentID, 1),
      watchIdentity: { ownerDID: this.dids[owner], connectorName, model, accountKey, sourceID },
    });
    if (!finalized.finalized) throw new Error(`demo: finalize of ${item.operationID} lost its lease`);
    return true;
  }

  /** On a re-run after the lease lapsed, a fresh lease is taken so one stays live. */
  private async inFlight(item: Extract<DemoItem, { kind: 'in-flight' }>): Promise<boolean> {
    const key = this.keyOf(item);
    const fence = await this.claim(key, item.write, 1, LIVE_LEASE_MS);
    if (fence !== undefined) {
      await operations.startOperationAttempt(this.store, fence);
      return true;
    }
    this.at(0);
    const existing = await operations.getOperationByKey(this.store, key);
    const leaseLive = existing?.leaseExpiresAt != null && existing.leaseExpiresAt > this.store.now();
    if (existing !== null && existing.state === 'attempted' && !leaseLive) {
      await operations.acquireOperationLease(this.store, { key, leaseMs: LIVE_LEASE_MS });
    }
    return false;
  }

  private async attemptEnded(item: Extract<DemoItem, { kind: 'attempt-ended' }>): Promise<boolean> {
    const fence = await this.claim(this.keyOf(item), item.write, item.startedMinutesAgo, WORK_LEASE_MS);
    if (fence === undefined) return false;
    await operations.startOperationAttempt(this.store, fence);
    if (item.sent) await operations.markOperationSent(this.store, { ...fence, sendMarker: `${item.operationID}:send-1` });
    this.at(item.startedMinutesAgo - 1);
    await operations.recordOperationOutcome(this.store, { ...fence, ...item.outcome });
    await operations.releaseOperationLease(this.store, fence);
    return true;
  }

  private async verifiedWatch(identity: ProjectionWatchIdentity, minutesAgo: number): Promise<boolean> {
    const watch = await watches.getWatch(this.store, identity);
    if (watch === null || watch.verificationStatus !== 'pending_verification' || watch.verificationAttempts > 0 || watch.claimedUntil !== null) {
      return false;
    }
    this.at(minutesAgo);
    const claimed = await watches.claimWatchAttempt(this.store, { identity, version: watch.version, claimMs: WATCH_CLAIM_MS });
    await watches.recordVerification(this.store, {
      identity,
      version: claimed.version,
      repairGeneration: claimed.repairGeneration,
      outcome: { kind: 'match', digest: digest(watch.documentID, 1) },
    });
    return true;
  }

  /** Re-claims a lapsed claim on a re-run, as a verifier at work would. */
  private async claimedWatch(identity: ProjectionWatchIdentity): Promise<boolean> {
    this.at(0);
    const watch = await watches.getWatch(this.store, identity);
    if (watch === null || watch.verificationStatus !== 'pending_verification') return false;
    if (watch.claimedUntil !== null && watch.claimedUntil > this.store.now()) return false;
    await watches.claimWatchAttempt(this.store, { identity, version: watch.version, claimMs: WATCH_CLAIM_MS });
    return watch.claimedUntil === null;
  }

  private async failedWatch(identity: ProjectionWatchIdentity, documentID: string): Promise<boolean> {
    if ((await watches.getWatch(this.store, identity)) !== null) return false;
    this.at(230);
    const policy = { maxAttempts: 3 };
    await watches.armWatch(this.store, { identity, documentID, reason: 'ingest', observedWinnerDigest: digest(documentID, 1) });
    for (const minutesAgo of [225, 200, 150]) {
      this.at(minutesAgo);
      const watch = await watches.getWatch(this.store, identity);
      if (watch === null) throw new Error('demo: watch vanished');
      const claimed = await watches.claimWatchAttempt(this.store, { identity, version: watch.version, claimMs: WATCH_CLAIM_MS });
      await watches.recordVerification(this.store, {
        identity,
        version: claimed.version,
        repairGeneration: claimed.repairGeneration,
        outcome: { kind: 'mismatch', observedDigest: digest(documentID, minutesAgo) },
        policy,
      });
    }
    return true;
  }

  private async offlineWatch(identity: ProjectionWatchIdentity, documentID: string): Promise<boolean> {
    if ((await watches.getWatch(this.store, identity)) !== null) return false;
    this.at(8);
    const armed = await watches.armWatch(this.store, { identity, documentID, reason: 'ingest', observedWinnerDigest: digest(documentID, 1) });
    const claimed = await watches.claimWatchAttempt(this.store, { identity, version: armed.watch.version, claimMs: WATCH_CLAIM_MS });
    this.at(7);
    await watches.recordVerification(this.store, {
      identity,
      version: claimed.version,
      repairGeneration: claimed.repairGeneration,
      outcome: { kind: 'offline' },
    });
    return true;
  }

  private async syncState(item: Extract<DemoItem, { kind: 'sync-state' }>): Promise<boolean> {
    const ownerDID = this.dids[item.owner];
    if ((await getSyncState(this.store, item.connectorName, ownerDID)) !== null) return false;
    this.at(item.minutesAgo);
    await setSyncState(this.store, item.connectorName, ownerDID, {
      checkpoint: this.times(item.checkpoint),
      lastSyncedAt: this.times(item.lastSynced) as string,
      entityCount: item.entityCount,
      status: item.status,
      ...(item.error !== undefined && { error: item.error }),
      ...(item.recovery !== undefined && { recovery: this.times(item.recovery) }),
    });
    return true;
  }

  private async trim(item: Extract<DemoItem, { kind: 'trim' }>): Promise<boolean> {
    if ((await getEntityTrim(this.store, item.documentID)) !== null) return false;
    this.at(item.minutesAgo);
    await setEntityTrim(this.store, {
      documentID: item.documentID,
      ownerDID: this.dids[item.owner],
      connectorName: item.connectorName,
      trimmedFields: item.trimmedFields,
    });
    return true;
  }

  private async sweep(item: Extract<DemoItem, { kind: 'sweep' }>): Promise<boolean> {
    const key = { ownerDID: this.dids[item.owner], connectorName: item.connectorName, partition: item.partition, provenance: item.provenance };
    if ((await getSweepReceipt(this.store, key)) !== null) return false;
    this.at(item.minutesAgo);
    await recordSweepReceipt(this.store, {
      key,
      sequence: item.sequence,
      modelID: item.modelID,
      scope: item.scope,
      keep: item.keep,
      sourceFetchHLC: item.sourceFetchHLC,
      kind: item.passKind,
      complete: item.complete,
      candidates: item.candidates.map(({ documentID, sourceID }) => ({ documentID, sourceID, modelID: item.modelID })),
    });
    this.at(item.minutesAgo - 2);
    for (const { documentID, result } of item.candidates) {
      const candidateKey = { ...key, documentID };
      if ('failed' in result) await recordSweepApplyFailure(this.store, { candidateKey, error: result.failed });
      else await recordSweepOutcome(this.store, { candidateKey, outcome: 'applied' in result ? 'applied' : 'kept' });
    }
    return true;
  }
}

/** A stand-in content digest: fixed per document and revision. */
function digest(documentID: string, revision: number): string {
  return `sha256:${createHash('sha256').update(`${documentID}@${revision}`).digest('hex').slice(0, 32)}`;
}
