/**
 * The installable client package (issue 20 item 1), as an integrator meets it:
 * `npm pack` in client/ (its prepack builds dist/ with tsc) gives
 * connector-store-client-<version>.tgz, which a fresh project outside the
 * repository installs; a plain `.mjs` script run by `node` (no tsx) imports
 * it, signs with a key file `npm run keygen` wrote, and runs the typed
 * documents against a real server process; a second one runs one write-back
 * through the runtime (`writeBack`, twice: committed, then replayed), and the
 * documented workers (client/README.md's runtime recipe, docs/worker.md's and
 * README.md's) and client/README.md's enqueue.mjs run as they are written
 * against the example's stand-in provider (examples/write-back-worker/
 * provider.ts, the routes they call); client/README.md's install lines run as
 * written from a folder of their own on a fresh clone; the same package (runtime included) bundles for the
 * browser without a Node built-in, its Node-only key-file subpath does not,
 * and a TypeScript consumer type-checks against its .d.ts.
 *
 * One dialect (SQLite): this is a packaging test, and nothing in it depends on
 * the database (the documents and tokens are the same on both; token-e2e and
 * the e2e suites cover Postgres).
 */
import { execFile, spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OperationByKeyDocument, type ClaimOperationInput } from '../../client/generated/graphql.js';
import { storeClientFromKeyFile, tokenSourceFromKeyFile } from '../../client/key-file.js';
import { writeBack, type WriteBackHandler } from '../../client/runtime/index.js';
import { startFakeProvider } from '../../examples/write-back-worker/provider.js';
import { keygenCommand } from '../../src/cli/keygen.js';
import { startE2EServers, type E2EServers } from '../helpers/e2e-server.js';
import { claimInput } from '../helpers/operation-graphql.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CLIENT = join(ROOT, 'client');
const AUDIENCE = 'connector-store-client-package';
const run = promisify(execFile);
// npm's own network and cache use; the dependencies (jose, graphql, …) come
// from the local npm cache when it has them, as it does wherever `npm ci` ran.
const NPM_QUIET = ['--no-audit', '--no-fund', '--prefer-offline', '--loglevel=error'];

/** An esbuild browser bundle (ESM, ES2022, in memory, with its metafile) of `contents` as a module of `project`. */
function browserBundle(project: string, contents: string) {
  return build({
    stdin: { contents, resolveDir: project, loader: 'js' },
    absWorkingDir: project,
    bundle: true,
    platform: 'browser',
    format: 'esm',
    target: 'es2022',
    write: false,
    metafile: true,
    logLevel: 'silent',
  });
}

interface PackResult {
  filename: string;
  files: { path: string }[];
}

// The script an integrator writes: plain ESM JavaScript, no TypeScript, no tsx.
const WORKER_SCRIPT = `
import { ClaimOperationDocument, ClaimOutcome, ConsoleServerInfoDocument, mintToken } from 'connector-store-client';
import { tokenSourceFromKeyFile, readKeyFile } from 'connector-store-client/key-file';
import { createTokenSource } from 'connector-store-client/token';
import { ClaimOperationDocument as SameDocument } from 'connector-store-client/documents';
import manifest from 'connector-store-client/persisted-documents.json' with { type: 'json' };
import { print } from 'graphql';

const [url, keyFile, audience, claimInput] = process.argv.slice(2);
const tokens = await tokenSourceFromKeyFile(keyFile, { audience, lifetimeSeconds: 600 });

async function graphql(document, variables = {}, token) {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: \`Bearer \${token ?? (await tokens.getToken())}\` },
    body: JSON.stringify({ query: print(document), variables }),
  });
  return { status: response.status, body: await response.json() };
}

const info = await graphql(ConsoleServerInfoDocument);
const claim = await graphql(ClaimOperationDocument, { input: JSON.parse(claimInput) });
const again = await graphql(ClaimOperationDocument, { input: JSON.parse(claimInput) });
// The same key as a plain JWK, through the browser-safe token API.
const jwk = await readKeyFile(keyFile);
const minted = await graphql(ConsoleServerInfoDocument, {}, await mintToken({ key: jwk, audience, lifetimeSeconds: 60 }));
const sourced = await graphql(ConsoleServerInfoDocument, {}, await createTokenSource({ key: jwk, audience }).getToken());
console.log(JSON.stringify({
  did: tokens.did,
  info,
  claim: claim.body.data.claimOperation.outcome,
  again: again.body.data.claimOperation.outcome,
  claimed: ClaimOutcome.Claimed,
  minted: minted.body.data.serverInfo.viewerDID,
  sourced: sourced.body.data.serverInfo.viewerDID,
  sameDocument: SameDocument === ClaimOperationDocument,
  persistedDocuments: Object.keys(manifest).length,
}));
`;

