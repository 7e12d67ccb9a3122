import { defineConfig } from 'vitest/config';

// Two projects. `unit`: every test beside the code it tests in src/, which needs no server (no
// Temporal, no PostgreSQL, no angr): `npm run test:unit`. `system`: tests/, against one real
// Temporal dev server, PostgreSQL and the provisioned tools that tests/globalSetup.ts starts for
// the whole run. `npm test` runs both.
export default defineConfig({
  test: {
    reporters: ['default'],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['src/**/*.test.ts'],
          pool: 'forks',
          // Pure tests share a process's module cache: loading each file's imports anew was half the run.
          isolate: false,
          testTimeout: 30_000,
        },
      },
      {
        test: {
          name: 'system',
          include: ['tests/**/*.test.ts'],
          // One real Temporal dev server for the whole run; each test file gets its own namespace.
          globalSetup: ['tests/globalSetup.ts'],
          // Temporal workers use native threads: keep each test file in its own process.
          pool: 'forks',
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
