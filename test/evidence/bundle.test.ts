// Portable Evidence Bundles end to end: the shipped golden bundle verifies and its content hash is
// reproduced; its four scenario variants and every kind of damage are refused by name; a bundle
// exported from a real run verifies (in another directory too) and validates with Python's
// jsonschema against the same schemas; referenced files are told apart from wrong ones.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import {
  appendFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DetsimError } from '../../core/formats/errors.js';
import { exportBundle } from '../../coordinator/evidence/export.js';
import { manifestContentHash } from '../../coordinator/evidence/pebv1.js';
import { verifyBundle } from '../../coordinator/evidence/verify.js';
import { detsimCli } from '../cli-refusal.js';

/** The published bundle format beside the checkout (the specs; CI has it), and this project's copy of it. */
const SHARED = join(__dirname, '..', '..', '..', 'shared', 'aet-pebv1');
const PEB = join(__dirname, '..', '..', 'fixtures', 'pebv1');
const MINIMAL = join(PEB, 'fixtures', 'minimal');
const PYTHON = join(__dirname, '..', '..', 'workers', 'python', '.venv', 'bin', 'python');
const GOLDEN_CONTENT_HASH = 'ff13afda689f4b31751f885ff41bb78bf71a8267b2487dfe7984215ba831a244';

let tmp: string;
let runDir: string;

beforeAll(() => {
  tmp = mkdtempSync(join(tmpdir(), 'detsim-evidence-'));
  const r = detsimCli(
    ['run', 'examples/forage-walkers.yaml', '--steps', '240', '--checkpoint-every', '80', '--out', join(tmp, 'runs')],
    120_000,
  );
  expect(r.status, r.stderr).toBe(0);
  runDir = join(tmp, 'runs', readdirSync(join(tmp, 'runs'))[0]!);
}, 150_000);
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The first failing check's reason code and message (null: verified). */
function refusal(bundle: string, runs: string[] = []): { reason: string; message: string } | null {
  try {
    verifyBundle(bundle, runs);
    return null;
  } catch (e) {
    if (!(e instanceof DetsimError)) throw e;
    return { reason: e.reason, message: e.message };
  }
}

