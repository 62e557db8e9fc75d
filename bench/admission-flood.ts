/**
 * Issue 19 item 5's flood, in process with the default limits: 50 fresh
 * did:keys each take their 20 graphql-sse reservations (PUT /graphql/stream)
 * and their 20 /graphql SSE subscriptions, each key from an address of its own
 * (FLOOD_ADDRESSES=one: all from one); then an owner of rows and a service DID
 * try to reserve and to subscribe. Prints what each got.
 *
 *   npx tsx bench/admission-flood.ts
 *   FLOOD_ADDRESSES=one npx tsx bench/admission-flood.ts
 */
import { generateLocalKey, mintToken } from '../src/auth/index.js';
import { openDatabase } from '../src/db/connect.js';
import { migrateToLatest } from '../src/db/migrator.js';
import { createServerApp } from '../src/server/app.js';
import { loadConfig } from '../src/server/config.js';
import { createLogger } from '../src/server/logger.js';

const AUDIENCE = 'connector-store-bench';
const KEYS = 50;
const PER_KEY = 20;
const oneAddress = process.env.FLOOD_ADDRESSES === 'one';

const owner = generateLocalKey();
const service = generateLocalKey();
const database = openDatabase({ dialect: 'sqlite', path: ':memory:', display: 'sqlite::memory:' });
await migrateToLatest(database.db, 'sqlite');
// The owner's row is made now: counted at once (KNOWN_VIEWER_ROW_AGE_MS=0), as an owner's hour-old row would be.
const config = loadConfig({ NODE_ENV: 'test', AUTH_AUDIENCE: AUDIENCE, SERVICE_DIDS: service.did, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0', KNOWN_VIEWER_ROW_AGE_MS: '0' });
const app = createServerApp({ config, database, logger: createLogger('silent') });
const bearer = async (key = generateLocalKey()) => `Bearer ${await mintToken({ privateKey: key.privateKey, did: key.did, audience: AUDIENCE, ttlSeconds: 600 })}`;
const peer = (i: number) => ({ req: { socket: { remoteAddress: oneAddress ? '10.1.0.1' : `10.1.${Math.floor(i / 250)}.${(i % 250) + 1}` } } });
const tally = (codes: string[]) => Object.entries(codes.reduce<Record<string, number>>((t, c) => ({ ...t, [c]: (t[c] ?? 0) + 1 }), {})).map(([c, n]) => `${c} ×${n}`).join(', ');

// The owner owns a row.
const claim = await app.yoga.fetch('http://localhost/graphql', {
  method: 'POST',
  headers: { 'content-type': 'application/json', authorization: await bearer(owner) },
  body: JSON.stringify({
    query: 'mutation($input: ClaimOperationInput!) { claimOperation(input: $input) { __typename } }',
    variables: { input: { operationID: 'op-1', connectorName: 'google', model: 'contact', op: 'CREATE', accountKey: 'a', target: 't', deterministicEventID: 'e', payloadHash: 'h', reissueIntent: 'none', leaseMs: 60_000 } },
  }),
});
const claimBody = (await claim.json()) as { data?: { claimOperation?: { __typename: string } }; errors?: unknown };
const claimed = claimBody.data?.claimOperation?.__typename ?? JSON.stringify(claimBody.errors);

const reserve = async (authorization: string, i: number) => {
  const response = await app.yoga.fetch('http://localhost/graphql/stream', { method: 'PUT', headers: { authorization } }, peer(i));
  const text = await response.text();
  return response.status === 201 ? '201' : `${response.status} ${(JSON.parse(text) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code}`;
};
const open: AbortController[] = [];
const subscribe = async (authorization: string, i: number) => {
  const abort = new AbortController();
  open.push(abort);
  const response = await app.yoga.fetch(
    'http://localhost/graphql',
    {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream', authorization },
      body: JSON.stringify({ query: 'subscription { operationsChanged { id } }' }),
      signal: abort.signal,
    },
    peer(i),
  );
  const reader = response.body!.getReader();
  // A refusal arrives at once as a `next` with errors; an accepted stream stays quiet.
  const first = await Promise.race([reader.read().then((r) => new TextDecoder().decode(r.value)), new Promise<string>((r) => setTimeout(() => r(''), 50))]);
  const code = /"code":"([A-Z_]+)"/.exec(first)?.[1];
  return code ?? 'open';
};

const started = Date.now();
const reservations: string[] = [];
const subscriptions: string[] = [];
for (let i = 0; i < KEYS; i++) {
  const token = await bearer();
  for (let j = 0; j < PER_KEY; j++) reservations.push(await reserve(token, i));
  for (let j = 0; j < PER_KEY; j++) subscriptions.push(await subscribe(token, i));
}
const floodMs = Date.now() - started;
console.log(`owner's claim: ${claimed}`);
console.log(`flood (${KEYS} keys × ${PER_KEY}, ${oneAddress ? 'one address' : 'an address per key'}, ${floodMs} ms): reservations ${tally(reservations)}; subscriptions ${tally(subscriptions)}`);
console.log(`owner:   reservation ${await reserve(await bearer(owner), 0)}, /graphql subscription ${await subscribe(await bearer(owner), 0)}`);
console.log(`service: reservation ${await reserve(await bearer(service), 0)}, /graphql subscription ${await subscribe(await bearer(service), 0)}`);
for (const abort of open) abort.abort();
app.closeSubscriptions();
await database.close();
process.exit(0);
