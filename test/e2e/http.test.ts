/**
 * End to end over real HTTP: `src/server/main.ts` started as a child process
 * on an ephemeral port, once per dialect (a fresh SQLite file; a fresh
 * Postgres database), driven with the generated client documents of
 * client/operations. The last test of each suite shuts the server down.
 */
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { print } from 'graphql';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ArmWatchDocument,
  ArmWatchReason,
  ClaimOperationDocument,
  CommitSweepReceiptDocument,
  DueSweepCandidatesDocument,
  ObservationRecordsDocument,
  PutObservationRecordDocument,
  RecordSweepOutcomeDocument,
  RecordSweepReceiptDocument,
  SetEntityTrimDocument,
  SweepDocumentDocument,
  SweepOutcome,
  SweepReceiptsDocument,
  UpsertObservationRepairDocument,
  ClaimWatchAttemptDocument,
  ConnectorOperationOp,
  DocumentStateDocument,
  FinalizeOperationDocument,
  MarkOperationSentDocument,
  OperationsDocument,
  RecordVerificationDocument,
  RequestRepullDocument,
  StartOperationAttemptDocument,
  WatchesDocument,
  type ClaimOperationInput,
  type ClaimOperationMutation,
} from '../../client/generated/graphql.js';
import type { DialectName } from '../../src/db/connect.js';
import { dialectAvailable, testDialects } from '../helpers/databases.js';
import { e2ePrincipals, postGraphQL, startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import type { ServerProcess } from '../helpers/server-process.js';

const AUDIENCE = 'connector-store-e2e';

type Who = 'alice' | 'worker';

const { keys, tokens, mint } = e2ePrincipals(AUDIENCE, ['alice', 'worker']);

/** A started server over its own fresh database. */
function launch(dialect: DialectName): Promise<E2EServers> {
  return startE2EServers(dialect, {
    audience: AUDIENCE,
    serviceDID: keys.worker.did,
    name: 'e2e',
    env: {
      DB_POOL_MAX: '10',
      SHUTDOWN_GRACE_MS: '10000',
      // Long enough to observe /readyz failing while the server still accepts.
      SHUTDOWN_DRAIN_MS: '1000',
      // Short, so a slow client is seen being cut off within the test.
      HTTP_HEADERS_TIMEOUT_MS: '1000',
      MAX_BODY_BYTES: '100000',
    },
  });
}

const dialects = testDialects().filter(dialectAvailable);
const launches = new Map<DialectName, Promise<E2EServers>>();

// Both servers start at once (start-up is mostly tsx compiling), each suite awaits its own.
beforeAll(async () => {
  for (const dialect of dialects) {
    const launching = launch(dialect);
    launching.catch(() => {}); // reported by the suite that awaits it
    launches.set(dialect, launching);
  }
  await mint();
});

afterAll(async () => {
  // Whatever happened in the suites: no child outlives the file, no database or file is left.
  for (const launching of launches.values()) await (await launching.catch(() => undefined))?.dispose();
});

for (const dialect of testDialects()) {
  describe.skipIf(!dialects.includes(dialect))(`${dialect}: end to end over HTTP`, () => {
    let launched: E2EServers | undefined;

    beforeAll(async () => {
      launched = await launches.get(dialect);
    });

    afterAll(async () => {
      await launched?.dispose();
    });

    const running = (): ServerProcess => {
      if (launched === undefined) throw new Error('server not started');
      return launched.server;
    };

    /** Sends a generated document as `who`; fails the test on a non-200 or a GraphQL error. */
    async function send<R, V>(document: TypedDocumentNode<R, V>, variables: V, who: Who = 'alice'): Promise<R> {
      const { status, body } = await postGraphQL<R>(running(), tokens[who], print(document), variables);
      expect(body.errors, JSON.stringify(body.errors)).toBeUndefined();
      expect(status).toBe(200);
      return body.data!;
    }

    const claimInput = (operationID: string, overrides: Partial<ClaimOperationInput> = {}): ClaimOperationInput => ({
      operationID,
      connectorName: 'github',
      model: 'issue',
      op: ConnectorOperationOp.Create,
      accountKey: 'account-1',
      target: 'repos/acme/issues',
      sourceID: null,
      deterministicEventID: `event-${operationID}`,
      payloadHash: 'sha256:payload-1',
      reissueIntent: 'create issue',
      leaseMs: 60_000,
      ...overrides,
    });

    type ClaimResult = ClaimOperationMutation['claimOperation'];
    type Claimed = Extract<ClaimResult, { __typename: 'ClaimOperationPayload' }>;

    async function claim(input: ClaimOperationInput): Promise<ClaimResult> {
      return (await send(ClaimOperationDocument, { input })).claimOperation;
    }

    function expectPayload<T extends { __typename?: string }, N extends string>(result: T, typename: N): Extract<T, { __typename?: N }> {
      expect(result.__typename, JSON.stringify(result)).toBe(typename);
      return result as Extract<T, { __typename?: N }>;
    }

    /** Claims `operationID` as alice (a fresh CLAIMED lease) and returns the payload. */
    async function claimFresh(operationID: string): Promise<Claimed & { lease: NonNullable<Claimed['lease']> }> {
      const payload = expectPayload(await claim(claimInput(operationID)), 'ClaimOperationPayload');
      expect(payload.outcome).toBe('CLAIMED');
      expect(payload.lease).toBeTruthy();
      return payload as Claimed & { lease: NonNullable<Claimed['lease']> };
    }

    it('answers /healthz and /readyz with 200', async () => {
      const health = await fetch(`${running().origin}/healthz`);
      expect(health.status).toBe(200);
      const ready = await fetch(`${running().origin}/readyz`);
      expect(ready.status).toBe(200);
    });

    it('refuses a bad bearer token with 401 and a challenge, and echoes the request id', async () => {
      const response = await postGraphQL(running(), 'not-a-jwt', '{ serverInfo { dialect } }', {}, { 'x-request-id': 'e2e-request-1' });
      expect(response.status).toBe(401);
      expect(response.headers.get('www-authenticate')).toMatch(/^Bearer /);
      expect(response.headers.get('x-request-id')).toBe('e2e-request-1');
    });

    it('claim → start → mark sent → finalize arms the watch → requestRepull → claimWatchAttempt → recordVerification', async () => {
      const claimed = await claimFresh('flow-1');
      const { id } = claimed.operation;
      const fence = { id, version: claimed.lease.version, leaseToken: claimed.lease.token };
      expect(claimed.operation.state).toBe('ATTEMPTED');
      expect(claimed.operation.callerDID).toBe(keys.alice.did);
      expect(claimed.operation.ownerDID).toBe(keys.alice.did);

      const started = expectPayload((await send(StartOperationAttemptDocument, { input: fence })).startOperationAttempt, 'OperationPayload');
      expect(started.operation.attempts).toBe(1);

      const marked = expectPayload(
        (await send(MarkOperationSentDocument, { input: { ...fence, sendMarker: 'marker-flow-1' } })).markOperationSent,
        'OperationPayload',
      );
      expect(marked.operation.sendMarkerSet).toBe(true);

      const finalize = expectPayload(
        (
          await send(FinalizeOperationDocument, {
            input: { ...fence, documentID: 'doc-flow-1', sourceID: 'gh-issue-1', resultEntity: { number: 1, title: 'Hello' } },
          })
        ).finalizeOperation,
        'FinalizeOperationPayload',
      );
      expect(finalize.finalized).toBe(true);
      expect(finalize.operation).toMatchObject({ id, state: 'COMMITTED', documentID: 'doc-flow-1', resultEntity: { number: 1, title: 'Hello' } });
      const armed = finalize.watch!;
      expect(armed).toMatchObject({
        ownerDID: keys.alice.did,
        connectorName: 'github',
        model: 'issue',
        accountKey: 'account-1',
        sourceID: 'gh-issue-1',
        documentID: 'doc-flow-1',
        verificationStatus: 'PENDING_VERIFICATION',
      });

      // The dashboard sees it: the document's state, the operations list and counts, the watches.
      const state = (await send(DocumentStateDocument, { documentID: 'doc-flow-1' })).document;
      expect(state.hasConnectorWork).toBe(true);
      expect(state.watch?.id).toBe(armed.id);
      expect(state.operations.map((o) => o.id)).toEqual([id]);
      const listed = await send(OperationsDocument, { first: 10, filter: { documentID: 'doc-flow-1' } });
      expect(listed.operations.totalCount).toBe(1);
      expect(listed.operations.edges[0]?.node.watch?.id).toBe(armed.id);
      expect(listed.operationCounts.find((c) => c.state === 'COMMITTED')?.count).toBe(1);
      const watches = await send(WatchesDocument, { first: 10, filter: { documentID: 'doc-flow-1' } });
      expect(watches.watches.edges.map((e) => e.node.id)).toEqual([armed.id]);

      // The worker's side: re-arm, claim the attempt, record a match.
      const repulled = expectPayload((await send(RequestRepullDocument, { input: { id: armed.id } }, 'worker')).requestRepull, 'WatchPayload');
      expect(repulled.watch.repairGeneration).toBeGreaterThan(armed.repairGeneration);
      expect(repulled.watch.verificationStatus).toBe('PENDING_VERIFICATION');

      const attempt = expectPayload(
        (await send(ClaimWatchAttemptDocument, { input: { id: armed.id, version: repulled.watch.version, claimMs: 30_000 } }, 'worker'))
          .claimWatchAttempt,
        'WatchPayload',
      );
      expect(attempt.watch.claimedUntil).not.toBeNull();
      expect(attempt.watch.version).toBe(repulled.watch.version + 1);

      const verified = expectPayload(
        (
          await send(
            RecordVerificationDocument,
            {
              input: {
                id: armed.id,
                version: attempt.watch.version,
                repairGeneration: attempt.watch.repairGeneration,
                result: 'MATCH',
                digest: 'sha256:converged',
              },
            },
            'worker',
          )
        ).recordVerification,
        'RecordVerificationPayload',
      );
      expect(verified.stale).toBe(false);
      expect(verified.watch).toMatchObject({ verificationStatus: 'VERIFIED', verifiedStateDigest: 'sha256:converged', claimedUntil: null });
    });

    it('replays a committed claim with the recorded result, and refuses the key with another payload', async () => {
      const claimed = await claimFresh('replay-1');
      const fence = { id: claimed.operation.id, version: claimed.lease.version, leaseToken: claimed.lease.token };
      const finalized = expectPayload(
        (await send(FinalizeOperationDocument, { input: { ...fence, documentID: 'doc-replay-1', sourceID: 'gh-2', resultEntity: { n: 2 } } }))
          .finalizeOperation,
        'FinalizeOperationPayload',
      );
      expect(finalized.finalized).toBe(true);

      const replayed = expectPayload(await claim(claimInput('replay-1')), 'ClaimOperationPayload');
      expect(replayed.outcome).toBe('REPLAYED');
      expect(replayed.lease).toBeNull();
      expect(replayed.replay).toEqual({ documentID: 'doc-replay-1', resultEntity: { n: 2 } });
      expect(replayed.operation).toMatchObject({ id: claimed.operation.id, state: 'COMMITTED' });

      const conflict = expectPayload(await claim(claimInput('replay-1', { payloadHash: 'sha256:another-payload' })), 'IdempotencyConflictError');
      expect(conflict).toMatchObject({ code: 'IDEMPOTENCY_CONFLICT', field: 'payloadHash' });

      // The refused claim changed nothing: the operation still replays the same result.
      const again = expectPayload(await claim(claimInput('replay-1')), 'ClaimOperationPayload');
      expect(again.replay).toEqual({ documentID: 'doc-replay-1', resultEntity: { n: 2 } });
    });

    it('20 concurrent identical finalizes over HTTP: 20 × finalized: true, one of them not a replay, one watch', async () => {
      const claimed = await claimFresh('race-1');
      const input = {
        id: claimed.operation.id,
        version: claimed.lease.version,
        leaseToken: claimed.lease.token,
        documentID: 'doc-race-1',
        sourceID: 'gh-race-1',
        resultEntity: { race: true },
      };
      const results = await Promise.all(Array.from({ length: 20 }, () => send(FinalizeOperationDocument, { input })));
      const payloads = results.map((r) => expectPayload(r.finalizeOperation, 'FinalizeOperationPayload'));
      expect(payloads.filter((p) => p.finalized)).toHaveLength(20);
      expect(payloads.filter((p) => !p.replayed)).toHaveLength(1);
      for (const p of payloads) expect(p.operation?.state).toBe('COMMITTED');
      const watches = await send(WatchesDocument, { first: 10, filter: { documentID: 'doc-race-1' } });
      expect(watches.watches.totalCount).toBe(1);
    });

    // Last: it stops the server.
    it('the ingest side: record a listing pass → apply its candidates → commit; observe → repair; trim; arm on ingest; sweep a deleted document', async () => {
      const owner = keys.alice.did;
      // A listing pass over alice's contacts did not see two local documents.
      const recorded = expectPayload(
        (
          await send(
            RecordSweepReceiptDocument,
            {
              input: {
                ownerDID: owner,
                connectorName: 'google',
                partition: 'contacts',
                provenance: 'listing-run-1',
                sequence: 1,
                modelID: 'contacts.person',
                scope: 'contacts',
                keep: 'listed',
                sourceFetchHLC: '0001917c2a4e8b000000',
                predicate: { since: '2026-01-01' },
                kind: 'full',
                complete: true,
                candidates: [
                  { documentID: 'doc-ingest-gone', sourceID: 'people/c1', modelID: 'contacts.person' },
                  { documentID: 'doc-ingest-kept', sourceID: 'people/c2', modelID: 'contacts.person' },
                ],
              },
            },
            'worker',
          )
        ).recordSweepReceipt,
        'RecordSweepReceiptPayload',
      );
      expect(recorded.created).toBe(true);
      const receiptID = recorded.receipt.id;
      const due = await send(DueSweepCandidatesDocument, { ownerDID: owner, connectorName: 'google' }, 'worker');
      expect(due.dueSweepCandidates.map((c) => [c.documentID, c.receipt?.id])).toEqual([
        ['doc-ingest-gone', receiptID],
        ['doc-ingest-kept', receiptID],
      ]);
      const applied = expectPayload(
        (await send(RecordSweepOutcomeDocument, { input: { id: receiptID, documentID: 'doc-ingest-gone', outcome: SweepOutcome.Applied } }, 'worker')).recordSweepOutcome,
        'SweepCandidatePayload',
      );
      expect(applied.candidate.state).toBe('APPLIED');
      await send(RecordSweepOutcomeDocument, { input: { id: receiptID, documentID: 'doc-ingest-kept', outcome: SweepOutcome.Kept } }, 'worker');
      const committed = expectPayload((await send(CommitSweepReceiptDocument, { input: { id: receiptID } }, 'worker')).commitSweepReceipt, 'CommitSweepReceiptPayload');
      expect(committed).toMatchObject({ newlyCommitted: true, checkpointAdvanced: true, checkpoint: { receiptSequence: 1, provenance: 'listing-run-1' } });
      // The owner's dashboard sees the pass, its counts and the checkpoint.
      const receipts = await send(SweepReceiptsDocument, { first: 5, filter: { partition: 'contacts' } });
      expect(receipts.sweepReceipts.edges[0]?.node).toMatchObject({ id: receiptID, committedAt: expect.any(String), checkpoint: { receiptSequence: 1 } });
      expect(receipts.sweepReceipts.edges[0]?.node.candidateCounts).toEqual([
        { state: 'PENDING', count: 0 },
        { state: 'APPLIED', count: 1 },
        { state: 'KEPT', count: 1 },
        { state: 'FAILED', count: 0 },
      ]);

      // An observation of the kept document, a repair obligation for it, a trim, and an ingest arm of its watch.
      const put = expectPayload(
        (
          await send(PutObservationRecordDocument, {
            input: { type: 'connector.observation', documentID: 'doc-ingest-kept', opHash: 'op-1', hlc: '0001917c2a4e8b000001', opJWT: 'eyJ.e30.sig', payload: 'AAEC' },
          })
        ).putObservationRecord,
        'PutObservationRecordPayload',
      );
      expect(put.inserted).toBe(true);
      expect((await send(ObservationRecordsDocument, { documentID: 'doc-ingest-kept' })).observationRecords).toMatchObject([{ owner, opHash: 'op-1', payload: 'AAEC' }]);
      const repair = expectPayload(
        (await send(UpsertObservationRepairDocument, { input: { documentID: 'doc-ingest-kept', fetchHLC: 'f1', decisionHLC: 'd1', present: true } })).upsertObservationRepair,
        'ObservationRepairPayload',
      );
      expect(repair.repair.owner).toBe(owner);
      expectPayload(
        (await send(SetEntityTrimDocument, { input: { documentID: 'doc-ingest-kept', connectorName: 'google', trimmedFields: { notes: 'cut' } } })).setEntityTrim,
        'EntityTrimPayload',
      );
      const watchInput = { connectorName: 'google', model: 'contacts.person', accountKey: 'primary', sourceID: 'people/c2' };
      const created = expectPayload(
        (await send(ArmWatchDocument, { input: { ...watchInput, documentID: 'doc-ingest-kept', reason: ArmWatchReason.Ingest } })).armWatch,
        'ArmWatchPayload',
      );
      const coalesced = expectPayload((await send(ArmWatchDocument, { input: { ...watchInput, reason: ArmWatchReason.Ingest } })).armWatch, 'ArmWatchPayload');
      expect([created.outcome, coalesced.outcome, coalesced.watch.version]).toEqual(['CREATED', 'COALESCED', created.watch.version]);
      const state = await send(DocumentStateDocument, { documentID: 'doc-ingest-kept' });
      expect(state.document.hasConnectorWork).toBe(true);

      // The document is deleted locally later: its connector rows go with it.
      const swept = expectPayload((await send(SweepDocumentDocument, { input: { documentID: 'doc-ingest-kept' } }, 'worker')).sweepDocument, 'SweepDocumentPayload');
      expect(swept.deleted).toEqual({ observationRecords: 1, repairs: 1, trims: 1, watches: 1, sweepCandidates: 1, operations: 0 });
      expect((await send(DocumentStateDocument, { documentID: 'doc-ingest-kept' })).document.hasConnectorWork).toBe(false);
    });

    it('a client that sends its headers too slowly is cut off (408) after HTTP_HEADERS_TIMEOUT_MS', async () => {
      const { hostname, port } = new URL(running().origin);
      const socket = connect(Number(port), hostname);
      await once(socket, 'connect');
      socket.write('POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\n');
      const started = Date.now();
      let answer = '';
      socket.on('data', (chunk) => (answer += chunk.toString()));
      await once(socket, 'close');
      expect(Date.now() - started).toBeLessThan(4_000);
      expect(answer).toMatch(/^HTTP\/1\.1 408/);
    });

    it('a declared body over MAX_BODY_BYTES gets 413 before it is sent; bytes past a declared length are never part of the body', async () => {
      const { hostname, port } = new URL(running().origin);
      const exchange = async (request: string) => {
        const socket = connect(Number(port), hostname);
        await once(socket, 'connect');
        let answer = '';
        socket.on('data', (chunk) => (answer += chunk.toString()));
        socket.on('error', () => {});
        socket.write(request);
        // (`once` would reject on the reset that follows a refused body.)
        await Promise.race([new Promise((r) => socket.on('close', r)), new Promise((r) => setTimeout(r, 3_000))]);
        socket.destroy();
        return answer;
      };
      const head = `POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nauthorization: Bearer ${tokens.alice}\r\ncontent-type: application/json\r\n`;
      // Only the headers go out: the answer cannot have waited for 200 001 bytes.
      expect(await exchange(`${head}content-length: 200001\r\n\r\n`)).toMatch(/^HTTP\/1\.1 413/);
      // The declared length is the body; what follows it is the next request, answered on its own.
      const body = JSON.stringify({ query: '{ __typename }' });
      const answers = await exchange(`${head}content-length: ${body.length}\r\n\r\n${body}GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nconnection: close\r\n\r\n`);
      expect(answers).toMatch(/^HTTP\/1\.1 200/);
      expect(answers).toContain('{"data":{"__typename":"Query"}}');
      expect(answers.match(/HTTP\/1\.1 200/g)).toHaveLength(2);
    });

    it('a chunked body over MAX_BODY_BYTES gets 413 and the connection is closed (its unread rest cannot poison the next request)', async () => {
      const { hostname, port } = new URL(running().origin);
      const socket = connect(Number(port), hostname);
      await once(socket, 'connect');
      let answer = '';
      socket.on('data', (chunk) => (answer += chunk.toString()));
      socket.on('error', () => {});
      socket.write(`POST /graphql HTTP/1.1\r\nHost: 127.0.0.1\r\nauthorization: Bearer ${tokens.alice}\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n`);
      const chunk = 'x'.repeat(50_000);
      for (let i = 0; i < 4 && !socket.destroyed; i++) socket.write(`${chunk.length.toString(16)}\r\n${chunk}\r\n`);
      await once(socket, 'close');
      expect(answer).toMatch(/^HTTP\/1\.1 413/);
      expect(answer.toLowerCase()).toContain('connection: close');
    });

    it('on SIGTERM: readiness fails first (503 while draining), a request in flight still finishes, the pool closes, exit 0', async () => {
      const proc = running();
      const body = JSON.stringify({ query: '{ serverInfo { dialect viewerIsService } }' });
      // A request held open mid-body: the server has it (it answered 100 Continue) but cannot finish it yet.
      const inFlight = await openHeldRequest(proc.origin, tokens.worker, body);

      proc.child.kill('SIGTERM');
      await proc.waitForLog((line) => typeof line.msg === 'string' && line.msg.startsWith('shutting down'));

      // Readiness fails first: during the drain the server still accepts and answers 503.
      const readiness = await fetch(`${proc.origin}/readyz`);
      expect(readiness.status).toBe(503);
      await proc.waitForLog((line) => typeof line.msg === 'string' && line.msg.startsWith('drained'));
      expect(proc.child.exitCode, 'still running while a request is in flight').toBeNull();

      inFlight.socket.write(body.slice(HELD_BYTES));
      const response = await inFlight.ended;
      expect(response).toMatch(/^HTTP\/1\.1 200 /m);
      expect(response).toContain(`{"data":{"serverInfo":{"dialect":"${dialect}","viewerIsService":true}}}`);

      const exit = await proc.exited;
      expect(exit).toEqual({ code: 0, signal: null });
      // Logged after the pool closed, just before exiting.
      const messages = proc.logs.map((line) => line.msg);
      expect(messages.indexOf('stopped')).toBeGreaterThan(messages.findIndex((m) => m?.startsWith('shutting down')));
      expect(proc.stderr()).toBe('');
    });
  });
}

/** How many body bytes a held request sends before it waits. */
const HELD_BYTES = 10;

/**
 * Opens a raw connection and sends a POST /graphql whose body stops after
 * {@link HELD_BYTES} bytes. Resolves once the server has answered
 * `100 Continue` (so it has read the headers and holds the request);
 * `ended` resolves with everything the server sent once the connection closes
 * (`Connection: close`: right after the response).
 */
async function openHeldRequest(origin: string, token: string, body: string): Promise<{ socket: Socket; ended: Promise<string> }> {
  const { hostname, port } = new URL(origin);
  const socket = connect(Number(port), hostname);
  await once(socket, 'connect');
  let received = '';
  socket.setEncoding('utf8');
  const continued = new Promise<void>((resolve, reject) => {
    const onData = (chunk: string) => {
      received += chunk;
      if (received.startsWith('HTTP/1.1 100')) {
        socket.off('error', reject);
        resolve();
      }
    };
    socket.on('data', onData);
    socket.once('error', reject);
  });
  const ended = new Promise<string>((resolve) => socket.once('close', () => resolve(received)));
  socket.write(
    [
      'POST /graphql HTTP/1.1',
      'Host: 127.0.0.1',
      `Authorization: Bearer ${token}`,
      'Content-Type: application/json',
      `Content-Length: ${Buffer.byteLength(body)}`,
      'Expect: 100-continue',
      'Connection: close',
      '',
      '',
    ].join('\r\n'),
  );
  await continued;
  socket.write(body.slice(0, HELD_BYTES));
  return { socket, ended };
}
