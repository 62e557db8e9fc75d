/**
 * The project's import graph, read with the TypeScript compiler's own
 * pre-processor (no type-check, so it is fast), and the layer rules of
 * docs/architecture.md checked against it.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import ts from 'typescript';

/** Repository-relative file → the repository-relative files and the packages it imports. */
export interface ImportGraph {
  [file: string]: { files: string[]; packages: string[] };
}

/** Folders whose files the rules cover. */
export const CHECKED_ROOTS = ['schema', 'resolvers', 'src', 'migrations', 'client', 'console', 'examples'] as const;

/**
 * The repository-relative file an import names: `.js` is the `.ts` (or
 * `.tsx`) source under NodeNext, and the console's bundler-style imports
 * name no extension at all.
 */
function resolveImport(repo: string, from: string, specifier: string): string {
  const base = normalize(join(dirname(from), specifier));
  const candidates = base.endsWith('.js') ? [base.replace(/\.js$/, '.ts'), base.replace(/\.js$/, '.tsx')] : [base, `${base}.ts`, `${base}.tsx`, join(base, 'index.ts')];
  return candidates.find((candidate) => existsSync(join(repo, candidate)) && !candidate.endsWith('/')) ?? candidates[0]!;
}

/** Reads every `.ts` / `.tsx` file under `roots` of `repo` into an import graph. */
export function readImportGraph(repo: string, roots: readonly string[] = CHECKED_ROOTS): ImportGraph {
  const graph: ImportGraph = {};
  for (const root of roots) {
    for (const file of listTypeScript(join(repo, root))) {
      const from = relative(repo, file);
      const info = ts.preProcessFile(readFileSync(file, 'utf8'), true, true);
      const files: string[] = [];
      const packages: string[] = [];
      for (const { fileName } of info.importedFiles) {
        if (fileName.startsWith('.')) files.push(resolveImport(repo, from, fileName));
        else packages.push(fileName.startsWith('@') ? fileName.split('/').slice(0, 2).join('/') : fileName.split('/')[0]!);
      }
      graph[from] = { files, packages };
    }
  }
  return graph;
}

function listTypeScript(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    // Build output and installed packages are no one's sources.
    if (entry.isDirectory()) return entry.name === 'node_modules' || entry.name.startsWith('dist') ? [] : listTypeScript(path);
    return /\.tsx?$/.test(entry.name) && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

/** One layer: the files it holds and what they may import. */
interface Layer {
  name: string;
  holds: (file: string) => boolean;
  mayImport: (file: string) => boolean;
  /** Packages it must not import (database drivers and SQL builders stay below the resolvers). */
  forbiddenPackages?: readonly string[];
}

const under = (...folders: string[]) => (file: string) => folders.some((folder) => file.startsWith(`${folder}/`));
const oneOf = (...files: string[]) => (file: string) => files.includes(file);
const either = (...tests: ((file: string) => boolean)[]) => (file: string) => tests.some((test) => test(file));
const SQL_PACKAGES = ['kysely', 'pg', 'better-sqlite3'] as const;

/** The layers, top to bottom. A file in none of them is reported too. */
export const LAYERS: readonly Layer[] = [
  // The schema itself, as the server knows it: what schema:check compares with the released one.
  { name: 'src/cli', holds: under('src/cli'), mayImport: either(under('src/cli', 'src/server', 'src/demo', 'src/store', 'src/db', 'src/auth'), oneOf('schema/index.ts')) },
  {
    name: 'src/server',
    holds: under('src/server'),
    // The schema itself and the context factory are all the server knows of the API.
    mayImport: either(under('src/server', 'src/demo', 'src/store', 'src/db', 'src/auth'), oneOf('schema/index.ts', 'resolvers/context.ts')),
  },
  // Demo data is written through the store, like any other client of it.
  { name: 'src/demo', holds: under('src/demo'), mayImport: under('src/demo', 'src/store', 'src/db', 'src/auth') },
  // package.json: the release number `serverInfo.version` reports (data, not code).
  { name: 'schema', holds: under('schema'), mayImport: either(under('schema', 'resolvers'), oneOf('package.json')), forbiddenPackages: SQL_PACKAGES },
  { name: 'resolvers', holds: under('resolvers'), mayImport: under('resolvers', 'src/store', 'src/auth'), forbiddenPackages: SQL_PACKAGES },
  { name: 'src/store', holds: under('src/store'), mayImport: under('src/store', 'src/db') },
  { name: 'src/db', holds: under('src/db'), mayImport: under('src/db', 'migrations') },
  { name: 'src/auth', holds: under('src/auth'), mayImport: under('src/auth'), forbiddenPackages: SQL_PACKAGES },
  // Frozen in time: a migration imports no application code.
  { name: 'migrations', holds: under('migrations'), mayImport: under('migrations') },
  // What outside integrators copy or import: it knows the server only through the API.
  { name: 'client', holds: under('client'), mayImport: under('client'), forbiddenPackages: SQL_PACKAGES },
  // The operations console, a browser app built on the public API and the client documents alone.
  { name: 'console', holds: under('console'), mayImport: under('console', 'client'), forbiddenPackages: [...SQL_PACKAGES, 'graphql-yoga', '@pothos/core'] },
  // The examples are what a connector author writes: the client package and the server's public API only.
  { name: 'examples', holds: under('examples'), mayImport: under('examples', 'client'), forbiddenPackages: [...SQL_PACKAGES, 'graphql-yoga', '@pothos/core'] },
];

/** Every import that crosses a layer the wrong way, as `from → to (layer)` lines. */
export function layerViolations(graph: ImportGraph): string[] {
  const violations: string[] = [];
  for (const [from, imports] of Object.entries(graph)) {
    const layer = LAYERS.find((l) => l.holds(from));
    if (layer === undefined) {
      violations.push(`${from}: in no layer`);
      continue;
    }
    for (const to of imports.files) if (!layer.mayImport(to)) violations.push(`${from} → ${to} (${layer.name} may not import it)`);
    for (const name of imports.packages) {
      if (layer.forbiddenPackages?.includes(name)) violations.push(`${from} → ${name} (${layer.name} may not use the database directly)`);
    }
  }
  return violations.sort();
}

/** Every import circle among the graph's files, each as `a → b → … → a`, each reported once. */
export function importCycles(graph: ImportGraph): string[] {
  const cycles = new Set<string>();
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    path.push(file);
    for (const next of graph[file]?.files ?? []) {
      if (state.get(next) === 'open') {
        const loop = path.slice(path.indexOf(next));
        // Rotate to the smallest name, so each circle has one spelling.
        const start = loop.indexOf([...loop].sort()[0]!);
        const rotated = [...loop.slice(start), ...loop.slice(0, start)];
        cycles.add([...rotated, rotated[0]].join(' → '));
      } else if (!state.has(next) && graph[next] !== undefined) {
        visit(next);
      }
    }
    path.pop();
    state.set(file, 'done');
  };
  for (const file of Object.keys(graph).sort()) if (!state.has(file)) visit(file);
  return [...cycles].sort();
}
