/**
 * Traces (issue 12 item 2) end to end: the server process started with the
 * standard OTEL_* variables exports, over OTLP/HTTP (JSON), to a collector
 * this test runs on 127.0.0.1: one span per GraphQL operation, the SQL
 * statements it ran as its children, and nothing a client sent (variables,
 * lease tokens, SQL parameters) in any attribute. Without the variables the
 * server exports nothing. Once per dialect.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { DialectName } from '../../src/db/connect.js';
import { tracingRequested } from '../../src/server/tracing.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { e2ePrincipals, postGraphQL, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import { CLAIM, claimInput } from '../helpers/operation-graphql.js';

const AUDIENCE = 'connector-store-tracing';
const { keys, tokens, mint } = e2ePrincipals(AUDIENCE, ['worker']);

interface ExportedSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes: { key: string; value: Record<string, unknown> }[];
}

/** An OTLP/HTTP JSON collector on loopback, keeping every span it receives. */
async function startCollector(): Promise<{ server: Server; url: string; spans: ExportedSpan[]; bodies: string[] }> {
  const spans: ExportedSpan[] = [];
  const bodies: string[] = [];
  const server = createServer((request, response) => {
    let body = '';
    request.on('data', (chunk) => (body += chunk));
    request.on('end', () => {
      bodies.push(body);
      if (request.url === '/v1/traces') {
        const parsed = JSON.parse(body) as { resourceSpans: { scopeSpans: { spans: ExportedSpan[] }[] }[] };
        for (const resource of parsed.resourceSpans) for (const scope of resource.scopeSpans) spans.push(...scope.spans);
      }
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, spans, bodies };
}

const attribute = (span: ExportedSpan, key: string) => {
  const value = span.attributes.find((a) => a.key === key)?.value;
  return value === undefined ? undefined : Object.values(value)[0];
};

it('tracing is off unless the OTEL_* variables ask for it', () => {
  expect(tracingRequested({})).toBe(false);
  expect(tracingRequested({ OTEL_TRACES_EXPORTER: 'none' })).toBe(false);
  expect(tracingRequested({ OTEL_TRACES_EXPORTER: 'otlp' })).toBe(true);
  expect(tracingRequested({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' })).toBe(true);
  expect(tracingRequested({ OTEL_TRACES_EXPORTER: 'console', OTEL_SDK_DISABLED: 'true' })).toBe(false);
});

const dialects: DialectName[] = testDialects().filter(dialectAvailable);

describe.each(dialects)('OpenTelemetry traces (%s)', (dialect) => {
  let collector: Awaited<ReturnType<typeof startCollector>>;
  let started: E2EServers | undefined;

  beforeAll(async () => {
    collector = await startCollector();
    started = await startE2EServers(dialect, {
      audience: AUDIENCE,
      serviceDID: keys.worker.did,
      name: 'trace',
      env: {
        OTEL_TRACES_EXPORTER: 'otlp',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${collector.url}/v1/traces`,
        OTEL_BSP_SCHEDULE_DELAY: '50',
        OTEL_SERVICE_NAME: 'cs-trace-test',
      },
    });
    await mint();
  }, 60_000);

  afterAll(async () => {
    await started?.dispose();
    await new Promise((resolve) => collector?.server.close(resolve));
  });

  it('exports one span per operation with its SQL statements as children, and no value a client sent', async () => {
    const claimed = await postGraphQL(started!.server, tokens.worker, CLAIM, { input: claimInput({ operationID: 'traced-1' }) });
    expect(claimed.status).toBe(200);
    const lease = claimed.body.data.claimOperation.lease as { token: string };
    expect(typeof lease.token).toBe('string');
    const listed = await postGraphQL(started!.server, tokens.worker, 'query Dashboard { operations(first: 5) { edges { node { operationID } } } }');
    expect(listed.body.data.operations.edges).toHaveLength(1);

    await expect.poll(() => collector.spans.filter((s) => s.name === 'query.Dashboard').length, { timeout: 10_000 }).toBe(1);
    const mutation = collector.spans.find((s) => s.name.startsWith('mutation.'))!;
    expect(mutation).toBeDefined();
    expect(mutation.kind).toBe(2); // SERVER
    expect(attribute(mutation, 'graphql.execute.operationType')).toBe('mutation');
    const query = collector.spans.find((s) => s.name === 'query.Dashboard')!;
    for (const operation of [mutation, query]) {
      const children = collector.spans.filter((s) => s.parentSpanId === operation.spanId);
      expect(children.length, `${operation.name} has SQL children`).toBeGreaterThan(0);
      for (const child of children) {
        expect(child.traceId).toBe(operation.traceId);
        expect(child.kind).toBe(3); // CLIENT
        expect(attribute(child, 'db.system.name')).toBe(dialect === 'postgres' ? 'postgresql' : 'sqlite');
        expect(String(attribute(child, 'db.query.text'))).toMatch(/kubun_connector_|pg_notify/);
      }
      // A new key's claim is one statement on Postgres: its INSERT, request record and NOTIFY in a WITH (issue 40).
      expect(children.map((c) => c.name)).toContain(operation === query ? 'SELECT' : dialect === 'postgres' ? 'WITH' : 'INSERT');
    }
    // Neither the lease token the server minted nor the client's values are exported.
    const everything = collector.bodies.join('\n');
    expect(everything).not.toContain(lease.token);
    expect(everything).not.toContain('traced-1');
    expect(everything).not.toContain(tokens.worker);
    expect(everything).toContain('cs-trace-test');
  });
});
