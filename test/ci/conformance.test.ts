// reports/conformance.json (issue #31): scripts/conformance.mjs run for real in a scratch checkout
// holding a copy of the real docs/spec pages and a vitest report this test writes, so each outcome
// is known: the ids the pages define, untested never counted as passed, a failing test failing its
// requirement, an unknown id or a claim in a describe title refused, the same bytes twice; then
// readConformance on its output and `detsim verify` recording the file's SHA-256 in attestation.jsonl
// (or recording that there was none). Not a test of the requirements themselves (their tests claim them).
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseStrict } from '../../core/formats/canonical-json.js';
import { readConformance } from '../../coordinator/diff0/conformance.js';
import { DetsimError } from '../../core/formats/errors.js';
import { CLI_MAIN } from '../cli-refusal.js';
import { REPO_ROOT } from '../workers/harness.js';

const SCRIPT = join(REPO_ROOT, 'scripts', 'conformance.mjs');
const SPECS = join(REPO_ROOT, 'docs', 'spec');

interface FakeTest {
  file: string;
  title: string;
  status: 'passed' | 'failed' | 'skipped';
  describe?: string[];
}

interface Requirement {
  id: string;
  spec: string;
  text: string;
  status: string;
  tests: { file: string; title: string; status: string }[];
}

interface Conformance {
  conformanceVersion: string;
  specs: Record<string, string>;
  requirements: Requirement[];
  summary: { passed: number; failed: number; untested: number; skipped: number };
  testFilesFailed: string[];
}

/** A scratch checkout: docs/spec copied from the repository, reports/vitest.json from `tests`. */
function checkout(tests: FakeTest[], opts: { failedFiles?: string[]; reverse?: boolean } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-conformance-'));
  mkdirSync(join(dir, 'docs'), { recursive: true });
  cpSync(SPECS, join(dir, 'docs', 'spec'), { recursive: true });
  writeReport(dir, tests, opts);
  return dir;
}

function writeReport(dir: string, tests: FakeTest[], opts: { failedFiles?: string[]; reverse?: boolean } = {}): void {
  const files = [...new Set(tests.map((t) => t.file))];
  const results = files.map((f) => ({
    name: join(dir, f),
    status: tests.some((t) => t.file === f && t.status === 'failed') ? 'failed' : 'passed',
    assertionResults: tests
      .filter((t) => t.file === f)
      .map((t) => ({
        ancestorTitles: t.describe ?? ['a suite'],
        title: t.title,
        fullName: [...(t.describe ?? ['a suite']), t.title].join(' '),
        status: t.status,
      })),
  }));
  for (const f of opts.failedFiles ?? [])
    results.push({ name: join(dir, f), status: 'failed', assertionResults: [], message: 'SyntaxError' } as never);
  mkdirSync(join(dir, 'reports'), { recursive: true });
  writeFileSync(
    join(dir, 'reports', 'vitest.json'),
    JSON.stringify({ testResults: opts.reverse ? results.reverse() : results }),
  );
}

function conformance(dir: string) {
  const r = spawnSync(process.execPath, [SCRIPT], { cwd: dir, encoding: 'utf8' });
  const out = join(dir, 'reports', 'conformance.json');
  const doc = existsSync(out) ? (JSON.parse(readFileSync(out, 'utf8')) as Conformance) : null;
  return { status: r.status, stdout: r.stdout, stderr: r.stderr, doc, out };
}

const byId = (doc: Conformance | null, id: string) => doc!.requirements.find((r) => r.id === id)!;

