/**
 * Demo data: a small, realistic data set written through the store functions
 * (never raw SQL), so a dashboard author sees something at once.
 *
 * Most rows belong to one owner (the local key's DID, so the token that
 * `npm start` prints sees them without being a service principal). A
 * "worker" DID calls some operations on that owner's behalf (visible to the
 * owner), and a "neighbour" DID owns a few rows the owner must not see.
 *
 * Idempotent: every row has a fixed key (idempotency keys, watch identities,
 * sync-state and receipt keys), and an item whose key already exists is
 * left alone, so running the demo twice writes nothing new. Two things are
 * refreshed on a re-run because they only make sense while live: the lease
 * of the in-flight operation and the claim of the claimed watch.
 *
 * Times are spread over the last few hours before `now`, well inside the
 * default idempotency window, so retention does not remove the set at once.
 */
import { createHash, createPrivateKey, createPublicKey } from 'node:crypto';
import { encodeDIDKey } from '../auth/index.js';
import { inTransaction, type StoreContext } from '../store/context.js';
import { getEntityTrim, setEntityTrim } from '../store/entity-trim/index.js';
import { finalizeOperationAndArmWatch } from '../store/finalize/index.js';
import * as operations from '../store/operations/index.js';
import type { ConnectorOperationOp, OperationFence, OperationKey } from '../store/operations/index.js';
import * as watches from '../store/projection-watches/index.js';
import type { ProjectionWatchIdentity } from '../store/projection-watches/index.js';
import { getSweepReceipt, recordSweepApplyFailure, recordSweepOutcome, recordSweepReceipt } from '../store/sweeps/index.js';
import { getSyncState, setSyncState, type SyncStateInput } from '../store/sync-state/index.js';

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
  const owner = options.ownerDID;
  const result: SeedDemoDataResult = { ownerDID: owner, created: 0, existing: 0 };
  const count = (created: boolean) => {
    if (created) result.created += 1;
    else result.existing += 1;
  };

  await inTransaction(demoStore, async (tx) => {
    const seeder = new DemoSeeder(tx, at);

    // --- Operations -------------------------------------------------------
    const standup = { ownerDID: owner, connectorName: 'google', model: 'calendar.event', accountKey: 'primary', sourceID: 'evt_7f3a91c2' };
    count(
      await seeder.committed({
        key: { callerDID: owner, operationID: 'demo-event-standup-create' },
        write: { ...standup, op: 'create', target: 'calendar:primary' },
        startedMinutesAgo: 300,
        documentID: 'demo-doc-event-standup',
        resultEntity: { id: 'evt_7f3a91c2', etag: '"3371029384023000"', summary: 'Team stand-up', status: 'confirmed' },
      }),
    );
    const planning = { ownerDID: owner, connectorName: 'google', model: 'calendar.event', accountKey: 'primary', sourceID: 'evt_b40d17e8' };
    count(
      await seeder.committed({
        key: { callerDID: owner, operationID: 'demo-event-planning-update' },
        write: { ...planning, op: 'update', target: 'calendar:primary' },
        startedMinutesAgo: 95,
        documentID: 'demo-doc-event-planning',
        resultEntity: { id: 'evt_b40d17e8', etag: '"3371029384555000"', summary: 'Quarterly planning', location: 'Room 4.01' },
      }),
    );
    const issue = { ownerDID: owner, connectorName: 'github', model: 'github.issue', accountKey: 'octo-org', sourceID: 'I_kwDOdemo123' };
    count(
      await seeder.committed({
        key: { callerDID: DEMO_WORKER_DID, operationID: 'demo-issue-flaky-test-create' },
        write: { ...issue, op: 'create', target: 'octo-org/website' },
        startedMinutesAgo: 50,
        documentID: 'demo-doc-issue-flaky-test',
        resultEntity: { number: 412, title: 'Flaky test in checkout flow', state: 'open' },
      }),
    );
    count(
      await seeder.inFlight({
        key: { callerDID: owner, operationID: 'demo-event-offsite-create' },
        write: { ownerDID: owner, connectorName: 'google', model: 'calendar.event', accountKey: 'primary', op: 'create', target: 'calendar:primary' },
      }),
    );
    count(
      await seeder.attemptEnded({
        key: { callerDID: owner, operationID: 'demo-contact-phone-update' },
        write: { ownerDID: owner, connectorName: 'google', model: 'contacts.person', accountKey: 'primary', op: 'update', target: 'contacts', sourceID: 'people/c4481' },
        startedMinutesAgo: 40,
        sent: true,
        outcome: { kind: 'retryable', lastHTTPStatus: 503, retryAfterMs: 60 * MINUTE },
      }),
    );
    count(
      await seeder.attemptEnded({
        key: { callerDID: owner, operationID: 'demo-issue-label-update' },
        write: { ownerDID: owner, connectorName: 'github', model: 'github.issue', accountKey: 'octo-org', op: 'update', target: 'octo-org/website', sourceID: 'I_kwDOdemo077' },
        startedMinutesAgo: 25,
        sent: true,
        // The connection dropped after the request went out: did it land?
        outcome: { kind: 'unknown' },
      }),
    );
    count(
      await seeder.attemptEnded({
        key: { callerDID: owner, operationID: 'demo-event-invalid-recurrence-create' },
        write: { ownerDID: owner, connectorName: 'google', model: 'calendar.event', accountKey: 'primary', op: 'create', target: 'calendar:primary' },
        startedMinutesAgo: 180,
        sent: true,
        outcome: { kind: 'fatal', lastHTTPStatus: 400 },
      }),
    );
    count(
      await seeder.attemptEnded({
        key: { callerDID: owner, operationID: 'demo-issue-comment-create' },
        write: { ownerDID: owner, connectorName: 'github', model: 'github.issue_comment', accountKey: 'octo-org', op: 'create', target: 'octo-org/website#398' },
        startedMinutesAgo: 10,
        sent: false,
        outcome: { kind: 'offline' },
      }),
    );
    count(
      await seeder.attemptEnded({
        key: { callerDID: DEMO_WORKER_DID, operationID: 'demo-contact-email-update' },
        write: { ownerDID: owner, connectorName: 'google', model: 'contacts.person', accountKey: 'primary', op: 'update', target: 'contacts', sourceID: 'people/c9012' },
        startedMinutesAgo: 5,
        // The token refresh failed before the request went out: it waits for the owner to authorize again.
        sent: false,
        outcome: { kind: 'auth', lastHTTPStatus: 401 },
      }),
    );
    // The neighbour's operations: invisible to the owner.
    count(
      await seeder.committed({
        key: { callerDID: DEMO_NEIGHBOUR_DID, operationID: 'demo-neighbour-event-create' },
        write: { ownerDID: DEMO_NEIGHBOUR_DID, connectorName: 'google', model: 'calendar.event', accountKey: 'primary', sourceID: 'evt_neighbour1', op: 'create', target: 'calendar:primary' },
        startedMinutesAgo: 120,
        documentID: 'demo-doc-neighbour-event',
        resultEntity: { id: 'evt_neighbour1', summary: 'Dentist' },
      }),
    );
    count(
      await seeder.attemptEnded({
        key: { callerDID: DEMO_NEIGHBOUR_DID, operationID: 'demo-neighbour-issue-create' },
        write: { ownerDID: DEMO_NEIGHBOUR_DID, connectorName: 'github', model: 'github.issue', accountKey: 'neighbour', op: 'create', target: 'neighbour/dotfiles' },
        startedMinutesAgo: 70,
        sent: true,
        outcome: { kind: 'fatal', lastHTTPStatus: 422 },
      }),
    );

    // --- Watches ------------------------------------------------------------
    // The planning event's watch stays as finalize armed it: pending_verification.
    count(await seeder.verifiedWatch({ ...standup }, 290));
    count(await seeder.claimedWatch({ ...issue }));
    count(
      await seeder.failedWatch(
        { ownerDID: owner, connectorName: 'google', model: 'contacts.person', accountKey: 'primary', sourceID: 'people/c2210' },
        'demo-doc-contact-ada',
      ),
    );
    count(
      await seeder.offlineWatch(
        { ownerDID: owner, connectorName: 'github', model: 'github.issue', accountKey: 'octo-org', sourceID: 'I_kwDOdemo031' },
        'demo-doc-issue-dark-mode',
      ),
    );

    // --- Sync states, trim, sweep -----------------------------------------
    count(
      await seeder.syncState('google', owner, 20, {
        checkpoint: { calendar: { syncToken: 'CPjBqfLn8oQDEPjBqfLn8oQDGAUgmMT-mgI' }, contacts: { pageToken: null, syncToken: 'EhQKEgiAgICAgICAgAEQgICAgICAgIA' } },
        lastSyncedAt: isoMinutesAgo(anchor, 20),
        entityCount: 248,
        status: 'idle',
      }),
    );
    count(
      await seeder.syncState('github', owner, 2, {
        checkpoint: { issues: { since: isoMinutesAgo(anchor, 65), page: 3 } },
        lastSyncedAt: isoMinutesAgo(anchor, 65),
        entityCount: 37,
        status: 'syncing',
      }),
    );
    count(
      await seeder.syncState('microsoft', owner, 240, {
        checkpoint: { mail: { deltaLink: null } },
        lastSyncedAt: isoMinutesAgo(anchor, 26 * 60),
        entityCount: 0,
        status: 'error',
        error: 'token refresh failed: invalid_grant (the owner must authorize again)',
        recovery: { action: 'reauthorize', since: isoMinutesAgo(anchor, 240) },
      }),
    );
    count(
      await seeder.syncState('google', DEMO_NEIGHBOUR_DID, 30, {
        checkpoint: { calendar: { syncToken: 'neighbour-token' } },
        lastSyncedAt: isoMinutesAgo(anchor, 30),
        entityCount: 12,
        status: 'idle',
      }),
    );
    count(
      await seeder.trim(90, {
        documentID: 'demo-doc-event-planning',
        ownerDID: owner,
        connectorName: 'google',
        trimmedFields: { description: 'Agenda: 1. Review of Q2 objectives … (4 812 characters trimmed to the model’s 2 000)', attendees: 14 },
      }),
    );
    count(await seeder.sweep(owner));
  });
  return result;
}

