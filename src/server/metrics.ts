/**
 * `GET /metrics` in the Prometheus text format: GraphQL request counts,
 * durations and errors by code (graphql-metrics.ts, on a registry of this
 * app's own), and the store's health as gauges read by one
 * bounded statement ({@link readStoreGauges}), cached for `cacheMs` so a
 * scrape never costs more than that statement however often it comes.
 * Optional bearer protection (`METRICS_TOKEN`).
 */
import { timingSafeEqual } from 'node:crypto';
import type { Plugin } from 'graphql-yoga';
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type pg from 'pg';
import type { ChangeFeed } from '../../resolvers/context.js';
import type { StoreContext } from '../store/context.js';
import type { ReadRouter } from '../db/read-replicas.js';
import { readStoreGauges, type StoreGauges } from '../store/gauges.js';
import { useGraphQLMetrics } from './graphql-metrics.js';
import type { Logger } from './logger.js';

/** The endpoint; not configurable, so dashboards and docs agree. */
export const METRICS_PATH = '/metrics';
/** Operation names become label values only while there are fewer than this many distinct ones (a client picks them). */
const MAX_OPERATION_NAMES = 200;
const OPERATION_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;
/** How long one gauge read may take before the scrape answers with the last values. */
const GAUGE_READ_TIMEOUT_MS = 2_000;

export interface MetricsOptions {
  /** Scrapes must send `Authorization: Bearer <token>` when set. */
  token: string | undefined;
  /** How long the store gauges are reused between scrapes. */
  cacheMs: number;
  store: StoreContext;
  changes: ChangeFeed;
  /** Open subscriptions per transport. */
  subscriptionsByTransport: () => ReadonlyMap<string, number>;
  /** Reserved or open single-connection event streams at /graphql/stream (each carries any number of subscriptions). */
  eventStreams?: () => number;
  /** The request pool (Postgres only). */
  pool: pg.Pool | undefined;
  /** Hot standbys for reads (READ_DATABASE_URLS): the store gauges are read through it, and its standbys' lag and routing are shown. */
  readRouter?: ReadRouter;
  logger: Logger;
}

/** The registry and the yoga plugins that fill and serve it. */
export function createMetrics(options: MetricsOptions): { registry: Registry; plugins: Plugin<any>[] } {
  const registry = new Registry();
  const names = new Set<string>();
  // Client-chosen names are bounded so a hostile client cannot grow the series without limit.
  const operationName = (name: string | undefined): string => {
    if (name === undefined || name === '') return 'Anonymous';
    if (!OPERATION_NAME.test(name)) return 'other';
    if (names.has(name)) return name;
    if (names.size >= MAX_OPERATION_NAMES) return 'other';
    names.add(name);
    return name;
  };
  const graphql = useGraphQLMetrics({ registry, endpoint: METRICS_PATH, operationName });

  // Process CPU, memory, event-loop lag, GC: prom-client's standard set.
  collectDefaultMetrics({ register: registry });
  registerStoreGauges(registry, options);
  registerProcessGauges(registry, options);
  return { registry, plugins: [metricsAccess(options.token), graphql] };
}

/** Refuses scrapes without the configured bearer token (401), before the endpoint answers. */
function metricsAccess(token: string | undefined): Plugin {
  const expected = token === undefined ? undefined : Buffer.from(`Bearer ${token}`);
  return {
    onRequest({ url, request, endResponse, fetchAPI }) {
      if (url.pathname !== METRICS_PATH) return;
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        endResponse(new fetchAPI.Response('metrics are read with GET\n', { status: 405, headers: { allow: 'GET, HEAD' } }));
        return;
      }
      if (expected === undefined) return;
      const sent = Buffer.from(request.headers.get('authorization') ?? '');
      if (sent.length !== expected.length || !timingSafeEqual(sent, expected)) {
        endResponse(
          new fetchAPI.Response('metrics need Authorization: Bearer <METRICS_TOKEN>\n', {
            status: 401,
            headers: { 'www-authenticate': 'Bearer realm="metrics"', 'content-type': 'text/plain; charset=utf-8' },
          }),
        );
      }
    },
  };
}

