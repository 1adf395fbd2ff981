// Prints the plain closing line CI reads, "N passed, N failed, N skipped", summed over the vitest
// JSON report, the cargo test log (when the Rust workspace ran) and the pytest log (when the Python
// worker's suite ran), then names every failed test (with its message's first line, so a log's tail
// shows it) and every skipped test. Failures count tests (a test file that failed to run at all counts
// as one, named), never the suites around a failing test.
// Exits 1 if anything failed, or if any test was skipped (vitest, pytest) or ignored (cargo) that is not on
// the documented allow-list scripts/expected-skips.json: a skipped test never fails, so an
// unexpected skip is a failure here. Reads reports only; runs nothing.
import { existsSync, readFileSync } from 'node:fs';
import { relative } from 'node:path';

const SKIPPED = new Set(['skipped', 'pending', 'todo']);
const allow = JSON.parse(readFileSync(new URL('./expected-skips.json', import.meta.url), 'utf8'));
const allowedVitest = new Map(allow.vitest.map((e) => [`${e.file} > ${e.fullName}`, e.why]));
const allowedCargo = new Map(allow.cargo.map((e) => [e.test, e.why]));
const allowedPytest = new Map((allow.pytest ?? []).map((e) => [e.test, e.why]));

/** A message's first non-empty line, at most 300 characters. */
function firstLine(message) {
  const line =
    String(message ?? '')
      .split('\n')
      .find((l) => l.trim() !== '') ?? '(no message)';
  return line.length > 300 ? `${line.slice(0, 300)}…` : line;
}

let passed = 0;
let failed = 0;
/** Every skipped test: {name, why (null when not allowed)}. */
const skips = [];
/** Every failed test, named with the first line of its message (printed after the count, where a log's tail shows it). */
const failures = [];

const vitest = 'reports/vitest.json';
if (existsSync(vitest)) {
  const r = JSON.parse(readFileSync(vitest, 'utf8'));
  passed += r.numPassedTests;
  // Tests, not suites: numFailedTestSuites counts each file and describe block around a failing test.
  failed += r.numFailedTests;
  for (const file of r.testResults ?? []) {
    const rel = relative(process.cwd(), file.name);
    // A file that failed without a failing test never ran (an import or syntax error): one failure, named.
    if (file.status === 'failed' && !(file.assertionResults ?? []).some((t) => t.status === 'failed')) {
      failed += 1;
      const why = String(file.message ?? '').split('\n')[0];
      console.error(`test-summary: ${rel} failed to run (counted as 1 failed): ${why}`);
      failures.push(`${rel} (failed to run): ${why}`);
    }
    for (const t of file.assertionResults ?? []) {
      if (t.status === 'failed') failures.push(`${rel} > ${t.fullName}: ${firstLine(t.failureMessages?.[0])}`);
      if (!SKIPPED.has(t.status)) continue;
      const name = `${rel} > ${t.fullName}`;
      skips.push({ name, why: allowedVitest.get(name) ?? null });
    }
  }
  // A count without names (an old or partial report) is still a skip: never let it pass unnamed.
  const counted = (r.numPendingTests ?? 0) + (r.numTodoTests ?? 0);
  const named = skips.length;
  for (let i = named; i < counted; i++)
    skips.push({ name: `(an unnamed skipped vitest test in ${vitest})`, why: null });
} else {
  console.error('test-summary: no vitest report at reports/vitest.json');
  failed += 1;
}
const cargo = 'reports/cargo-test.txt';
if (existsSync(cargo)) {
  const log = readFileSync(cargo, 'utf8');
  let ignored = 0;
  for (const m of log.matchAll(/test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored/g)) {
    passed += Number(m[1]);
    failed += Number(m[2]);
    ignored += Number(m[3]);
  }
  for (const m of log.matchAll(/^test (.+?) \.\.\. FAILED\b/gm)) failures.push(`cargo ${m[1]}`);
  // Names may hold spaces (doc-tests: "src/lib.rs - f (line 3)"); an ignore reason may follow.
  const named = [...log.matchAll(/^test (.+?) \.\.\. ignored\b/gm)].map((m) => m[1]);
  for (const name of named) skips.push({ name: `cargo ${name}`, why: allowedCargo.get(name) ?? null });
  for (let i = named.length; i < ignored; i++)
    skips.push({ name: `(an unnamed ignored cargo test in ${cargo})`, why: null });
}
const pytest = 'reports/pytest.txt';
if (existsSync(pytest)) {
  const log = readFileSync(pytest, 'utf8');
  // The closing line: "3 failed, 80 passed, 1 skipped, 2 errors in 0.52s" (any order, any subset).
  const closing = [...log.matchAll(/^=*\s*((?:\d+ \w+(?:, )?)+) in [\d.]+s\b.*$/gm)].pop();
  let skipped = 0;
  if (!closing) {
    console.error(`test-summary: no pytest closing line in ${pytest}`);
    failed += 1;
  } else {
    for (const [, n, what] of closing[1].matchAll(/(\d+) (\w+)/g)) {
      if (what === 'passed') passed += Number(n);
      else if (what === 'failed' || what === 'error' || what === 'errors' || what === 'xpassed') failed += Number(n);
      // An expected failure asserts nothing that passes: it counts as a skip (allow-listed, or CI fails).
      else if (what === 'skipped' || what === 'deselected' || what === 'xfailed') skipped += Number(n);
    }
  }
  // pytest's short summary names each failure: "FAILED tests/test_x.py::t - AssertionError: …".
  for (const m of log.matchAll(/^(?:FAILED|ERROR) (\S+)(?: - (.*))?$/gm))
    failures.push(`pytest ${m[1]}${m[2] ? `: ${firstLine(m[2])}` : ''}`);
  // -rfEsx (scripts/test-python.sh) names each skip, "SKIPPED [1] tests/test_x.py:12: reason", and expected failure, "XFAIL tests/test_x.py::t - why".
  const named = [
    ...[...log.matchAll(/^SKIPPED \[\d+\] (\S+?):\d+: /gm)].map((m) => m[1]),
    ...[...log.matchAll(/^XFAIL (\S+?)(?:::\S+)?(?: |$)/gm)].map((m) => m[1]),
  ];
  for (const name of named) skips.push({ name: `pytest ${name}`, why: allowedPytest.get(name) ?? null });
  for (let i = named.length; i < skipped; i++)
    skips.push({ name: `(an unnamed skipped pytest test in ${pytest})`, why: null });
}
console.log(`${passed} passed, ${failed} failed, ${skips.length} skipped`);
for (const f of failures) console.log(`failed: ${f}`);
const unexpected = skips.filter((s) => s.why === null);
for (const s of skips) {
  if (s.why !== null) console.log(`skipped (expected: ${s.why}): ${s.name}`);
  else console.error(`test-summary: unexpected skip (not in scripts/expected-skips.json): ${s.name}`);
}
if (unexpected.length > 0)
  console.error(
    `test-summary: ${unexpected.length} unexpected skip(s) fail CI: run them (install what they need) or, if the skip is by design, add them to scripts/expected-skips.json with why`,
  );
process.exit(failed > 0 || unexpected.length > 0 ? 1 : 0);