describe('scripts/conformance.mjs on the real specs', () => {
  it('the spec pages define the ids: D1–D10, the seven envelope checks, the four phases, seed and store rules', () => {
    const { status, doc, stdout } = conformance(checkout([]));
    expect(status).toBe(0);
    const ids = doc!.requirements.map((r) => r.id);
    const range = (p: string, n: number) => Array.from({ length: n }, (_, i) => `${p}${i + 1}`);
    for (const id of [...range('D', 10), ...range('ENV-', 7), ...range('SEED-', 5), ...range('LOCK-', 6)])
      expect(ids, id).toContain(id);
    for (const id of ['STORE-3', 'STORE-4', 'STORE-16', 'STORE-17', 'STORE-18', 'STORE-19']) expect(ids).toContain(id);
    // Each prefix belongs to one page, and every requirement has its first sentence as text.
    const page: Record<string, string> = {
      D: 'diff0.md',
      DIFF: 'diff0.md',
      ENV: 'checkpoint-envelope.md',
      LOCK: 'lockstep.md',
      SEED: 'seed-derivation.md',
      STORE: 'checkpoint-store.md',
    };
    for (const r of doc!.requirements) {
      expect(r.spec, r.id).toBe(`docs/spec/${page[/^[A-Z]+/.exec(r.id)![0]]}`);
      expect(r.text.length, r.id).toBeGreaterThan(10);
      expect(r.text, r.id).not.toMatch(/\*\*|\[[A-Z]+-?\d+\]/);
    }
    expect(byId(doc, 'D4').text).toBe('two independent runs agree.');
    expect(byId(doc, 'LOCK-3').text).toMatch(/^Phase A — prepare\. `Agent\.Prepare\(k\)` goes to every agent at once/);
    // The specs map holds each defining page's SHA-256, and no page that defines none.
    expect(Object.keys(doc!.specs).sort()).toEqual(
      [...new Set(Object.values(page))].map((p) => `docs/spec/${p}`).sort(),
    );
    const seedSpec = readFileSync(join(SPECS, 'seed-derivation.md'));
    expect(doc!.specs['docs/spec/seed-derivation.md']).toBe(createHash('sha256').update(seedSpec).digest('hex'));
    expect(doc!.summary).toEqual({ passed: 0, failed: 0, untested: ids.length, skipped: 0 });
    expect(stdout).toContain(`conformance: ${ids.length} requirements, 0 passed, 0 failed, ${ids.length} untested`);
  });
});

describe('scripts/conformance.mjs: statuses', () => {
  it('a requirement with no test is untested, never passed; a claimed one lists its tests', () => {
    const { status, doc, stdout } = conformance(
      checkout([
        { file: 'test/a.test.ts', title: '[SEED-2] builds the material', status: 'passed' },
        { file: 'test/a.test.ts', title: '[SEED-2, SEED-3] hashes the material', status: 'passed' },
        { file: 'test/a.test.ts', title: 'claims nothing', status: 'passed' },
      ]),
    );
    expect(status).toBe(0);
    expect(byId(doc, 'SEED-2')).toMatchObject({
      spec: 'docs/spec/seed-derivation.md',
      status: 'passed',
      tests: [
        { file: 'test/a.test.ts', title: 'a suite > [SEED-2, SEED-3] hashes the material', status: 'passed' },
        { file: 'test/a.test.ts', title: 'a suite > [SEED-2] builds the material', status: 'passed' },
      ],
    });
    expect(byId(doc, 'SEED-3').status).toBe('passed');
    expect(byId(doc, 'SEED-4')).toMatchObject({ status: 'untested', tests: [] });
    const n = doc!.requirements.length;
    expect(doc!.summary).toEqual({ passed: 2, failed: 0, untested: n - 2, skipped: 0 });
    expect(stdout).toMatch(/^conformance: untested: .*\bSEED-4\b/m);
    expect(stdout).not.toMatch(/^conformance: untested: .*\bSEED-2\b/m);
  });

  it('one failing test fails its requirement and the script (exit 1), the file still written', () => {
    const { status, doc, stdout } = conformance(
      checkout([
        { file: 'test/a.test.ts', title: '[ENV-3] refuses a pretty manifest', status: 'passed' },
        { file: 'test/b.test.ts', title: '[ENV-3] refuses a duplicate key', status: 'failed' },
        { file: 'test/b.test.ts', title: '[ENV-4] refuses 65 payloads', status: 'passed' },
      ]),
    );
    expect(status).toBe(1);
    expect(byId(doc, 'ENV-3').status).toBe('failed');
    expect(byId(doc, 'ENV-3').tests.map((t) => t.status)).toEqual(['passed', 'failed']);
    expect(byId(doc, 'ENV-4').status).toBe('passed');
    expect(doc!.summary.failed).toBe(1);
    expect(stdout).toContain('conformance: failed: ENV-3');
  });

  it('a skipped test without a failure makes its requirement skipped, not passed (exit 0)', () => {
    const { status, doc } = conformance(
      checkout([
        { file: 'test/a.test.ts', title: '[STORE-21] recovers in process', status: 'passed' },
        { file: 'test/c.test.ts', title: '[STORE-21] recovers under Slurm', status: 'skipped' },
      ]),
    );
    expect(status).toBe(0);
    expect(byId(doc, 'STORE-21').status).toBe('skipped');
    expect(doc!.summary.skipped).toBe(1);
  });
});

