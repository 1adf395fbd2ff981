// Prints the plain closing line CI reads, "N passed, N failed", summed over the vitest JSON
// report and the cargo test log (when the Rust workspace ran). Exits 1 if anything failed.
import { existsSync, readFileSync } from 'node:fs';

let passed = 0;
let failed = 0;
let skipped = 0;
const vitest = 'reports/vitest.json';
if (existsSync(vitest)) {
  const r = JSON.parse(readFileSync(vitest, 'utf8'));
  passed += r.numPassedTests;
  failed += r.numFailedTests + (r.numFailedTestSuites ?? 0);
  skipped += (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
} else {
  console.error('test-summary: no vitest report at reports/vitest.json');
  failed += 1;
}
const cargo = 'reports/cargo-test.txt';
if (existsSync(cargo)) {
  for (const m of readFileSync(cargo, 'utf8').matchAll(/test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored/g)) {
    passed += Number(m[1]);
    failed += Number(m[2]);
    skipped += Number(m[3]);
  }
}
console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed > 0 ? 1 : 0);