/** The store's gauges, all filled from one cached read. */
function registerStoreGauges(registry: Registry, { store, cacheMs, logger, readRouter }: MetricsOptions): void {
  let last: { at: number; gauges: StoreGauges } | undefined;
  let reading: Promise<StoreGauges | undefined> | undefined;
  const readFailures = new Counter({
    name: 'connector_store_gauge_read_failures_total',
    help: 'Reads of the store gauges that failed or timed out (the scrape then shows the last values read).',
    registers: [registry],
    // Serialised before the gauges: waits for this scrape's read so it counts its failure.
    collect: async () => void (await current()),
  });
  const lastRead = new Gauge({
    name: 'connector_store_gauge_read_timestamp_seconds',
    help: 'When the store gauges shown were read from the database (Unix seconds); 0 before the first read.',
    registers: [registry],
    collect: async () => {
      await current();
      lastRead.set(last === undefined ? 0 : last.at / 1000);
    },
  });
  async function current(): Promise<StoreGauges | undefined> {
    const now = Date.now();
    if (last !== undefined && now - last.at < cacheMs) return last.gauges;
    reading ??= (async () => {
      let timer: NodeJS.Timeout | undefined;
      try {
        const gauges = await Promise.race([
          // Gauges may be a moment stale: a standby in rotation serves them when there is one.
          readRouter === undefined ? readStoreGauges(store) : readRouter.readerFor(null).then((db) => readStoreGauges({ ...store, db })),
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new Error(`store gauges not read within ${GAUGE_READ_TIMEOUT_MS} ms`)), GAUGE_READ_TIMEOUT_MS);
          }),
        ]);
        last = { at: Date.now(), gauges };
        return gauges;
      } catch (error) {
        readFailures.inc();
        logger.warn({ err: error }, 'metrics: reading the store gauges failed; serving the last values');
        return last?.gauges;
      } finally {
        clearTimeout(timer);
        reading = undefined;
      }
    })();
    return reading;
  }
  // Each gauge's collect awaits the same cached read; one statement per cacheMs at most.
  const gauge = (name: string, help: string, labelNames: string[], fill: (g: Gauge<string>, gauges: StoreGauges) => void) => {
    const g: Gauge<string> = new Gauge({
      name,
      help,
      labelNames,
      registers: [registry],
      collect: async () => {
        const gauges = await current();
        if (gauges === undefined) return;
        g.reset();
        fill(g, gauges);
      },
    });
  };
  gauge('connector_store_operations', 'Operations by state (exact, from the counter tables).', ['state'], (g, s) => {
    for (const [state, n] of Object.entries(s.operationsByState)) g.set({ state }, n);
  });
  gauge('connector_store_operations_due', 'Live operations a worker could claim now (due, not deferred, no live lease); at most 10 000 counted.', [], (g, s) =>
    g.set(s.dueBacklog.count),
  );
  gauge(
    'connector_store_oldest_due_operation_age_seconds',
    'How long the longest-waiting due operation has been due, in seconds; 0 when none is due.',
    [],
    (g, s) => g.set(s.oldestDueAt === null ? 0 : Math.max(0, (store.now() - s.oldestDueAt) / 1000)),
  );
  gauge('connector_store_operations_lease_expired', 'Live operations whose lease expired without an outcome; at most 10 000 counted.', [], (g, s) =>
    g.set(s.expiredLeases.count),
  );
  gauge('connector_store_operations_stuck', 'Live operations that count as stuck (lapsed lease, or due for over 15 minutes with no live lease); at most 10 000 counted.', [], (g, s) =>
    g.set(s.stuck.count),
  );
  gauge('connector_store_watches', 'Projection watches by verification status; at most 10 000 counted per status.', ['status'], (g, s) => {
    for (const [status, n] of Object.entries(s.watchesByStatus)) g.set({ status }, n.count);
  });
  gauge('connector_store_sync_states', 'Sync states by status, counted over at most 10 000 rows (see connector_store_counts_capped).', ['status'], (g, s) => {
    for (const [status, n] of Object.entries(s.syncStatesByStatus)) g.set({ status }, n);
  });
  gauge('connector_store_counts_capped', '1 when a gauge stopped counting at 10 000 (its value is then a lower bound).', ['gauge'], (g, s) => {
    g.set({ gauge: 'connector_store_operations_due' }, Number(s.dueBacklog.capped));
    g.set({ gauge: 'connector_store_operations_lease_expired' }, Number(s.expiredLeases.capped));
    g.set({ gauge: 'connector_store_operations_stuck' }, Number(s.stuck.capped));
    g.set({ gauge: 'connector_store_watches' }, Number(Object.values(s.watchesByStatus).some((n) => n.capped)));
    g.set({ gauge: 'connector_store_sync_states' }, Number(s.syncStatesCapped));
  });
}

