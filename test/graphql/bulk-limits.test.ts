/**
 * Bulk mutations against hostile clients (issue 19 item 3): a bulk action is
 * priced by the rows it may touch (its cap, a receipt's candidates), so many
 * aliases of one are refused with QUERY_COMPLEXITY before anything runs; the
 * rows all bulk fields of one request may touch are bounded by
 * MAX_BULK_ROWS_PER_REQUEST; and a mutation whose writes committed is never
 * answered with a bare RESPONSE_TOO_LARGE refusal.
 */
import { print } from 'graphql';
import { expect, it } from 'vitest';
import { CancelOperationsDocument, RecordSweepReceiptDocument, RequeueOperationsDocument, RetryOperationsDocument } from '../../client/generated/graphql.js';
import { describeGraphQL, type GraphQLSuite } from '../helpers/graphql.js';
import { operationRowValues } from '../helpers/row-fixtures.js';

interface ErrorBody {
  data?: unknown;
  errors?: { message: string; extensions?: Record<string, any> }[];
}

/** `count` live ATTEMPTED operations of alice, not yet due and without a lease (so requeue has something to do to each). */
async function seedLive(suite: GraphQLSuite, count: number) {
  const store = suite.store;
  const rows = Array.from({ length: count }, (_, i) =>
    operationRowValues(store, {
      caller_did: suite.keys.alice.did,
      owner_did: suite.keys.alice.did,
      operation_id: `live-${i}`,
      next_attempt_at: store.now() + 3_600_000,
      lease_token: null,
      lease_expires_at: null,
      created_at: store.now() - count + i,
    }),
  );
  for (let i = 0; i < rows.length; i += 500) await store.db.insertInto('kubun_connector_operation').values(rows.slice(i, i + 500)).execute();
}

/** Operator-action history rows written so far (REQUEUE, RETRY, CANCEL). */
async function actionsWritten(suite: GraphQLSuite): Promise<number> {
  const rows = await suite.store.db.selectFrom('kubun_connector_operation_history').select('kind').where('kind', '!=', 'attempt').execute();
  return rows.length;
}

const requeues = (aliases: number, cap: number | null, selection = '__typename ... on BulkOperationActionPayload { changed more }') =>
  `mutation { ${Array.from({ length: aliases }, (_, i) => `a${i}: requeueOperations(input: { filter: { states: [ATTEMPTED] }${cap === null ? '' : `, cap: ${cap}`} }) { ${selection} }`).join(' ')} }`;

const receiptInput = (provenance: string) => ({
  connectorName: 'google',
  partition: 'calendar:primary',
  provenance,
  sequence: 1,
  modelID: 'calendar.event',
  scope: 'calendar:primary',
  keep: 'listed-since-window-start',
  sourceFetchHLC: '0001917c2a4e8b000000',
  kind: 'full',
  complete: true,
});
const candidates = (n: number) => Array.from({ length: n }, (_, i) => ({ documentID: `doc-${i}`, sourceID: `evt-${i}`, modelID: 'calendar.event' }));

describeGraphQL('graphql bulk limits: the cost budget prices bulk actions by the rows they may touch', (suite) => {
  async function expectRefused(query: string, variables: Record<string, unknown> = {}) {
    const response = await suite.request(query, variables);
    const body = (await response.json()) as ErrorBody;
    expect(response.status, JSON.stringify(body)).toBe(400);
    expect(body.data).toBeUndefined();
    expect(body.errors?.[0]?.extensions?.code).toBe('QUERY_COMPLEXITY');
    return body.errors![0]!;
  }

  it('30 aliased requeueOperations at cap 1 000 are refused with QUERY_COMPLEXITY before anything runs', async () => {
    await seedLive(suite, 50);
    const refused = await expectRefused(requeues(30, 1_000));
    expect(refused.extensions!.queryComplexity).toMatchObject({ max: 20_000 });
    expect(refused.extensions!.queryComplexity.actual).toBeGreaterThan(30 * 1_000);
    // The default cap is the maximum, and prices the same.
    await expectRefused(requeues(30, null));
    expect(await actionsWritten(suite)).toBe(0);
    const versions = await suite.store.db.selectFrom('kubun_connector_operation').select('version').execute();
    expect(versions.every((row) => Number(row.version) === 1)).toBe(true);
  });

  it('one bulk action at its cap fits: the client’s generated RequeueOperations (and Retry / Cancel) at the default cap of 1 000', async () => {
    await seedLive(suite, 1_000);
    const res = await suite.gql(print(RequeueOperationsDocument), { input: { filter: { states: ['ATTEMPTED'] } } });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    expect(res.data.requeueOperations).toMatchObject({ __typename: 'BulkOperationActionPayload', changed: 1_000, more: false });
    expect(res.data.requeueOperations.operations).toHaveLength(1_000);
    expect(await actionsWritten(suite)).toBe(1_000);
    for (const [document, input] of [
      [RetryOperationsDocument, { filter: { states: ['DEAD'] } }],
      [CancelOperationsDocument, { filter: { states: ['DEAD'] }, reason: 'none live' }],
    ] as const) {
      const other = await suite.gql(print(document), { input });
      expect(other.errors, JSON.stringify(other.errors)).toBeUndefined();
    }
  });

  it('a remembered verdict follows the cap sent as a variable: cheap caps run, then cap 1 000 under the same document is refused', async () => {
    await seedLive(suite, 10);
    const query = `mutation($input: RequeueOperationsInput!) { ${Array.from({ length: 30 }, (_, i) => `a${i}: requeueOperations(input: $input) { __typename }`).join(' ')} }`;
    const cheap = await suite.gql(query, { input: { filter: { states: ['ATTEMPTED'] }, cap: 1 } });
    expect(cheap.errors, JSON.stringify(cheap.errors)).toBeUndefined();
    const before = await actionsWritten(suite);
    expect(before).toBe(10);
    await expectRefused(query, { input: { filter: { states: ['ATTEMPTED'] }, cap: 1_000 } });
    await expectRefused(query, { input: { filter: { states: ['ATTEMPTED'] } } });
    expect(await actionsWritten(suite)).toBe(before);
  });

  it('retryOperations and cancelOperations are priced the same way', async () => {
    for (const [field, type] of [
      ['retryOperations', 'RetryOperationsInput'],
      ['cancelOperations', 'CancelOperationsInput'],
    ]) {
      const query = `mutation($input: ${type}!) { ${Array.from({ length: 30 }, (_, i) => `a${i}: ${field}(input: $input) { __typename }`).join(' ')} }`;
      await expectRefused(query, { input: { filter: { states: ['DEAD', 'ATTEMPTED'] }, reason: field === 'cancelOperations' ? 'bulk' : undefined } });
    }
  });

  it('a sweep receipt is priced by its candidates: 30 aliased receipts of 1 000 are refused, one of 10 000 fits', async () => {
    const aliased = `mutation($c: [SweepCandidateInput!]!) { ${Array.from(
      { length: 30 },
      (_, i) => `r${i}: recordSweepReceipt(input: { connectorName: "google", partition: "p", provenance: "run-${i}", sequence: ${i}, modelID: "calendar.event", scope: "s", keep: "k", sourceFetchHLC: "0001917c2a4e8b000000", kind: "full", complete: true, candidates: $c }) { __typename }`,
    ).join(' ')} }`;
    await expectRefused(aliased, { c: candidates(1_000) });
    expect(await suite.store.db.selectFrom('kubun_connector_sweep_candidate').select('document_id').execute()).toEqual([]);
    // The client's generated document, at the most candidates one receipt may carry.
    const one = await suite.gql(print(RecordSweepReceiptDocument), { input: { ...receiptInput('run-big'), candidates: candidates(10_000) } });
    expect(one.errors, JSON.stringify(one.errors)).toBeUndefined();
    expect(one.data.recordSweepReceipt).toMatchObject({ created: true, receipt: { candidateCounts: expect.arrayContaining([{ state: 'PENDING', count: 10_000 }]) } });
  });
});

