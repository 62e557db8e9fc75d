/**
 * The installable client package (issue 20 item 1), as an integrator meets it:
 * `npm pack` in client/ (its prepack builds dist/ with tsc) gives
 * connector-store-client-<version>.tgz, which a fresh project outside the
 * repository installs; a plain `.mjs` script run by `node` (no tsx) imports
 * it, signs with a key file `npm run keygen` wrote, and runs the typed
 * documents against a real server process; the same package bundles for the
 * browser without a Node built-in, its Node-only key-file subpath does not,
 * and a TypeScript consumer type-checks against its .d.ts.
 *
 * One dialect (SQLite): this is a packaging test, and nothing in it depends on
 * the database (the documents and tokens are the same on both; token-e2e and
 * the e2e suites cover Postgres).
 */
import { execFile } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { build } from 'esbuild';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
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

  it('packs as connector-store-client-<server version>.tgz with the built JavaScript, .d.ts and README only', async () => {
    const server = JSON.parse(await readFile(join(ROOT, 'package.json'), 'utf8')) as { version: string };
    const client = JSON.parse(await readFile(join(CLIENT, 'package.json'), 'utf8')) as { version: string };
    expect(client.version).toBe(server.version);
    expect(pack.filename).toBe(`connector-store-client-${server.version}.tgz`);
    const files = pack.files.map((f) => f.path).sort();
    expect(files).toEqual(
      expect.arrayContaining(['README.md', 'package.json', 'dist/index.js', 'dist/index.d.ts', 'dist/token.js', 'dist/token.d.ts', 'dist/key-file.js', 'dist/generated/graphql.js', 'dist/generated/graphql.d.ts', 'dist/generated/persisted-documents.json']),
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
    const recipe = [...readme.matchAll(/```js\n([\s\S]*?)```/g)].map((m) => m[1]!).find((code) => code.startsWith('// worker.mjs'));
    expect(recipe).toBeDefined();
    expect(recipe).toContain("'http://127.0.0.1:4000/graphql'");
    const script = recipe!.replace("'http://127.0.0.1:4000/graphql'", JSON.stringify(`${started!.server.origin}/graphql`)).replace("audience: 'connector-store'", `audience: ${JSON.stringify(AUDIENCE)}`);
    await writeFile(join(project, 'readme-worker.mjs'), script);
    const { stdout } = await run(process.execPath, ['readme-worker.mjs'], { cwd: project, env: { PATH: process.env.PATH ?? '' } });
    expect(stdout).toMatch(new RegExp(`^signing as ${did}\nCLAIMED \\S+\n$`));
  });

  it('bundles for the browser with no Node built-in (and tree-shakes the documents it does not use)', async () => {
    const bundle = await build({
      stdin: {
        contents: "import { ClaimOperationDocument, createTokenSource } from 'connector-store-client';\nimport { print } from 'graphql';\nexport const query = print(ClaimOperationDocument);\nexport const tokens = createTokenSource({ key: await crypto.subtle.generateKey({ name: 'Ed25519' }, false, ['sign', 'verify']) });\n",
        resolveDir: project,
        loader: 'js',
      },
      absWorkingDir: project,
      bundle: true,
      platform: 'browser',
      format: 'esm',
      target: 'es2022',
      write: false,
      metafile: true,
      logLevel: 'silent',
    });
    expect(bundle.errors).toEqual([]);
    const inputs = Object.keys(bundle.metafile.inputs);
    expect(inputs.filter((path) => path.startsWith('node:') || !path.startsWith('node_modules/'))).toEqual(['<stdin>']);
    expect(inputs).toEqual(expect.arrayContaining(['node_modules/connector-store-client/dist/token.js', 'node_modules/connector-store-client/dist/generated/graphql.js']));
    const code = bundle.outputFiles[0]!.text;
    expect(code).toContain('ClaimOperation');
    expect(code).not.toContain('ConsoleOperationDetail');
  });

  it('its key-file subpath is Node only: a browser bundle of it is refused', async () => {
    const refused = await build({
      stdin: { contents: "export { tokenSourceFromKeyFile } from 'connector-store-client/key-file';\n", resolveDir: project, loader: 'js' },
      absWorkingDir: project,
      bundle: true,
      platform: 'browser',
      format: 'esm',
      write: false,
      logLevel: 'silent',
    }).then(
      () => [],
      (error: { errors: { text: string }[] }) => error.errors.map((e) => e.text),
    );
    expect(refused.join('\n')).toMatch(/connector-store-client\/key-file/);
  });

  it('a TypeScript consumer type-checks against the .d.ts: documents carry their result and variables types', async () => {
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
      ].join('\n'),
    );
    const program = ts.createProgram([file], {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      // A browser-flavoured consumer: the DOM library, no Node types.
      lib: ['lib.es2022.d.ts', 'lib.dom.d.ts'],
      types: [],
      strict: true,
      noEmit: true,
    });
    const errors = ts.getPreEmitDiagnostics(program).map((d) => `${d.file?.fileName ?? ''}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`);
    expect(errors).toEqual([]);
  }, 30_000);
});