// The runtime as an integrator imports it: one write-back, then the same key again.
const RUNTIME_SCRIPT = `
import { runWorker, writeBack } from 'connector-store-client/runtime';
import { runWorker as mainRunWorker, writeBack as mainWriteBack } from 'connector-store-client';
import { storeClientFromKeyFile } from 'connector-store-client/key-file';

const [url, keyFile, audience, claimInput] = process.argv.slice(2);
const client = await storeClientFromKeyFile(keyFile, { url, audience });
let sends = 0;
const handler = {
  async send({ markSent }) {
    sends++;
    await markSent();
    return { kind: 'committed', documentID: 'doc-1', sourceID: 'src-1' };
  },
  async reconcile() {
    return { kind: 'not-landed' };
  },
};
const input = JSON.parse(claimInput);
const first = await writeBack(client, input, handler);
const again = await writeBack(client, input, handler);
client.dispose();
console.log(JSON.stringify({
  did: client.did,
  first: { status: first.status, state: first.operation.state, documentID: first.operation.documentID, watch: first.watch?.sourceID, reconciled: first.reconciled },
  again: { status: again.status, documentID: again.documentID },
  sends,
  runWorker: typeof runWorker,
  mainRunWorker: typeof mainRunWorker,
  sameModule: mainRunWorker === runWorker && mainWriteBack === writeBack,
}));
`;

/** Reads a child's stdout as it comes; `waitFor` resolves once it matches (or rejects when the child exits first). */
function outputOf(child: ReturnType<typeof spawn>) {
  let text = '';
  let exited = false;
  const waiters = new Set<() => void>();
  const notify = () => waiters.forEach((check) => check());
  child.stdout!.on('data', (chunk: Buffer) => {
    text += chunk.toString();
    notify();
  });
  child.on('exit', () => {
    exited = true;
    notify();
  });
  return {
    get text() {
      return text;
    },
    waitFor: (pattern: RegExp) =>
      new Promise<void>((resolve, reject) => {
        const check = () => {
          if (pattern.test(text)) {
            waiters.delete(check);
            resolve();
          } else if (exited) {
            waiters.delete(check);
            reject(new Error(`exited before ${pattern}: ${text}`));
          }
        };
        waiters.add(check);
        check();
      }),
  };
}

