// Writes reports/conformance.json from the test run itself (issue #31): every requirement the
// specifications mark with an id (`**[SEED-1]**` in docs/spec/*.md; docs/spec/README.md
// "Requirement ids") → the vitest tests whose own titles claim it (`it('[ENV-3] …')`) and their
// outcome in reports/vitest.json. A requirement is passed only when it has a test and every one
// passed, failed when any failed, skipped when none failed but one was skipped, untested when no
// test claims it (listed, never passed). Prints one line, "conformance: N requirements, …".
// Exits 1 on a failed requirement, an id no spec defines, a claim in a describe title, a
// malformed or repeated marker, a test file that failed outside its tests (an import error or a
// hook: what it claims is not proven) or a missing report; untested requirements do not fail. The spec files are the only registry; this
// script runs nothing and keeps no list of its own. The pytest and cargo logs are not read (they
// do not name passed tests in a form that can carry an id).
// Usage: node scripts/conformance.mjs [--specs DIR] [--vitest FILE] [--out FILE] (paths from the cwd).
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';

const CONFORMANCE_VERSION = 'detsim-conformance-v1';
/** An id: upper-case letters, an optional hyphen, a number (SEED-1, ENV-7, D10). */
const ID = '[A-Z]+-?[0-9]+';
/** A marker in a spec: the id in brackets, in bold. */
const MARKER = new RegExp(`\\*\\*\\[(${ID})\\]\\*\\*`, 'g');
/** Anything that looks like a marker: a typo in one must not silently drop a requirement. */
const MARKER_LIKE = /\*\*\[([^\]\n]*)\]\*\*/g;
/** A claim in a test title: one or more ids in brackets, comma-separated ([LOCK-3] or [LOCK-3, LOCK-4]). */
const CLAIM = new RegExp(`\\[(${ID}(?:\\s*,\\s*${ID})*)\\]`, 'g');
const SKIPPED = new Set(['skipped', 'pending', 'todo', 'disabled']);

function args(argv) {
  const opts = {
    specs: join('docs', 'spec'),
    vitest: join('reports', 'vitest.json'),
    out: join('reports', 'conformance.json'),
  };
  for (let i = 0; i < argv.length; i += 2) {
    const key = { '--specs': 'specs', '--vitest': 'vitest', '--out': 'out' }[argv[i]];
    if (!key || argv[i + 1] === undefined)
      fail(`unknown or incomplete option ${JSON.stringify(argv[i])} (--specs DIR, --vitest FILE, --out FILE)`);
    opts[key] = argv[i + 1];
  }
  return opts;
}

function fail(message) {
  console.error(`conformance: ${message}`);
  process.exit(1);
}

const posix = (p) => p.split(sep).join('/');

/** A spec's text as blocks (a paragraph, a list item, a table row or a heading), fenced code left out. */
function blocks(text) {
  const out = [];
  let current = null;
  let fenced = false;
  text.split('\n').forEach((line, i) => {
    if (line.trimStart().startsWith('```')) fenced = !fenced;
    const t = line.trim();
    if (fenced || t === '' || t.startsWith('```')) return void (current = null);
    if (current === null || /^([-*]|\d+\.)\s|^#|^\|/.test(t)) {
      current = { line: i + 1, text: t };
      out.push(current);
    } else current.text += ` ${t}`;
  });
  return out;
}

/** The first sentence of a text, markup dropped. */
function sentence(s) {
  const plain = s.replace(/\*\*/g, '').replace(/\s+/g, ' ').trim();
  const end = /(?<!\b(?:e\.g|i\.e|etc|cf))[.!?](?=\s+[A-Z(`*]|\s*$)/.exec(plain);
  return end ? plain.slice(0, end.index + 1) : plain;
}

/** A requirement's text: the first sentence after its marker, or a bold run-in heading and the sentence after it. */
function firstSentence(s) {
  const heading = /^\s*\*\*([^*]+[.:])\*\*/.exec(s);
  return heading ? `${heading[1]} ${sentence(s.slice(heading[0].length))}` : sentence(s);
}

/** Every requirement of the spec files in `dir` (README.md documents the scheme and defines none). */
function readSpecs(dir) {
  const files = readdirSync(dir)
    .filter((f) => f.endsWith('.md') && f !== 'README.md')
    .sort();
  const requirements = new Map();
  const specs = {};
  const errors = [];
  for (const f of files) {
    const path = posix(relative(process.cwd(), join(dir, f)));
    const text = readFileSync(join(dir, f), 'utf8');
    let defined = 0;
    for (const b of blocks(text)) {
      for (const m of b.text.matchAll(MARKER_LIKE))
        if (!new RegExp(`^${ID}$`).test(m[1])) errors.push(`${path}:${b.line}: malformed requirement marker ${m[0]}`);
      const marks = [...b.text.matchAll(MARKER)];
      marks.forEach((m, i) => {
        const id = m[1];
        const at = `${path}:${b.line}`;
        if (requirements.has(id))
          return void errors.push(`${at}: ${id} is already defined at ${requirements.get(id).at}`);
        const rest = b.text.slice(m.index + m[0].length, marks[i + 1]?.index ?? b.text.length);
        requirements.set(id, { id, spec: path, text: firstSentence(rest), at });
        defined++;
      });
    }
    if (defined > 0) specs[path] = createHash('sha256').update(text).digest('hex');
  }
  return { requirements, specs, errors };
}

/** The ids a title claims, in the order written. */
const claimsOf = (title) => [...String(title).matchAll(CLAIM)].flatMap((m) => m[1].split(',').map((s) => s.trim()));

const statusOf = (s) => (s === 'passed' ? 'passed' : SKIPPED.has(s) ? 'skipped' : 'failed');

/** Every claim of the vitest report: [{id, file, title, status}], and the problems found. */
function readClaims(report) {
  const claims = [];
  const errors = [];
  const failedFiles = [];
  for (const file of report.testResults ?? []) {
    const rel = posix(relative(process.cwd(), file.name));
    const results = file.assertionResults ?? [];
    // A file that failed without a failing test (an import error, a hook): what it claims is not proven.
    if (file.status === 'failed' && !results.some((t) => t.status === 'failed')) failedFiles.push(rel);
    for (const t of results) {
      const ancestors = t.ancestorTitles ?? [];
      for (const a of ancestors)
        if (claimsOf(a).length > 0)
          errors.push(
            `${rel}: describe ${JSON.stringify(a)} claims ${claimsOf(a).join(', ')}: claims belong in a test's own title`,
          );
      const title = t.title ?? t.fullName;
      for (const id of new Set(claimsOf(title)))
        claims.push({ id, file: rel, title: [...ancestors, title].join(' > '), status: statusOf(t.status) });
    }
  }
  return { claims, errors: [...new Set(errors)], failedFiles: [...new Set(failedFiles)].sort() };
}

