import { defineConfig } from 'vitest/config';

// Integration tests spawn real worker processes: two forks on the 2-core CI machine.
// The JSON report feeds the plain "N passed, N failed" line that .ci/run prints.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', ['json', { outputFile: 'reports/vitest.json' }]],
  },
});
