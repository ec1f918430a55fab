import { defineConfig } from 'vitest/config';

// The Temporal core bridge is a native module that crashes worker_threads pools: run each test file in a forked process.
export default defineConfig({
  test: {
    pool: 'forks',
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', 'runs/**', '.tools/**'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