describe('the client package (npm pack, installed outside the repository)', () => {
  let work: string;
  let project: string;
  let pack: PackResult;
  let started: E2EServers | undefined;
  let did: string;

  beforeAll(async () => {
    work = await mkdtemp(join(tmpdir(), 'cs-client-package-'));
    project = join(work, 'project');
    const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', work, ...NPM_QUIET], { cwd: CLIENT });
    pack = (JSON.parse(stdout) as [PackResult])[0];

    await run('mkdir', [project]);
    await writeFile(join(project, 'package.json'), JSON.stringify({ name: 'integrator', private: true, type: 'module' }));
    await run('npm', ['install', ...NPM_QUIET, join(work, pack.filename)], { cwd: project });

    // The worker's key, made as the README says (npm run keygen -- --out FILE).
    let out = '';
    const code = await keygenCommand.run({ argv: ['--out', 'worker-key.json'], env: {}, cwd: project, stdout: (t) => (out += t), stderr: () => {} });
    expect(code).toBe(0);
    did = out.trim();
    started = await startE2EServers('sqlite', { audience: AUDIENCE, serviceDID: did, name: 'client_package' });
  }, 120_000);
  afterAll(async () => {
    await started?.dispose();
    if (work !== undefined) await rm(work, { recursive: true, force: true });
  });

  it('the install lines of client/README.md run as written from a folder of their own, on a fresh clone (no dist/): the key lands in that folder', async () => {
    const lines = installLines();
    // The front page and the getting-started page show the same lines.
    for (const page of ['README.md', 'docs/getting-started.md']) expect(shBlocks(readFileSync(join(ROOT, page), 'utf8')), page).toContain(lines);
    expect(lines).toContain('npm --prefix "$CONNECTOR_STORE" run -s client:pack');
    expect(lines).toContain('npm --prefix "$CONNECTOR_STORE" run -s keygen -- --out worker-key.json');
    const elsewhere = join(work, 'elsewhere');
    await run('mkdir', [elsewhere]);
    await writeFile(join(elsewhere, 'package.json'), JSON.stringify({ name: 'elsewhere', private: true, type: 'module' }));
    const dist = join(ROOT, 'dist');
    // A fresh clone has no dist/ (it is build output, ignored by git): set any there aside for the test.
    const aside = existsSync(dist) ? `${dist}-aside-${process.pid}` : undefined;
    if (aside !== undefined) await rename(dist, aside);
    try {
      const client = JSON.parse(await readFile(join(CLIENT, 'package.json'), 'utf8')) as { version: string };
      expect(lines).toContain(`connector-store-client-${client.version}.tgz`);
      // npm's settings only (quiet, from the local cache when it can): the lines are the README's.
      const npmQuiet = { npm_config_loglevel: 'error', npm_config_audit: 'false', npm_config_fund: 'false', npm_config_prefer_offline: 'true' };
      const { stdout } = await run('sh', ['-e', '-c', lines], { cwd: elsewhere, env: { ...process.env, ...npmQuiet, CONNECTOR_STORE: ROOT } });
      expect(existsSync(join(dist, `connector-store-client-${client.version}.tgz`))).toBe(true);
      expect(JSON.parse(await readFile(join(elsewhere, 'node_modules/connector-store-client/package.json'), 'utf8'))).toMatchObject({ version: client.version });
      expect(stdout.trim().split('\n').at(-1)).toBe((await tokenSourceFromKeyFile(join(elsewhere, 'worker-key.json'))).did);
      expect(existsSync(join(ROOT, 'worker-key.json'))).toBe(false);
    } finally {
      await rm(dist, { recursive: true, force: true });
      if (aside !== undefined) await rename(aside, dist);
    }
  }, 120_000);

  it('packs as connector-store-client-<server version>.tgz with the built JavaScript, .d.ts and README only', async () => {
    const server = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const client = JSON.parse(await readFile(join(CLIENT, 'package.json'), 'utf8')) as { version: string };
    expect(client.version).toBe(server.version);
    expect(pack.filename).toBe(`connector-store-client-${server.version}.tgz`);
    const files = pack.files.map((f) => f.path).sort();
    expect(files).toEqual(
      expect.arrayContaining(['README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/token.js', 'dist/token.d.ts', 'dist/key-file.js', 'dist/runtime/index.js', 'dist/runtime/index.d.ts', 'dist/generated/graphql.js', 'dist/generated/graphql.d.ts', 'dist/generated/persisted-documents.json']),
    );
    // No TypeScript sources, operations or build files: what the package runs is what it ships.
    expect(files.filter((f) => !/^dist\/.*\.(js|d\.ts|json)$/.test(f) && f !== 'README.md' && f !== 'package.json')).toEqual([]);
  });

  it('a plain .mjs script under node (no tsx) signs with a keygen key file and runs the typed documents against a server', async () => {
    const script = join(project, 'worker.mjs');
    await writeFile(script, WORKER_SCRIPT);
    const input = claimInput({ operationID: 'op-from-the-package', connectorName: 'package-test' });
    const { stdout } = await run(process.execPath, [script, `${started!.server.origin}/graphql`, 'worker-key.json', AUDIENCE, JSON.stringify(input)], { cwd: project, env: { PATH: process.env.PATH ?? '' } });
    const result = JSON.parse(stdout) as Record<string, unknown>;
    expect(result).toEqual({
      did,
      info: { status: 200, body: { data: { serverInfo: { version: expect.any(String), dialect: 'sqlite', viewerDID: did, viewerIsService: true, audience: AUDIENCE } } } },
      claim: 'CLAIMED',
      again: 'IN_FLIGHT',
      claimed: 'CLAIMED',
      minted: did,
      sourced: did,
      sameDocument: true,
      persistedDocuments: expect.any(Number),
    });
    expect(result.persistedDocuments).toBeGreaterThan(50);
  });

  it('the worker recipe of client/README.md runs as it is written (its server and audience swapped for the test server)', async () => {
    const readme = await readFile(join(CLIENT, 'README.md'), 'utf8');
    const recipe = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!).find((code) => code.startsWith('// worker.mjs') && code.includes('ClaimOperationDocument'));
    expect(recipe).toBeDefined();
    expect(recipe).toContain("'http://127.0.0.1:4000/graphql'");
    const script = recipe!.replace("'http://127.0.0.1:4000/graphql'", JSON.stringify(`${started!.server.origin}/graphql`)).replace("audience: 'connector-store'", `audience: ${JSON.stringify(AUDIENCE)}`);
    await writeFile(join(project, 'readme-worker.mjs'), script);
    const { stdout } = await run(process.execPath, ['readme-worker.mjs'], { cwd: project, env: { PATH: process.env.PATH ?? '' } });
    expect(stdout).toMatch(new RegExp(`^signing as ${did}\nCLAIMED \\S+\n$`));
  });

  it('the runtime from plain .mjs: writeBack commits with a keygen key file, the same key again is a replay; runWorker is exported by both entries', async () => {
    const script = join(project, 'write-back.mjs');
    await writeFile(script, RUNTIME_SCRIPT);
    const input = claimInput({ operationID: 'op-from-the-runtime', connectorName: 'package-test', deterministicEventID: 'event-from-the-runtime' });
    const { stdout } = await run(process.execPath, [script, `${started!.server.origin}/graphql`, 'worker-key.json', AUDIENCE, JSON.stringify(input)], { cwd: project, env: { PATH: process.env.PATH ?? '' } });
    expect(JSON.parse(stdout)).toEqual({
      did,
      first: { status: 'committed', state: 'COMMITTED', documentID: 'doc-1', watch: 'src-1', reconciled: false },
      again: { status: 'replayed', documentID: 'doc-1' },
      sends: 1,
      runWorker: 'function',
      mainRunWorker: 'function',
      sameModule: true,
    });
  });

  it('the runtime worker recipe of client/README.md runs as it is written: sends a due operation, reconciles one that landed, drains on SIGTERM', async () => {
    const readme = await readFile(join(CLIENT, 'README.md'), 'utf8');
    const recipe = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!).find((code) => code.startsWith('// worker.mjs') && code.includes("from 'connector-store-client/runtime'"));
    expect(recipe).toBeDefined();

    const provider = await startFakeProvider();
    // An event the provider already has: sent earlier, its answer lost.
    expect((await fetch(`${provider.url}/events`, { method: 'POST', body: JSON.stringify({ eventID: 'event-readme-landed' }) })).status).toBe(201);

    const url = `${started!.server.origin}/graphql`;
    expect(recipe).toContain("const STORE = 'http://127.0.0.1:4000/graphql';");
    expect(recipe).toContain("const PROVIDER = 'http://127.0.0.1:4100';");
    await writeFile(join(project, 'readme-runtime-worker.mjs'), againstTestServers(recipe!, url, provider.url));

    // Work for its connector, enqueued through the runtime of this repository: a claim given back at once (due now).
    const store = await storeClientFromKeyFile(join(project, 'worker-key.json'), { url, audience: AUDIENCE });
    const input = (key: string) => claimInput({ operationID: `op-${key}`, connectorName: 'acme-crm', deterministicEventID: `event-${key}` }) as ClaimOperationInput;
    expect((await writeBack(store, input('readme-sent'), unused, { signal: AbortSignal.abort() })).status).toBe('released');

    const worker = spawn(process.execPath, ['readme-runtime-worker.mjs'], { cwd: project, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'inherit'] });
    const output = outputOf(worker);
    try {
      // It logs the operation's key, as the console shows it, not its base64 global id.
      await output.waitFor(/^finished op-readme-sent committed/m);
      // Sent, and no answer came: RECONCILE_ONLY, due once its send window (500 ms + the 2 s margin) has passed. The provider has it.
      const unknown = await writeBack(store, input('readme-landed'), {
        send: async ({ markSent }) => {
          await markSent();
          return { kind: 'unknown', message: 'no answer' };
        },
        reconcile: unused.reconcile,
      }, { sendTimeoutMs: 500 });
      expect(unknown).toMatchObject({ status: 'recorded', kind: 'UNKNOWN', operation: { state: 'RECONCILE_ONLY' } });
      await output.waitFor(/^finished op-readme-sent committed[\s\S]*^finished op-readme-landed committed/m);
      worker.kill('SIGTERM');
      const [code] = (await once(worker, 'exit')) as [number | null];
      expect(code).toBe(0);
    } finally {
      if (worker.exitCode === null) worker.kill('SIGKILL');
      await provider.close();
    }
    expect(output.text).toMatch(new RegExp(`^worker for acme-crm signing as ${did}$`, 'm'));
    const counters = JSON.parse(/^stopped (.*)$/m.exec(output.text)![1]!) as Record<string, number>;
    expect(counters).toMatchObject({ started: 2, committed: 2, reconciled: 1, retried: 0, failed: 0, leaseLost: 0, errors: 0 });
    // One POST carrying the operation's event id; the one that may have landed was looked up, never sent again.
    expect(provider.stats()).toMatchObject({ applies: { 'event-readme-landed': 1, 'event-readme-sent': 1 }, lookups: 1 });
    const sent = (await store.request(OperationByKeyDocument, { operationID: 'op-readme-sent' })).operationByKey;
    const landed = (await store.request(OperationByKeyDocument, { operationID: 'op-readme-landed' })).operationByKey;
    expect(sent).toMatchObject({ state: 'COMMITTED', documentID: 'contact:op-readme-sent', resultEntity: { id: 'item-2', etag: '"2"' }, attempts: 1, leaseExpiresAt: null });
    expect(landed).toMatchObject({ state: 'COMMITTED', documentID: 'contact:op-readme-landed', resultEntity: { id: 'item-1', etag: '"1"' }, providerEtag: '"1"', attempts: 1 });
  });

  it('the worker of docs/worker.md runs as it is written: commits a due operation, drains on SIGTERM', async () => {
    const snippet = docsWorker();
    expect(snippet).toContain("url: 'http://127.0.0.1:4000/graphql', audience: 'connector-store'");
    expect(snippet).toContain("const PROVIDER = 'http://127.0.0.1:4100';");
    const provider = await startFakeProvider();
    const url = `${started!.server.origin}/graphql`;
    await writeFile(join(project, 'docs-worker.mjs'), againstTestServers(snippet, url, provider.url));
    const store = await storeClientFromKeyFile(join(project, 'worker-key.json'), { url, audience: AUDIENCE });
    const input = claimInput({ operationID: 'op-docs-worker', connectorName: 'acme-crm', model: 'contact', deterministicEventID: 'event-docs-worker' }) as ClaimOperationInput;
    expect((await writeBack(store, input, unused, { signal: AbortSignal.abort() })).status).toBe('released');

    const worker = spawn(process.execPath, ['docs-worker.mjs'], { cwd: project, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const deadline = Date.now() + 20_000;
      let state: string | undefined;
      while (Date.now() < deadline && state !== 'COMMITTED') {
        await new Promise((resolve) => setTimeout(resolve, 200));
        state = (await store.request(OperationByKeyDocument, { operationID: 'op-docs-worker' })).operationByKey?.state;
      }
      expect(state).toBe('COMMITTED');
      worker.kill('SIGTERM');
      const [code] = (await once(worker, 'exit')) as [number | null];
      expect(code).toBe(0);
    } finally {
      if (worker.exitCode === null) worker.kill('SIGKILL');
      await provider.close();
      store.dispose();
    }
    expect(provider.stats()).toMatchObject({ applies: { 'event-docs-worker': 1 }, lookups: 0 });
    const committed = (await store.request(OperationByKeyDocument, { operationID: 'op-docs-worker' })).operationByKey;
    expect(committed).toMatchObject({ state: 'COMMITTED', documentID: 'contact:op-docs-worker', attempts: 1 });
  });

  it("README.md's worker runs as it is written, given work by client/README.md's enqueue.mjs as written: the provider applies it once", async () => {
    const worker = frontDoorWorker();
    expect(worker).toContain("const PROVIDER = 'http://127.0.0.1:4100';");
    const enqueueScript = [...(await readFile(join(CLIENT, 'README.md'), 'utf8')).matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!).find((code) => code.startsWith('// enqueue.mjs'));
    expect(enqueueScript).toBeDefined();
    const provider = await startFakeProvider();
    const url = `${started!.server.origin}/graphql`;
    await writeFile(join(project, 'front-door-worker.mjs'), againstTestServers(worker, url, provider.url));
    await writeFile(join(project, 'enqueue.mjs'), againstTestServers(enqueueScript!, url, provider.url));
    const store = await storeClientFromKeyFile(join(project, 'worker-key.json'), { url, audience: AUDIENCE });
    const child = spawn(process.execPath, ['front-door-worker.mjs'], { cwd: project, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const enqueued = await run(process.execPath, ['enqueue.mjs', 'contact-front-door@v1'], { cwd: project, env: { PATH: process.env.PATH ?? '' } });
      expect(enqueued.stdout).toBe('created contact-front-door@v1 ATTEMPTED\n');
      const again = await run(process.execPath, ['enqueue.mjs', 'contact-front-door@v1'], { cwd: project, env: { PATH: process.env.PATH ?? '' } });
      expect(again.stdout).toBe('replayed contact-front-door@v1 ATTEMPTED\n');
      const deadline = Date.now() + 20_000;
      let state: string | undefined;
      while (Date.now() < deadline && state !== 'COMMITTED') {
        await new Promise((resolve) => setTimeout(resolve, 200));
        state = (await store.request(OperationByKeyDocument, { operationID: 'contact-front-door@v1' })).operationByKey?.state;
      }
      expect(state).toBe('COMMITTED');
      expect((await store.request(OperationByKeyDocument, { operationID: 'contact-front-door@v1' })).operationByKey).toMatchObject({ documentID: 'contact-front-door@v1', attempts: 1 });
      child.kill('SIGTERM');
      const [code] = (await once(child, 'exit')) as [number | null];
      expect(code).toBe(0);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
      await provider.close();
      store.dispose();
    }
    expect(provider.stats()).toMatchObject({ applies: { 'contact-front-door@v1': 1 }, lookups: 0 });
  });

  it('the worker recipes of client/README.md and docs/worker.md type-check as TypeScript under --strict, as they are written', async () => {
    const readme = await readFile(join(CLIENT, 'README.md'), 'utf8');
    const recipe = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!).find((code) => code.startsWith('// worker.mjs') && code.includes("from 'connector-store-client/runtime'"));
    expect(recipe).toBeDefined();
    const files = [join(project, 'readme-recipe.ts'), join(project, 'docs-worker.ts')];
    await writeFile(files[0]!, recipe!);
    await writeFile(files[1]!, docsWorker());
    for (const file of files) expect(typeErrors(file)).toEqual([]);
  }, 30_000);

  it('bundles for the browser with no Node built-in (and tree-shakes the documents it does not use)', async () => {
    const bundle = await browserBundle(
      project,
      "import { ClaimOperationDocument, createTokenSource } from 'connector-store-client';\nimport { print } from 'graphql';\nexport const query = print(ClaimOperationDocument);\nexport const tokens = createTokenSource({ key: await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']) });\n",
    );
    expect(bundle.errors).toEqual([]);
    const inputs = Object.keys(bundle.metafile.inputs);
    expect(inputs.filter((path) => path.startsWith('node:') || !path.startsWith('node_modules/'))).toEqual(['<stdin>']);
    expect(inputs).toEqual(expect.arrayContaining(['node_modules/connector-store-client/dist/token.js', 'node_modules/connector-store-client/dist/generated/graphql.js']));
    const code = bundle.outputFiles[0]!.text;
    expect(code).toContain('ClaimOperation');
    expect(code).not.toContain('ConsoleOperationDetail');
  });

  it('its runtime bundles for the browser with no Node built-in', async () => {
    const bundle = await browserBundle(
      project,
      "import { createStoreClient, runWorker, writeBack } from 'connector-store-client/runtime';\nexport const client = createStoreClient({ url: '/graphql', tokens: 'token' });\nexport { runWorker, writeBack };\n",
    );
    expect(bundle.errors).toEqual([]);
    const inputs = Object.keys(bundle.metafile.inputs);
    expect(inputs.filter((path) => path.startsWith('node:') || !path.startsWith('node_modules/'))).toEqual(['<stdin>']);
    expect(inputs).toEqual(expect.arrayContaining(['node_modules/connector-store-client/dist/runtime/worker.js', 'node_modules/connector-store-client/dist/runtime/write-back.js']));
    expect(inputs.some((path) => path.startsWith('node_modules/graphql-sse/'))).toBe(true);
  });

  it('its key-file subpath is Node only: a browser bundle of it is refused', async () => {
    const refused = await browserBundle(project, "export { tokenSourceFromKeyFile } from 'connector-store-client/key-file';\n").then(
      () => [],
      (error: { errors: { text: string }[] }) => error.errors.map((e) => e.text),
    );
    expect(refused.join('\n')).toMatch(/connector-store-client\/key-file/);
  });

  it('a TypeScript consumer type-checks against the .d.ts: documents carry their result and variables types, the runtime its handler and result types', async () => {
    const file = join(project, 'consumer.ts');
    await writeFile(
      file,
      [
        "import type { TypedDocumentNode } from '@graphql-typed-document-node/core';",
        "import { ClaimOperationDocument, createTokenSource, type ClaimOperationMutation, type ClaimOperationMutationVariables } from 'connector-store-client';",
        "import { tokenSourceFromKeyFile } from 'connector-store-client/key-file';",
        'export const document: TypedDocumentNode<ClaimOperationMutation, ClaimOperationMutationVariables> = ClaimOperationDocument;',
        'export const tokens = createTokenSource({ key: new Uint8Array(32), lifetimeSeconds: 600 });',
        "export const worker = tokenSourceFromKeyFile('worker-key.json', { audience: 'x' }).then((source) => source.did.startsWith('did:key:'));",
        '// @ts-expect-error a token source needs a key',
        'createTokenSource({});',
        "type Outcome = Extract<ClaimOperationMutation['claimOperation'], { __typename: 'ClaimOperationPayload' }>['outcome'];",
        "export const outcome: Outcome = 'CLAIMED';",
        '// @ts-expect-error not an outcome',
        "export const wrong: Outcome = 'MAYBE';",
        "import { runWorker, writeBack, type WriteBackHandler, type WriteBackResult } from 'connector-store-client/runtime';",
        "import { storeClientFromKeyFile } from 'connector-store-client/key-file';",
        'export const handler: WriteBackHandler = {',
        "  async send({ operation, markSent, signal }) { await markSent(); return signal.aborted ? { kind: 'unknown', httpStatus: 504 } : { kind: 'committed', documentID: operation.operationID, sourceID: operation.deterministicEventID }; },",
        "  async reconcile() { return { kind: 'not-landed' }; },",
        '};',
        "export const run = storeClientFromKeyFile('worker-key.json', { url: 'http://127.0.0.1:4000/graphql', audience: 'x' }).then((client) => runWorker({ client, connector: client.did, concurrency: 2, handler }).counters.committed);",
        "export const once = (result: WriteBackResult): string => (result.status === 'recorded' ? result.kind : result.status);",
        "export const claimed = (client: Parameters<typeof writeBack>[0]) => writeBack(client, { id: 'T3A', leaseMs: 30000 }, handler);",
        '// @ts-expect-error not an outcome kind',
        "export const wrongHandler: WriteBackHandler = { send: async () => ({ kind: 'maybe' }), reconcile: async () => ({ kind: 'not-landed' }) };",
        '// @ts-expect-error a committed outcome needs its sourceID',
        "export const noSource: WriteBackHandler = { send: async () => ({ kind: 'committed', documentID: 'd' }), reconcile: async () => ({ kind: 'not-landed' }) };",
      ].join('\n'),
    );
    expect(typeErrors(file)).toEqual([]);
  }, 30_000);
});

