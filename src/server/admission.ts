/**
 * Who may hold a long-lived stream on this replica: a subscription (yoga SSE
 * on /graphql, graphql-sse in either mode, graphql-ws), a reserved
 * graphql-sse stream, a WebSocket connection. did:keys cost nothing, so a cap
 * per DID alone lets a crowd of fresh keys fill the process-wide cap and lock
 * everyone else out. The rule, checked in this order for each pool:
 *
 * 1. per viewer: at most `perViewer` (429 `TOO_MANY_SUBSCRIPTIONS`);
 * 2. an *unknown* viewer (not a service DID, owns no row old enough) from an
 *    address that already holds `perIP` for unknown viewers is refused
 *    (429 `TOO_MANY_SUBSCRIPTIONS_PER_IP`); the address is the socket's
 *    remote address keyed by client-address.ts (IPv6 per /64), no proxy
 *    header is trusted;
 * 3. at most `total` for everyone (503 `OVERLOADED`, retryable);
 * 4. unknown viewers together hold at most `unknownPercent` % of `total`
 *    (503 `OVERLOADED`, retryable): the rest is kept for known identities,
 *    service DIDs and viewers who own rows.
 *
 * Known viewers are not counted per address: an owner behind the same NAT as
 * a flood of fresh keys still gets in. Known costs more than a claim (issue
 * 41): a row counts once it is KNOWN_VIEWER_ROW_AGE_MS old (an hour by
 * default), so keys that each claim once a moment ago are still fresh keys;
 * keys prepared that long ahead are not stopped by this, only by the
 * per-viewer caps and the totals. Standing is an admission hint (cached
 * for a few seconds); the caps are resource limits of this process, so they
 * live in its memory like the rest of SPEC §6's per-replica limits.
 */

/** A viewer's standing for admission: `known` (service DID, or owns a row old enough) or `unknown` (a fresh key). */
export type Standing = 'known' | 'unknown';

/** Who asks to hold one more stream. */
export interface Applicant {
  viewerDID: string;
  /** The socket's remote address; null when there is none (in-process requests): then no per-address cap applies. */
  ip: string | null;
  standing: Standing;
}

/** The caps of one pool (see the file comment). */
export interface AdmissionLimits {
  perViewer: number;
  /** Held by unknown viewers from one address; 0: no cap. */
  perIP: number;
  total: number;
  /** Percentage of `total` unknown viewers may hold together (0 to 100; 100: nothing kept for known viewers). */
  unknownPercent: number;
}

/** Why a stream was refused: a stable `code`, its HTTP status, and whether trying again later may succeed. */
export class AdmissionRefusedError extends Error {
  readonly retryable: boolean;
  constructor(
    readonly code: 'TOO_MANY_SUBSCRIPTIONS' | 'TOO_MANY_SUBSCRIPTIONS_PER_IP' | 'OVERLOADED',
    readonly status: 429 | 503,
    message: string,
  ) {
    super(message);
    this.name = 'AdmissionRefusedError';
    this.retryable = status === 503;
  }
}

/** One kind of stream under one set of caps. */
export interface AdmissionPool {
  /** Admits `applicant` or throws {@link AdmissionRefusedError}. Returns the release (idempotent). */
  admit(applicant: Applicant): () => void;
  /** Held by one viewer. */
  count(viewerDID: string): number;
  /** Held by everyone. */
  total(): number;
  /** Held by unknown viewers. */
  unknown(): number;
}

