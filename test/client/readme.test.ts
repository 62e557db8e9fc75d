/**
 * client/README.md's codegen.ts for outside integrators maps every custom
 * scalar of the printed schema, exactly as this repository's codegen.ts does,
 * so a scalar added to the schema cannot be left out of the documentation.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import codegen from '../../codegen.js';

const read = (path: string) => readFileSync(fileURLToPath(new URL(`../../${path}`, import.meta.url)), 'utf8');

describe('client/README.md', () => {
  it('its codegen.ts maps every custom scalar as this repository does', () => {
    const schemaScalars = [...read('schema/schema.graphql').matchAll(/^scalar (\w+)/gm)].map((m) => m[1]!).sort();
    const output = codegen.generates['client/generated/'] as { config: { scalars: Record<string, string> } };
    const repoScalars = output.config.scalars;

    const snippet = [...read('client/README.md').matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]!).find((code) => code.includes('CodegenConfig'));
    expect(snippet).toBeDefined();
    const block = /scalars: \{([^}]*)\}/.exec(snippet!)?.[1] ?? '';
    const readmeScalars = Object.fromEntries([...block.matchAll(/(\w+): '([^']+)'/g)].map((m) => [m[1]!, m[2]!]));

    expect(Object.keys(repoScalars).sort()).toEqual(schemaScalars);
    expect(readmeScalars).toEqual(repoScalars);
    expect(readmeScalars).toEqual({ DateTime: 'string', DID: 'string', JSON: 'unknown' });
  });
});
