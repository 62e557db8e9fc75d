import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/helpers/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // Each file makes its own databases; two workers match this machine's cores.
    pool: 'forks',
    maxWorkers: 2,
  },
});
