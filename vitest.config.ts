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
    // A worker runs its files one after another in one process, the modules loaded once: importing the
    // server's modules (the schema built, yoga, Pothos) took 1.3 s per file, 212 s of the suite's 823 s on
    // 2 cores, 18 s without isolation (633 s in all). So no test may reset the module registry
    // (`vi.resetModules`: the schema's Pothos plugins would register twice) or leave a global changed.
    isolate: false,
  },
});
