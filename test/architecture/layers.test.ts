/**
 * Layers run one way (docs/architecture.md): schema → resolvers → store →
 * SQL, the server knows only the schema and the context factory, migrations
 * import no application code, client/ (for outside integrators) imports
 * nothing of the server, and no file imports itself in a circle.
 */
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { importCycles, layerViolations, readImportGraph, type ImportGraph } from './import-graph.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));

describe('layers', () => {
  const graph = readImportGraph(repo);

  it('reads the whole tree', () => {
    expect(Object.keys(graph)).toEqual(
      expect.arrayContaining(['schema/index.ts', 'resolvers/context.ts', 'src/server/app.ts', 'migrations/index.ts', 'client/token.ts', 'client/generated/graphql.ts', 'console/src/app.tsx']),
    );
    // The console's extensionless imports resolve to their .ts/.tsx files (so circles among them are seen too).
    expect(graph['console/src/app.tsx']!.files).toEqual(expect.arrayContaining(['console/src/router.tsx', 'console/src/graphql.ts', 'client/generated/graphql.ts']));
    expect(graph['schema/index.ts']!.files).toContain('schema/builder.ts');
  });

  it('no import crosses a layer the wrong way', () => {
    expect(layerViolations(graph)).toEqual([]);
  });

  it('no import circles', () => {
    expect(importCycles(graph)).toEqual([]);
  });
});

describe('the layer check itself', () => {
  const fixture = (edges: Record<string, string[]>, packages: Record<string, string[]> = {}): ImportGraph =>
    Object.fromEntries(Object.entries(edges).map(([from, files]) => [from, { files, packages: packages[from] ?? [] }]));

  it('refuses schema → store, resolvers → schema, server → resolver internals, migrations → app', () => {
    const violations = layerViolations(
      fixture({
        'schema/operation.ts': ['src/store/operations/index.ts', 'resolvers/operations.ts'],
        'resolvers/operations.ts': ['schema/pagination.ts', 'src/store/errors.ts'],
        'src/server/app.ts': ['resolvers/subscriptions.ts', 'resolvers/context.ts', 'schema/index.ts'],
        'migrations/0002-next.ts': ['src/db/tables.ts'],
        'src/store/operations/claim.ts': ['resolvers/viewer.ts'],
        'client/token.ts': ['src/auth/did-key.ts', 'schema/scalars.ts', 'resolvers/viewer.ts', 'client/generated/graphql.ts'],
        'console/src/app.tsx': ['client/generated/graphql.ts', 'console/src/ui.tsx', 'src/server/console.ts', 'resolvers/viewer.ts'],
      }),
    );
    expect(violations).toEqual([
      'client/token.ts → resolvers/viewer.ts (client may not import it)',
      'client/token.ts → schema/scalars.ts (client may not import it)',
      'client/token.ts → src/auth/did-key.ts (client may not import it)',
      'console/src/app.tsx → resolvers/viewer.ts (console may not import it)',
      'console/src/app.tsx → src/server/console.ts (console may not import it)',
      'migrations/0002-next.ts → src/db/tables.ts (migrations may not import it)',
      'resolvers/operations.ts → schema/pagination.ts (resolvers may not import it)',
      'schema/operation.ts → src/store/operations/index.ts (schema may not import it)',
      'src/server/app.ts → resolvers/subscriptions.ts (src/server may not import it)',
      'src/store/operations/claim.ts → resolvers/viewer.ts (src/store may not import it)',
    ]);
  });

  it('refuses SQL packages above the store, and files outside every layer', () => {
    expect(layerViolations(fixture({ 'resolvers/x.ts': [], 'lib/y.ts': [] }, { 'resolvers/x.ts': ['kysely', 'zod'] }))).toEqual([
      'lib/y.ts: in no layer',
      'resolvers/x.ts → kysely (resolvers may not use the database directly)',
    ]);
  });

  it('finds circles, each once', () => {
    const graph = fixture({ 'src/a.ts': ['src/b.ts'], 'src/b.ts': ['src/c.ts'], 'src/c.ts': ['src/a.ts'], 'src/d.ts': ['src/d.ts'] });
    expect(importCycles(graph)).toEqual(['src/a.ts → src/b.ts → src/c.ts → src/a.ts', 'src/d.ts → src/d.ts']);
  });
});
