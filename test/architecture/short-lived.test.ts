/**
 * Per-request objects must die young (docs/architecture.md; issue 21): on
 * this server's Node, an object literal with a getter or setter made per
 * request keeps what its accessors close over alive through the
 * young-generation collections (the dashboard list's `pageInfo` kept its 50
 * rows: `npx tsx bench/gc-shapes.ts`). Server code uses a class instead,
 * its accessors on the prototype. Read with the TypeScript compiler's parser.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const repo = fileURLToPath(new URL('../..', import.meta.url));

/** Where request-time code lives. */
const SERVER_ROOTS = ['schema', 'resolvers', 'src/store', 'src/server', 'src/db', 'src/auth'];

/** Files whose object literals are made once per process (at start), not per request: they may keep accessors. */
const MADE_ONCE = new Set(['src/server/jobs.ts']);

/** `file:line: text` of every accessor written inside an object literal of `source`. */
export function objectLiteralAccessors(fileName: string, source: string): string[] {
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node) => {
    if ((ts.isGetAccessorDeclaration(node) || ts.isSetAccessorDeclaration(node)) && ts.isObjectLiteralExpression(node.parent)) {
      const { line } = file.getLineAndCharacterOfPosition(node.getStart(file));
      found.push(`${fileName}:${line + 1}: ${node.getText(file).split('\n')[0]}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return entry.name === 'node_modules' ? [] : tsFiles(path);
    return entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts') ? [path] : [];
  });
}

describe('per-request objects die young', () => {
  it('no object literal in server code has a getter or setter (a class has them on its prototype)', () => {
    const files = SERVER_ROOTS.flatMap((root) => tsFiles(join(repo, root))).map((path) => relative(repo, path));
    expect(files).toEqual(expect.arrayContaining(['resolvers/pagination.ts', 'src/server/app.ts', 'src/store/prepared.ts']));
    const found = files.filter((file) => !MADE_ONCE.has(file)).flatMap((file) => objectLiteralAccessors(file, readFileSync(join(repo, file), 'utf8')));
    expect(found).toEqual([]);
  });

  it('the check finds accessors in literals, and only there', () => {
    const source = [
      'const page = { items: [], get first() { return this.items[0]; } };',
      'const box = { set value(v: number) {} };',
      'class PageInfo { get first() { return 1; } }',
      'const plain = { first: () => 1, method() { return 2; } };',
    ].join('\n');
    expect(objectLiteralAccessors('fixture.ts', source)).toEqual(['fixture.ts:1: get first() { return this.items[0]; }', 'fixture.ts:2: set value(v: number) {}']);
  });
});
