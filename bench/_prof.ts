import { spawn } from 'node:child_process';
import autocannon from 'autocannon';
import { generateLocalKey, mintToken } from '../src/auth/index.js';
const key = generateLocalKey();
const token = await mintToken({ privateKey: key.privateKey, audience: 'b', ttlSeconds: 3600 });
const url = process.argv[2]!;
const child = spawn(process.execPath, ['--cpu-prof', '--cpu-prof-dir=/tmp/prof-out', '--import', 'tsx', 'src/server/main.ts'], { cwd: process.cwd(), env: { PATH: process.env.PATH!, HOST: '127.0.0.1', PORT: '4555', DATABASE_URL: url, NODE_ENV: 'production', AUTH_AUDIENCE: 'b', SERVICE_DIDS: key.did, LOG_LEVEL: 'silent', RETENTION_INTERVAL_MS: '0', RATE_LIMIT_PER_VIEWER: '0', RATE_LIMIT_PER_IP: '0' }, stdio: 'inherit' });
for (;;) { try { if ((await fetch('http://127.0.0.1:4555/readyz')).ok) break; } catch {} await new Promise(r => setTimeout(r, 100)); }
const CLAIM = `mutation($input: ClaimOperationInput!) { claimOperation(input: $input) { __typename ... on ClaimOperationPayload { outcome operation { id state } lease { token version expiresAt } } } }`;
let n = 0;
const r = await autocannon({ url: 'http://127.0.0.1:4555/graphql', connections: 16, duration: 8, method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
  requests: [{ method: 'POST', setupRequest: (req: any) => ({ ...req, body: JSON.stringify({ query: CLAIM, variables: { input: { operationID: `p-${++n}`, connectorName: 'google', model: 'calendar.event', op: 'CREATE', accountKey: 'a', target: 't', deterministicEventID: 'e', payloadHash: 'h', reissueIntent: 'none', leaseMs: 30000 } } }) }) }] as any });
console.log(r.requests.average, r.non2xx);
child.kill('SIGINT');
await new Promise(r => child.on('exit', r));
