import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'tests/**/*.test.ts'],
    // One real Temporal dev server for the whole run; each test file gets its own namespace.
    globalSetup: ['tests/globalSetup.ts'],
    // Temporal workers use native threads: keep each test file in its own process.
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ['default'],
  },
});
