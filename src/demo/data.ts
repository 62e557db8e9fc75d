/**
 * The demo set, as data: what to create, in order, each item a step the
 * seeder (`seed.ts`) knows how to write through the store functions.
 *
 * Most rows belong to the owner (the local key's DID, so the token that
 * `npm start` prints sees them without being a service principal). The
 * worker calls some operations on the owner's behalf (visible to the owner),
 * and the neighbour owns a few rows the owner must not see. Times are minutes
 * before the moment of seeding, spread over the last few hours: well inside
 * the default idempotency window, so retention does not remove the set at once.
 */
import type { ConnectorOperationOp, OperationOutcomeKind } from '../store/operations/index.js';

/** Who a row belongs to; the seeder maps each role to a DID. */
export type DemoRole = 'owner' | 'worker' | 'neighbour';

/** A time inside demo JSON (checkpoints, recovery): written as the ISO string of that many minutes before seeding. */
export class MinutesAgo {
  constructor(readonly minutes: number) {}
}
const ago = (minutes: number) => new MinutesAgo(minutes);

/** The provider document a watch tracks (owner by role). */
export interface DemoWatchIdentity {
  owner: DemoRole;
  connectorName: string;
  model: string;
  accountKey: string;
  sourceID: string;
}

/** What a demo operation writes. */
export interface DemoWrite {
  owner: DemoRole;
  connectorName: string;
  model: string;
  accountKey: string;
  op: ConnectorOperationOp;
  target: string;
  sourceID?: string;
}

/** How a demo attempt ended (see `recordOperationOutcome`). */
export interface DemoOutcome {
  kind: OperationOutcomeKind;
  lastHTTPStatus?: number;
  retryAfterMs?: number;
  /** What the provider (or the network) said, as a worker would record it. */
  message?: string;
}

/** One step of the demo. */
export type DemoItem =
  /** Claimed, sent and finalized `startedMinutesAgo`: committed, and its document's watch armed. */
  | { kind: 'committed'; caller: DemoRole; operationID: string; write: DemoWrite & { sourceID: string }; startedMinutesAgo: number; documentID: string; resultEntity: unknown }
  /** An attempt open right now under a live lease. */
  | { kind: 'in-flight'; caller: DemoRole; operationID: string; write: DemoWrite }
  /** An attempt that ended short of success; the worker then released its lease. */
  | { kind: 'attempt-ended'; caller: DemoRole; operationID: string; write: DemoWrite; startedMinutesAgo: number; sent: boolean; outcome: DemoOutcome }
  /** The finalize-armed watch of `watch`, verified with a match. */
  | { kind: 'verified-watch'; watch: DemoWatchIdentity; minutesAgo: number }
  /** The finalize-armed watch of `watch`, claimed now by a verifier at work. */
  | { kind: 'claimed-watch'; watch: DemoWatchIdentity }
  /** Armed by ingest; every verification found another winner until it failed. */
  | { kind: 'failed-watch'; watch: DemoWatchIdentity; documentID: string }
  /** Armed by ingest; the verifier was offline, so it is deferred without spending an attempt. */
  | { kind: 'offline-watch'; watch: DemoWatchIdentity; documentID: string }
  | { kind: 'sync-state'; connectorName: string; owner: DemoRole; minutesAgo: number; checkpoint: unknown; lastSynced: MinutesAgo; entityCount: number; status: string; error?: string; recovery?: unknown }
  | { kind: 'trim'; minutesAgo: number; documentID: string; owner: DemoRole; connectorName: string; trimmedFields: Record<string, unknown> }
  /**
   * A listing pass recorded `minutesAgo` with these candidates, whose results
   * came in two minutes later; not committed, so its checkpoint has not moved.
   */
  | {
      kind: 'sweep';
      owner: DemoRole;
      connectorName: string;
      partition: string;
      provenance: string;
      sequence: number;
      modelID: string;
      scope: string;
      keep: string;
      sourceFetchHLC: string;
      passKind: string;
      complete: boolean;
      minutesAgo: number;
      candidates: { documentID: string; sourceID: string; result: { applied: true } | { kept: true } | { failed: string } }[];
    };

const STANDUP = { owner: 'owner', connectorName: 'google', model: 'calendar.event', accountKey: 'primary', sourceID: 'evt_7f3a91c2' } as const;
const PLANNING = { owner: 'owner', connectorName: 'google', model: 'calendar.event', accountKey: 'primary', sourceID: 'evt_b40d17e8' } as const;
const FLAKY_TEST_ISSUE = { owner: 'owner', connectorName: 'github', model: 'github.issue', accountKey: 'octo-org', sourceID: 'I_kwDOdemo123' } as const;
const OWNER_CALENDAR = { owner: 'owner', connectorName: 'google', model: 'calendar.event', accountKey: 'primary', op: 'create', target: 'calendar:primary' } as const;
const OWNER_CONTACTS = { owner: 'owner', connectorName: 'google', model: 'contacts.person', accountKey: 'primary', op: 'update', target: 'contacts' } as const;
const MINUTE = 60_000;