/** Natural order: by prefix, then number (D2 before D10). */
function byId(a, b) {
  const [, pa, na] = /^([A-Z]+)-?([0-9]+)$/.exec(a.id);
  const [, pb, nb] = /^([A-Z]+)-?([0-9]+)$/.exec(b.id);
  return pa < pb ? -1 : pa > pb ? 1 : Number(na) - Number(nb);
}

const cmp = (x, y) => (x < y ? -1 : x > y ? 1 : 0);

function statusOfRequirement(tests) {
  if (tests.length === 0) return 'untested';
  if (tests.some((t) => t.status === 'failed')) return 'failed';
  if (tests.some((t) => t.status === 'skipped')) return 'skipped';
  return 'passed';
}

/** The conformance document: requirements sorted by id, their tests by file and title. */
function conformance(specs, requirements, claims, failedFiles) {
  const rows = [...requirements.values()].sort(byId).map((r) => {
    const tests = claims
      .filter((c) => c.id === r.id)
      .map(({ file, title, status }) => ({ file, title, status }))
      .sort((x, y) => cmp(x.file, y.file) || cmp(x.title, y.title) || cmp(x.status, y.status));
    return { id: r.id, spec: r.spec, text: r.text, status: statusOfRequirement(tests), tests };
  });
  const count = (s) => rows.filter((r) => r.status === s).length;
  return {
    conformanceVersion: CONFORMANCE_VERSION,
    specs: Object.fromEntries(Object.entries(specs).sort(([a], [b]) => cmp(a, b))),
    requirements: rows,
    summary: {
      passed: count('passed'),
      failed: count('failed'),
      untested: count('untested'),
      skipped: count('skipped'),
    },
    testFilesFailed: failedFiles,
  };
}

function main() {
  const opts = args(process.argv.slice(2));
  // Written from this run or not at all: a stale file must never stand for this run.
  rmSync(opts.out, { force: true });
  if (!existsSync(opts.vitest)) fail(`no vitest report at ${opts.vitest}: run the tests first (npm test)`);
  if (!existsSync(opts.specs)) fail(`no specification directory ${opts.specs}`);
  const { requirements, specs, errors: specErrors } = readSpecs(opts.specs);
  let report;
  try {
    report = JSON.parse(readFileSync(opts.vitest, 'utf8'));
  } catch (e) {
    fail(`${opts.vitest} is not a JSON report: ${e.message}`);
  }
  const { claims, errors: claimErrors, failedFiles } = readClaims(report);
  const unknown = claims.filter((c) => !requirements.has(c.id));
  const errors = [
    ...specErrors,
    ...claimErrors,
    ...unknown.map((c) => `${c.file}: ${JSON.stringify(c.title)} claims ${c.id}, which no docs/spec file defines`),
  ];
  if (requirements.size === 0) errors.push(`${opts.specs} defines no requirement (no **[ID]** marker)`);
  if (errors.length > 0) {
    for (const e of errors) console.error(`conformance: ${e}`);
    fail(`${errors.length} problem(s); ${opts.out} not written`);
  }
  const doc = conformance(specs, requirements, claims, failedFiles);
  mkdirSync(dirname(opts.out) || '.', { recursive: true });
  writeFileSync(opts.out, `${JSON.stringify(doc, null, 2)}\n`);
  const s = doc.summary;
  console.log(
    `conformance: ${doc.requirements.length} requirements, ${s.passed} passed, ${s.failed} failed, ${s.untested} untested, ${s.skipped} skipped (${posix(opts.out)})`,
  );
  for (const st of ['failed', 'skipped', 'untested']) {
    const ids = doc.requirements.filter((r) => r.status === st).map((r) => r.id);
    if (ids.length > 0) console.log(`conformance: ${st}: ${ids.join(', ')}`);
  }
  for (const f of failedFiles)
    console.error(
      `conformance: ${f} failed outside its tests (an import error or a hook): what it claims is not proven`,
    );
  if (s.failed > 0 || failedFiles.length > 0) process.exit(1);
}

main();