/** What a demo operation writes. */
interface DemoWrite {
  ownerDID: string;
  connectorName: string;
  model: string;
  accountKey: string;
  op: ConnectorOperationOp;
  target: string;
  sourceID?: string;
}

/** How a demo attempt ended (see `recordOperationOutcome`). */
interface DemoOutcome {
  kind: operations.OperationOutcomeKind;
  lastHTTPStatus?: number;
  retryAfterMs?: number;
}

/** Steps of the demo, each skipping what exists; every method says whether it created its item. */
class DemoSeeder {
  constructor(
    private readonly store: StoreContext,
    private readonly at: (minutesAgo: number) => void,
  ) {}

  /** Claims a new operation `minutesAgo` with a lease; undefined when the key already exists. */
  private async claim(key: OperationKey, write: DemoWrite, minutesAgo: number, leaseMs: number): Promise<OperationFence | undefined> {
    if ((await operations.getOperationByKey(this.store, key)) !== null) return undefined;
    this.at(minutesAgo);
    const claim = await operations.claimOperation(this.store, {
      ...key,
      ...write,
      deterministicEventID: `${key.operationID}:event`,
      payloadHash: createHash('sha256').update(key.operationID).digest('hex'),
      reissueIntent: write.op === 'create' ? 'create-once' : 'update-latest',
      leaseMs,
    });
    // Anything but a fresh claim means a concurrent demo run got there first.
    if (claim.outcome !== 'CLAIMED' || claim.lease === undefined) return undefined;
    return { key, version: claim.lease.version, leaseToken: claim.lease.token };
  }

