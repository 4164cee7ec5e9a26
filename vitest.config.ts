import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    testTimeout: 30_000,
    hookTimeout: 120_000,
    pool: 'forks',
    // Tests share one PostgreSQL server and bind loopback ports; two workers match the 2-core machine.
    maxWorkers: 2,
    reporters: ['default'],
  },
});
