/**
 * A fake third-party provider for the write-back example (node:http on
 * 127.0.0.1). It applies every create/update it receives, **without**
 * deduplicating (a real provider might not, and the point is to prove the
 * worker's exactly-once), counts raw applies per event id, and lets a reconcile
 * look an event up. It can be told to fail (503 before applying), stall (answer
 * late), drop the response after applying (the connection is cut: the caller
 * cannot know), or refuse a target for good (422).
 *
 * Its routes are those the documented workers talk to (README.md, client/README.md,
 * docs/worker.md), so each runs against it as written:
 *
 *   POST /events           {eventID, op?, model?, target?, …} → 201 {id, etag}, header etag
 *                          (the event id from the body, else the `idempotency-key` header;
 *                          header `x-apply-after-ms: n`: applied n ms after it arrived)
 *   GET  /events/:eventID  → 200 {id, etag}, header etag | 404
 *   GET  /stats            → {applies, lookups, dropped, failed, stalled, …}
 *   POST /faults           {failRate?, stallRate?, stallMs?, slowApplyRate?, slowApplyMs?, dropRate?, rejectTargets?}
 *
 * Run alone: `npm run example:provider` (port PROVIDER_PORT, default 4100, or the
 * first argument; 0 takes a free one).
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';

/** What the provider does wrong, on purpose. Rates are probabilities per request in [0, 1]. */
export interface ProviderFaults {
  /** Answer 503 (Retry-After: 0) without applying. */
  failRate: number;
  /** Apply, then answer only after `stallMs`. */
  stallRate: number;
  stallMs: number;
  /**
   * Take `slowApplyMs` before applying (issue 37): a provider still applying
   * a request after its sender's lease lapsed (the sender aborting its
   * request does not stop it). Only the send window keeps a takeover's
   * reconcile from missing it.
   */
  slowApplyRate: number;
  slowApplyMs: number;
  /** Apply, then cut the connection without answering. */
  dropRate: number;
  /** Targets refused for good: 422, nothing applied. */
  rejectTargets: string[];
}

/** What the provider has seen. */
export interface ProviderStats {
  /** Raw applies per event id (2 would be a duplicate write). */
  applies: Record<string, number>;
  /** Reconcile lookups (GET /events/:eventID). */
  lookups: number;
  dropped: number;
  failed: number;
  stalled: number;
  rejected: number;
  /** Requests applied only after `slowApplyMs`. */
  slowApplies: number;
}

/** A running fake provider. */
export interface FakeProvider {
  /** `http://127.0.0.1:PORT`. */
  url: string;
  stats(): ProviderStats;
  setFaults(faults: Partial<ProviderFaults>): void;
  close(): Promise<void>;
}

interface Item {
  id: string;
  etag: string;
  eventID: string;
}

/** Starts the provider on 127.0.0.1 (`port` 0: any free one). */
export async function startFakeProvider(options: { port?: number; faults?: Partial<ProviderFaults> } = {}): Promise<FakeProvider> {
  const faults: ProviderFaults = { failRate: 0, stallRate: 0, stallMs: 2_000, slowApplyRate: 0, slowApplyMs: 2_000, dropRate: 0, rejectTargets: [], ...options.faults };
  const items = new Map<string, Item>();
  const stats: ProviderStats = { applies: {}, lookups: 0, dropped: 0, failed: 0, stalled: 0, rejected: 0, slowApplies: 0 };
  let next = 0;

  const server: Server = createServer(async (request, response) => {
    const url = new URL(request.url ?? '/', 'http://127.0.0.1');
    const json = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      response.writeHead(status, { 'content-type': 'application/json', ...headers });
      response.end(JSON.stringify(body));
    };
    try {
      if (request.method === 'POST' && url.pathname === '/events') {
        const body = JSON.parse(await readBody(request)) as { eventID?: unknown; target?: unknown };
        const keyHeader = request.headers['idempotency-key'];
        const eventID = typeof body.eventID === 'string' && body.eventID !== '' ? body.eventID : typeof keyHeader === 'string' ? keyHeader : '';
        if (eventID === '') return json(400, { error: 'eventID (or an idempotency-key header) is required' });
        if (typeof body.target === 'string' && faults.rejectTargets.includes(body.target)) {
          stats.rejected++;
          return json(422, { error: `target ${body.target} does not accept writes` });
        }
        if (Math.random() < faults.failRate) {
          stats.failed++;
          return json(503, { error: 'provider busy' }, { 'retry-after': '0' });
        }
        const asked = Number(request.headers['x-apply-after-ms'] ?? 0);
        const applyAfterMs = Number.isFinite(asked) && asked > 0 ? Math.min(asked, 60_000) : Math.random() < faults.slowApplyRate ? faults.slowApplyMs : 0;
        if (applyAfterMs > 0) {
          stats.slowApplies++;
          // Applied even if the sender is gone by then: its aborting the request does not stop the provider.
          await new Promise((resolve) => setTimeout(resolve, applyAfterMs));
        }
        // Applied: every request counts, duplicates included.
        const item: Item = { id: `item-${++next}`, etag: `"${next}"`, eventID };
        items.set(eventID, item);
        stats.applies[eventID] = (stats.applies[eventID] ?? 0) + 1;
        if (Math.random() < faults.dropRate) {
          stats.dropped++;
          request.socket.destroy();
          return;
        }
        if (Math.random() < faults.stallRate) {
          stats.stalled++;
          await new Promise((resolve) => setTimeout(resolve, faults.stallMs));
        }
        return json(201, { id: item.id, etag: item.etag }, { etag: item.etag });
      }
      if (request.method === 'GET' && url.pathname.startsWith('/events/')) {
        stats.lookups++;
        const item = items.get(decodeURIComponent(url.pathname.slice('/events/'.length)));
        return item === undefined ? json(404, { error: 'no such event' }) : json(200, { id: item.id, etag: item.etag }, { etag: item.etag });
      }
      if (request.method === 'GET' && url.pathname === '/stats') return json(200, stats);
      if (request.method === 'POST' && url.pathname === '/faults') {
        Object.assign(faults, JSON.parse(await readBody(request)) as Partial<ProviderFaults>);
        return json(200, faults);
      }
      return json(404, { error: 'not found' });
    } catch (error) {
      return json(400, { error: (error as Error).message });
    }
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    stats: () => structuredClone(stats),
    setFaults: (update) => Object.assign(faults, update),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = '';
    request.setEncoding('utf8');
    request.on('data', (chunk: string) => {
      body += chunk;
      if (body.length > 1_000_000) reject(new Error('body too large'));
    });
    request.on('end', () => resolve(body));
    request.on('error', reject);
  });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const port = Number(process.argv[2] ?? process.env.PROVIDER_PORT ?? 4100);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    console.error(`PROVIDER_PORT: must be an integer from 0 to 65535 (got ${JSON.stringify(process.argv[2] ?? process.env.PROVIDER_PORT)})`);
    process.exit(2);
  }
  const provider = await startFakeProvider({ port });
  console.log(`stand-in provider on ${provider.url}: POST /events, GET /events/:eventID (POST /faults to make it fail, stall or drop; Ctrl+C stops it)`);
}
