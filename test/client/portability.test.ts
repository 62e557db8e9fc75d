/**
 * client/token.ts runs outside Node too: it imports only `jose` and files of
 * client/ (no `node:` module, no other package), and it type-checks as browser
 * code — the DOM library and no Node types — so no `Buffer`, `process` or
 * other Node global can creep in; and as Node code without the DOM library,
 * for Node projects that do not load it.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const TOKEN_MODULE = 'client/token.ts';
const ALLOWED_PACKAGES = ['jose'];

/** Every import (static, dynamic, `require`, type-only) of `source`, a file at `path` in the repo, that a browser copy could not resolve. */
function portabilityViolations(path: string, source: string): string[] {
  const { importedFiles } = ts.preProcessFile(source, true, true);
  return importedFiles
    .map(({ fileName }) => fileName)
    .filter((name) => {
      if (name.startsWith('.')) return !normalize(join(dirname(path), name)).startsWith('client/');
      return !ALLOWED_PACKAGES.includes(name);
    });
}

describe('client/token.ts is portable', () => {
  it('imports only jose and files of client/', () => {
    const source = readFileSync(join(repo, TOKEN_MODULE), 'utf8');
    expect(portabilityViolations(TOKEN_MODULE, source)).toEqual([]);
    expect(ts.preProcessFile(source, true, true).importedFiles.map((f) => f.fileName)).toContain('jose');
  });

  it('the check itself refuses node: modules, other packages and files outside client/', () => {
    const source = [
      "import { createHash } from 'node:crypto';",
      "import type { KeyObject } from 'crypto';",
      "import { base58 } from '@scure/base';",
      "import { encodeDIDKey } from '../src/auth/did-key.js';",
      "import { SignJWT } from 'jose';",
      "import { x } from './generated/graphql.js';",
      "const fs = require('fs');",
      "const os = await import('node:os');",
    ].join('\n');
    expect(portabilityViolations(TOKEN_MODULE, source)).toEqual(['node:crypto', 'crypto', '@scure/base', '../src/auth/did-key.js', 'fs', 'node:os']);
  });

  /** The type errors of client/token.ts under `lib` and `types`, and whether @types/node was loaded. */
  function typeCheck(lib: string[], types: string[]): { errors: string[]; loadedNodeTypes: boolean } {
    const program = ts.createProgram([join(repo, TOKEN_MODULE)], {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      lib,
      types,
      strict: true,
      noUncheckedIndexedAccess: true,
      verbatimModuleSyntax: true,
      skipLibCheck: true,
      noEmit: true,
    });
    return {
      errors: ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n')),
      loadedNodeTypes: program.getSourceFiles().some((f) => f.fileName.includes('/@types/node/')),
    };
  }

  it('type-checks as browser code: the DOM library, no Node types (so no Buffer, no process)', () => {
    expect(typeCheck(['lib.es2022.d.ts', 'lib.dom.d.ts'], [])).toEqual({ errors: [], loadedNodeTypes: false });
  }, 30_000);

  it('type-checks as Node code without the DOM library (CryptoKey is a global name only there)', () => {
    expect(typeCheck(['lib.es2022.d.ts'], ['node'])).toEqual({ errors: [], loadedNodeTypes: true });
  }, 30_000);
});
