import { defineConfig } from 'vitest/config';

// Integration tests: a real Temporal dev server (started once in globalSetup), real workers, real files.
export default defineConfig({
  test: {
    pool: 'forks',
    include: ['test/integration/**/*.test.ts'],
    globalSetup: ['test/support/global-setup.ts'],
    testTimeout: 240_000,
    hookTimeout: 240_000,
    // Each file starts its own worker(s) on its own task queue; two at a time fit 2 cores.
    poolOptions: { forks: { maxForks: 2, minForks: 1 } },
  },
});