  /** An operation sent and finalized (committed), which arms its document's watch. */
  async committed(input: {
    key: OperationKey;
    write: DemoWrite & { sourceID: string };
    startedMinutesAgo: number;
    documentID: string;
    resultEntity: unknown;
  }): Promise<boolean> {
    const fence = await this.claim(input.key, input.write, input.startedMinutesAgo, WORK_LEASE_MS);
    if (fence === undefined) return false;
    await operations.startOperationAttempt(this.store, fence);
    await operations.markOperationSent(this.store, { ...fence, sendMarker: `${input.key.operationID}:send-1` });
    this.at(input.startedMinutesAgo - 1);
    const { ownerDID, connectorName, model, accountKey, sourceID } = input.write;
    const finalized = await finalizeOperationAndArmWatch(this.store, {
      ...fence,
      documentID: input.documentID,
      resultEntity: input.resultEntity,
      currentWinnerDigest: digest(input.documentID, 1),
      watchIdentity: { ownerDID, connectorName, model, accountKey, sourceID },
    });
    if (!finalized.finalized) throw new Error(`demo: finalize of ${input.key.operationID} lost its lease`);
    return true;
  }

  /**
   * The operation in flight right now: an attempt open under a live lease.
   * On a re-run after the lease lapsed, a fresh lease is taken so one stays live.
   */
  async inFlight(input: { key: OperationKey; write: DemoWrite }): Promise<boolean> {
    const fence = await this.claim(input.key, input.write, 1, LIVE_LEASE_MS);
    if (fence !== undefined) {
      await operations.startOperationAttempt(this.store, fence);
      return true;
    }
    this.at(0);
    const existing = await operations.getOperationByKey(this.store, input.key);
    const leaseLive = existing?.leaseExpiresAt != null && existing.leaseExpiresAt > this.store.now();
    if (existing !== null && existing.state === 'attempted' && !leaseLive) {
      await operations.acquireOperationLease(this.store, { key: input.key, leaseMs: LIVE_LEASE_MS });
    }
    return false;
  }

