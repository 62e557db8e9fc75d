import { defineConfig } from 'vitest/config';

export default defineConfig({
  resolve: {
    // graphql 16 ships CJS (`main`) and ESM (`module`). Node, and so every
    // dependency (yoga, Pothos), loads the CJS build; without this alias Vite
    // would give our sources the ESM one, and `instanceof GraphQLError`
    // across the two would fail in tests only.
    alias: [{ find: /^graphql$/, replacement: 'graphql/index.js' }],
  },
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    // Every prepared statement's run is checked against the statement its values build (src/store/prepared.ts).
    env: { STORE_CHECK_PREPARED: '1' },
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file makes its own databases; two workers match this machine's cores.
    pool: 'forks',
    maxWorkers: 2,
  },
});
