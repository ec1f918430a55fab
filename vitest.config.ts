import { defineConfig } from 'vitest/config';

// The Temporal core bridge is a native module that crashes worker_threads pools: run each test file in a
// forked process. Integration tests (test/integration) need a real Temporal dev server and run under
// vitest.integration.config.ts, which starts one in globalSetup.
export default defineConfig({
  test: {
    pool: 'forks',
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', 'runs/**', '.tools/**', 'test/integration/**'],
    testTimeout: 60_000,
    hookTimeout: 120_000,
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
