import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    // One PostgreSQL server for the whole run: TEST_DATABASE_URL, else 127.0.0.1:5432, else embedded.
    globalSetup: ['test/setup/database.ts'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Tests share one PostgreSQL server and bind loopback ports; two workers match the 2-core machine.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
