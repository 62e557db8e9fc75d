/**
 * Statements on the wire per write-back step (issue 40 item 1): every
 * statement a Postgres connection of the server's pool sends is counted
 * (BEGIN, COMMIT and the NOTIFY included), with the server's own Postgres
 * change feed listening, as `npm start` runs it. Each fenced step is one
 * statement: the fenced UPDATE, its history entry, its request key's record
 * and its NOTIFY together; the NOTIFY reaches the feed once per step.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, inject, it } from 'vitest';
import { generateLocalKey, mintToken } from '../../src/auth/index.js';
import type { OpenDatabase } from '../../src/db/connect.js';
import type { ChangeEvent, ChangeFeed } from '../../resolvers/context.js';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { createPostgresChangeFeed } from '../../src/server/change-feed.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { createTestDatabase, type TestDatabase } from '../helpers/databases.js';
import { TEST_AUDIENCE } from '../helpers/graphql.js';
import { CLAIM, claimInput, FINALIZE, operationMutationDocument, type OperationMutation } from '../helpers/operation-graphql.js';
import { CompiledQuery } from 'kysely';
import pg from 'pg';

const alice = generateLocalKey();

describe.skipIf(!inject('postgresAvailable'))('postgres: statements per write-back step', () => {
  let database: TestDatabase;
  let counted: OpenDatabase;
  let feed: ChangeFeed;
  let app: ServerApp;
  const sent: string[] = [];
  const heard: ChangeEvent[] = [];

  beforeAll(async () => {
    database = await createTestDatabase('postgres');
    counted = database.connectAgain();
    // Every statement any pooled connection sends, as the driver sends it.
    counted.pgPool!.on('connect', (client) => {
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        const first = args[0] as string | { text?: string };
        sent.push(typeof first === 'string' ? first : (first?.text ?? '?'));
        return query(...args);
      };
    });
    feed = await createPostgresChangeFeed({
      connectionString: (database.open.target as { connectionString: string }).connectionString,
      publish: async (channel, payload) => {
        await counted.db.executeQuery(CompiledQuery.raw('select pg_notify($1, $2)', [channel, payload]));
      },
      logger: createLogger('silent'),
    });
    feed.listen((event) => heard.push(event));
    app = createServerApp({
      config: loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: TEST_AUDIENCE, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0', RATE_LIMIT_PER_VIEWER: '0' }),
      database: counted,
      changes: feed,
      logger: createLogger('silent'),
    });
  });

  afterAll(async () => {
    await feed?.close();
    await database?.destroy();
  });

  beforeEach(async () => {
    await database.truncate();
  });

  async function gql(query: string, input: Record<string, unknown>): Promise<Record<string, any>> {
    const token = await mintToken({ privateKey: alice.privateKey, did: alice.did, audience: TEST_AUDIENCE, now: Date.now(), ttlSeconds: 600 });
    const response = await app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query, variables: { input } }),
    });
    const body = (await response.json()) as { data: Record<string, any>; errors?: unknown };
    expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
    return body.data;
  }

  /** Runs `step`; returns its answer and the statements it sent. */
  async function measure(step: () => Promise<Record<string, any>>) {
    sent.length = 0;
    const answer = await step();
    return { answer, statements: [...sent] };
  }

  const waitForHeard = async (count: number) => {
    for (let i = 0; i < 100 && heard.length < count; i++) await new Promise((resolve) => setTimeout(resolve, 20));
  };

  it('start, mark sent, renew and release are one statement each, keyed or not, and each is heard once', async () => {
    const claim = await gql(CLAIM, claimInput({ requestKey: 'claim-1' }));
    const { operation, lease } = claim.claimOperation as { operation: { id: string }; lease: { token: string; version: number } };
    const fence = { id: operation.id, version: lease.version, leaseToken: lease.token };
    const steps: [OperationMutation, Record<string, unknown>][] = [
      ['startOperationAttempt', { requestKey: 'start-1' }],
      ['markOperationSent', { sendMarker: 'marker-1', requestKey: 'mark-1' }],
      ['renewOperationLease', { leaseMs: 60_000 }],
      ['renewOperationLease', { leaseMs: 60_000, requestKey: 'renew-1' }],
      ['recordOperationAttempt', { kind: 'RETRYABLE', requestKey: 'record-1' }],
      ['startOperationAttempt', {}],
      ['releaseOperationLease', { requestKey: 'release-1' }],
    ];
    // The claim's own announcement, before counting the steps'.
    await waitForHeard(1);
    for (const [name, input] of steps) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      heard.length = 0;
      const { answer, statements } = await measure(() => gql(operationMutationDocument(name), { ...fence, ...input }));
      expect(answer[name], JSON.stringify(answer)).toMatchObject({ __typename: 'OperationPayload', replayed: false });
      if (name !== 'recordOperationAttempt') expect(statements, `${name}: ${statements.join('\n')}`).toHaveLength(1);
      await waitForHeard(1);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(heard, name).toEqual([{ kind: 'operation', nodeKey: expect.any(String) }]);
    }
  });

  it('a resent keyed step answers from its record in two reads and writes nothing; a lost fence reads once to say why', async () => {
    const claim = await gql(CLAIM, claimInput({ requestKey: 'claim-1' }));
    const { operation, lease } = claim.claimOperation as { operation: { id: string }; lease: { token: string; version: number } };
    const fence = { id: operation.id, version: lease.version, leaseToken: lease.token };
    const start = operationMutationDocument('startOperationAttempt');
    await gql(start, { ...fence, requestKey: 'start-1' });
    const resent = await measure(() => gql(start, { ...fence, requestKey: 'start-1' }));
    expect(resent.answer.startOperationAttempt).toMatchObject({ replayed: true, operation: { attempts: 1 } });
    // The statement (which wrote nothing: its key was recorded), the row, the record.
    expect(resent.statements).toHaveLength(3);
    const stale = await measure(() => gql(start, { ...fence, version: lease.version + 1 }));
    expect(stale.answer.startOperationAttempt).toMatchObject({ __typename: 'StaleLeaseError' });
    expect(stale.statements).toHaveLength(2);
  });

  it('concurrent steps of one holder on parallel connections each land once: a history entry that collides runs its statement again', async () => {
    const claim = await gql(CLAIM, claimInput({ requestKey: 'claim-1' }));
    const { operation, lease } = claim.claimOperation as { operation: { id: string }; lease: { token: string; version: number } };
    const fence = { id: operation.id, version: lease.version, leaseToken: lease.token };
    const start = operationMutationDocument('startOperationAttempt');
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => gql(start, { ...fence, requestKey: `start-${i}` })));
    expect(answers.map((a) => a.startOperationAttempt.__typename)).toEqual(Array(8).fill('OperationPayload'));
    expect(answers.map((a) => a.startOperationAttempt.operation.attempts).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
    const history = await database.open.db.selectFrom('kubun_connector_operation_history').select(['seq', 'attempt']).orderBy('seq').execute();
    expect(history.map((h) => [Number(h.seq), Number(h.attempt)])).toEqual([1, 2, 3, 4, 5, 6, 7, 8].map((n) => [n, n]));
  });

  it('finalizes on parallel connections: one document written by several operations keeps one watch; one finalize resent at once commits once', async () => {
    const claims = await Promise.all(
      Array.from({ length: 6 }, (_, i) => gql(CLAIM, claimInput({ operationID: `op-${i}`, deterministicEventID: `event-${i}`, requestKey: `claim-${i}` }))),
    );
    const fences = claims.map(({ claimOperation: { operation, lease } }) => ({ id: operation.id as string, version: lease.version as number, leaseToken: lease.token as string }));
    // Five operations write one document under five source ids at once: each commits, one watch is left (the last one armed).
    const written = await Promise.all(fences.slice(0, 5).map((fence, i) => gql(FINALIZE, { ...fence, documentID: 'doc-shared', sourceID: `src-${i}`, requestKey: `finalize-${i}` })));
    expect(written.map((w) => w.finalizeOperation.finalized)).toEqual(Array(5).fill(true));
    const watches = await database.open.db.selectFrom('kubun_connector_projection_watch').select(['document_id', 'source_id']).where('document_id', '=', 'doc-shared').execute();
    expect(watches).toHaveLength(1);
    // One holder's finalize sent four times at once (answers lost): one commit, every answer finalized, the watch armed once.
    const last = fences[5]!;
    const finalizeWithReplayed = FINALIZE.replace('{ finalized operation', '{ finalized replayed operation');
    const resent = await Promise.all(Array.from({ length: 4 }, () => gql(finalizeWithReplayed, { ...last, documentID: 'doc-own', sourceID: 'src-own', requestKey: 'finalize-own' })));
    expect(resent.map((r) => r.finalizeOperation.finalized)).toEqual(Array(4).fill(true));
    expect(resent.filter((r) => r.finalizeOperation.replayed === false)).toHaveLength(1);
    const own = await database.open.db.selectFrom('kubun_connector_projection_watch').select(['repair_generation', 'version']).where('document_id', '=', 'doc-own').execute();
    expect(own).toEqual([{ repair_generation: 0, version: 0 }]);
  });

  it('a batch of starts or marks is one statement whatever its size; a stale item writes nothing and is refused alone; a resent batch replays each item', async () => {
    const ITEM = `__typename ... on Error { code } ... on OperationPayload { replayed operation { id attempts sendMarkerSet } }`;
    const START_MANY = `mutation($input: StartOperationAttemptsInput!) { startOperationAttempts(input: $input) { __typename ... on StartOperationAttemptsPayload { results { ${ITEM} } } } }`;
    const MARK_MANY = `mutation($input: MarkOperationsSentInput!) { markOperationsSent(input: $input) { __typename ... on MarkOperationsSentPayload { results { ${ITEM} } } } }`;
    const claims = await Promise.all(Array.from({ length: 6 }, (_, i) => gql(CLAIM, claimInput({ operationID: `op-${i}`, deterministicEventID: `event-${i}`, requestKey: `claim-${i}` }))));
    const fences = claims.map(({ claimOperation: { operation, lease } }) => ({ id: operation.id as string, version: lease.version as number, leaseToken: lease.token as string }));
    await waitForHeard(6);
    await new Promise((resolve) => setTimeout(resolve, 100));
    heard.length = 0;
    // The last item's fence is stale: refused on its own (after the batch's statement, one read says why).
    const items = fences.map((fence, i) => ({ ...fence, ...(i === 5 && { version: fence.version + 1 }), requestKey: `start-${i}` }));
    const started = await measure(() => gql(START_MANY, { items }));
    const results = started.answer.startOperationAttempts.results as { __typename: string; replayed?: boolean; operation?: { attempts: number } }[];
    expect(results.map((r) => r.__typename)).toEqual([...Array(5).fill('OperationPayload'), 'StaleLeaseError']);
    expect(results.slice(0, 5).map((r) => [r.replayed, r.operation!.attempts])).toEqual(Array(5).fill([false, 1]));
    expect(started.statements.filter((text) => text.includes('update "kubun_connector_operation"')), started.statements.join('\n')).toHaveLength(1);
    // The batch's one statement (no node read first: the statement applies what the viewer may see, as a single
    // step's does), and for the stale item the read of its row and of its request key's record.
    expect(started.statements, started.statements.join('\n')).toHaveLength(3);
    await waitForHeard(5);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard).toHaveLength(5);
    const history = await database.open.db.selectFrom('kubun_connector_operation_history').select(['operation_id', 'seq', 'attempt']).orderBy('operation_id').execute();
    expect(history.map((h) => [h.operation_id, Number(h.seq), Number(h.attempt)])).toEqual([0, 1, 2, 3, 4].map((i) => [`op-${i}`, 1, 1]));

    const marks = fences.slice(0, 5).map((fence, i) => ({ ...fence, sendMarker: `marker-${i}`, requestKey: `mark-${i}` }));
    const marked = await measure(() => gql(MARK_MANY, { items: marks }));
    expect(marked.answer.markOperationsSent.results.map((r: { operation: { sendMarkerSet: boolean } }) => r.operation.sendMarkerSet)).toEqual(Array(5).fill(true));
    // The batch's one statement, nothing else.
    expect(marked.statements, marked.statements.join('\n')).toHaveLength(1);
    const sent = await database.open.db.selectFrom('kubun_connector_operation_history').select('sent_at').where('sent_at', 'is not', null).execute();
    expect(sent).toHaveLength(5);

    // Resent after a lost answer: each item answered from its record, nothing written again.
    const again = await gql(START_MANY, { items: items.slice(0, 5) });
    expect(again.startOperationAttempts.results.map((r: { replayed: boolean; operation: { attempts: number } }) => [r.replayed, r.operation.attempts])).toEqual(Array(5).fill([true, 1]));
    const counts = await database.open.db.selectFrom('kubun_connector_operation').select(['operation_id', 'attempts']).orderBy('operation_id').execute();
    expect(counts.map((c) => Number(c.attempts))).toEqual([1, 1, 1, 1, 1, 0]);
  });

  it('a batch of finalizes is one statement: each committed with its watch armed, counted once, heard once; a stale item is refused alone', async () => {
    const FINALIZE_MANY = `mutation($input: FinalizeOperationsInput!) { finalizeOperations(input: $input) { __typename ... on FinalizeOperationsPayload { results { __typename ... on Error { code } ... on FinalizeOperationPayload { finalized replayed operation { state documentID } watch { id } } } } } }`;
    const claims = await Promise.all(Array.from({ length: 5 }, (_, i) => gql(CLAIM, claimInput({ operationID: `op-${i}`, deterministicEventID: `event-${i}`, requestKey: `claim-${i}` }))));
    const fences = claims.map(({ claimOperation: { operation, lease } }) => ({ id: operation.id as string, version: lease.version as number, leaseToken: lease.token as string }));
    await waitForHeard(5);
    await new Promise((resolve) => setTimeout(resolve, 100));
    heard.length = 0;
    // The last item's lease token is wrong: it finalizes nothing.
    const items = fences.map((fence, i) => ({ ...fence, ...(i === 4 && { leaseToken: 'not-the-token' }), documentID: `doc-${i}`, sourceID: `src-${i}`, requestKey: `finalize-${i}` }));
    const finalized = await measure(() => gql(FINALIZE_MANY, { items }));
    const results = finalized.answer.finalizeOperations.results as { finalized: boolean; replayed: boolean; operation: { state: string; documentID: string } | null }[];
    expect(results.map((r) => [r.finalized, r.operation?.state ?? null, r.operation?.documentID ?? null])).toEqual([
      ...[0, 1, 2, 3].map((i) => [true, 'COMMITTED', `doc-${i}`]),
      [false, 'ATTEMPTED', null],
    ]);
    expect(finalized.statements.filter((text) => text.includes('update "kubun_connector_operation"')), finalized.statements.join('\n')).toHaveLength(2);
    expect(finalized.statements.filter((text) => text.includes('"i" as')), finalized.statements.join('\n')).toHaveLength(1);
    await waitForHeard(8);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard.map((event) => event.kind).sort()).toEqual([...Array(4).fill('operation'), ...Array(4).fill('watch')]);
    const watches = await database.open.db.selectFrom('kubun_connector_projection_watch').select(['document_id', 'source_id']).orderBy('document_id').execute();
    expect(watches).toEqual([0, 1, 2, 3].map((i) => ({ document_id: `doc-${i}`, source_id: `src-${i}` })));
    const activity = await database.open.db.selectFrom('kubun_connector_operation_activity_total').select((eb) => eb.fn.sum<string>('n').as('n')).where('outcome', '=', 'committed').executeTakeFirst();
    expect(Number(activity?.n)).toBe(4);
    const counted = await database.open.db.selectFrom('kubun_connector_operation_total').select(['state', (eb) => eb.fn.sum<string>('n').as('n')]).groupBy('state').orderBy('state').execute();
    expect(counted.map((c) => [c.state, Number(c.n)])).toEqual([['attempted', 1], ['committed', 4]]);
    // Resent after a lost answer: each committed item answered from its record.
    const again = await gql(FINALIZE_MANY, { items: items.slice(0, 4) });
    expect(again.finalizeOperations.results.map((r: { finalized: boolean; replayed: boolean }) => [r.finalized, r.replayed])).toEqual(Array(4).fill([true, true]));
  });

  it('a batch the database fails (its statement past the timeout) answers every item with that retryable failure, writes nothing and runs no item again alone', async () => {
    const START_MANY = `mutation($input: StartOperationAttemptsInput!) { startOperationAttempts(input: $input) { __typename ... on StartOperationAttemptsPayload { results { __typename ... on Error { code } } } } }`;
    const FINALIZE_MANY = `mutation($input: FinalizeOperationsInput!) { finalizeOperations(input: $input) { __typename ... on FinalizeOperationsPayload { results { __typename ... on Error { code } } } } }`;
    const claims = await Promise.all(Array.from({ length: 4 }, (_, i) => gql(CLAIM, claimInput({ operationID: `op-${i}`, deterministicEventID: `event-${i}`, requestKey: `claim-${i}` }))));
    const fences = claims.map(({ claimOperation: { operation, lease } }) => ({ id: operation.id as string, version: lease.version as number, leaseToken: lease.token as string }));
    const snapshot = () => database.open.db.selectFrom('kubun_connector_operation').select(['operation_id', 'version', 'attempts', 'state']).orderBy('operation_id').execute();
    const before = await snapshot();
    // A server whose statements may run 400 ms, and another writer holding every operation's row.
    const timed = database.connectAgain({ statementTimeoutMs: 400 });
    const timedSent: string[] = [];
    timed.pgPool!.on('connect', (client) => {
      const query = client.query.bind(client) as (...args: unknown[]) => unknown;
      (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
        const first = args[0] as string | { text?: string };
        timedSent.push(typeof first === 'string' ? first : (first?.text ?? '?'));
        return query(...args);
      };
    });
    const timedApp = createServerApp({
      config: loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: TEST_AUDIENCE, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0', RATE_LIMIT_PER_VIEWER: '0' }),
      database: timed,
      changes: feed,
      logger: createLogger('silent'),
    });
    const locker = new pg.Client({ connectionString: (database.open.target as { connectionString: string }).connectionString });
    await locker.connect();
    try {
      await locker.query('begin');
      await locker.query(`select 1 from kubun_connector_operation for update`);
      const token = await mintToken({ privateKey: alice.privateKey, did: alice.did, audience: TEST_AUDIENCE, now: Date.now(), ttlSeconds: 600 });
      const post = async (query: string, input: Record<string, unknown>) => {
        const response = await timedApp.yoga.fetch('http://localhost/graphql', {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({ query, variables: { input } }),
        });
        return (await response.json()) as { data?: Record<string, any> | null; errors?: { extensions?: { code?: string } }[] };
      };
      for (const [name, query, items] of [
        ['startOperationAttempts', START_MANY, fences.map((fence, i) => ({ ...fence, requestKey: `start-${i}` }))],
        ['finalizeOperations', FINALIZE_MANY, fences.map((fence, i) => ({ ...fence, documentID: `doc-${i}`, sourceID: `src-${i}`, requestKey: `finalize-${i}` }))],
      ] as const) {
        timedSent.length = 0;
        const body = await post(query, { items });
        // Every item's answer is the database's retryable timeout; the batch's one statement is all that ran.
        const codes = body.errors?.map((error) => error.extensions?.code) ?? body.data?.[name]?.results?.map((result: { code?: string }) => result.code);
        expect(codes, JSON.stringify(body)).toContain('DATABASE_TIMEOUT');
        expect(
          timedSent.filter((text) => text.includes('update "kubun_connector_operation"')),
          `${name}: ${timedSent.join('\n')}`,
        ).toHaveLength(1);
      }
    } finally {
      await locker.query('rollback');
      await locker.end();
    }
    expect(await snapshot()).toEqual(before);
  });

  it('enqueueing one new operation announces it inside its transaction (no NOTIFY after the COMMIT), heard once; its replay is heard not at all', async () => {
    const ENQUEUE_ONE = `mutation($input: EnqueueOperationInput!) { enqueueOperation(input: $input) { __typename ... on EnqueueOperationPayload { outcome } } }`;
    const { leaseMs: _lease, ...item } = claimInput({ operationID: 'queued-one', deterministicEventID: 'queued-one-event' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    heard.length = 0;
    const first = await measure(() => gql(ENQUEUE_ONE, item));
    expect(first.answer.enqueueOperation).toEqual({ __typename: 'EnqueueOperationPayload', outcome: 'CREATED' });
    // BEGIN, the INSERT announcing it, its answer's INSERT, COMMIT.
    expect(first.statements, first.statements.join('\n')).toHaveLength(4);
    await waitForHeard(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard).toEqual([{ kind: 'operation', nodeKey: expect.any(String) }]);
    heard.length = 0;
    expect((await gql(ENQUEUE_ONE, item)).enqueueOperation).toEqual({ __typename: 'EnqueueOperationPayload', outcome: 'REPLAYED' });
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(heard).toEqual([]);
  });

  it('enqueueing a batch of 100 new operations is a handful of statements, not two per operation, each operation announced inside it and heard once; a resent batch replays each item and announces nothing', async () => {
    const ENQUEUE_MANY = `mutation($input: EnqueueOperationsInput!) {
      enqueueOperations(input: $input) { __typename ... on EnqueueOperationsPayload { created replayed conflicts } }
    }`;
    const items = Array.from({ length: 100 }, (_, i) => {
      const { leaseMs: _lease, ...item } = claimInput({ operationID: `queued-${i}`, deterministicEventID: `queued-event-${i}` });
      return item;
    });
    await new Promise((resolve) => setTimeout(resolve, 100));
    heard.length = 0;
    const first = await measure(() => gql(ENQUEUE_MANY, { operations: items }));
    expect(first.answer.enqueueOperations).toMatchObject({ created: 100, replayed: 0, conflicts: 0 });
    // BEGIN, the operations' INSERT (announcing each, sent at the commit), their answers' INSERT, COMMIT: no NOTIFY after it.
    expect(first.statements, first.statements.join('\n')).toHaveLength(4);
    expect(first.statements.some((text) => /pg_notify/.test(text) && !text.startsWith('insert into'))).toBe(false);
    // Each created operation heard once.
    await waitForHeard(100);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard).toHaveLength(100);
    expect(new Set(heard.map((event) => (event as { nodeKey: string }).nodeKey)).size).toBe(100);
    heard.length = 0;
    const again = await measure(() => gql(ENQUEUE_MANY, { operations: items }));
    expect(again.answer.enqueueOperations).toMatchObject({ created: 0, replayed: 100, conflicts: 0 });
    // A replay wrote nothing and announces nothing.
    await new Promise((resolve) => setTimeout(resolve, 150));
    expect(heard).toEqual([]);
    // Both INSERTs are one text whatever the batch's size (each column one array): parsed once per connection, never built again.
    const few = await measure(() => gql(ENQUEUE_MANY, { operations: items.slice(0, 3).map((item, i) => ({ ...item, operationID: `few-${i}`, deterministicEventID: `few-event-${i}` })) }));
    expect(few.answer.enqueueOperations).toMatchObject({ created: 3 });
    const inserts = (statements: string[]) => statements.filter((text) => text.startsWith('insert into'));
    expect(inserts(few.statements)).toEqual(inserts(first.statements));
    expect(inserts(first.statements)).toHaveLength(2);
  });

  it('leasing a batch of due operations is one statement, with each leased operation announced inside it and heard once', async () => {
    const ENQUEUE_MANY = `mutation($input: EnqueueOperationsInput!) {
      enqueueOperations(input: $input) { __typename ... on EnqueueOperationsPayload { created } }
    }`;
    const LEASE_DUE = `mutation($input: LeaseDueOperationsInput!) {
      leaseDueOperations(input: $input) { __typename ... on LeaseDueOperationsPayload { operations { operation { id } lease { version } } } }
    }`;
    const items = Array.from({ length: 3 }, (_, i) => {
      const { leaseMs: _lease, ...item } = claimInput({ operationID: `due-${i}`, deterministicEventID: `due-event-${i}` });
      return item;
    });
    expect((await gql(ENQUEUE_MANY, { operations: items })).enqueueOperations).toMatchObject({ created: 3 });
    await waitForHeard(3);
    await new Promise((resolve) => setTimeout(resolve, 100));
    heard.length = 0;
    const leased = await measure(() => gql(LEASE_DUE, { connectorName: items[0]!.connectorName, limit: 10, leaseMs: 60_000 }));
    expect(leased.answer.leaseDueOperations.operations).toHaveLength(3);
    // The UPDATE with its pg_notify per leased row: no NOTIFY of its own after it.
    expect(leased.statements, leased.statements.join('\n')).toHaveLength(1);
    await waitForHeard(3);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard.map((event) => event.kind)).toEqual(['operation', 'operation', 'operation']);
    expect(new Set(heard.map((event) => event.nodeKey)).size).toBe(3);
    // Nothing more is due: an empty lease writes and announces nothing.
    heard.length = 0;
    const none = await measure(() => gql(LEASE_DUE, { connectorName: items[0]!.connectorName, limit: 10, leaseMs: 60_000 }));
    expect(none.answer.leaseDueOperations.operations).toEqual([]);
    expect(none.statements).toHaveLength(1);
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(heard).toEqual([]);
  });

  it('the whole sequence (claim, start, mark sent, finalize) sends at most the statements the issue allows', async () => {
    let total = 0;
    const claim = await measure(() => gql(CLAIM, claimInput({ requestKey: 'claim-1' })));
    total += claim.statements.length;
    const { operation, lease } = claim.answer.claimOperation as { operation: { id: string }; lease: { token: string; version: number } };
    const fence = { id: operation.id, version: lease.version, leaseToken: lease.token };
    for (const [name, input] of [
      ['startOperationAttempt', { requestKey: 'start-1' }],
      ['markOperationSent', { sendMarker: 'marker-1', requestKey: 'mark-1' }],
    ] as const) {
      total += (await measure(() => gql(operationMutationDocument(name), { ...fence, ...input }))).statements.length;
    }
    await waitForHeard(1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    heard.length = 0;
    const finalize = await measure(() => gql(FINALIZE, { ...fence, documentID: 'doc-1', sourceID: 'src-1', requestKey: 'finalize-1' }));
    expect(finalize.answer.finalizeOperation).toMatchObject({ finalized: true });
    // The commit and the armed watch, heard once each from the statement's own NOTIFY.
    await waitForHeard(2);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(heard.map((event) => event.kind).sort()).toEqual(['operation', 'watch']);
    total += finalize.statements.length;
    console.info(`write-back sequence on the wire: claim ${claim.statements.length}, start 1, mark sent 1, finalize ${finalize.statements.length}: ${total} statements`);
    expect(total).toBeLessThanOrEqual(SEQUENCE_BOUND);
  });
});

/** Statements per write-back sequence (claim, start, mark sent, finalize) on Postgres. */
const SEQUENCE_BOUND = 6;
