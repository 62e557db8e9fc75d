/**
 * The request log (issue 12 item 3): one line per request with method, path,
 * status, duration, operation name, request id and viewer kind, never a
 * token; slow ones at warn. Also the pretty format's output for a terminal.
 */
import { Writable } from 'node:stream';
import { expect, it } from 'vitest';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { createServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { describeEachDialect } from '../helpers/databases.js';
import { captureLogs } from './log-capture.js';

const AUDIENCE = 'connector-store-request-log';
const worker = generateLocalKey();
const alice = generateLocalKey();

describeEachDialect('request log', (suite) => {
  function app(env: Record<string, string> = {}) {
    const logs = captureLogs('info');
    const built = createServerApp({
      config: loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, SERVICE_DIDS: worker.did, RETENTION_INTERVAL_MS: '0', RATE_LIMIT_PER_VIEWER: '0', ...env }),
      database: suite.database.open,
      logger: logs.logger,
      storeDeps: { now: suite.clock.now },
    });
    const requests = () => logs.entries().filter((e) => e.component === 'http');
    return { app: built, logs, requests };
  }

  it('writes one line per request with what an operator needs and no token', async () => {
    const { app: target, logs, requests } = app();
    const token = await mintToken({ privateKey: alice.privateKey, audience: AUDIENCE, now: suite.clock.now() });
    const service = await mintToken({ privateKey: worker.privateKey, audience: AUDIENCE, now: suite.clock.now() });
    const ask = (headers: Record<string, string>, body: unknown) =>
      target.yoga.fetch('http://localhost/graphql', { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
    await ask({ authorization: `Bearer ${token}`, 'x-request-id': 'req-12345678' }, { query: 'query Dash { serverInfo { viewerDID } }', operationName: 'Dash' });
    await ask({ authorization: `Bearer ${service}` }, { query: '{ __typename }' });
    // No operationName sent: the document's only operation names the line.
    await ask({}, { query: 'query Counts { operationCounts { count } }' });
    await ask({ authorization: 'Bearer not-a-token' }, { query: '{ __typename }' });
    await target.yoga.fetch('http://localhost/healthz'); // liveness probes are not logged
    await target.yoga.fetch('http://localhost/readyz');
    const lines = requests();
    expect(lines).toHaveLength(5);
    expect(lines[0]).toMatchObject({ level: 30, msg: 'request', method: 'POST', path: '/graphql', status: 200, operationName: 'Dash', requestID: 'req-12345678', viewer: 'user' });
    expect(typeof lines[0]!.durationMs).toBe('number');
    expect(lines[1]).toMatchObject({ status: 200, operationName: null, viewer: 'service' });
    expect(lines[2]).toMatchObject({ viewer: 'anonymous', operationName: 'Counts' });
    expect(lines[3]).toMatchObject({ status: 401, viewer: 'none' });
    expect(lines[4]).toMatchObject({ method: 'GET', path: '/readyz', status: 200 });
    expect(logs.text).not.toContain(token);
    expect(logs.text).not.toContain(service);
    expect(logs.text).not.toContain('not-a-token');
  });

  it('logs requests over SLOW_REQUEST_MS at warn', async () => {
    const { app: target, requests } = app({ SLOW_REQUEST_MS: '1' });
    const token = await mintToken({ privateKey: worker.privateKey, audience: AUDIENCE, now: suite.clock.now() });
    await target.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      // Slow enough on any machine: a page of every operation field with its watch and counts.
      body: JSON.stringify({ query: '{ operations(first: 100) { totalCount edges { node { id state watch { id } } } } operationCounts(groupBy: [CONNECTOR, STATE]) { count } }' }),
    });
    const [line] = requests();
    if (line!.durationMs > 1) expect(line).toMatchObject({ level: 40, msg: 'slow request' });
    else expect(line).toMatchObject({ level: 30 });
  });
});

it('the pretty format writes one readable line per entry for a terminal, not JSON', () => {
  const lines: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString('utf8'));
      done();
    },
  });
  const logger = createLogger('info', sink, 'pretty');
  logger.info({ status: 200, leaseToken: 'secret-token' }, 'request');
  logger.error({ err: new Error('the disk is full') }, 'could not write');
  const text = lines.join('');
  expect(text).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  request status=200 leaseToken=\[redacted\]\n/);
  expect(text).not.toContain('secret-token');
  expect(text).toMatch(/\n\d\d:\d\d:\d\d\.\d{3} ERROR could not write: the disk is full\n\s+at /);
  expect(() => JSON.parse(text)).toThrow();
});

describeEachDialect('request log, pretty', (suite) => {
  it('one line per request in development: method, operation name (or path), status, milliseconds', async () => {
    const lines: string[] = [];
    const logger = createLogger('info', { write: (text: string) => void lines.push(text) }, 'pretty');
    const target = createServerApp({
      config: loadConfig({ NODE_ENV: 'development', AUTH_AUDIENCE: AUDIENCE, RETENTION_INTERVAL_MS: '0', CONSOLE: 'false' }),
      database: suite.database.open,
      logger,
      storeDeps: { now: suite.clock.now },
    });
    const token = await mintToken({ privateKey: alice.privateKey, audience: AUDIENCE, now: suite.clock.now() });
    const ask = (body: unknown) =>
      target.yoga.fetch('http://localhost/graphql', { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` }, body: JSON.stringify(body) });
    await ask({ query: 'query Dash { serverInfo { viewerDID } }' });
    await ask({ query: 'query Counts { operationCounts { state count } }' });
    await ask({ query: '{ __typename }' });
    await target.yoga.fetch(`http://localhost/graphql?query=${encodeURIComponent('{ __typename }')}`, { headers: { accept: 'application/json' } });
    const written = lines.join('').split('\n').filter((line) => line !== '');
    expect(written).toHaveLength(4);
    expect(written[0]).toMatch(/^\d\d:\d\d:\d\d\.\d{3} INFO  POST Dash 200 \d+(\.\d)? ms$/);
    expect(written[1]).toMatch(/ INFO  POST Counts 200 \d+(\.\d)? ms$/);
    expect(written[2]).toMatch(/ INFO  POST \/graphql 200 \d+(\.\d)? ms$/);
    expect(written[3]).toMatch(/ INFO  GET \/graphql 200 \d+(\.\d)? ms anonymous$/);
    expect(lines.join('')).not.toContain(token);
  });
});
