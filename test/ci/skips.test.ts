// A skipped test never fails, so CI must: scripts/test-summary.mjs fails (exit 1) on any skipped
// vitest test or ignored cargo test that is not on scripts/expected-skips.json, naming each one,
// the closing line counts failed tests exactly (not the suites around them, checked on a real vitest
// report), and UPDATE_MODEL_VECTORS=1 never passes for a comparison (refused in CI). Runs the real script
// on report files written into a scratch directory; not a test of vitest itself.
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';

const SCRIPT = join(process.cwd(), 'scripts', 'test-summary.mjs');
const ALLOW = JSON.parse(readFileSync(join(process.cwd(), 'scripts', 'expected-skips.json'), 'utf8')) as {
  vitest: { file: string; fullName: string; why: string }[];
};

interface FakeTest {
  file: string;
  fullName: string;
  status: 'passed' | 'failed' | 'skipped' | 'pending' | 'todo';
}

/** A scratch checkout with reports/vitest.json (and optionally reports/cargo-test.txt, reports/pytest.txt); runs the summary there. */
function summary(tests: FakeTest[], opts: { cargo?: string; pytest?: string; pendingCount?: number } = {}) {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-summary-'));
  mkdirSync(join(dir, 'reports'));
  const files = [...new Set(tests.map((t) => t.file))];
  const count = (s: FakeTest['status'][]) => tests.filter((t) => s.includes(t.status)).length;
  const report = {
    numPassedTests: count(['passed']),
    numFailedTests: count(['failed']),
    numFailedTestSuites: 0,
    numPendingTests: opts.pendingCount ?? count(['skipped', 'pending']),
    numTodoTests: count(['todo']),
    testResults: files.map((f) => ({
      name: join(dir, f),
      assertionResults: tests.filter((t) => t.file === f).map((t) => ({ fullName: t.fullName, status: t.status })),
    })),
  };
  writeFileSync(join(dir, 'reports', 'vitest.json'), JSON.stringify(report));
  if (opts.cargo !== undefined) writeFileSync(join(dir, 'reports', 'cargo-test.txt'), opts.cargo);
  if (opts.pytest !== undefined) writeFileSync(join(dir, 'reports', 'pytest.txt'), opts.pytest);
  return spawnSync(process.execPath, [SCRIPT], { cwd: dir, encoding: 'utf8' });
}

const ok: FakeTest = { file: 'test/a.test.ts', fullName: 'a works', status: 'passed' };

describe('test-summary: skips fail CI unless expected', () => {
  it('passes with only allow-listed skips and names each with its reason', () => {
    const allowed = ALLOW.vitest.map((e) => ({ file: e.file, fullName: e.fullName, status: 'skipped' as const }));
    expect(allowed.length).toBeGreaterThan(0);
    const r = summary([ok, ...allowed]);
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toContain(`1 passed, 0 failed, ${allowed.length} skipped`);
    for (const e of ALLOW.vitest) expect(r.stdout).toContain(`skipped (expected: ${e.why}): ${e.file} > ${e.fullName}`);
  });

  it('an unexpected skipped vitest test fails, naming its file and full name', () => {
    const r = summary([
      ok,
      { file: 'test/cross-lang/seed.test.ts', fullName: 'seeds: TypeScript and Rust agree match', status: 'skipped' },
    ]);
    expect(r.status).toBe(1);
    expect(r.stdout).toContain('1 passed, 0 failed, 1 skipped');
    expect(r.stderr).toContain(
      'unexpected skip (not in scripts/expected-skips.json): test/cross-lang/seed.test.ts > seeds: TypeScript and Rust agree match',
    );
  });

  it('a todo, and a skip counted but not named, fail too', () => {
    expect(summary([ok, { file: 'test/a.test.ts', fullName: 'a later', status: 'todo' }]).status).toBe(1);
    const unnamed = summary([ok], { pendingCount: 1 });
    expect(unnamed.status).toBe(1);
    expect(unnamed.stderr).toContain('an unnamed skipped vitest test');
  });

  it('an ignored cargo test fails, named; passing cargo tests are counted', () => {
    const cargo =
      'running 2 tests\ntest jcs_vectors_pairs ... ignored, fixtures absent\ntest other ... ok\n\ntest result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out\n';
    const r = summary([ok], { cargo });
    expect(r.status).toBe(1);
    expect(r.stdout).toContain('2 passed, 0 failed, 1 skipped');
    expect(r.stderr).toContain('unexpected skip (not in scripts/expected-skips.json): cargo jcs_vectors_pairs');
    const doc = summary([ok], {
      cargo: 'test src/lib.rs - f (line 3) ... ignored\n\ntest result: ok. 0 passed; 0 failed; 1 ignored; 0 measured\n',
    });
    expect(doc.status).toBe(1);
    expect(doc.stderr).toContain('cargo src/lib.rs - f (line 3)');
    const unnamed = summary([ok], { cargo: 'test result: ok. 0 passed; 0 failed; 2 ignored; 0 measured\n' });
    expect(unnamed.status).toBe(1);
    expect(unnamed.stdout).toContain('1 passed, 0 failed, 2 skipped');
  });

  it('pytest results count (workers/python via scripts/test-python.sh): passes, failures, errors; a skip fails, named', () => {
    const clean = summary([ok], { pytest: '........ [100%]\n80 passed in 0.47s\n' });
    expect(clean.status, clean.stderr).toBe(0);
    expect(clean.stdout).toContain('81 passed, 0 failed, 0 skipped');
    const broken = summary([ok], { pytest: 'F.E\n=== 1 failed, 79 passed, 1 error in 0.52s ===\n' });
    expect(broken.status).toBe(1);
    expect(broken.stdout).toContain('80 passed, 2 failed, 0 skipped');
    const skipped = summary([ok], {
      pytest: 's.\nSKIPPED [1] tests/test_models.py:40: no numpy\n1 passed, 1 skipped in 0.10s\n',
    });
    expect(skipped.status).toBe(1);
    expect(skipped.stdout).toContain('2 passed, 0 failed, 1 skipped');
    expect(skipped.stderr).toContain(
      'unexpected skip (not in scripts/expected-skips.json): pytest tests/test_models.py',
    );
    // An expected failure (xfail) asserts nothing that passes: a skip, named, and CI fails on it.
    const xfailed = summary([ok], {
      pytest: 'x.\nXFAIL tests/test_models.py::test_walker - not yet\n1 passed, 1 xfailed in 0.10s\n',
    });
    expect(xfailed.status).toBe(1);
    expect(xfailed.stdout).toContain('2 passed, 0 failed, 1 skipped');
    expect(xfailed.stderr).toContain(
      'unexpected skip (not in scripts/expected-skips.json): pytest tests/test_models.py',
    );
    // A log with no closing line (pytest crashed) is a failure, never nothing.
    expect(summary([ok], { pytest: 'Traceback (most recent call last):\n' }).status).toBe(1);
  });

  it('a failure fails; a clean run passes', () => {
    expect(summary([ok, { file: 'test/a.test.ts', fullName: 'a breaks', status: 'failed' }]).status).toBe(1);
    const clean = summary([ok]);
    expect(clean.status).toBe(0);
    expect(clean.stdout.trim()).toBe('1 passed, 0 failed, 0 skipped');
  });
});

