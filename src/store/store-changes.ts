/**
 * Changes that are not delivered node by node (issue 38 item 4): retention
 * removing finished operations, a backlog sample taken, a migration's data
 * fix. Each is one "re-read what you show" event per subject and audience,
 * however many rows it touched, so a background job never floods a
 * subscriber, and nobody learns anything about rows they may not see: an
 * event scoped to a DID reaches that DID's viewers (and services) only.
 */

/** A change feed event (resolvers/context.ts `ChangeEvent`) of kind `store`. */
export interface StoreChangeEvent {
  kind: 'store';
  nodeKey: string;
}

/** Who reads (src/auth's `Viewer`, as far as this needs it). */
type Reader = { readonly kind: 'anonymous' } | { readonly kind: 'user' | 'service'; readonly did: string };

/** What changed: the rows a view of this subject shows. */
export const STORE_CHANGE_SUBJECTS = ['OPERATIONS', 'WATCHES', 'SWEEP_RECEIPTS', 'BACKLOG'] as const;
export type StoreChangeSubject = (typeof STORE_CHANGE_SUBJECTS)[number];

/**
 * Why it changed. `BULK_CHANGE` is never published: a server's subscriptions
 * tell it to a viewer who may see more of one write's rows than node-by-node
 * subscriptions are sent (resolvers/subscriptions.ts, `MAX_NODES_PER_WRITE`).
 */
export const STORE_CHANGE_REASONS = ['RETENTION', 'BACKLOG_SAMPLED', 'MIGRATION', 'BULK_CHANGE'] as const;
export type StoreChangeReason = (typeof STORE_CHANGE_REASONS)[number];

/** Who is told: every viewer, services only (store-wide numbers), or the viewers of one DID (and services). */
export type StoreChangeAudience = { everyone: true } | { services: true } | { did: string };

/** One store change as a subscriber receives it. */
export interface StoreChange {
  subject: StoreChangeSubject;
  reason: StoreChangeReason;
  /** When this server delivered it (ms since the epoch). */
  at: number;
}

const EVERYONE = '*';
const SERVICES = '@services';

/**
 * The feed event of a store change. Its node key is
 * `subject/reason/audience`: no spaces (the feed's separator) and no `/` in a
 * DID, and identical events merge in a subscriber's queue (a burst of them is
 * one re-read).
 */
export function storeChangeEvent(subject: StoreChangeSubject, reason: StoreChangeReason, audience: StoreChangeAudience): StoreChangeEvent {
  const to = 'did' in audience ? audience.did : 'services' in audience ? SERVICES : EVERYONE;
  return { kind: 'store', nodeKey: `${subject}/${reason}/${to}` };
}

/** The events for rows of `subject` changed for `reason` whose owners (and callers) are `dids`: one per DID, services included in each. */
export function storeChangeEventsFor(subject: StoreChangeSubject, reason: StoreChangeReason, dids: Iterable<string>): StoreChangeEvent[] {
  return [...new Set(dids)].map((did) => storeChangeEvent(subject, reason, { did }));
}

/** The store change an event carries as `viewer` may receive it; null when it is not for this viewer or malformed. */
export function storeChangeFor(viewer: Reader, event: { nodeKey: string }, at: number): StoreChange | null {
  const first = event.nodeKey.indexOf('/');
  const second = event.nodeKey.indexOf('/', first + 1);
  if (first < 0 || second < 0) return null;
  const subject = event.nodeKey.slice(0, first) as StoreChangeSubject;
  const reason = event.nodeKey.slice(first + 1, second) as StoreChangeReason;
  const to = event.nodeKey.slice(second + 1);
  if (!STORE_CHANGE_SUBJECTS.includes(subject) || !STORE_CHANGE_REASONS.includes(reason) || to === '') return null;
  if (viewer.kind === 'anonymous') return null;
  const visible = to === EVERYONE || viewer.kind === 'service' || (to !== SERVICES && to === viewer.did);
  return visible ? { subject, reason, at } : null;
}

/**
 * What applied migrations publish: every subject, to everyone who may see it
 * (a migration may rewrite any row; saying so leaks nothing about anyone's).
 */
export function migrationEvents(): StoreChangeEvent[] {
  return [
    storeChangeEvent('OPERATIONS', 'MIGRATION', { everyone: true }),
    storeChangeEvent('SWEEP_RECEIPTS', 'MIGRATION', { everyone: true }),
    storeChangeEvent('BACKLOG', 'MIGRATION', { services: true }),
  ];
}
