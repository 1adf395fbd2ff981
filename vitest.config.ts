import { defineConfig } from 'vitest/config';

// Integration tests spawn real worker processes: two forks on the 2-core CI machine.
// The JSON report feeds the plain "N passed, N failed" line that .ci/run prints.
export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Builds the Rust binaries once before any test (test/global-setup.ts): never inside a test's limit;
    // every temporary directory goes under one root removed at the end (test/temp-root.ts).
    globalSetup: ['test/global-setup.ts', 'test/temp-root.ts'],
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default', ['json', { outputFile: 'reports/vitest.json' }]],
  },
});
