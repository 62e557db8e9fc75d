/**
 * DataLoaders batch every per-document and per-node lookup: a request costs
 * the same number of SQL statements for 100 documents / ids / rows as for 1.
 * The app here runs over the suite's database through a Kysely plugin that
 * records every statement.
 */
import { beforeAll, beforeEach, expect, it } from 'vitest';
import { createServerApp, type ServerApp } from '../../src/server/app.js';
import { loadConfig } from '../../src/server/config.js';
import { createLogger } from '../../src/server/logger.js';
import { recordSweepReceipt } from '../../src/store/sweeps/index.js';
import { describeGraphQL, TEST_AUDIENCE, type GraphQLResponse } from '../helpers/graphql.js';
import { seedDocumentsInBulk } from '../helpers/bulk-seed.js';
import { nodeID, seedClaim } from '../helpers/graphql-seed.js';
import { withStatementCounter } from '../helpers/statement-counter.js';

const DOCUMENTS = /* GraphQL */ `
  query($ids: [String!]!) {
    documents(documentIDs: $ids) {
      documentID operations { id } watch { id } entityTrim { documentID } hasConnectorWork
      sweepCandidates { documentID } observationRecords { opHash } repair { present }
    }
  }
`;
const NODES = /* GraphQL */ `
  query($ids: [ID!]!) {
    nodes(ids: $ids) {
      __typename id
      ... on ConnectorOperation { state }
      ... on ProjectionWatch { verificationStatus }
      ... on SyncState { connectorName }
    }
  }
`;
const OPERATIONS = /* GraphQL */ `
  query($first: Int!) { operations(first: $first) { edges { node { id watch { id } } } } }
`;

const SIZE = 100;

