/**
 * Compiled execution (src/server/jit.ts): queries and mutations run compiled,
 * bad variables are reported in graphql-js's words and nothing runs twice,
 * variables deeper than any input run on graphql-js and are refused clearly.
 */
import { expect, it } from 'vitest';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { describeEachDialect } from '../helpers/databases.js';

const AUDIENCE = 'connector-store-jit';
const CLAIM = `mutation($input: ClaimOperationInput!) { claimOperation(input: $input) { __typename ... on ClaimOperationPayload { outcome operation { operationID } } } }`;

describeEachDialect('compiled execution', (suite) => {
  const worker = generateLocalKey();
  const makeApp = (): ServerApp =>
    createServerApp({
      config: loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, SERVICE_DIDS: worker.did, RETENTION_INTERVAL_MS: '0' }),
      database: suite.database.open,
      logger: createLogger('silent'),
      storeDeps: { now: suite.clock.now },
    });
  const post = async (app: ServerApp, query: string, variables: Record<string, unknown> = {}) => {
    const token = await mintToken({ privateKey: worker.privateKey, audience: AUDIENCE, now: suite.clock.now() });
    const response = await app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query, variables }),
    });
    return { status: response.status, body: (await response.json()) as { data?: any; errors?: { message: string; extensions?: { code?: string } }[] } };
  };
  const claimInput = (operationID: string, overrides: Record<string, unknown> = {}) => ({
    operationID,
    connectorName: 'google',
    model: 'calendar.event',
    op: 'CREATE',
    accountKey: 'account-1',
    target: 'primary',
    deterministicEventID: `event-${operationID}`,
    payloadHash: 'hash-1',
    reissueIntent: 'none',
    leaseMs: 30_000,
    ...overrides,
  });
  const rows = async () => (await suite.store.db.selectFrom('kubun_connector_operation').select('operation_id').execute()).map((r) => r.operation_id);

  it('a mutation runs once, compiled, and the same document again reuses its compilation', async () => {
    const app = makeApp();
    const first = await post(app, CLAIM, { input: claimInput('jit-1') });
    const second = await post(app, CLAIM, { input: claimInput('jit-2') });
    expect(first.body.data.claimOperation).toEqual({ __typename: 'ClaimOperationPayload', outcome: 'CLAIMED', operation: { operationID: 'jit-1' } });
    expect(second.body.data.claimOperation.outcome).toBe('CLAIMED');
    expect((await rows()).sort()).toEqual(['jit-1', 'jit-2']);
  });

  it("a bad variable gets graphql-js's message (the scalar's own words), and nothing is written", async () => {
    const app = makeApp();
    // Compiled first with good variables, so the second request meets the compiled query.
    await post(app, CLAIM, { input: claimInput('jit-good') });
    const bad = await post(app, CLAIM, { input: claimInput('jit-bad', { ownerDID: 'not-a-did' }) });
    expect(bad.body.data).toBeUndefined();
    expect(bad.body.errors).toHaveLength(1);
    expect(bad.body.errors![0]!.message).toBe(
      'Variable "$input" got invalid value "not-a-did" at "input.ownerDID"; DID must look like did:method:identifier (at most 2048 characters)',
    );
    const missing = await post(app, CLAIM, { input: { operationID: 'jit-missing' } });
    expect(missing.body.errors![0]!.message).toMatch(/^Variable "\$input" got invalid value .* Field "accountKey" of required type "String!" was not provided\./);
    expect(await rows()).toEqual(['jit-good']);
  });

  it('variables deeper than any input run on graphql-js and get the typed refusal', async () => {
    const app = makeApp();
    let deep: unknown = 'leaf';
    for (let i = 0; i < 100; i++) deep = { next: deep };
    const result = await post(
      app,
      `mutation($input: FinalizeOperationInput!) { finalizeOperation(input: $input) { __typename ... on Error { message } } }`,
      { input: { id: 'x', version: 0, leaseToken: 't', documentID: 'd', sourceID: 's', resultEntity: deep } },
    );
    expect(result.body.errors).toBeUndefined();
    expect(result.body.data.finalizeOperation).toEqual({
      __typename: 'InputValidationError',
      message: 'Validation error: input.resultEntity: must be nested at most 64 levels deep',
    });
  });
});