/** Every step, in the order it runs: watches that verify a finalize-armed watch come after its operation. */
export const DEMO_ITEMS: readonly DemoItem[] = [
  // Operations, in every state.
  {
    kind: 'committed',
    caller: 'owner',
    operationID: 'demo-event-standup-create',
    write: { ...STANDUP, op: 'create', target: 'calendar:primary' },
    startedMinutesAgo: 300,
    documentID: 'demo-doc-event-standup',
    resultEntity: { id: 'evt_7f3a91c2', etag: '"3371029384023000"', summary: 'Team stand-up', status: 'confirmed' },
  },
  {
    kind: 'committed',
    caller: 'owner',
    operationID: 'demo-event-planning-update',
    write: { ...PLANNING, op: 'update', target: 'calendar:primary' },
    startedMinutesAgo: 95,
    documentID: 'demo-doc-event-planning',
    resultEntity: { id: 'evt_b40d17e8', etag: '"3371029384555000"', summary: 'Quarterly planning', location: 'Room 4.01' },
  },
  {
    kind: 'committed',
    caller: 'worker',
    operationID: 'demo-issue-flaky-test-create',
    write: { ...FLAKY_TEST_ISSUE, op: 'create', target: 'octo-org/website' },
    startedMinutesAgo: 50,
    documentID: 'demo-doc-issue-flaky-test',
    resultEntity: { number: 412, title: 'Flaky test in checkout flow', state: 'open' },
  },
  { kind: 'in-flight', caller: 'owner', operationID: 'demo-event-offsite-create', write: OWNER_CALENDAR },
  {
    kind: 'attempt-ended',
    caller: 'owner',
    operationID: 'demo-contact-phone-update',
    write: { ...OWNER_CONTACTS, sourceID: 'people/c4481' },
    startedMinutesAgo: 40,
    sent: true,
    outcome: {
      kind: 'retryable',
      lastHTTPStatus: 503,
      retryAfterMs: 60 * MINUTE,
      message: 'People API: 503 Service Unavailable, "The service is currently unavailable." (Retry-After: 3600)',
    },
  },
  {
    kind: 'attempt-ended',
    caller: 'owner',
    operationID: 'demo-issue-label-update',
    write: { owner: 'owner', connectorName: 'github', model: 'github.issue', accountKey: 'octo-org', op: 'update', target: 'octo-org/website', sourceID: 'I_kwDOdemo077' },
    startedMinutesAgo: 25,
    // The connection dropped after the request went out: did it land?
    sent: true,
    outcome: { kind: 'unknown', message: 'PATCH /repos/octo-org/website/issues/77: socket hang up after the request was written (ECONNRESET); the label may or may not be applied' },
  },
  {
    kind: 'attempt-ended',
    caller: 'owner',
    operationID: 'demo-event-invalid-recurrence-create',
    write: OWNER_CALENDAR,
    startedMinutesAgo: 180,
    sent: true,
    outcome: { kind: 'fatal', lastHTTPStatus: 400, message: 'Calendar API: 400 Bad Request, "Invalid recurrence rule: RRULE:FREQ=WEEKLY;BYDAY=XY"' },
  },
  {
    kind: 'attempt-ended',
    caller: 'owner',
    operationID: 'demo-issue-comment-create',
    write: { owner: 'owner', connectorName: 'github', model: 'github.issue_comment', accountKey: 'octo-org', op: 'create', target: 'octo-org/website#398' },
    startedMinutesAgo: 10,
    sent: false,
    outcome: { kind: 'offline', message: 'getaddrinfo EAI_AGAIN api.github.com: the device has no network' },
  },
  {
    kind: 'attempt-ended',
    caller: 'worker',
    operationID: 'demo-contact-email-update',
    write: { ...OWNER_CONTACTS, sourceID: 'people/c9012' },
    startedMinutesAgo: 5,
    // The token refresh failed before the request went out: it waits for the owner to authorize again.
    sent: false,
    outcome: { kind: 'auth', lastHTTPStatus: 401, message: 'oauth2.googleapis.com: 400 invalid_grant, "Token has been expired or revoked." The owner must authorize again' },
  },
  // The neighbour's operations: invisible to the owner.
  {
    kind: 'committed',
    caller: 'neighbour',
    operationID: 'demo-neighbour-event-create',
    write: { owner: 'neighbour', connectorName: 'google', model: 'calendar.event', accountKey: 'primary', sourceID: 'evt_neighbour1', op: 'create', target: 'calendar:primary' },
    startedMinutesAgo: 120,
    documentID: 'demo-doc-neighbour-event',
    resultEntity: { id: 'evt_neighbour1', summary: 'Dentist' },
  },
  {
    kind: 'attempt-ended',
    caller: 'neighbour',
    operationID: 'demo-neighbour-issue-create',
    write: { owner: 'neighbour', connectorName: 'github', model: 'github.issue', accountKey: 'neighbour', op: 'create', target: 'neighbour/dotfiles' },
    startedMinutesAgo: 70,
    sent: true,
    outcome: { kind: 'fatal', lastHTTPStatus: 422, message: 'POST /repos/neighbour/dotfiles/issues: 422 Unprocessable Entity, "Validation Failed: title is too long (maximum is 256 characters)"' },
  },

  // Watches in every status. The planning event's watch stays as finalize armed it: pending verification.
  { kind: 'verified-watch', watch: STANDUP, minutesAgo: 290 },
  { kind: 'claimed-watch', watch: FLAKY_TEST_ISSUE },
  {
    kind: 'failed-watch',
    watch: { owner: 'owner', connectorName: 'google', model: 'contacts.person', accountKey: 'primary', sourceID: 'people/c2210' },
    documentID: 'demo-doc-contact-ada',
  },
  {
    kind: 'offline-watch',
    watch: { owner: 'owner', connectorName: 'github', model: 'github.issue', accountKey: 'octo-org', sourceID: 'I_kwDOdemo031' },
    documentID: 'demo-doc-issue-dark-mode',
  },

  // Sync states, a trim record, a sweep in progress.
  {
    kind: 'sync-state',
    connectorName: 'google',
    owner: 'owner',
    minutesAgo: 20,
    checkpoint: { calendar: { syncToken: 'CPjBqfLn8oQDEPjBqfLn8oQDGAUgmMT-mgI' }, contacts: { pageToken: null, syncToken: 'EhQKEgiAgICAgICAgAEQgICAgICAgIA' } },
    lastSynced: ago(20),
    entityCount: 248,
    status: 'idle',
  },
  {
    kind: 'sync-state',
    connectorName: 'github',
    owner: 'owner',
    minutesAgo: 2,
    checkpoint: { issues: { since: ago(65), page: 3 } },
    lastSynced: ago(65),
    entityCount: 37,
    status: 'syncing',
  },
  {
    kind: 'sync-state',
    connectorName: 'microsoft',
    owner: 'owner',
    minutesAgo: 240,
    checkpoint: { mail: { deltaLink: null } },
    lastSynced: ago(26 * 60),
    entityCount: 0,
    status: 'error',
    error: 'token refresh failed: invalid_grant (the owner must authorize again)',
    recovery: { action: 'reauthorize', since: ago(240) },
  },
  {
    kind: 'sync-state',
    connectorName: 'google',
    owner: 'neighbour',
    minutesAgo: 30,
    checkpoint: { calendar: { syncToken: 'neighbour-token' } },
    lastSynced: ago(30),
    entityCount: 12,
    status: 'idle',
  },
  {
    kind: 'trim',
    minutesAgo: 90,
    documentID: 'demo-doc-event-planning',
    owner: 'owner',
    connectorName: 'google',
    trimmedFields: { description: 'Agenda: 1. Review of Q2 objectives … (4 812 characters trimmed to the model’s 2 000)', attendees: 14 },
  },
  {
    // A listing pass over the primary calendar that did not see three local events.
    kind: 'sweep',
    owner: 'owner',
    connectorName: 'google',
    partition: 'calendar:primary',
    provenance: 'demo-listing-run-0042',
    sequence: 42,
    modelID: 'calendar.event',
    scope: 'calendar:primary',
    keep: 'listed-since-window-start',
    sourceFetchHLC: '0001917c2a4e8b000000',
    passKind: 'full',
    complete: true,
    minutesAgo: 35,
    candidates: [
      { documentID: 'demo-doc-event-cancelled-lunch', sourceID: 'evt_0c11aa90', result: { applied: true } },
      { documentID: 'demo-doc-event-old-retro', sourceID: 'evt_93d2e5b1', result: { kept: true } },
      { documentID: 'demo-doc-event-moved-1on1', sourceID: 'evt_5a7708fe', result: { failed: 'document is open in an editor; will retry' } },
    ],
  },
];