const readJson = (p: string) => JSON.parse(readFileSync(p, 'utf8')) as Record<string, unknown>;
const readLines = (p: string) =>
  readFileSync(p, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
const writeLines = (p: string, rows: unknown[]) =>
  writeFileSync(p, rows.map((r) => `${JSON.stringify(r)}\n`).join('') || '\n');
const sha = (b: Buffer | string) => createHash('sha256').update(b).digest('hex');

/**
 * Re-list every file's hash and the content hash after a deliberate edit (as a producer would), and
 * each bundled file's SHA-256 in archive/sources.jsonl (a forger who knows the format does too).
 */
function reseal(bundle: string): void {
  const sourcesFile = join(bundle, 'archive/sources.jsonl');
  if (existsSync(sourcesFile)) {
    const sources = readLines(sourcesFile);
    for (const src of sources) {
      const at = join(bundle, String((src.locator as { path?: string }).path));
      if (existsSync(at)) (src.integrity as { content_hash: string }).content_hash = sha(readFileSync(at));
    }
    writeLines(sourcesFile, sources);
  }
  const manifest = readJson(join(bundle, 'manifest.json'));
  const walk = (rel: string): string[] =>
    readdirSync(join(bundle, rel), { withFileTypes: true }).flatMap((e) => {
      const p = rel ? `${rel}/${e.name}` : e.name;
      return e.isDirectory() ? walk(p) : p === 'manifest.json' ? [] : [p];
    });
  (manifest.integrity as Record<string, unknown>).file_hashes = Object.fromEntries(
    walk('')
      .sort()
      .map((p) => [p, sha(readFileSync(join(bundle, p)))]),
  );
  (manifest.bundle as Record<string, unknown>).content_hash = manifestContentHash(manifest);
  writeFileSync(join(bundle, 'manifest.json'), `${JSON.stringify(manifest, null, 2)}\n`);
}

function copyOf(src: string, name: string): string {
  const dest = join(tmp, name);
  cpSync(src, dest, { recursive: true });
  return dest;
}

let exported: string;
function freshExport(name: string, include?: { trace: boolean; checkpoints: boolean }): string {
  const dest = join(tmp, name);
  exportBundle(runDir, dest, { include });
  return dest;
}

describe('the golden PEBv1 bundle (fixtures/pebv1/fixtures/minimal, a copy of ../shared/aet-pebv1)', () => {
  it('verifies as is, and its content_hash is reproduced exactly', () => {
    expect(refusal(MINIMAL)).toBeNull();
    expect(manifestContentHash(readJson(join(MINIMAL, 'manifest.json')))).toBe(GOLDEN_CONTENT_HASH);
  });

  it.skipIf(!existsSync(SHARED))(
    'the schemas and golden bundle detsim ships are the published ones, byte for byte (needs ../shared)',
    () => {
      for (const dir of ['schemas', join('fixtures', 'minimal')]) {
        const ours = join(PEB, dir);
        const theirs = join(SHARED, dir);
        expect(readdirSync(ours, { recursive: true }).sort()).toEqual(readdirSync(theirs, { recursive: true }).sort());
        for (const f of readdirSync(theirs, { recursive: true }) as string[])
          if (!statSync(join(theirs, f)).isDirectory())
            expect(sha(readFileSync(join(ours, f))), f).toBe(sha(readFileSync(join(theirs, f))));
      }
      const scenarios = join('fixtures', 'scenarios.json');
      expect(sha(readFileSync(join(PEB, scenarios)))).toBe(sha(readFileSync(join(SHARED, scenarios))));
    },
  );

  // The four variants of fixtures/scenarios.json, built from the minimal bundle as upstream's tests build them.
  const variants: Record<string, (b: string) => void> = {
    conflicted: (b) => {
      const claims = readLines(join(b, 'core/claims.jsonl'));
      Object.assign(claims[0]!, {
        status: 'conflicted',
        counter_evidence_refs: ['ev-002'],
        basis: { type: 'mixed', explanation: 'both' },
      });
      writeLines(join(b, 'core/claims.jsonl'), claims);
      const ev = readLines(join(b, 'core/evidence.jsonl'));
      ev.push({
        ...ev[0]!,
        id: 'ev-002',
        kind: 'freshness_fact',
        strength: 'corroborated',
        supports: [],
        contradicts: ['claim-001'],
      });
      writeLines(join(b, 'core/evidence.jsonl'), ev);
      writeLines(join(b, 'archive/conflicts.jsonl'), [
        {
          id: 'conflict-001',
          proposition: 'p',
          evidence_refs: ['ev-001', 'ev-002'],
          conflict_type: 'workspace_conflict',
          resolution_status: 'unresolved',
          explanation: 'e',
        },
      ]);
    },
    unknown: (b) => {
      const claims = readLines(join(b, 'core/claims.jsonl'));
      Object.assign(claims[0]!, { status: 'unknown', basis: { type: 'observational', explanation: 'x' } });
      writeLines(join(b, 'core/claims.jsonl'), claims);
      const ev = readLines(join(b, 'core/evidence.jsonl'));
      ev[0]!.freshness = { status: 'unknown', explanation: 'cannot read', effect: 'not current' };
      writeLines(join(b, 'core/evidence.jsonl'), ev);
    },
    stale: (b) => {
      const claims = readLines(join(b, 'core/claims.jsonl'));
      Object.assign(claims[0]!, { status: 'partially_supported' });
      writeLines(join(b, 'core/claims.jsonl'), claims);
      const ev = readLines(join(b, 'core/evidence.jsonl'));
      ev[0]!.freshness = {
        status: 'relevant_files_changed',
        checked_at: '2026-01-02T03:06:00Z',
        explanation: 'changed',
        effect: 'historic only',
      };
      writeLines(join(b, 'core/evidence.jsonl'), ev);
    },
    truncated: (b) => {
      const raw = Buffer.from('前置输出\n完整结果：1 项通过\n');
      const digest = sha(raw);
      mkdirSync(join(b, 'blobs'));
      writeFileSync(join(b, 'blobs', `sha256-${digest}`), raw);
      const ev = readLines(join(b, 'core/evidence.jsonl'));
      Object.assign(ev[0]!, {
        strength: 'observed',
        integrity: {
          content_hash: digest,
          blob_ref: `blobs/sha256-${digest}`,
          truncated: true,
          original_bytes: raw.length,
        },
      });
      writeLines(join(b, 'core/evidence.jsonl'), ev);
      const claims = readLines(join(b, 'core/claims.jsonl'));
      Object.assign(claims[0]!, {
        status: 'partially_supported',
        basis: { type: 'observational', explanation: 'truncated view' },
      });
      writeLines(join(b, 'core/claims.jsonl'), claims);
    },
  };
  const scenarios = (
    JSON.parse(readFileSync(join(PEB, 'fixtures', 'scenarios.json'), 'utf8')) as { cases: { id: string }[] }
  ).cases;
  const expected: Record<string, [string, RegExp]> = {
    conflicted: ['audit_evidence_unsupported', /claim claim-001 is conflicted \(counter-evidence ev-002\)/],
    unknown: ['audit_evidence_unsupported', /claim claim-001 is unknown/],
    stale: ['audit_evidence_stale', /evidence ev-001 of claim claim-001 is relevant_files_changed/],
    truncated: ['audit_evidence_truncated', /evidence ev-001 of claim claim-001 is truncated/],
  };
  it.each(scenarios.map((s) => s.id))('the %s variant is refused by name', (id) => {
    const b = copyOf(MINIMAL, `variant-${id}`);
    variants[id]!(b);
    reseal(b);
    const r = refusal(b);
    expect(r?.reason).toBe(expected[id]![0]);
    expect(r?.message).toMatch(expected[id]![1]);
  });
});

describe('a bundle exported from a real run', () => {
  beforeAll(() => {
    exported = freshExport('exported');
  });

  it('verifies: every claim recomputed, the trace bundled, the checkpoints referenced', () => {
    const out = verifyBundle(exported);
    expect(out.claims.map((c) => [c.id, c.how])).toEqual([
      ['claim-1-reprohash', 'rechecked'],
      ['claim-1-ledger', 'rechecked'],
      ['claim-1-checkpoints', 'rechecked'],
    ]);
    const receipt = readJson(join(runDir, 'receipt.json'));
    expect(out.claims[0]!.statement).toContain(`ReproHash ${String(receipt.reproHash)}`);
    expect(out.notPresent.every((p) => p.endsWith('.flysess'))).toBe(true);
    expect(out.notPresent.length).toBeGreaterThan(0);
  });

  it('verifies from another directory through the CLI (nothing depends on where it was written)', () => {
    const moved = join(tmp, 'elsewhere', 'bundle');
    mkdirSync(join(tmp, 'elsewhere'));
    cpSync(exported, moved, { recursive: true });
    const r = spawnSync(
      process.execPath,
      [join(process.cwd(), 'dist/coordinator/cli/main.js'), 'evidence', 'verify', 'bundle'],
      {
        cwd: join(tmp, 'elsewhere'),
        encoding: 'utf8',
      },
    );
    expect(r.status, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/detsim evidence verify: verified/);
  });

  it.skipIf(!existsSync(PYTHON))(
    "validates with Python's jsonschema (Draft 2020-12) and hashes the same in Python",
    () => {
      const script = `
import hashlib, json, os, sys
from jsonschema import Draft202012Validator
from jsonschema import FormatChecker
root, schemas = sys.argv[1], sys.argv[2]
def schema(name): return Draft202012Validator(json.load(open(os.path.join(schemas, name + '.schema.json'))), format_checker=FormatChecker())
m = json.load(open(os.path.join(root, 'manifest.json')))
schema('manifest').validate(m)
kinds = {'index':'index','claims':'claim','evidence':'evidence','observations':'observation','sources':'source','diagnostics':'diagnostic','conflicts':'conflict','ledger':'ledger-entry','policy':'policy'}
n = 0
for key, name in kinds.items():
    path = os.path.join(root, m['contents'][key])
    rows = [json.load(open(path))] if key in ('index', 'policy') else [json.loads(l) for l in open(path, encoding='utf-8') if l.strip()]
    for r in rows: schema(name).validate(r); n += 1
for rel, h in m['integrity']['file_hashes'].items():
    assert hashlib.sha256(open(os.path.join(root, rel), 'rb').read()).hexdigest() == h, rel
c = json.loads(json.dumps(m)); c['bundle']['content_hash'] = '0' * 64
body = json.dumps(c, ensure_ascii=False, sort_keys=True, separators=(',', ':')).encode()
assert hashlib.sha256(body).hexdigest() == m['bundle']['content_hash'], 'content hash'
print('records', n)
`;
      const r = spawnSync(PYTHON, ['-c', script, exported, join(PEB, 'schemas')], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      expect(Number(/records (\d+)/.exec(r.stdout)![1])).toBeGreaterThan(10);
    },
  );

  it.skipIf(!existsSync(PYTHON))(
    "passes AET's own PEBv1 validator (agent-engineering-toolkit), trace and checkpoints included or not",
    () => {
      const full = freshExport('aet-full', { trace: true, checkpoints: true });
      const script = `
import sys
from pathlib import Path
from aet.bundle import validate_bundle
for p in sys.argv[1:]:
    b = validate_bundle(Path(p))
    print(p, len(b['claims']))
`;
      const r = spawnSync(PYTHON, ['-c', script, exported, full], { encoding: 'utf8' });
      expect(r.status, r.stderr).toBe(0);
      expect(
        r.stdout
          .trim()
          .split('\n')
          .map((l) => l.split(' ')[1]),
      ).toEqual(['3', '3']);
    },
  );

  it('carries the fixed PEBv1 consumer guide, byte for byte', () => {
    expect(sha(readFileSync(join(exported, 'consumer-guide.md')))).toBe(
      sha(readFileSync(join(MINIMAL, 'consumer-guide.md'))),
    );
  });

  it('a one-byte change to any bundled file is refused naming that file', () => {
    const listed = Object.keys(
      (readJson(join(exported, 'manifest.json')).integrity as { file_hashes: object }).file_hashes,
    );
    expect(listed.length).toBeGreaterThan(15);
    for (const rel of listed) {
      const b = copyOf(exported, `flip-${rel.replace(/\W/g, '_')}`);
      const bytes = readFileSync(join(b, rel));
      const at = bytes.length >> 1;
      bytes.writeUInt8(bytes[at]! ^ 0x01, at);
      writeFileSync(join(b, rel), bytes);
      const r = refusal(b);
      expect(r?.reason, rel).toBe('audit_evidence_file_hash');
      expect(r?.message.startsWith(`${rel}: present, wrong`), r?.message).toBe(true);
      rmSync(b, { recursive: true });
    }
  });

  it('a changed manifest, a missing file, an extra file and a symbolic link are refused by name', () => {
    const m = copyOf(exported, 'manifest-edit');
    const manifest = readJson(join(m, 'manifest.json'));
    (manifest.task as Record<string, unknown>).request = 'something else';
    writeFileSync(join(m, 'manifest.json'), JSON.stringify(manifest));
    expect(refusal(m)?.reason).toBe('audit_evidence_content_hash');
    const gone = copyOf(exported, 'missing-file');
    rmSync(join(gone, 'core/evidence.jsonl'));
    expect(refusal(gone)).toEqual({
      reason: 'audit_evidence_file_missing',
      message: 'core/evidence.jsonl is listed in integrity.file_hashes and missing from the bundle',
    });
    const extra = copyOf(exported, 'extra-file');
    writeFileSync(join(extra, 'notes.txt'), 'unlisted');
    expect(refusal(extra)).toEqual({
      reason: 'audit_evidence_unlisted_file',
      message: 'notes.txt is in the bundle and not listed in integrity.file_hashes',
    });
    const link = copyOf(exported, 'symlink');
    symlinkSync('/etc/passwd', join(link, 'core', 'escape'));
    expect(refusal(link)).toEqual({
      reason: 'danger_evidence_path',
      message: 'core/escape is a symbolic link: a bundle holds regular files only',
    });
  });

  it('a claim whose evidence is missing, a schema-invalid record and deep nesting are refused by name', () => {
    const dangling = copyOf(exported, 'dangling');
    writeLines(join(dangling, 'core/evidence.jsonl'), readLines(join(dangling, 'core/evidence.jsonl')).slice(1));
    reseal(dangling);
    expect(refusal(dangling)).toEqual({
      reason: 'audit_evidence_dangling_ref',
      message: 'claim claim-1-reprohash: evidence ev-1-reprohash is not in the bundle',
    });
    const invalid = copyOf(exported, 'schema-invalid');
    const claims = readLines(join(invalid, 'core/claims.jsonl'));
    claims[1]!.status = 'proven';
    writeLines(join(invalid, 'core/claims.jsonl'), claims);
    reseal(invalid);
    expect(refusal(invalid)?.message).toMatch(
      /^core\/claims\.jsonl line 2: \/status must be equal to one of the allowed values/,
    );
    const deep = copyOf(exported, 'deep');
    writeFileSync(join(deep, 'policy.json'), `${'['.repeat(2000)}${']'.repeat(2000)}`);
    reseal(deep);
    const r = refusal(deep);
    expect(r?.reason).toBe('struct_invalid_json');
    expect(r?.message).toMatch(/^policy\.json: nesting deeper than 512/);
  });

  it('a huge record file is refused by its size before it is parsed', () => {
    const huge = copyOf(exported, 'huge');
    writeFileSync(join(huge, 'index.json'), `{"pad":"${'x'.repeat(65 * 1024 * 1024)}"}`);
    reseal(huge);
    const r = refusal(huge);
    expect(r?.reason).toBe('size_evidence_file');
    expect(r?.message).toMatch(/^index\.json is \d+ bytes, more than the 67108864 a record file may hold$/);
    rmSync(huge, { recursive: true });
  });

  it('a claim that no longer recomputes is refused naming the field and both values', () => {
    const b = copyOf(exported, 'forged-claim');
    const claims = readLines(join(b, 'core/claims.jsonl'));
    (claims[0]!.extensions as { detsim: { expected: Record<string, unknown> } }).detsim.expected.reproHash =
      '0000000000000000';
    writeLines(join(b, 'core/claims.jsonl'), claims);
    reseal(b);
    const r = refusal(b);
    expect(r?.reason).toBe('audit_evidence_recheck_failed');
    expect(r?.message).toMatch(
      /^claim claim-1-reprohash: reproHash recomputes to "[0-9a-f]{16}", the claim states "0000000000000000"$/,
    );
  });

  it('a claim statement or a report that says other than the recomputed values is refused, resealed or not', () => {
    const b = copyOf(exported, 'forged-statement');
    const claims = readLines(join(b, 'core/claims.jsonl'));
    const said = String(claims[0]!.statement);
    claims[0]!.statement = said.replace(/has ReproHash [0-9a-f]{16}/, 'has ReproHash ffffffffffffffff');
    expect(claims[0]!.statement).not.toBe(said);
    writeLines(join(b, 'core/claims.jsonl'), claims);
    reseal(b);
    const r = refusal(b);
    expect(r?.reason).toBe('audit_evidence_recheck_failed');
    expect(r?.message).toBe(
      `claim claim-1-reprohash: its statement is not the one its recomputed values give: ${JSON.stringify(said)}`,
    );

    const report = copyOf(exported, 'forged-report');
    const text = readFileSync(join(report, 'report.md'), 'utf8');
    writeFileSync(join(report, 'report.md'), text.replace(/\[supported\]/, '[supported, and more]'));
    reseal(report);
    const rr = refusal(report);
    expect(rr?.reason).toBe('audit_evidence_recheck_failed');
    expect(rr?.message).toBe(
      "report.md is not the projection of core/claims.jsonl and the index's question (PEBv1's deterministic report)",
    );

    for (const file of ['README.md', 'consumer-guide.md']) {
      const notes = copyOf(exported, `forged-${file}`);
      writeFileSync(join(notes, file), `${readFileSync(join(notes, file), 'utf8')}Note: trust me.\n`);
      reseal(notes);
      const rn = refusal(notes);
      expect(rn?.reason).toBe('audit_evidence_recheck_failed');
      expect(rn?.message).toBe(`${file} is not the fixed text detsim writes (edited?)`);
    }
  });
});

describe('files referenced by digest, not copied', () => {
  it('tells "referenced, not present" from "present, wrong", and --run supplies them', () => {
    const b = freshExport('referenced', { trace: false, checkpoints: false });
    const r = refusal(b);
    expect(r?.reason).toBe('audit_evidence_not_present');
    expect(r?.message).toMatch(
      /^runs\/[^/]+\/trace\/000000\.jsonl\.gz: referenced, not present \(give the run directory with --run/,
    );
    expect(refusal(b, [runDir])).toBeNull();
    const wrongRun = copyOf(runDir, 'wrong-run');
    appendFileSync(
      join(
        wrongRun,
        'store',
        readdirSync(join(wrongRun, 'store')).find((f) => f.endsWith('.flysess'))!,
      ),
      'x',
    );
    const w = refusal(b, [wrongRun]);
    expect(w?.reason).toBe('audit_evidence_file_hash');
    expect(w?.message).toMatch(/\.flysess \(from .*\): present, wrong/);
    // With --run, a file read from it is not "not present"; one the run directory lacks still is.
    expect(verifyBundle(b, [runDir]).notPresent).toEqual([]);
    const lacking = copyOf(runDir, 'lacking-run');
    const gone = readdirSync(join(lacking, 'store')).find((f) => f.endsWith('.flysess'))!;
    rmSync(join(lacking, 'store', gone));
    expect(verifyBundle(b, [lacking]).notPresent).toEqual([`runs/${basename(runDir)}/store/${gone}`]);
  });

  it('archive/sources.jsonl holds: an included file gone, or a referenced digest changed, is refused resealed', () => {
    const b = freshExport('sources-included', { trace: true, checkpoints: true });
    const store = join(b, 'runs', basename(runDir), 'store');
    const gone = readdirSync(store).find((f) => f.endsWith('.flysess'))!;
    rmSync(join(store, gone));
    reseal(b);
    const r = refusal(b);
    expect(r?.reason).toBe('audit_evidence_file_missing');
    expect(r?.message).toMatch(
      new RegExp(
        `^archive/sources\\.jsonl src-\\d+ \\(runs/[^ ]+/store/${gone.replace('.', '\\.')}\\): recorded as included, missing from the bundle$`,
      ),
    );

    const ref = freshExport('sources-referenced', { trace: true, checkpoints: false });
    const sources = readLines(join(ref, 'archive/sources.jsonl'));
    const ckpt = sources.find((x) => String((x.locator as { path: string }).path).endsWith('.flysess'))!;
    (ckpt.integrity as { content_hash: string }).content_hash = '0'.repeat(64);
    writeLines(join(ref, 'archive/sources.jsonl'), sources);
    reseal(ref);
    for (const runs of [[], [runDir]]) {
      const x = refusal(ref, runs);
      expect(x?.reason).toBe('audit_evidence_file_hash');
      expect(x?.message).toMatch(
        /\.flysess: archive\/sources\.jsonl records SHA-256 0{64}, the run binds [0-9a-f]{64}$/,
      );
    }
  });

  it('--include trace,checkpoints copies them and verifies alone', () => {
    const b = freshExport('everything', { trace: true, checkpoints: true });
    expect(
      readdirSync(join(b, 'runs', readdirSync(join(b, 'runs'))[0]!, 'store')).some((f) => f.endsWith('.flysess')),
    ).toBe(true);
    expect(verifyBundle(b).notPresent).toEqual([]);
  });
});

describe('export refuses bad input and writes nothing', () => {
  it('a damaged receipt or trace, or a destination that is not empty', () => {
    const damaged = copyOf(runDir, 'damaged-receipt');
    const receipt = readJson(join(damaged, 'receipt.json'));
    receipt.reproHash = 'ffffffffffffffff';
    writeFileSync(join(damaged, 'receipt.json'), JSON.stringify(receipt));
    const c1 = detsimCli(['evidence', 'export', damaged, join(tmp, 'never-1')]);
    expect(c1.status).toBe(1);
    expect(c1.stderr).toMatch(
      /^detsim: \[audit_evidence_recheck_failed\] .*receipt\.json records ReproHash ffffffffffffffff, its trace recomputes to [0-9a-f]{16}\n$/,
    );
    const torn = copyOf(runDir, 'damaged-trace');
    appendFileSync(join(torn, 'trace', '000001.jsonl.gz'), 'x');
    const c2 = detsimCli(['evidence', 'export', torn, join(tmp, 'never-2')]);
    expect(c2.status).toBe(1);
    expect(c2.stderr).toMatch(/^detsim: \[audit_trace_segment_tampered\]/);
    const full = join(tmp, 'not-empty');
    mkdirSync(full);
    writeFileSync(join(full, 'keep.txt'), 'mine');
    const c3 = detsimCli(['evidence', 'export', runDir, full]);
    expect(c3.status).toBe(2); // input: the destination exists
    expect(c3.stderr).toBe(
      `detsim: [perm_evidence_bundle_exists] ${full} exists and is not empty: a bundle is written into a new directory\n`,
    );
    expect(readdirSync(full)).toEqual(['keep.txt']);
    for (const d of ['never-1', 'never-2']) expect(existsSync(join(tmp, d))).toBe(false);
    expect(readdirSync(tmp).some((f) => f.includes('.partial-'))).toBe(false);
  });

  it("a run.json or summary.json that is not the receipt's, or a store without its manifest, is refused by name", () => {
    const cases: [string, (d: string) => void, RegExp][] = [
      [
        'run-json-garbage',
        (d) => writeFileSync(join(d, 'run.json'), '{broken'),
        /^detsim: \[audit_evidence_recheck_failed\] runs\/run-json-garbage\/run\.json is not the run\.json its receipt\.json records \(changed or damaged after the run\)\n$/,
      ],
      [
        'run-json-no-seed',
        (d) => {
          const run = readJson(join(d, 'run.json'));
          delete run.masterSeed;
          writeFileSync(join(d, 'run.json'), JSON.stringify(run));
        },
        /^detsim: \[audit_evidence_recheck_failed\] runs\/run-json-no-seed\/run\.json is not the run\.json/,
      ],
      [
        'summary-edited',
        (d) => writeFileSync(join(d, 'summary.json'), '{"status":"completed"}'),
        /^detsim: \[audit_evidence_recheck_failed\] runs\/summary-edited\/summary\.json is not the summary\.json/,
      ],
      [
        'store-no-manifest',
        (d) => rmSync(join(d, 'store', 'manifest.json')),
        /^detsim: \[audit_store_manifest_missing\] .*store\/manifest\.json: missing, while [0-9]+ generation file\(s\) remain/,
      ],
      [
        'store-manifest-garbage',
        (d) => writeFileSync(join(d, 'store', 'manifest.json'), '{oops'),
        /^detsim: \[struct_invalid_receipt\] .*store\/manifest\.json: /,
      ],
    ];
    // A destination on a kernel filesystem is refused at once (a write under /proc spun forever).
    const proc = detsimCli(['evidence', 'export', runDir, '/proc/detsim-bundle']);
    expect(proc.stderr).toBe(
      'detsim: [perm_out_dir_unwritable] <bundle-dir>: /proc is on a kernel filesystem (/proc), not a place for evidence bundles\n',
    );
    // A file the export must read that is gone: one line with a reason code, exit 2 (not a verification).
    const noRepro = copyOf(runDir, 'no-repro');
    const repro = readdirSync(join(noRepro, 'trace')).find((f) => f.endsWith('.repro.gz'))!;
    rmSync(join(noRepro, 'trace', repro));
    const gone = detsimCli(['evidence', 'export', noRepro, join(tmp, 'never-no-repro')]);
    expect(gone.status).toBe(2);
    expect(gone.stderr).toBe(
      `detsim: [perm_file_unreachable] cannot access ${join(noRepro, 'trace', repro)}: ENOENT\n`,
    );
    for (const [name, damage, expected] of cases) {
      const d = copyOf(runDir, name);
      damage(d);
      const r = detsimCli(['evidence', 'export', d, join(tmp, `never-${name}`)]);
      // A file that failed verification exits 1; a run file that is not JSON at all is input, 2.
      expect(r.status, name).toBe(name === 'store-manifest-garbage' ? 2 : 1);
      expect(r.stderr, name).toMatch(expected);
      expect(r.stderr, name).not.toMatch(/\n\s+at /);
      expect(existsSync(join(tmp, `never-${name}`)), name).toBe(false);
    }
  });

  it('verify: exit 2 for a bundle directory that does not exist, 1 naming the check', () => {
    const u = detsimCli(['evidence', 'verify', join(tmp, 'no-such-bundle')]);
    expect(u.status).toBe(2);
    expect(u.stderr).toMatch(
      /^detsim: \[struct_invalid_field\] .*no-such-bundle is not an existing bundle directory\n$/,
    );
    const run = detsimCli(['evidence', 'verify', runDir]);
    expect(run.status).toBe(2);
    expect(run.stderr).toBe(
      `detsim: [struct_invalid_field] ${runDir} is a run directory, not a bundle: make one with detsim evidence export ${runDir} <bundle>\n`,
    );
    const b = copyOf(exported, 'cli-extra');
    writeFileSync(join(b, 'x.json'), '{}');
    const r = detsimCli(['evidence', 'verify', b]);
    expect(r.status).toBe(1);
    expect(r.stderr.split('\n')[0]).toBe(
      'detsim: [audit_evidence_unlisted_file] x.json is in the bundle and not listed in integrity.file_hashes',
    );
  });
});

describe('a verify attestation', () => {
  it('exports replay, prediction and conformance claims that verify; a changed check breaks the verdict hash', () => {
    const out = join(tmp, 'vout');
    mkdirSync(out);
    const conformance = join(out, 'conformance.json');
    const reqs = [
      { id: 'D1', status: 'passed' },
      { id: 'D2', status: 'untested' },
    ];
    writeFileSync(
      conformance,
      JSON.stringify({
        conformanceVersion: 'detsim-conformance-v1',
        requirements: reqs,
        summary: { passed: 1, failed: 0, untested: 1, skipped: 0 },
      }),
    );
    const v = detsimCli(
      [
        'verify',
        '--config',
        'examples/lif-pair.yaml',
        '--out',
        out,
        '--runs-dir',
        join(out, 'runs'),
        '--predict',
        '--conformance',
        conformance,
      ],
      150_000,
    );
    expect(v.status, v.stderr).toBe(0);
    const b = join(tmp, 'attested');
    exportBundle(out, b);
    const res = verifyBundle(b);
    expect(res.claims.map((c) => c.id)).toEqual([
      'claim-1-reprohash',
      'claim-1-replay',
      'claim-1-prediction',
      'claim-1-conformance',
    ]);
    expect(res.claims[2]!.statement).toMatch(
      /ledgered its prediction for configuration lif-pair: ReproHash [0-9a-f]{16} \(attestation\/ledger\.jsonl line 1, before its first evidence at line 2\); the runs confirmed it\.$/,
    );
    expect(res.claims[3]!.statement).toBe(
      `detsim verify ran beside conformance file ${sha(readFileSync(conformance))}: 2 spec requirements, 1 passed, 0 failed, 1 untested, 0 skipped.`,
    );
    const reordered = copyOf(b, 'prediction-moved');
    const ledger = readFileSync(join(reordered, 'attestation', 'ledger.jsonl'), 'utf8').split('\n');
    [ledger[0], ledger[1]] = [ledger[1]!, ledger[0]!];
    writeFileSync(join(reordered, 'attestation', 'ledger.jsonl'), ledger.join('\n'));
    reseal(reordered);
    const moved = refusal(reordered);
    expect(moved?.reason).toBe('audit_evidence_recheck_failed');
    expect(moved?.message).toMatch(/^attestation\/ledger\.jsonl line 1: /);
    const att = join(b, 'attestation', 'attestation.jsonl');
    const lines = readFileSync(att, 'utf8').split('\n');
    const i = lines.findIndex((l) => l.includes('"check":"golden"'));
    lines[i] = lines[i]!.replace('"status":"pass"', '"status":"warn"');
    writeFileSync(att, lines.join('\n'));
    reseal(b);
    const r = refusal(b);
    expect(r?.reason).toBe('audit_evidence_recheck_failed');
    expect(r?.message).toMatch(/^attestation\/attestation\.jsonl: verdict_hash [0-9a-f]{64} does not bind its checks/);
  }, 180_000);
});
describe('a resumed run and the uninterrupted one (--same-as)', () => {
  it('bundles both with a same-run claim naming the checkpoint it was resumed from; another run is refused', () => {
    const resumed = copyOf(runDir, 'resumed');
    const r = detsimCli(['resume', resumed, '--checkpoint', 'ckpt-e1-80'], 120_000);
    expect(r.status, r.stderr).toBe(0);
    const b = join(tmp, 'same-run');
    exportBundle(resumed, b, { sameAs: runDir });
    const out = verifyBundle(b);
    const claim = out.claims.find((c) => c.id === 'claim-1-same-run')!;
    expect(claim.how).toBe('rechecked');
    expect(claim.statement).toMatch(
      /^Run resumed, resumed from checkpoint ckpt-e1-80 \(envelope digest [0-9a-f]{64}\) in epoch e2, is the same run as run /,
    );
    const shorter = join(tmp, 'shorter');
    expect(detsimCli(['run', 'examples/forage-walkers.yaml', '--steps', '160', '--out', shorter], 120_000).status).toBe(
      0,
    );
    const other = join(shorter, readdirSync(shorter)[0]!);
    expect(() => exportBundle(resumed, join(tmp, 'never-same'), { sameAs: other })).toThrow(/are not the same run/);
    expect(existsSync(join(tmp, 'never-same'))).toBe(false);
  }, 240_000);
});

describe('a fork', () => {
  it("bundles and verifies: its base checkpoint, copied from the parent, is bound by the fork's restored entry", () => {
    const fork = join(tmp, 'fork');
    const r = detsimCli(['fork', runDir, '--checkpoint', 'ckpt-e1-80', '--out', fork], 120_000);
    expect(r.status, r.stderr).toBe(0);
    const b = join(tmp, 'fork-bundle');
    exportBundle(fork, b);
    const out = verifyBundle(b);
    const claim = out.claims.find((c) => c.id === 'claim-1-checkpoints')!;
    expect(claim.how).toBe('rechecked');
    expect(claim.statement).toMatch(/^Run fork committed checkpoints ckpt-e1-80, ckpt-e2-160, ckpt-e2-240 durably/);
  }, 240_000);
});

describe('a run made with --trace-observations', () => {
  it("bundles each segment's observations: the bundle verifies, and its run exports the same obs columns", () => {
    const runs = join(tmp, 'obs-runs');
    const r = detsimCli([
      'run',
      'examples/forage-walkers.yaml',
      '--steps',
      '100',
      '--trace-observations',
      '--out',
      runs,
    ]);
    expect(r.status, r.stderr).toBe(0);
    const run = join(runs, readdirSync(runs)[0]!);
    const b = join(tmp, 'obs-bundle');
    exportBundle(run, b, { roCrate: true });
    const bundled = join(b, 'runs', basename(run));
    const sidecars = readdirSync(join(bundled, 'trace')).filter((f) => f.endsWith('.observations.jsonl.gz'));
    expect(sidecars).toEqual(readdirSync(join(run, 'trace')).filter((f) => f.endsWith('.observations.jsonl.gz')));
    expect(sidecars.length).toBeGreaterThan(0);
    expect(refusal(b)).toBeNull();
    expect(readFileSync(join(b, 'ro-crate-metadata.json'), 'utf8')).toContain("A trace segment's observations");
    const table = (dir: string, name: string) => {
      const out = join(tmp, `${name}.csv`);
      const e = detsimCli(['trace', 'export', dir, '--out', out]);
      expect(e.status, e.stderr).toBe(0);
      return readFileSync(out, 'utf8');
    };
    const original = table(run, 'obs-original');
    expect(original.split('\n')[0]).toMatch(/,obs\./);
    expect(table(bundled, 'obs-bundled')).toBe(original);
  }, 240_000);
});