  /** An attempt that ended short of success (retry, reconcile, dead, deferred); the worker then released its lease. */
  async attemptEnded(input: { key: OperationKey; write: DemoWrite; startedMinutesAgo: number; sent: boolean; outcome: DemoOutcome }): Promise<boolean> {
    const fence = await this.claim(input.key, input.write, input.startedMinutesAgo, WORK_LEASE_MS);
    if (fence === undefined) return false;
    await operations.startOperationAttempt(this.store, fence);
    if (input.sent) await operations.markOperationSent(this.store, { ...fence, sendMarker: `${input.key.operationID}:send-1` });
    this.at(input.startedMinutesAgo - 1);
    await operations.recordOperationOutcome(this.store, { ...fence, ...input.outcome });
    await operations.releaseOperationLease(this.store, fence);
    return true;
  }

  /** Verifies the (finalize-armed) watch of `identity` with a match. */
  async verifiedWatch(identity: ProjectionWatchIdentity, minutesAgo: number): Promise<boolean> {
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

  /** Claims the (finalize-armed) watch of `identity` now, as a verifier at work would; re-claims a lapsed claim on a re-run. */
  async claimedWatch(identity: ProjectionWatchIdentity): Promise<boolean> {
    this.at(0);
    const watch = await watches.getWatch(this.store, identity);
    if (watch === null || watch.verificationStatus !== 'pending_verification') return false;
    if (watch.claimedUntil !== null && watch.claimedUntil > this.store.now()) return false;
    await watches.claimWatchAttempt(this.store, { identity, version: watch.version, claimMs: WATCH_CLAIM_MS });
    return watch.claimedUntil === null;
  }

  /** A watch armed by ingest whose verifications kept finding another winner until it failed. */
  async failedWatch(identity: ProjectionWatchIdentity, documentID: string): Promise<boolean> {
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

  /** A watch armed by ingest whose verifier was offline: deferred without spending an attempt. */
  async offlineWatch(identity: ProjectionWatchIdentity, documentID: string): Promise<boolean> {
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

  async syncState(connectorName: string, ownerDID: string, minutesAgo: number, state: SyncStateInput): Promise<boolean> {
    if ((await getSyncState(this.store, connectorName, ownerDID)) !== null) return false;
    this.at(minutesAgo);
    await setSyncState(this.store, connectorName, ownerDID, state);
    return true;
  }

  async trim(minutesAgo: number, input: Parameters<typeof setEntityTrim>[1]): Promise<boolean> {
    if ((await getEntityTrim(this.store, input.documentID)) !== null) return false;
    this.at(minutesAgo);
    await setEntityTrim(this.store, input);
    return true;
  }

  /**
   * A listing pass over the owner's primary calendar that did not see three
   * local events: one applied (deleted locally), one kept, one still pending
   * after a failed apply. Not committed yet, so its checkpoint has not moved.
   */
  async sweep(ownerDID: string): Promise<boolean> {
    const key = { ownerDID, connectorName: 'google', partition: 'calendar:primary', provenance: 'demo-listing-run-0042' };
    if ((await getSweepReceipt(this.store, key)) !== null) return false;
    this.at(35);
    const candidates = [
      { documentID: 'demo-doc-event-cancelled-lunch', sourceID: 'evt_0c11aa90', modelID: 'calendar.event' },
      { documentID: 'demo-doc-event-old-retro', sourceID: 'evt_93d2e5b1', modelID: 'calendar.event' },
      { documentID: 'demo-doc-event-moved-1on1', sourceID: 'evt_5a7708fe', modelID: 'calendar.event' },
    ];
    await recordSweepReceipt(this.store, {
      key,
      sequence: 42,
      modelID: 'calendar.event',
      scope: 'calendar:primary',
      keep: 'listed-since-window-start',
      sourceFetchHLC: '0001917c2a4e8b000000',
      kind: 'full',
      complete: true,
      candidates,
    });
    this.at(33);
    await recordSweepOutcome(this.store, { candidateKey: { ...key, documentID: candidates[0]!.documentID }, outcome: 'applied' });
    await recordSweepOutcome(this.store, { candidateKey: { ...key, documentID: candidates[1]!.documentID }, outcome: 'kept' });
    await recordSweepApplyFailure(this.store, {
      candidateKey: { ...key, documentID: candidates[2]!.documentID },
      error: 'document is open in an editor; will retry',
    });
    return true;
  }
}

/** A stand-in content digest: fixed per document and revision. */
function digest(documentID: string, revision: number): string {
  return `sha256:${createHash('sha256').update(`${documentID}@${revision}`).digest('hex').slice(0, 32)}`;
}

function isoMinutesAgo(anchor: number, minutes: number): string {
  return new Date(anchor - minutes * MINUTE).toISOString();
}