describeGraphQL(
  'graphql bulk limits: MAX_BULK_ROWS_PER_REQUEST bounds the rows of every bulk field of a request together',
  (suite) => {
    it('two requeues of 1 000 are refused at a bound of 1 500, nothing written; two of 700 run', async () => {
      await seedLive(suite, 1_500);
      const response = await suite.request(requeues(2, 1_000));
      const body = (await response.json()) as ErrorBody;
      expect(response.status).toBe(400);
      expect(body.data).toBeUndefined();
      expect(body.errors?.[0]).toMatchObject({
        message: expect.stringMatching(/MAX_BULK_ROWS_PER_REQUEST/),
        extensions: { code: 'QUERY_COMPLEXITY', bulkRows: { actual: 2_000, max: 1_500 } },
      });
      expect(await actionsWritten(suite)).toBe(0);
      const fits = await suite.gql(requeues(2, 700));
      expect(fits.errors, JSON.stringify(fits.errors)).toBeUndefined();
      expect([fits.data.a0.changed, fits.data.a1.changed]).toEqual([700, 700]);
    });

    it('a receipt’s candidates count as bulk rows too', async () => {
      const res = await suite.request('mutation($input: RecordSweepReceiptInput!) { recordSweepReceipt(input: $input) { __typename } }', {
        input: { ...receiptInput('run-1'), candidates: candidates(1_501) },
      });
      expect(res.status).toBe(400);
      expect(((await res.json()) as ErrorBody).errors?.[0]?.extensions).toMatchObject({ code: 'QUERY_COMPLEXITY', bulkRows: { actual: 1_501, max: 1_500 } });
    });
  },
  { env: { MAX_BULK_ROWS_PER_REQUEST: '1500' } },
);

describeGraphQL(
  'graphql bulk limits: a mutation whose writes committed is never answered "refused"',
  (suite) => {
    it('an over-size answer of a committed bulk requeue says what committed, not RESPONSE_TOO_LARGE with nothing', async () => {
      await seedLive(suite, 100);
      const response = await suite.request(
        requeues(1, 100, '__typename ... on BulkOperationActionPayload { changed more operations { id operationID callerDID ownerDID connectorName model state version nextAttemptAt createdAt updatedAt } }'),
      );
      const body = (await response.json()) as ErrorBody;
      // Not a refusal: the writes are done.
      expect(response.status).toBe(200);
      expect(body.errors).toHaveLength(1);
      const error = body.errors![0]!;
      expect(error.message).toMatch(/committed/);
      expect(error.extensions).toMatchObject({
        code: 'RESPONSE_TOO_LARGE',
        committed: true,
        done: { a0: { __typename: 'BulkOperationActionPayload', changed: 100, more: false } },
        omitted: ['a0.operations'],
      });
      expect(await actionsWritten(suite)).toBe(100);
    });

    it('an over-size query answer is still refused (it wrote nothing)', async () => {
      await seedLive(suite, 100);
      const response = await suite.request('{ operations(first: 100) { edges { node { id operationID callerDID ownerDID connectorName model state version } } } }');
      expect(response.status).toBe(400);
      const body = (await response.json()) as ErrorBody;
      expect(body.data).toBeUndefined();
      expect(body.errors?.[0]?.extensions).toMatchObject({ code: 'RESPONSE_TOO_LARGE' });
      expect(body.errors?.[0]?.extensions?.committed).toBeUndefined();
    });
  },
  { env: { MAX_RESPONSE_BYTES: '4096' } },
);
