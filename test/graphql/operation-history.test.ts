/**
 * `ConnectorOperation.attemptHistory` and `lastError` through yoga.fetch
 * (issue 11 item 1): written per attempt by the mutations, messages bounded
 * and redacted, paged newest first, the committing attempt marked, visible
 * only to whoever sees the operation, and one statement per page of
 * operations whatever their number.
 */
import { expect, it } from 'vitest';
import { describeGraphQL } from '../helpers/graphql.js';
import { claimed, finalize, mutate, mutateOK } from '../helpers/operation-graphql.js';

const HISTORY = `query H($id: ID!, $first: Int, $after: String) {
  node(id: $id) {
    ... on ConnectorOperation {
      lastError
      attemptHistory(first: $first, after: $after) {
        totalCount
        pageInfo { hasNextPage endCursor }
        edges { node { seq attempt startedAt sentAt endedAt outcome committed httpStatus retryAfterMs deferReason message } }
      }
    }
  }
}`;

describeGraphQL('graphql operations: attempt history', (suite) => {
  async function historyOf(id: string, variables: Record<string, unknown> = {}, as: 'alice' | 'bob' | 'worker' = 'alice') {
    const res = await suite.gql(HISTORY, { id, first: 10, ...variables }, { as });
    expect(res.errors, JSON.stringify(res.errors)).toBeUndefined();
    return res.data.node as { lastError: string | null; attemptHistory: { totalCount: number; pageInfo: { hasNextPage: boolean; endCursor: string | null }; edges: { node: Record<string, unknown> }[] } } | null;
  }

  it('records each attempt of the write-back sequence, with the message, and marks the one that committed', async () => {
    const { fence } = await claimed(suite);
    await mutateOK(suite, 'startOperationAttempt', fence);
    await mutateOK(suite, 'markOperationSent', { ...fence, sendMarker: 'marker-1' });
    await mutateOK(suite, 'recordOperationAttempt', { ...fence, kind: 'RETRYABLE', lastHTTPStatus: 503, retryAfterMs: 2_000, message: `503 from provider; token ${fence.leaseToken}` });
    let seen = await historyOf(fence.id);
    expect(seen?.lastError).toBe('503 from provider; token [redacted]');
    expect(seen?.attemptHistory.edges.map((e) => e.node)).toEqual([
      {
        seq: 1,
        attempt: 1,
        startedAt: expect.any(String),
        sentAt: expect.any(String),
        endedAt: expect.any(String),
        outcome: 'RETRYABLE',
        committed: false,
        httpStatus: 503,
        retryAfterMs: 2_000,
        deferReason: null,
        message: '503 from provider; token [redacted]',
      },
    ]);
    await mutateOK(suite, 'startOperationAttempt', fence);
    await finalize(suite, fence);
    seen = await historyOf(fence.id);
    expect(seen?.lastError).toBeNull();
    expect(seen?.attemptHistory.totalCount).toBe(2);
    expect(seen?.attemptHistory.edges.map((e) => [e.node.seq, e.node.outcome, e.node.committed, e.node.endedAt !== null])).toEqual([
      [2, null, true, true],
      [1, 'RETRYABLE', false, true],
    ]);
  });

  it('pages newest first with cursors', async () => {
    const { fence } = await claimed(suite);
    for (let i = 0; i < 3; i++) {
      await mutateOK(suite, 'startOperationAttempt', fence);
      await mutateOK(suite, 'recordOperationAttempt', { ...fence, kind: 'OFFLINE', message: `offline ${i}` });
    }
    const first = await historyOf(fence.id, { first: 2 });
    expect(first?.attemptHistory.edges.map((e) => e.node.message)).toEqual(['offline 2', 'offline 1']);
    expect(first?.attemptHistory.pageInfo.hasNextPage).toBe(true);
    const rest = await historyOf(fence.id, { first: 2, after: first?.attemptHistory.pageInfo.endCursor });
    expect(rest?.attemptHistory.edges.map((e) => [e.node.message, e.node.deferReason])).toEqual([['offline 0', 'OFFLINE']]);
    expect(rest?.attemptHistory.pageInfo.hasNextPage).toBe(false);
    const bad = await suite.gql(HISTORY, { id: fence.id, first: 2, after: 'garbage!' });
    expect(bad.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
  });

  it('refuses a message over 20 000 characters and writes nothing', async () => {
    const { fence } = await claimed(suite);
    await mutateOK(suite, 'startOperationAttempt', fence);
    const refused = await mutate(suite, 'recordOperationAttempt', { ...fence, kind: 'FATAL', message: 'x'.repeat(20_001) });
    expect(refused.__typename).toBe('InputValidationError');
    const seen = await historyOf(fence.id);
    expect(seen?.attemptHistory.edges.map((e) => e.node.outcome)).toEqual([null]);
    // A long one within the bound is kept cut to 2 000 characters.
    await mutateOK(suite, 'recordOperationAttempt', { ...fence, kind: 'FATAL', message: 'y'.repeat(19_000) });
    expect([...((await historyOf(fence.id))?.lastError ?? '')]).toHaveLength(2_000);
  });

  it('a stranger sees no history: the operation is null for them', async () => {
    const { fence } = await claimed(suite);
    await mutateOK(suite, 'startOperationAttempt', fence);
    expect(await historyOf(fence.id, {}, 'bob')).toBeNull();
    expect((await historyOf(fence.id, {}, 'worker'))?.attemptHistory.totalCount).toBe(1);
  });
});
