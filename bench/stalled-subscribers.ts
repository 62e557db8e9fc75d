/**
 * Stalled subscribers (issue 19 item 4): a server process, SUBSCRIBERS
 * subscriptions to one operation that subscribe and never read (raw sockets,
 * test/helpers/stalled-subscribers.ts), RENEWS renewals of that operation's
 * lease, then every subscriber reads again. Prints the server's RSS before
 * and after the renewals and what each subscriber received on resume
 * (events, bytes, whether the server ended it and with which code).
 *
 *   npx tsx bench/stalled-subscribers.ts
 *   TRANSPORTS=sse,websocket SUBSCRIBERS=20 RENEWS=6000 DIALECT=postgres npx tsx bench/stalled-subscribers.ts
 */
import { readFileSync } from 'node:fs';
import { generateLocalKey, mintToken } from '../src/auth/index.js';
import type { DialectName } from '../src/db/connect.js';
import { postGraphQL, startE2EServers } from '../test/helpers/e2e-server.js';
import { CLAIM, claimInput, operationMutationDocument } from '../test/helpers/operation-graphql.js';
import { openStalledSubscriber, TRANSPORTS, type Transport } from '../test/helpers/stalled-subscribers.js';

const SUBSCRIBERS = Number(process.env.SUBSCRIBERS ?? 20);
const RENEWS = Number(process.env.RENEWS ?? 6_000);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 8);
const DIALECT = (process.env.DIALECT ?? 'sqlite') as DialectName;
const transports = (process.env.TRANSPORTS ?? TRANSPORTS.join(',')).split(',') as Transport[];
const AUDIENCE = 'connector-store-stalled';
const SUBSCRIPTION = 'subscription($id: ID!) { operationChanged(id: $id) { id state attempts version leaseExpiresAt updatedAt } }';

/** The server's V8 heap in use (prom-client's nodejs_heap_size_used_bytes on /metrics), MB: what RSS alone cannot tell apart, live data from garbage not yet collected. */
async function heapUsedMB(origin: string): Promise<number> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  return Math.round(Number(/^nodejs_heap_size_used_bytes (\S+)$/m.exec(text)?.[1] ?? NaN) / 1024 / 1024);
}
const rssMB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]) / 1024;

async function run(transport: Transport) {
  const user = generateLocalKey();
  const worker = generateLocalKey();
  const extraEnv = Object.fromEntries((process.env.SERVER_ENV ?? '').split(',').filter((kv) => kv.includes('=')).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
  const started = await startE2EServers(DIALECT, {
    audience: AUDIENCE,
    serviceDID: worker.did,
    name: 'stalled',
    // The user is a fresh did:key: without the whole pool for fresh keys, admission refuses half of them (OVERLOADED) at the start.
    env: { MAX_SUBSCRIPTIONS_PER_VIEWER: String(SUBSCRIBERS + 5), MAX_SUBSCRIPTIONS: String(SUBSCRIBERS + 5), UNKNOWN_VIEWER_SHARE_PERCENT: '100', RATE_LIMIT_PER_VIEWER: '0', RATE_LIMIT_PER_IP: '0', ...extraEnv },
  });
  try {
    const { server } = started;
    const pid = server.child.pid!;
    const token = await mintToken({ privateKey: user.privateKey, audience: AUDIENCE, ttlSeconds: 3600 });
    const { body } = await postGraphQL(server, token, CLAIM, { input: claimInput({ operationID: 'op-stalled', leaseMs: 60_000 }) });
    const { operation, lease } = body.data.claimOperation as { operation: { id: string }; lease: { token: string; version: number } };
    const subscribers = [];
    for (let i = 0; i < SUBSCRIBERS; i++) subscribers.push(await openStalledSubscriber(server.origin, transport, token, SUBSCRIPTION, { id: operation.id }));
    // READING=1: a control run whose subscribers read all along.
    const reading = process.env.READING === '1' ? subscribers.map((s) => s.resume(5_000, 600_000)) : undefined;
    await new Promise((r) => setTimeout(r, 500));
    const before = rssMB(pid);
    const renew = operationMutationDocument('renewOperationLease');
    let next = 0;
    let failed = 0;
    const startedAt = Date.now();
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next < RENEWS) {
          next++;
          const res = await postGraphQL(server, token, renew, { input: { id: operation.id, version: lease.version, leaseToken: lease.token, leaseMs: 60_000 } });
          if (res.body.data?.renewOperationLease?.__typename !== 'OperationPayload') failed++;
        }
      }),
    );
    const renewMs = Date.now() - startedAt;
    await new Promise((r) => setTimeout(r, 1_000));
    const after = rssMB(pid);
    const heapAfter = await heapUsedMB(server.origin);
    // Idle for a while: V8 collects once allocation stops (its memory reducer); what is still used then is held.
    await new Promise((r) => setTimeout(r, Number(process.env.IDLE_MS ?? 15_000)));
    const heapIdle = await heapUsedMB(server.origin);
    const resumed = await Promise.all(reading ?? subscribers.map((s) => s.resume(1_500)));
    const counts = resumed.map((r) => r.results.length);
    const codes = new Set(resumed.flatMap((r) => r.results.flatMap((x) => x.errors?.map((e) => String(e.extensions?.code)) ?? [])));
    console.log(
      JSON.stringify({
        transport,
        reading: reading !== undefined,
        dialect: DIALECT,
        subscribers: SUBSCRIBERS,
        renews: RENEWS,
        failedRenews: failed,
        renewSeconds: renewMs / 1_000,
        rssBeforeMB: Math.round(before),
        rssAfterMB: Math.round(after),
        heapUsedAfterMB: heapAfter,
        heapUsedIdleMB: heapIdle,
        eventsOnResume: { min: Math.min(...counts), max: Math.max(...counts) },
        bytesOnResume: { max: Math.max(...resumed.map((r) => r.bytes)) },
        ended: resumed.filter((r) => r.ended).length,
        errorCodes: [...codes],
        lastLeaseExpiresAt: [...new Set(resumed.map((r) => r.results.findLast((x) => x.data)?.data?.operationChanged?.leaseExpiresAt))].length,
      }),
    );
    for (const s of subscribers) s.close();
  } finally {
    await started.dispose();
  }
}

for (const transport of transports) await run(transport);