describeGraphQL('graphql statement count', (suite) => {
  let app: ServerApp;
  let statements: string[];
  const seeded = { documentIDs: [] as string[], operationIDs: [] as string[], watchIDs: [] as string[], syncStateIDs: [] as string[] };

  beforeAll(() => {
    const counted = withStatementCounter(suite.store);
    statements = counted.statements;
    app = createServerApp({
      config: loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: TEST_AUDIENCE, SERVICE_DIDS: suite.keys.worker.did, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0' }),
      database: { ...suite.database.open, db: counted.store.db },
      logger: createLogger('silent'),
      storeDeps: { now: suite.clock.now },
    });
  });

  // Tables are emptied before every test; seed 100 documents, each with a
  // committed operation, its watch and a trim, and 100 sync states.
  beforeEach(async () => {
    const bulk = await seedDocumentsInBulk(suite.store, { ownerDID: suite.keys.alice.did, count: SIZE });
    seeded.documentIDs = bulk.documentIDs;
    seeded.operationIDs = bulk.operationNodeKeys.map((key) => nodeID('ConnectorOperation', key));
    seeded.watchIDs = bulk.watchNodeKeys.map((key) => nodeID('ProjectionWatch', key));
    seeded.syncStateIDs = bulk.syncStateNodeKeys.map((key) => nodeID('SyncState', key));
  });

  /** Runs `query` as `as` on the counting app; returns the answer and the statements it cost. */
  async function measure(query: string, variables: Record<string, unknown>, as: 'alice' | 'worker' = 'alice') {
    statements.length = 0;
    const response = await app.yoga.fetch('http://localhost/graphql', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${await suite.token(as)}` },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as GraphQLResponse;
    expect(body.errors).toBeUndefined();
    return { data: body.data, count: statements.length, kinds: [...statements] };
  }

  it.each(['alice', 'worker'] as const)('documents(100 ids) costs what documents(1 id) costs: one statement per table (%s)', async (as) => {
    const one = await measure(DOCUMENTS, { ids: seeded.documentIDs.slice(0, 1) }, as);
    const hundred = await measure(DOCUMENTS, { ids: seeded.documentIDs }, as);
    // operations, watches, trims, sweep candidates, observation records, repairs.
    expect(one.count).toBe(6);
    expect(hundred.count).toBe(one.count);
    expect(hundred.kinds.every((k) => k === 'SelectQueryNode')).toBe(true);
    const docs = hundred.data.documents as { documentID: string; operations: unknown[]; watch: unknown; entityTrim: unknown; hasConnectorWork: boolean }[];
    expect(docs).toHaveLength(SIZE);
    for (const doc of docs) {
      expect(doc.operations).toHaveLength(1);
      expect(doc.watch).not.toBeNull();
      expect(doc.entityTrim).not.toBeNull();
      expect(doc.hasConnectorWork).toBe(true);
    }
  });

  it('a document named twice costs nothing more', async () => {
    const once = await measure(DOCUMENTS, { ids: seeded.documentIDs.slice(0, 50) });
    const twice = await measure(DOCUMENTS, { ids: [...seeded.documentIDs.slice(0, 50), ...seeded.documentIDs.slice(0, 50)] });
    expect(twice.count).toBe(once.count);
  });

  it.each(['alice', 'worker'] as const)('nodes(100 mixed ids) costs what nodes(one of each type) costs: one statement per type (%s)', async (as) => {
    const small = [seeded.operationIDs[0], seeded.watchIDs[0], seeded.syncStateIDs[0]];
    const mixed = [...seeded.operationIDs.slice(0, 34), ...seeded.watchIDs.slice(0, 33), ...seeded.syncStateIDs.slice(0, 33)];
    // Interleave so the batch is not sorted by type.
    mixed.sort((a, b) => (a! < b! ? -1 : 1));
    const one = await measure(NODES, { ids: small }, as);
    const hundred = await measure(NODES, { ids: mixed }, as);
    expect(one.count).toBe(3);
    expect(hundred.count).toBe(one.count);
    const nodes = hundred.data.nodes as ({ id: string } | null)[];
    expect(nodes.map((n) => n?.id)).toEqual(mixed);
  });

  it('nodes of one type cost one statement for 1 or 100 ids', async () => {
    for (const ids of [seeded.operationIDs, seeded.watchIDs, seeded.syncStateIDs]) {
      const one = await measure(NODES, { ids: ids.slice(0, 1) });
      const hundred = await measure(NODES, { ids });
      expect(one.count).toBe(1);
      expect(hundred.count).toBe(1);
    }
  });

  it.each(['alice', 'worker'] as const)('operations(first: 50) with each node’s watch costs what first: 1 costs (%s)', async (as) => {
    const one = await measure(OPERATIONS, { first: 1 }, as);
    const fifty = await measure(OPERATIONS, { first: 50 }, as);
    // The page, then one batched watch lookup.
    expect(one.count).toBe(2);
    expect(fifty.count).toBe(one.count);
    const edges = fifty.data.operations.edges as { node: { watch: { id: string } | null } }[];
    expect(edges).toHaveLength(50);
    expect(edges.every((e) => e.node.watch !== null)).toBe(true);
  });

  it.each(['alice', 'worker'] as const)('syncState(connectorName) lookups under 30 aliases cost what one costs: one statement (%s)', async (as) => {
    const lookups = (n: number) =>
      `{ ${Array.from({ length: n }, (_, i) => `s${i}: syncState(connectorName: "doc-connector-${i}", ownerDID: "${suite.keys.alice.did}") { id }`).join(' ')} }`;
    const one = await measure(lookups(1), {}, as);
    const thirty = await measure(lookups(30), {}, as);
    expect(one.count).toBe(1);
    expect(thirty.count).toBe(1);
    expect(Object.values(thirty.data).every((state) => state !== null)).toBe(true);
  });

  it.each(['alice', 'worker'] as const)('sweepReceipts(first: 30) with counts, checkpoint and first candidates costs what first: 1 costs (%s)', async (as) => {
    for (let i = 0; i < 30; i++) {
      await recordSweepReceipt(suite.store, {
        key: { ownerDID: suite.keys.alice.did, connectorName: 'google', partition: `p-${i % 3}`, provenance: `run-${i}` },
        sequence: i,
        modelID: 'm',
        scope: 's',
        keep: 'k',
        sourceFetchHLC: 'h',
        kind: 'full',
        complete: true,
        candidates: [1, 2, 3].map((n) => ({ documentID: `doc-${i}-${n}`, sourceID: `src-${n}`, modelID: 'm' })),
      });
    }
    const query = `query($first: Int!) { sweepReceipts(first: $first) { edges { node {
      provenance candidateCounts { state count } checkpoint { receiptSequence } candidates(first: 2) { edges { node { documentID receipt { provenance } } } }
    } } } }`;
    const one = await measure(query, { first: 1 }, as);
    const thirty = await measure(query, { first: 30 }, as);
    // The page, the grouped counts, the checkpoints, one windowed candidate read; the candidates' receipts come from the same loaders.
    expect(one.count).toBe(5);
    expect(thirty.count).toBe(one.count);
    const edges = thirty.data.sweepReceipts.edges as { node: { candidates: { edges: unknown[] }; candidateCounts: { count: number }[] } }[];
    expect(edges).toHaveLength(30);
    expect(edges.every((e) => e.node.candidates.edges.length === 2 && e.node.candidateCounts[0]!.count === 3)).toBe(true);
  });

  it.each(['alice', 'worker'] as const)('attemptHistory of 1 or 100 operations costs one statement for the histories (%s)', async (as) => {
    const query = `query($first: Int!) { operations(first: $first) { edges { node { id lastError attemptHistory(first: 3) { edges { node { seq outcome } } } } } } }`;
    const one = await measure(query, { first: 1 }, as);
    const hundred = await measure(query, { first: 100 }, as);
    // The page and one windowed history read.
    expect(one.count).toBe(2);
    expect(hundred.count).toBe(one.count);
    expect((hundred.data.operations as { edges: unknown[] }).edges).toHaveLength(100);
  });

  it('finalizeOperation reads the operation once and does not read it again after the commit', async () => {
    const claimed = await seedClaim(suite);
    const finalize = `mutation($input: FinalizeOperationInput!) {
      finalizeOperation(input: $input) { __typename ... on FinalizeOperationPayload { finalized operation { id state documentID } watch { id } } }
    }`;
    const result = await measure(finalize, {
      input: { id: claimed.id, version: claimed.lease.version, leaseToken: claimed.lease.token, documentID: 'doc-counted', sourceID: 'src-counted' },
    });
    expect(result.data.finalizeOperation).toMatchObject({ finalized: true, operation: { id: claimed.id, state: 'COMMITTED', documentID: 'doc-counted' } });
    if (suite.dialect === 'postgres') {
      // The node read, then the finalize as one statement (commit, slot lock, superseded DELETE, upsert, NOTIFY in CTEs).
      expect(result.count, result.kinds.join()).toBe(2);
      return;
    }
    // The node read, the fenced UPDATE … RETURNING, the superseded-watch DELETE, the watch upsert (BEGIN/COMMIT are not counted here).
    expect(result.kinds.filter((k) => k === 'SelectQueryNode').length, result.kinds.join()).toBe(1);
    expect(result.count, result.kinds.join()).toBe(4);
  });
});
