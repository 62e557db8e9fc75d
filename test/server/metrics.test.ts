/**
 * `GET /metrics` (issue 12 item 1): GraphQL request, duration and error
 * series by operation and code, the store gauges moving after a claim,
 * process gauges, bounded operation-name labels, the optional bearer token,
 * and a scrape that still answers when the database is gone.
 */
import { describe, expect, it } from 'vitest';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { openDatabase, parseDatabaseURL } from '../../src/db/connect.js';
import { createServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { describeEachDialect } from '../helpers/databases.js';
import { CLAIM, claimInput as fixtureClaimInput } from '../helpers/operation-graphql.js';
import { captureLogs } from './log-capture.js';

const claimInput = (operationID: string) => fixtureClaimInput({ operationID });

const AUDIENCE = 'connector-store-metrics';
const worker = generateLocalKey();

/** The value of one series in a Prometheus text exposition, or undefined. */
function sample(text: string, series: string): number | undefined {
  for (const line of text.split('\n')) {
    if (line.startsWith(`${series} `)) return Number(line.slice(series.length + 1));
  }
  return undefined;
}

describeEachDialect('metrics endpoint', (suite) => {
  function app(env: Record<string, string> = {}) {
    const logs = captureLogs('warn');
    const built = createServerApp({
      config: loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, SERVICE_DIDS: worker.did, RETENTION_INTERVAL_MS: '0', RATE_LIMIT_PER_VIEWER: '0', METRICS_CACHE_MS: '0', ...env }),
      database: suite.database.open,
      logger: logs.logger,
      storeDeps: { now: suite.clock.now },
    });
    return { app: built, logs };
  }
  const token = () => mintToken({ privateKey: worker.privateKey, audience: AUDIENCE, now: suite.clock.now() });
  async function post(target: ReturnType<typeof app>['app'], body: unknown, auth?: string) {
    const response = await target.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(auth !== undefined && { authorization: `Bearer ${auth}` }) },
      body: JSON.stringify(body),
    });
    return response.json();
  }
  async function scrape(target: ReturnType<typeof app>['app'], headers: Record<string, string> = {}) {
    const response = await target.yoga.fetch('http://localhost/metrics', { headers });
    return { status: response.status, type: response.headers.get('content-type'), text: await response.text() };
  }

  it('serves request counts and durations by operation, errors by code, and store gauges that move after a claim', async () => {
    const { app: target } = app();
    const before = await scrape(target);
    expect(before.status).toBe(200);
    expect(before.type).toContain('text/plain');
    expect(sample(before.text, 'connector_store_operations{state="attempted"}')).toBe(0);
    expect(sample(before.text, 'connector_store_operations_due')).toBe(0);

    const auth = await token();
    const claimed = await post(target, { query: CLAIM, variables: { input: claimInput('m-1') }, operationName: 'Claim' }, auth);
    expect(claimed.data.claimOperation.outcome).toBe('CLAIMED');
    await post(target, { query: '{ operationCounts { count } }' }); // anonymous: UNAUTHENTICATED
    await post(target, { query: '{ nope }' }, auth); // validation error

    const after = await scrape(target);
    expect(sample(after.text, 'connector_store_operations{state="attempted"}')).toBe(1);
    expect(sample(after.text, 'graphql_envelop_request{operationName="Claim",operationType="mutation"}')).toBe(1);
    expect(sample(after.text, 'graphql_envelop_request_duration_count{operationName="Claim",operationType="mutation"}')).toBe(1);
    expect(after.text).toMatch(/graphql_envelop_error_result\{[^}]*code="UNAUTHENTICATED"[^}]*\} 1/);
    expect(after.text).toMatch(/graphql_envelop_error_result\{[^}]*phase="validate"[^}]*\} 1/);
    expect(after.text).toMatch(/graphql_yoga_http_duration_count\{method="POST",statusCode="200",operationName="Claim",operationType="mutation"\} 1/);
    // No URL label: query strings never become series.
    expect(after.text).not.toMatch(/url="/);

    // Its lease lapses: due, expired, and after 15 minutes also stuck.
    suite.clock.advance(20 * 60_000);
    const later = await scrape(target);
    expect(sample(later.text, 'connector_store_operations_due')).toBe(1);
    expect(sample(later.text, 'connector_store_operations_lease_expired')).toBe(1);
    expect(sample(later.text, 'connector_store_operations_stuck')).toBe(1);
    expect(sample(later.text, 'connector_store_oldest_due_operation_age_seconds')).toBeGreaterThanOrEqual(19 * 60);
    expect(sample(later.text, 'connector_store_watches{status="verified"}')).toBe(0);
    expect(sample(later.text, 'connector_store_counts_capped{gauge="connector_store_operations_due"}')).toBe(0);
    expect(sample(later.text, 'connector_store_change_feed_status{status="connected"}')).toBe(1);
    expect(sample(later.text, 'connector_store_subscriptions_open{transport="sse"}')).toBe(0);
    expect(sample(later.text, 'connector_store_gauge_read_timestamp_seconds')).toBeGreaterThan(0);
    expect(later.text).toContain('process_cpu_user_seconds_total');
    if (suite.dialect === 'postgres') expect(later.text).toMatch(/connector_store_db_pool_connections\{state="total"\} \d+/);
  });

  it('labels each error by phase and code: parse, validate, execute; only executed documents are counted (subscriptions when they end: test/server/document-endpoints.test.ts, on every endpoint)', async () => {
    const { app: target } = app();
    const auth = await token();
    await post(target, { query: '{ operations(' }, auth); // does not parse
    await post(target, { query: 'query Nope { nope }', operationName: 'Nope' }, auth); // does not validate
    // No token: refused (401) before anything runs, as the execution's one error.
    await post(target, { query: 'query Two { a: operationCounts { count } b: operationCounts { count } }', operationName: 'Two' });
    const text = (await scrape(target)).text;
    expect(sample(text, 'graphql_envelop_error_result{operationName="Anonymous",operationType="unknown",phase="parse",code="GRAPHQL_PARSE_FAILED"}')).toBe(1);
    expect(sample(text, 'graphql_envelop_error_result{operationName="Nope",operationType="query",phase="validate",code="GRAPHQL_VALIDATION_FAILED"}')).toBe(1);
    expect(sample(text, 'graphql_envelop_error_result{operationName="Two",operationType="query",phase="execute",code="UNAUTHENTICATED"}')).toBe(1);
    expect(sample(text, 'graphql_envelop_request{operationName="Two",operationType="query"}')).toBe(1);
    expect(sample(text, 'graphql_envelop_request_duration_count{operationName="Two",operationType="query"}')).toBe(1);
    // Neither the unparsed nor the invalid document executed; only the parsed ones have an HTTP duration.
    expect(sample(text, 'graphql_envelop_request{operationName="Nope",operationType="query"}')).toBeUndefined();
    expect(text).not.toMatch(/graphql_yoga_http_duration_count\{[^}]*operationType="unknown"/);
    expect(text).toMatch(/graphql_yoga_http_duration_count\{method="POST",statusCode="401",operationName="Two",operationType="query"\} 1/);
  });

  it('counts open subscriptions per transport and forgets them when they end', async () => {
    const { app: target } = app();
    const controller = new AbortController();
    const stream = await target.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization: `Bearer ${await token()}` },
      body: JSON.stringify({ query: 'subscription { operationsChanged { id } }' }),
      signal: controller.signal,
    });
    expect(stream.status).toBe(200);
    await expect.poll(async () => sample((await scrape(target)).text, 'connector_store_subscriptions_open{transport="sse"}')).toBe(1);
    expect(sample((await scrape(target)).text, 'connector_store_subscriptions_open{transport="websocket"}')).toBe(0);
    controller.abort();
    await stream.body?.cancel().catch(() => {});
    await expect.poll(async () => sample((await scrape(target)).text, 'connector_store_subscriptions_open{transport="sse"}')).toBe(0);
  });

  it('reads the store once per cache period however often it is scraped', async () => {
    const { app: target } = app({ METRICS_CACHE_MS: '60000' });
    const first = await scrape(target);
    await post(target, { query: CLAIM, variables: { input: claimInput('m-2') } }, await token());
    const second = await scrape(target);
    // Within the cache period the gauges are the first read's.
    expect(sample(second.text, 'connector_store_operations{state="attempted"}')).toBe(0);
    expect(sample(second.text, 'connector_store_gauge_read_timestamp_seconds')).toBe(sample(first.text, 'connector_store_gauge_read_timestamp_seconds'));
  });

  it('labels at most 200 distinct operation names and never a malformed one', async () => {
    const { app: target } = app();
    const auth = await token();
    for (let i = 0; i < 205; i++) await post(target, { query: `query Q${i} { __typename }`, operationName: `Q${i}` }, auth);
    await post(target, { query: 'query Q0 { __typename }', operationName: 'Q0' }, auth);
    const text = (await scrape(target)).text;
    const names = new Set([...text.matchAll(/graphql_envelop_request\{operationName="([^"]+)"/g)].map((m) => m[1]));
    expect(names.size).toBe(201); // 200 names + "other"
    expect(sample(text, 'graphql_envelop_request{operationName="Q0",operationType="query"}')).toBe(2);
    expect(sample(text, 'graphql_envelop_request{operationName="other",operationType="query"}')).toBe(5);
  });

  it('with METRICS_TOKEN refuses scrapes without it (401) and serves them with it', async () => {
    const secret = 'scrape-secret-0123456789';
    const { app: target } = app({ METRICS_TOKEN: secret });
    const refused = await scrape(target);
    expect(refused.status).toBe(401);
    expect(refused.text).not.toContain(secret);
    expect((await scrape(target, { authorization: 'Bearer wrong-secret-0123456789' })).status).toBe(401);
    const served = await scrape(target, { authorization: `Bearer ${secret}` });
    expect(served.status).toBe(200);
    expect(served.text).toContain('connector_store_operations');
    expect(() => loadConfig({ METRICS_TOKEN: 'short' })).toThrow(/METRICS_TOKEN/);
  });

  it('METRICS=false turns the endpoint off; other methods than GET are refused', async () => {
    const { app: off } = app({ METRICS: 'false' });
    expect((await scrape(off)).status).toBe(404);
    const { app: on } = app();
    const posted = await on.yoga.fetch('http://localhost/metrics', { method: 'POST', body: '' });
    expect(posted.status).toBe(405);
  });
});

describe('metrics endpoint: database unreachable', () => {
  it('still answers 200 with the process gauges, counts the failed read, and never takes the process down', async () => {
    // A closed port on loopback: nothing listens on port 1.
    const database = openDatabase(parseDatabaseURL('postgres://postgres@127.0.0.1:1/none'), { connectionTimeoutMs: 500 });
    const logs = captureLogs('warn');
    try {
      const target = createServerApp({
        config: loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, RETENTION_INTERVAL_MS: '0', METRICS_CACHE_MS: '0', DATABASE_URL: 'postgres://postgres@127.0.0.1:1/none' }),
        database,
        logger: logs.logger,
      });
      const response = await target.yoga.fetch('http://localhost/metrics');
      expect(response.status).toBe(200);
      const text = await response.text();
      expect(sample(text, 'connector_store_gauge_read_failures_total')).toBe(1);
      expect(sample(text, 'connector_store_gauge_read_timestamp_seconds')).toBe(0);
      expect(text).not.toMatch(/^connector_store_operations\{/m);
      expect(text).toMatch(/connector_store_db_pool_connections\{state="waiting"\} \d+/);
      expect(logs.text).toContain('reading the store gauges failed');
    } finally {
      await database.close();
    }
  });
});