describe('scripts/conformance.mjs: refusals', () => {
  it('an id no spec defines exits 1 naming it and the test; nothing is written, a stale file removed', () => {
    const dir = checkout([
      { file: 'test/a.test.ts', title: '[ENV-3] refuses a pretty manifest', status: 'passed' },
      { file: 'test/a.test.ts', title: '[ENV-99] checks something', status: 'passed' },
    ]);
    writeFileSync(join(dir, 'reports', 'conformance.json'), '{"stale":true}\n');
    const { status, stderr, doc } = conformance(dir);
    expect(status).toBe(1);
    expect(stderr).toContain(
      'conformance: test/a.test.ts: "a suite > [ENV-99] checks something" claims ENV-99, which no docs/spec file defines',
    );
    expect(stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(doc).toBeNull();
  });

  it('a claim in a describe title is refused (it would claim for every test inside)', () => {
    const { status, stderr, doc } = conformance(
      checkout([{ file: 'test/a.test.ts', title: 'checks', status: 'passed', describe: ['[LOCK-3] phase A'] }]),
    );
    expect(status).toBe(1);
    expect(stderr).toContain('describe "[LOCK-3] phase A" claims LOCK-3');
    expect(doc).toBeNull();
  });

  it('a test file that failed outside its tests (an import error): what it claims is not proven, exit 1 naming it', () => {
    const { status, stderr, doc } = conformance(
      checkout([{ file: 'test/a.test.ts', title: '[D4] agree', status: 'passed' }], {
        failedFiles: ['test/broken.test.ts'],
      }),
    );
    expect(status).toBe(1);
    expect(stderr).toContain('conformance: test/broken.test.ts failed outside its tests');
    expect(doc!.testFilesFailed).toEqual(['test/broken.test.ts']);
    expect(byId(doc, 'D4').status).toBe('passed'); // the other file's claims are reported as usual
  });

  it('a malformed or repeated marker in a spec page exits 1 naming the page and line', () => {
    const dir = checkout([]);
    const page = join(dir, 'docs', 'spec', 'lockstep.md');
    writeFileSync(page, `${readFileSync(page, 'utf8')}\n**[lock-x]** a typo.\n\n**[LOCK-3]** said twice.\n`);
    const { status, stderr, doc } = conformance(dir);
    expect(status).toBe(1);
    expect(stderr).toMatch(/docs\/spec\/lockstep\.md:\d+: malformed requirement marker \*\*\[lock-x\]\*\*/);
    expect(stderr).toMatch(/docs\/spec\/lockstep\.md:\d+: LOCK-3 is already defined at docs\/spec\/lockstep\.md:\d+/);
    expect(doc).toBeNull();
  });

  it('no vitest report: exit 1 in one line', () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-conformance-'));
    const r = spawnSync(process.execPath, [SCRIPT], { cwd: dir, encoding: 'utf8' });
    expect(r.status).toBe(1);
    expect(r.stderr).toBe('conformance: no vitest report at reports/vitest.json: run the tests first (npm test)\n');
  });
});

describe('scripts/conformance.mjs: output', () => {
  it('is deterministic: the same results in another order give the same bytes, sorted by id (D2 before D10)', () => {
    const tests: FakeTest[] = [
      { file: 'test/b.test.ts', title: '[D10] one entry', status: 'passed' },
      { file: 'test/a.test.ts', title: '[D2] sorted lists', status: 'passed' },
      { file: 'test/a.test.ts', title: '[LOCK-8, D2] ticks', status: 'failed' },
    ];
    const dir = checkout(tests);
    const first = conformance(dir);
    const bytes = readFileSync(first.out);
    writeReport(dir, [...tests].reverse(), { reverse: true });
    const second = conformance(dir);
    expect(readFileSync(second.out).equals(bytes)).toBe(true);
    const ids = first.doc!.requirements.map((r) => r.id);
    expect(ids.indexOf('D2')).toBeLessThan(ids.indexOf('D10'));
    expect(ids.indexOf('D10')).toBeLessThan(ids.indexOf('DIFF-1'));
    expect(ids.indexOf('ENV-9')).toBeLessThan(ids.indexOf('ENV-10'));
    expect(ids).toEqual([...ids].sort((a, b) => cmpId(a, b)));
  });
});

/** Natural id order, independent of the script's: prefix, then number. */
function cmpId(a: string, b: string): number {
  const [pa, na] = [/^[A-Z]+/.exec(a)![0], Number(/\d+$/.exec(a)![0])];
  const [pb, nb] = [/^[A-Z]+/.exec(b)![0], Number(/\d+$/.exec(b)![0])];
  return pa < pb ? -1 : pa > pb ? 1 : na - nb;
}

