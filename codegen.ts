/**
 * GraphQL Code Generator (`npm run codegen`): prints the schema built in
 * schema/index.ts to schema/schema.graphql, and generates typed documents for
 * the client operations in client/operations/*.graphql into client/generated/.
 * Both outputs are committed; test/graphql/schema-artifacts.test.ts fails when
 * either the printed schema is stale or a client operation no longer validates.
 */
import { createHash } from 'node:crypto';
import type { CodegenConfig } from '@graphql-codegen/cli';

const config: CodegenConfig = {
  // The code-first schema (its `schema` export); loading a .ts file needs
  // NODE_OPTIONS=--import=tsx, which `npm run codegen` sets. The loader sorts
  // the schema lexicographically before printing.
  schema: './schema/index.ts',
  documents: ['client/operations/*.graphql'],
  ignoreNoDocuments: false,
  generates: {
    'schema/schema.graphql': {
      plugins: ['schema-ast'],
      config: { includeDirectives: false },
    },
    'client/generated/': {
      preset: 'client',
      // Results carry every selected field; no useFragment() unmasking.
      presetConfig: {
        fragmentMasking: false,
        // client/generated/persisted-documents.json: id → document, for PERSISTED_DOCUMENTS
        // (ids in the GraphQL-over-HTTP persisted-documents form, `sha256:<hex>`).
        persistedDocuments: { hashAlgorithm: (operation: string) => `sha256:${createHash('sha256').update(operation).digest('hex')}` },
      },
      config: {
        // Relative imports under NodeNext carry an extension.
        importExtension: '.js',
        useTypeImports: true,
        strictScalars: true,
        scalars: {
          DateTime: 'string',
          DID: 'string',
          JSON: 'unknown',
        },
        enumType: 'const',
      },
    },
  },
};

export default config;