/** This replica's own state: change feed, open subscriptions, database pool. Read at scrape time, no I/O. */
function registerProcessGauges(registry: Registry, { changes, subscriptionsByTransport, eventStreams, pool, readRouter }: MetricsOptions): void {
  const feed: Gauge<string> = new Gauge({
    name: 'connector_store_change_feed_status',
    help: 'The change feed of this replica: 1 for its current status (connected, reconnecting, closed), 0 for the others.',
    labelNames: ['status'],
    registers: [registry],
    collect: () => {
      const status = changes.status();
      for (const s of ['connected', 'reconnecting', 'closed']) feed.set({ status: s }, Number(s === status));
    },
  });
  const subscriptions: Gauge<string> = new Gauge({
    name: 'connector_store_subscriptions_open',
    help: 'Open subscriptions on this replica by transport (sse, websocket).',
    labelNames: ['transport'],
    registers: [registry],
    collect: () => {
      const open = subscriptionsByTransport();
      for (const transport of new Set(['sse', 'websocket', ...open.keys()])) subscriptions.set({ transport }, open.get(transport) ?? 0);
    },
  });
  if (eventStreams !== undefined) {
    const streams: Gauge<string> = new Gauge({
      name: 'connector_store_event_streams_open',
      help: 'Reserved or open single-connection event streams at /graphql/stream on this replica; each carries any number of subscriptions (the console shares one per browser and identity).',
      registers: [registry],
      collect: () => streams.set(eventStreams()),
    });
  }
  if (pool === undefined) return;
  if (readRouter !== undefined) registerStandbyMetrics(registry, readRouter);
  const connections: Gauge<string> = new Gauge({
    name: 'connector_store_db_pool_connections',
    help: 'The Postgres request pool of this replica: total and idle connections, and requests waiting for one.',
    labelNames: ['state'],
    registers: [registry],
    collect: () => {
      connections.set({ state: 'total' }, pool.totalCount);
      connections.set({ state: 'idle' }, pool.idleCount);
      connections.set({ state: 'waiting' }, pool.waitingCount);
    },
  });
}

/** The read standbys: lag and rotation per standby, and where reads went. */
function registerStandbyMetrics(registry: Registry, router: ReadRouter): void {
  const lag: Gauge<string> = new Gauge({
    name: 'connector_store_read_standby_lag_seconds',
    help: 'Replay lag of each read standby (READ_DATABASE_URLS) at its last check, in seconds; -1 while it does not answer.',
    labelNames: ['standby'],
    registers: [registry],
    collect: () => {
      for (const standby of router.standbys()) lag.set({ standby: standby.name }, standby.lagMs === null ? -1 : standby.lagMs / 1000);
    },
  });
  const rotation: Gauge<string> = new Gauge({
    name: 'connector_store_read_standby_in_rotation',
    help: 'Whether each read standby serves reads (1) or is out of rotation (0: lagging past MAX_REPLICA_LAG_MS, unreachable, or not in recovery).',
    labelNames: ['standby'],
    registers: [registry],
    collect: () => {
      for (const standby of router.standbys()) rotation.set({ standby: standby.name }, Number(standby.inRotation));
    },
  });
  const routed = new Counter({
    name: 'connector_store_reads_routed_total',
    help: 'Reads that could use a standby (queries, gauges), by where they went and why; failover counts statements a standby failed that ran again on the primary.',
    labelNames: ['target', 'reason'],
    registers: [registry],
  });
  router.onRoute((target, reason) => routed.inc({ target, reason }));
}