/** A pool of streams named `noun` in refusals ("open subscriptions", "event streams"), under `limits`. */
export function createAdmissionPool(limits: AdmissionLimits, noun: string): AdmissionPool {
  const perViewer = new Map<string, number>();
  const unknownPerIP = new Map<string, number>();
  const unknownCap = Math.floor((limits.total * limits.unknownPercent) / 100);
  let total = 0;
  let unknown = 0;
  const decrement = (map: Map<string, number>, key: string) => {
    const left = (map.get(key) ?? 1) - 1;
    if (left <= 0) map.delete(key);
    else map.set(key, left);
  };
  return {
    admit({ viewerDID, ip, standing }) {
      const mine = perViewer.get(viewerDID) ?? 0;
      if (mine >= limits.perViewer) throw new AdmissionRefusedError('TOO_MANY_SUBSCRIPTIONS', 429, `too many ${noun} (at most ${limits.perViewer} per viewer)`);
      const counted = standing === 'unknown' && ip !== null && limits.perIP > 0 ? ip : null;
      if (counted !== null && (unknownPerIP.get(counted) ?? 0) >= limits.perIP) {
        throw new AdmissionRefusedError(
          'TOO_MANY_SUBSCRIPTIONS_PER_IP',
          429,
          `too many ${noun} from this address for viewers who own nothing here yet (at most ${limits.perIP})`,
        );
      }
      // Retryable: another replica (or this one, later) has room.
      if (total >= limits.total) throw new AdmissionRefusedError('OVERLOADED', 503, `this server holds its maximum of ${limits.total} ${noun}; retry later or elsewhere`);
      if (standing === 'unknown' && unknown >= unknownCap) {
        throw new AdmissionRefusedError(
          'OVERLOADED',
          503,
          `this server keeps its remaining ${noun} for service principals and viewers who own rows; retry later or elsewhere`,
        );
      }
      perViewer.set(viewerDID, mine + 1);
      total++;
      if (standing === 'unknown') unknown++;
      if (counted !== null) unknownPerIP.set(counted, (unknownPerIP.get(counted) ?? 0) + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        total--;
        if (standing === 'unknown') unknown--;
        decrement(perViewer, viewerDID);
        if (counted !== null) decrement(unknownPerIP, counted);
      };
    },
    count: (viewerDID) => perViewer.get(viewerDID) ?? 0,
    total: () => total,
    unknown: () => unknown,
  };
}

/** What {@link createStandingLookup} needs. */
export interface StandingLookupOptions {
  /** The configured service principals (always known). */
  serviceDIDs: ReadonlySet<string>;
  /** Whether a DID owns a row that makes it known (the store's `ownsAnyRow`, with the age rule). */
  ownsRows: (did: string) => Promise<boolean>;
  /** How long a `known` answer is reused. Default 60 000 ms. */
  knownTtlMs?: number;
  /** How long an `unknown` answer is reused: a viewer's first row makes them known within it. Default 2 000 ms. */
  unknownTtlMs?: number;
  /** Answers kept at most (oldest dropped first). Default 10 000. */
  maxEntries?: number;
  /** Clock (ms). Default `Date.now`. */
  now?: () => number;
}

/**
 * A viewer's {@link Standing}, from the configuration (service DIDs) or one
 * indexed ownership probe, cached per DID (a minute when known, two seconds
 * when not; concurrent asks share one probe). A failed probe counts as `unknown` and is not cached: a
 * database in trouble shrinks a fresh key's room, never a known one's for long.
 */
export function createStandingLookup(options: StandingLookupOptions): (did: string) => Promise<Standing> {
  const { serviceDIDs, ownsRows, knownTtlMs = 60_000, unknownTtlMs = 2_000, maxEntries = 10_000, now = Date.now } = options;
  const cache = new Map<string, { at: number; ttlMs: number; standing: Promise<Standing> }>();
  return (did) => {
    if (serviceDIDs.has(did)) return Promise.resolve('known');
    const hit = cache.get(did);
    if (hit !== undefined && now() - hit.at < hit.ttlMs) return hit.standing;
    cache.delete(did);
    if (cache.size >= maxEntries) cache.delete(cache.keys().next().value!);
    // Until answered, asks within the shorter lifetime share the probe.
    const entry = { at: now(), ttlMs: unknownTtlMs, standing: Promise.resolve<Standing>('unknown') };
    entry.standing = ownsRows(did).then(
      (owns): Standing => {
        if (owns) entry.ttlMs = knownTtlMs;
        return owns ? 'known' : 'unknown';
      },
      (): Standing => {
        if (cache.get(did) === entry) cache.delete(did);
        return 'unknown';
      },
    );
    cache.set(did, entry);
    return entry.standing;
  };
}
