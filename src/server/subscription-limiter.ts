/**
 * The per-process admission of subscriptions (admission.ts: per viewer, per
 * address for unknown viewers, in total, and the share kept for known
 * viewers), and the registry of open streams that shutdown ends. A resource
 * limit of this process, not a data invariant, so it lives in memory.
 */
import { GraphQLError } from 'graphql';
import { AdmissionRefusedError, createAdmissionPool, type AdmissionLimits, type Applicant, type Standing } from './admission.js';

/**
 * Open subscriptions under `limits` (see admission.ts); `standingOf` tells
 * known viewers from fresh keys. Default: every viewer known, i.e. only the
 * per-viewer and total caps.
 */
export function createSubscriptionLimiter(limits: AdmissionLimits, standingOf: (did: string) => Promise<Standing> = async () => 'known') {
  const pool = createAdmissionPool(limits, 'open subscriptions');
  const perTransport = new Map<string, number>();
  const streams = new Set<() => void>();
  const limiter = {
    /** Remembers how to end a stream; returns the function that forgets it. */
    register(end: () => void): () => void {
      streams.add(end);
      return () => streams.delete(end);
    },
    /** Ends every open stream (server shutdown). */
    closeAll(): void {
      for (const end of [...streams]) end();
    },
    /** Opens one for `applicant` over `transport` (for metrics: `sse`, `websocket`); throws the refusal as a GraphQL error. Returns its release. */
    open(applicant: Applicant, transport = 'sse'): () => void {
      let release: () => void;
      try {
        release = pool.admit(applicant);
      } catch (error) {
        if (!(error instanceof AdmissionRefusedError)) throw error;
        throw new GraphQLError(error.message, { extensions: { code: error.code, ...(error.retryable && { retryable: true }) } });
      }
      perTransport.set(transport, (perTransport.get(transport) ?? 0) + 1);
      let released = false;
      return () => {
        if (released) return;
        released = true;
        release();
        perTransport.set(transport, (perTransport.get(transport) ?? 1) - 1);
      };
    },
    /** Open subscriptions of one viewer (for tests and metrics). */
    count: (viewer: string) => pool.count(viewer),
    /** Open subscriptions of every viewer. */
    total: () => pool.total(),
    /** Open subscriptions per transport (metrics). */
    byTransport: (): ReadonlyMap<string, number> => perTransport,
    /** The limiter as one request's context gets it: over `transport`, for a client at `ip` (the socket's address; null: none). */
    over(transport: string, ip: string | null) {
      return {
        open: async (viewerDID: string) => limiter.open({ viewerDID, ip, standing: await standingOf(viewerDID) }, transport),
        register: (end: () => void) => limiter.register(end),
      };
    },
  };
  return limiter;
}
