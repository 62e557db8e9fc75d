/**
 * The operations console's build (issue 13 item 2): `console/` is a Vite +
 * React single-page app whose output is not committed. `npm start` calls
 * {@link loadConsoleBuild}, which builds it when `console/dist` is missing or
 * was built from other sources (a content hash of `console/`, `client/` and
 * the lockfile, kept in `console/dist/build-stamp.json`), then reads every
 * built file into memory: a few hundred kB, served without touching the disk
 * again, and untouched by another process rebuilding meanwhile.
 *
 * A build goes to a fresh temporary folder and is renamed into place, so two
 * servers starting at once never serve each other's half-written files.
 * `npm run console:build` builds it ahead (a deployment image; the server
 * then finds it fresh).
 */
import { spawn } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readdir, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { extname, join, relative, sep } from 'node:path';
import { gzipSync } from 'node:zlib';
import { PROJECT_ROOT } from './paths.js';

const ROOT = PROJECT_ROOT;
/** The console's sources. */
export const CONSOLE_DIR = join(ROOT, 'console');
/** Where the built console is kept. */
export const CONSOLE_DIST = join(CONSOLE_DIR, 'dist');
const STAMP = 'build-stamp.json';
const VITE = join(ROOT, 'node_modules/vite/bin/vite.js');
/** What the console's build depends on, besides `console/` itself. */
const OTHER_INPUTS = [join(ROOT, 'client'), join(ROOT, 'package-lock.json')];

/** One built file, ready to serve. */
export interface ConsoleFile {
  /** Path under /console/ (`index.html`, `assets/index-3f2a1b.js`). */
  path: string;
  contentType: string;
  body: Buffer;
  /** Gzip of `body` for clients that accept it, when smaller. */
  gzip: Buffer | undefined;
  /** Content-hashed by Vite (under `assets/`): cacheable for ever. */
  immutable: boolean;
}

/** The built console in memory. */
export interface ConsoleBuild {
  files: ReadonlyMap<string, ConsoleFile>;
  /** Whether this start built it (false: `console/dist` was fresh). */
  built: boolean;
  /** How long building took, ms (0 when not built). */
  buildMs: number;
}

const CONTENT_TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.ico': 'image/x-icon',
  '.woff2': 'font/woff2',
  '.txt': 'text/plain; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
};

/** A hash of every input of the console build (paths and contents). */
export async function consoleSourcesHash(): Promise<string> {
  const hash = createHash('sha256');
  // console/dist and its temporary siblings (dist-…) are outputs, not sources.
  const files = await listFiles(CONSOLE_DIR, (path) => path.startsWith(CONSOLE_DIST) || path.includes(`${sep}node_modules`));
  for (const input of OTHER_INPUTS) files.push(...(input.endsWith('.json') ? [input] : await listFiles(input, () => false)));
  for (const file of files.sort()) {
    hash.update(relative(ROOT, file)).update('\0').update(await readFile(file)).update('\0');
  }
  return hash.digest('hex');
}

/** Builds the console into `console/dist` (through a temporary folder); returns the hash it was built from. */
export async function buildConsole(): Promise<{ dir: string; sources: string }> {
  const sources = await consoleSourcesHash();
  const temporary = `${CONSOLE_DIST}-${process.pid}-${randomBytes(4).toString('hex')}`;
  // In a child process with NODE_ENV=production: Vite follows NODE_ENV (a development server's, a test
  // runner's `test`) into the bundle, and the server keeps none of Vite's memory.
  const child = spawn(process.execPath, [VITE, 'build', '--config', join(CONSOLE_DIR, 'vite.config.ts'), '--outDir', temporary, '--emptyOutDir', '--logLevel', 'warn'], {
    cwd: ROOT,
    env: { ...process.env, NODE_ENV: 'production' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.once('error', reject);
    child.once('exit', resolve);
  });
  if (code !== 0) {
    await rm(temporary, { recursive: true, force: true });
    throw new Error(`vite build exited with ${code}: ${output.trim().split('\n').slice(-5).join(' | ')}`);
  }
  await writeFile(join(temporary, STAMP), JSON.stringify({ sources }));
  return { dir: temporary, sources };
}

/** Moves a finished build into `console/dist`; another server may have done it first, which is fine. */
async function install(temporary: string): Promise<void> {
  const old = `${CONSOLE_DIST}-old-${process.pid}-${randomBytes(4).toString('hex')}`;
  try {
    if (existsSync(CONSOLE_DIST)) await rename(CONSOLE_DIST, old);
    await rename(temporary, CONSOLE_DIST);
  } catch {
    // Another process installed its (identical) build in between: keep that one.
  } finally {
    await rm(old, { recursive: true, force: true });
    await rm(temporary, { recursive: true, force: true });
  }
}

/** Whether `console/dist` was built from the current sources. */
export async function consoleBuildFresh(sources?: string): Promise<boolean> {
  try {
    const stamp = JSON.parse(await readFile(join(CONSOLE_DIST, STAMP), 'utf8')) as { sources?: string };
    return stamp.sources === (sources ?? (await consoleSourcesHash()));
  } catch {
    return false;
  }
}

/** The built console, building it first when missing or stale (see the file comment). */
export async function loadConsoleBuild(options: { onBuild?: () => void } = {}): Promise<ConsoleBuild> {
  if (await consoleBuildFresh()) return { files: await readBuild(CONSOLE_DIST), built: false, buildMs: 0 };
  options.onBuild?.();
  return rebuildConsole();
}

/** Builds the console now, fresh or not, installs it in `console/dist` and returns it. */
export async function rebuildConsole(): Promise<ConsoleBuild> {
  const started = performance.now();
  const { dir } = await buildConsole();
  const files = await readBuild(dir);
  await install(dir);
  return { files, built: true, buildMs: Math.round(performance.now() - started) };
}

async function readBuild(dir: string): Promise<Map<string, ConsoleFile>> {
  const files = new Map<string, ConsoleFile>();
  for (const file of await listFiles(dir, () => false)) {
    const path = relative(dir, file).split(sep).join('/');
    if (path === STAMP) continue;
    const body = await readFile(file);
    const contentType = CONTENT_TYPES[extname(file)] ?? 'application/octet-stream';
    const compressible = /^(text\/|application\/json|image\/svg)/.test(contentType);
    const gzip = compressible ? gzipSync(body, { level: 9 }) : undefined;
    files.set(path, { path, contentType, body, gzip: gzip !== undefined && gzip.length < body.length ? gzip : undefined, immutable: path.startsWith('assets/') });
  }
  if (!files.has('index.html')) throw new Error(`the console build in ${dir} has no index.html`);
  return files;
}

async function listFiles(dir: string, skip: (path: string) => boolean): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (skip(path)) continue;
    if (entry.isDirectory()) out.push(...(await listFiles(path, skip)));
    else if (entry.isFile()) out.push(path);
  }
  return out;
}