/** `detsim verify` on the tiny configuration, from `cwd`. */
function verify(cwd: string, extra: string[]) {
  const out = mkdtempSync(join(tmpdir(), 'detsim-conformance-verify-'));
  const r = spawnSync(
    process.execPath,
    [
      join(REPO_ROOT, CLI_MAIN),
      'verify',
      '--config',
      join(REPO_ROOT, 'test', 'receipt', 'fixtures', 'tiny-walkers.yaml'),
      '--out',
      join(out, 'report'),
      '--runs-dir',
      join(out, 'runs'),
      '--golden-dir',
      join(out, 'golden'),
      '--no-golden-marker',
      ...extra,
    ],
    { cwd, encoding: 'utf8', timeout: 120_000 },
  );
  const lines = existsSync(join(out, 'report', 'attestation.jsonl'))
    ? readFileSync(join(out, 'report', 'attestation.jsonl'), 'utf8')
        .split('\n')
        .filter(Boolean)
    : [];
  const verdict = lines.length ? (parseStrict(lines[lines.length - 1]!) as Record<string, unknown>) : null;
  const md = existsSync(join(out, 'report', 'attestation.md'))
    ? readFileSync(join(out, 'report', 'attestation.md'), 'utf8')
    : '';
  return { ...r, verdict, md, out };
}

describe('the conformance file verify ran with', () => {
  let made: ReturnType<typeof conformance>;
  let sha: string;
  beforeAll(() => {
    made = conformance(
      checkout([
        { file: 'test/a.test.ts', title: '[D4] agree', status: 'passed' },
        { file: 'test/a.test.ts', title: '[D5] sensitive', status: 'skipped' },
      ]),
    );
    sha = createHash('sha256').update(readFileSync(made.out)).digest('hex');
  });

  it('readConformance gives the SHA-256 of the bytes, the counts, and its path from the working directory', () => {
    const c = readConformance(made.out);
    const n = made.doc!.requirements.length;
    expect(c).toMatchObject({
      sha256: sha,
      conformanceVersion: 'detsim-conformance-v1',
      requirements: n,
      summary: { passed: 1, failed: 0, untested: n - 2, skipped: 1 },
    });
    expect(c.path).toMatch(/^(\.\.\/)+.*reports\/conformance\.json$/);
  });

  it('readConformance refuses a summary that disagrees with its requirements, another version and bad JSON, naming the file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'detsim-conformance-bad-'));
    const doc = JSON.parse(readFileSync(made.out, 'utf8')) as Conformance;
    const cases: [string, string, RegExp][] = [
      ['summary', JSON.stringify({ ...doc, summary: { ...doc.summary, passed: 9 } }), /summary\.passed is 9 but 1/],
      ['version', JSON.stringify({ ...doc, conformanceVersion: 'v0' }), /conformanceVersion is "v0"/],
      ['json', '{"conformanceVersion":', /--conformance: .*json: /],
    ];
    for (const [name, text, message] of cases) {
      const file = join(dir, `${name}.json`);
      writeFileSync(file, text);
      let e: unknown;
      try {
        readConformance(file);
      } catch (err) {
        e = err;
      }
      expect(e, name).toBeInstanceOf(DetsimError);
      expect((e as DetsimError).message, name).toMatch(message);
      expect((e as DetsimError).message, name).toContain(file);
      expect((e as DetsimError).field, name).toBe('--conformance');
    }
  });

  it('verify --conformance FILE records its SHA-256 and counts beside the verdict, outside the verdict hash', () => {
    const r = verify(REPO_ROOT, ['--conformance', made.out]);
    expect(r.status, r.stdout + r.stderr).toBe(2); // yellow: no golden for the tiny config here
    expect(r.verdict).toMatchObject({
      type: 'verdict',
      conformance: {
        present: true,
        sha256: sha,
        summary: made.doc!.summary,
        conformanceVersion: 'detsim-conformance-v1',
      },
    });
    expect(r.md).toContain(`- conformance: `);
    expect(r.md).toContain(`sha256 ${sha}`);
    expect(r.stdout).toContain(`sha256 ${sha}`);
    // The same verification without a conformance file: another record, the same verdict hash.
    const none = verify(mkdtempSync(join(tmpdir(), 'detsim-conformance-cwd-')), []);
    expect(none.status, none.stdout + none.stderr).toBe(2);
    expect(none.verdict).toMatchObject({ conformance: { present: false, path: 'reports/conformance.json' } });
    expect(none.md).toContain('- conformance: none (no reports/conformance.json');
    expect(none.verdict!.verdict_hash).toBe(r.verdict!.verdict_hash);
  });

  it('verify refuses an unreadable --conformance before any run: exit 2, one line', () => {
    const missing = join(tmpdir(), 'detsim-no-such-conformance.json');
    const r = verify(REPO_ROOT, ['--conformance', missing]);
    expect(r.status).toBe(2);
    expect(r.stderr).toBe(`detsim: [struct_invalid_field] --conformance: ${missing}: cannot be read (ENOENT)\n`);
    expect(existsSync(join(r.out, 'runs'))).toBe(false);
  });
});
