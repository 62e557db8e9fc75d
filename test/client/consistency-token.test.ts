/**
 * Read-your-writes from the client package (issue 24 item 2): tokens compare
 * as WAL positions, not as text, and the store client sends the latest token
 * of its mutations' answers in `Consistency-Token` on every later request,
 * per client. A fake fetch plays a server with read standbys (the in-process
 * app has none, so its mutations carry no token); the server's side is
 * test/db/read-replicas.test.ts.
 */
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { parse } from 'graphql';
import { describe, expect, it } from 'vitest';
import { CONSISTENCY_TOKEN_HEADER, laterConsistencyToken } from '../../client/consistency-token.js';
import { createStoreClient, StoreRequestError } from '../../client/runtime/index.js';

describe('laterConsistencyToken', () => {
  it('keeps the later WAL position, comparing (X << 32) + Y in hex rather than text', () => {
    expect(laterConsistencyToken(null, { consistencyToken: '0/3000148' })).toBe('0/3000148');
    expect(laterConsistencyToken('0/9', { consistencyToken: '0/10' })).toBe('0/10');
    expect(laterConsistencyToken('0/10', { consistencyToken: '0/9' })).toBe('0/10');
    expect(laterConsistencyToken('0/FFFFFFFF', { consistencyToken: '1/0' })).toBe('1/0');
    expect(laterConsistencyToken('1/0', { consistencyToken: '0/FFFFFFFF' })).toBe('1/0');
    expect(laterConsistencyToken('A/1', { consistencyToken: 'a/1' })).toBe('A/1');
  });

  it('an answer without a token, or with one not shaped X/Y, changes nothing', () => {
    for (const extensions of [undefined, null, 'text', {}, { consistencyToken: 42 }, { consistencyToken: '' }, { consistencyToken: '0/123456789' }, { consistencyToken: ' 0/1' }]) {
      expect(laterConsistencyToken('0/5', extensions)).toBe('0/5');
      expect(laterConsistencyToken(null, extensions)).toBeNull();
    }
  });
});

type Answer = { status?: number; body: unknown };

/** A store client whose fetch answers from `answers` in turn and records the token header of each request. */
function fakeServer(answers: Answer[]) {
  const sent: (string | null)[] = [];
  const client = createStoreClient({
    url: 'http://localhost/graphql',
    tokens: 'a-token',
    maxRetries: 0,
    fetch: (async (_url: string, init: RequestInit) => {
      sent.push(new Headers(init.headers).get(CONSISTENCY_TOKEN_HEADER));
      const answer = answers.shift() ?? { body: { data: { ok: true } } };
      return new Response(JSON.stringify(answer.body), { status: answer.status ?? 200, headers: { 'content-type': 'application/json' } });
    }) as typeof fetch,
  });
  return { client, sent };
}

const QUERY = parse('query Read { ok }') as TypedDocumentNode<{ ok: boolean }, Record<string, never>>;
const MUTATION = parse('mutation Write { ok }') as TypedDocumentNode<{ ok: boolean }, Record<string, never>>;
const written = (token: string): Answer => ({ body: { data: { ok: true }, extensions: { consistencyToken: token } } });

describe('store client: consistency token', () => {
  it('sends none before a write, then the latest of its mutations’ tokens on every request', async () => {
    const { client, sent } = fakeServer([{ body: { data: { ok: true } } }, written('0/3000148'), { body: { data: { ok: true } } }, written('0/3000100'), { body: {} }, written('0/4000000')]);
    await client.request(QUERY, {});
    await client.request(MUTATION, {});
    await client.request(QUERY, {});
    // An older token (a slower replica's answer arriving late) does not take the place of the later one.
    await client.request(MUTATION, {});
    await expect(client.request(QUERY, {})).rejects.toBeInstanceOf(StoreRequestError);
    await client.request(MUTATION, {});
    await client.request(QUERY, {});
    expect(sent).toEqual([null, null, '0/3000148', '0/3000148', '0/3000148', '0/3000148', '0/4000000']);
  });

  it('keeps the token of a mutation answered with an error (its writes may have committed)', async () => {
    const { client, sent } = fakeServer([
      { body: { errors: [{ message: 'too large', extensions: { code: 'RESPONSE_TOO_LARGE', committed: true } }], extensions: { consistencyToken: '0/5000000' } } },
    ]);
    await expect(client.request(MUTATION, {})).rejects.toMatchObject({ code: 'RESPONSE_TOO_LARGE' });
    await client.request(QUERY, {});
    expect(sent).toEqual([null, '0/5000000']);
  });

  it('each client keeps its own', async () => {
    const first = fakeServer([written('0/3000148')]);
    const second = fakeServer([]);
    await first.client.request(MUTATION, {});
    await second.client.request(QUERY, {});
    await first.client.request(QUERY, {});
    expect(second.sent).toEqual([null]);
    expect(first.sent).toEqual([null, '0/3000148']);
  });
});
