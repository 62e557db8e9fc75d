#!/usr/bin/env node
/**
 * `npm start`: runs the server from one JavaScript bundle of its TypeScript
 * sources (src/server/main.ts and everything it imports; packages stay in
 * node_modules), built with esbuild on the first start and again whenever a
 * source changes, then kept in node_modules/.cache/connector-store-server/.
 * Running the sources through tsx instead costs about 58 MiB of memory for
 * the life of the process (bench/startup-memory.ts); the bundle is the same
 * code (esbuild compiles both).
 *
 * Plain JavaScript so it needs nothing compiled to run. `npm run dev` runs
 * the sources with tsx, for stack traces that point into them.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const ENTRY = join(ROOT, 'src/server/main.ts');
/** Where bundles are kept; SERVER_BUILD_DIR moves it (a read-only checkout, tests). */
const CACHE = process.env.SERVER_BUILD_DIR || join(ROOT, 'node_modules/.cache/connector-store-server');
/** Everything the server's code is built from: its sources, and what decides which packages and settings it builds with. */
const INPUTS = ['src', 'schema', 'resolvers', 'migrations', 'client', 'package.json', 'package-lock.json', 'tsconfig.json', 'scripts/start.mjs'];
/** Not inputs of the server: installed packages and build outputs. */
const SKIPPED = new Set(['node_modules', 'dist']);

function filesUnder(path) {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path, { withFileTypes: true })
    .filter((entry) => !SKIPPED.has(entry.name))
    .sort((a, b) => a.name.localeCompare(b.name))
    .flatMap((entry) => filesUnder(join(path, entry.name)));
}

/** A hash of every input's path and contents: the bundle's name. */
function inputsHash() {
  const hash = createHash('sha256');
  for (const file of INPUTS.flatMap((input) => filesUnder(join(ROOT, input)))) {
    hash.update(relative(ROOT, file)).update('\0').update(readFileSync(file)).update('\0');
  }
  return hash.digest('hex').slice(0, 16);
}

async function build(outfile) {
  const { build: esbuild } = await import('esbuild');
  mkdirSync(CACHE, { recursive: true });
  const temporary = `${outfile}.${process.pid}.tmp.mjs`;
  await esbuild({
    entryPoints: [ENTRY],
    outfile: temporary,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    packages: 'external',
    sourcemap: 'linked',
    logLevel: 'warning',
  });
  renameSync(`${temporary}.map`, `${outfile}.map`);
  renameSync(temporary, outfile);
  // Older builds go; another process may still run one, which has it loaded already.
  for (const name of readdirSync(CACHE)) {
    const path = join(CACHE, name);
    if (name.startsWith('server-') && !path.startsWith(outfile) && !name.includes('.tmp.')) rmSync(path, { force: true });
  }
}

const bundle = join(CACHE, `server-${inputsHash()}.mjs`);
let built = existsSync(bundle);
if (!built) {
  try {
    await build(bundle);
    built = true;
  } catch (error) {
    // The server still starts: from its sources, as `npm run dev` runs them (a source that does not compile fails there too, with its error).
    const reason = error instanceof Error ? error.message.split('\n')[0] : String(error);
    console.error(`connector store: could not build the server bundle in ${CACHE} (${reason}); running the sources through tsx instead`);
  }
}
if (built) {
  await import(pathToFileURL(bundle).href);
} else {
  const { register } = await import('tsx/esm/api');
  register();
  await import(pathToFileURL(ENTRY).href);
}