describe('test-summary: the closing line counts failed tests, not suites', () => {
  // A real vitest JSON report: test/a.test.ts has one failing test inside two describe blocks
  // (numFailedTestSuites counts the file and both blocks), test/b.test.ts failed to import.
  const REPORT = JSON.parse(
    readFileSync(join(process.cwd(), 'test', 'ci', 'fixtures', 'vitest-report-nested-failure.json'), 'utf8'),
  ) as { numFailedTestSuites: number; testResults: { name: string }[] };

  function summarize(report: object) {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-summary-'));
    mkdirSync(join(dir, 'reports'));
    writeFileSync(join(dir, 'reports', 'vitest.json'), JSON.stringify(report));
    return spawnSync(process.execPath, [SCRIPT], { cwd: dir, encoding: 'utf8' });
  }

  it('one failing test in nested describe blocks is "1 failed"', () => {
    const r = summarize({ ...REPORT, numFailedTestSuites: 3, testResults: REPORT.testResults.slice(0, 1) });
    expect(r.status).toBe(1);
    expect(r.stdout.split('\n')[0]).toBe('1 passed, 1 failed, 0 skipped');
    // Named right after the count, with its message's first line: a CI log's tail shows which test failed.
    expect(r.stdout.split('\n')[1]).toBe(
      'failed: test/a.test.ts > outer inner breaks: AssertionError: expected 1 to be 2 // Object.is equality',
    );
  });

  it('failed cargo and pytest tests are named after the count too', () => {
    const r = summary([ok], {
      cargo:
        'test walk::turns ... FAILED\ntest walk::moves ... ok\ntest result: FAILED. 1 passed; 1 failed; 0 ignored\n',
      pytest: 'FAILED tests/test_walk.py::test_turns - assert 1 == 2\n1 failed, 3 passed in 0.52s\n',
    });
    expect(r.status).toBe(1);
    expect(r.stdout.split('\n').slice(0, 3)).toEqual([
      '5 passed, 2 failed, 0 skipped',
      'failed: cargo walk::turns',
      'failed: pytest tests/test_walk.py::test_turns: assert 1 == 2',
    ]);
  });

  it('a test file that failed to run counts as one failure, named with its error', () => {
    const r = summarize(REPORT);
    expect(r.status).toBe(1);
    expect(r.stdout.split('\n')[0]).toBe('1 passed, 2 failed, 0 skipped');
    expect(r.stdout).toContain("failed: test/b.test.ts (failed to run): Cannot find module './does-not-exist.js'");
    expect(r.stderr).toContain(
      "test-summary: test/b.test.ts failed to run (counted as 1 failed): Cannot find module './does-not-exist.js'",
    );
  });
});

describe('UPDATE_MODEL_VECTORS never passes for a comparison', () => {
  it('in CI it is refused: the models test fails and the vectors file is not written', { timeout: 120_000 }, () => {
    const vectors = join('test', 'workers', 'vectors', 'models-v1.json');
    const before = readFileSync(vectors);
    const r = spawnSync(
      process.execPath,
      [join('node_modules', 'vitest', 'vitest.mjs'), 'run', 'test/workers/models.test.ts', '--reporter=default'],
      {
        encoding: 'utf8',
        env: { ...process.env, CI: '1', UPDATE_MODEL_VECTORS: '1' },
        timeout: 110_000,
      },
    );
    expect(r.status, r.stdout.slice(-2000)).toBe(1);
    expect(r.stdout + r.stderr).toContain('UPDATE_MODEL_VECTORS=1 is refused in CI');
    expect(readFileSync(vectors).equals(before)).toBe(true);
  });
});