/** What `tsc --strict` says of `file` as a browser-flavoured consumer (the DOM library, no Node types), against the installed package. */
function typeErrors(file: string): string[] {
  const program = ts.createProgram([file], {
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
    types: [],
    strict: true,
    noEmit: true,
  });
  return ts.getPreEmitDiagnostics(program).map((d) => `${d.file?.fileName ?? ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
}

/** A handler for work enqueued (claimed and given back) by the test itself: it never sends. */
const unused: WriteBackHandler = { send: () => Promise.reject(new Error('not sent here')), reconcile: () => Promise.reject(new Error('not reconciled here')) };

/** A documented worker as it is written, but for the store, provider and audience it names: the test's. */
function againstTestServers(script: string, storeURL: string, providerOrigin: string): string {
  return script
    .replace("'http://127.0.0.1:4000/graphql'", JSON.stringify(storeURL))
    .replace("'http://127.0.0.1:4100'", JSON.stringify(providerOrigin))
    .replace("audience: 'connector-store'", `audience: ${JSON.stringify(AUDIENCE)}`);
}

/** The worker of README.md ("A worker"), as it is written. */
function frontDoorWorker(): string {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const snippet = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!).find((code) => code.startsWith('// worker.mjs'));
  if (snippet === undefined) throw new Error('README.md has no worker.mjs snippet');
  return snippet;
}

/** The sh blocks of a markdown page. */
function shBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]!);
}

/** The install lines of client/README.md (its sh block that packs the client), comments and all. */
function installLines(): string {
  const block = shBlocks(readFileSync(join(CLIENT, 'README.md'), 'utf8')).find((code) => code.includes('client:pack'));
  if (block === undefined) throw new Error('client/README.md has no install lines');
  return block;
}

/** The worker of docs/worker.md ("A worker in twenty lines"), as it is written. */
function docsWorker(): string {
  const docs = readFileSync(join(ROOT, 'docs/worker.md'), 'utf8');
  const snippet = [...docs.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!).find((code) => code.startsWith('// worker.mjs'));
  if (snippet === undefined) throw new Error('docs/worker.md has no worker.mjs snippet');
  return snippet;
}

