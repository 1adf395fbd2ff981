// `detsim verify`, the single entry (D10), end to end through the CLI on a tiny configuration:
// green with grade full when the golden hits, the same verdict_hash twice (D9), exit 1 on a
// tampered golden (D6), exit 2 on an unclassified field (D1). Plus grading on fixed checks.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { canonicalize, parseStrict } from '../../core/formats/canonical-json.js';
import { buildAttestation, gradeOf } from '../../coordinator/diff0/attestation.js';
import { FIELD_TABLE } from '../../coordinator/receipt/fields.js';
import { makeCheck } from '../../coordinator/diff0/replay.js';
import { CLI_MAIN } from '../cli-refusal.js';

const CONFIG = join('test', 'receipt', 'fixtures', 'tiny-walkers.yaml');
const tmp = (p: string) => mkdtempSync(join(tmpdir(), p));

/** The built CLI (`npm test` builds first): from source, tsx compiles it and each worker on every start. */
function detsim(args: string[]) {
  return spawnSync(process.execPath, [CLI_MAIN, ...args], {
    encoding: 'utf8',
    timeout: 120_000,
  });
}

const runsDir = tmp('detsim-verify-runs-');
const goldenDir = tmp('detsim-verify-golden-');

function verifyCli(out: string, extra: string[] = [], golden = goldenDir) {
  return detsim([
    'verify',
    '--config',
    CONFIG,
    '--golden-dir',
    golden,
    '--out',
    out,
    '--runs-dir',
    runsDir,
    '--no-golden-marker',
    ...extra,
  ]);
}

function jsonl(out: string): Record<string, unknown>[] {
  return readFileSync(join(out, 'attestation.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => parseStrict(l) as Record<string, unknown>);
}

const pass = (check: string, subject = 'x') => makeCheck(check, subject, 'pass', 'audit_replay_stable', {});

describe('grading and the verdict hash (no processes)', () => {
  it('[DIFF-5] full needs every configuration replayed with a golden hit; a missing golden is sampled; a failed replay incompatible', () => {
    const base = [
      pass('table', 'detsim'),
      pass('replay'),
      pass('sensitivity'),
      pass('physical-diff'),
      pass('canonical'),
    ];
    expect(gradeOf([...base, makeCheck('golden', 'x', 'pass', 'audit_golden_hit', {})])).toBe('full');
    expect(gradeOf([...base, makeCheck('golden', 'x', 'warn', 'meta_golden_missing', {})])).toBe('sampled');
    expect(gradeOf([...base, makeCheck('golden', 'x', 'fail', 'audit_golden_mismatch', {})])).toBe('sampled');
    expect(
      gradeOf([
        ...base.filter((c) => c.check !== 'replay'),
        makeCheck('replay', 'x', 'fail', 'audit_repro_hash_mismatch', {}),
      ]),
    ).toBe('incompatible');
    expect(
      gradeOf([
        ...base.filter((c) => c.check !== 'sensitivity'),
        makeCheck('sensitivity', 'x', 'fail', 'audit_sensitivity_failed', {}),
      ]),
    ).toBe('incompatible');
    expect(
      gradeOf([
        ...base.filter((c) => c.check !== 'table'),
        makeCheck('table', 'detsim', 'fail', 'meta_field_table_invalid', {}),
      ]),
    ).toBe('incompatible');
  });

  it('[D9] the verdict hash ignores ts_build, physical facts and check order; it moves with any verdict field', () => {
    const checks = [
      makeCheck('replay', 'x', 'pass', 'audit_replay_stable', { reproHash: 'ab' }, { runDirs: ['/tmp/a'] }),
      pass('sensitivity'),
    ];
    const a = buildAttestation(checks, '2026-01-01T00:00:00Z');
    const b = buildAttestation(
      [checks[1]!, { ...checks[0]!, physical: { runDirs: ['/elsewhere'] } }],
      '2030-12-31T23:59:59Z',
    );
    expect(b.verdict_hash).toBe(a.verdict_hash);
    expect(a.verdict_hash).toMatch(/^[0-9a-f]{64}$/);
    const c = buildAttestation(
      [makeCheck('replay', 'x', 'pass', 'audit_replay_stable', { reproHash: 'ac' }), pass('sensitivity')],
      '2026-01-01T00:00:00Z',
    );
    expect(c.verdict_hash).not.toBe(a.verdict_hash);
  });
});

describe('detsim verify (CLI, real runs)', () => {
  let first: { out: string; hash: string };

  it(
    "a config without a golden (a researcher's own): yellow, exit 2, and the warning says what to do",
    { timeout: 240_000 },
    () => {
      const out = tmp('detsim-verify-nogolden-');
      const r = verifyCli(out, [], tmp('detsim-verify-no-goldens-'));
      expect(r.status, r.stdout + r.stderr).toBe(2);
      expect(r.stdout).toMatch(
        /^WARN tiny-walkers golden \[meta_golden_missing\] .* \(no golden for this config: the runs agreed with each other, which is DIFF=0 — a config of your own is checked so by detsim replay; --update-goldens records a golden/m,
      );
      expect(r.stdout).toMatch(/grade sampled, verdict yellow/);
    },
  );

  it(
    '[D10, DIFF-5] one entry; a hit golden gives exit 0, grade full, attestation.md and one check per line',
    { timeout: 240_000 },
    () => {
      // The golden: two independent `detsim run`s must print the same ReproHash before it is frozen.
      const hashes = [0, 1].map(() => {
        const r = detsim(['run', CONFIG, '--out', runsDir]);
        expect(r.status, r.stderr).toBe(0);
        return {
          reproHash: /repro hash\s+([0-9a-f]{16})/.exec(r.stdout)![1]!,
          behaviourDigest: /behaviour digest\s+([0-9a-f]{64})/.exec(r.stdout)![1]!,
        };
      });
      expect(hashes[1]).toEqual(hashes[0]);
      writeFileSync(
        join(goldenDir, 'tiny-walkers.json'),
        `${canonicalize({ example: 'tiny-walkers', config: CONFIG, steps: 3, ...hashes[0]!, evidence_class: 'simulated', how: 'two agreeing detsim run' })}\n`,
      );

      const out = tmp('detsim-verify-out-');
      const r = verifyCli(out);
      expect(r.status, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(/grade full, verdict green/);
      const lines = jsonl(out);
      const verdict = lines[lines.length - 1]!;
      expect(verdict).toMatchObject({
        type: 'verdict',
        grade: 'full',
        verdict: 'green',
        exitCode: 0,
        evidence_class: 'simulated',
      });
      const checks = lines.slice(0, -1);
      expect(
        checks.every((c) => c.type === 'check' && typeof c.reason === 'string' && (c.reason as string).length > 0),
      ).toBe(true);
      expect(checks.map((c) => `${c.subject}/${c.check}`).sort()).toEqual([
        'detsim/table',
        'tiny-walkers/canonical',
        'tiny-walkers/field-table',
        'tiny-walkers/golden',
        'tiny-walkers/honesty',
        'tiny-walkers/physical-diff',
        'tiny-walkers/replay',
        'tiny-walkers/sensitivity',
      ]);
      expect(checks.find((c) => c.check === 'golden')).toMatchObject({ status: 'pass', reason: 'audit_golden_hit' });
      const md = readFileSync(join(out, 'attestation.md'), 'utf8');
      expect(md).toContain('grade: **full**');
      for (const d of ['D1', 'D2', 'D3', 'D4', 'D5', 'D6', 'D7', 'D8', 'D9', 'D10']) expect(md).toContain(`| ${d} `);
      first = { out, hash: verdict.verdict_hash as string };
    },
  );

  it(
    '[D9] verifying twice gives the same verdict_hash (ts_build and run directories differ)',
    { timeout: 240_000 },
    () => {
      const out = tmp('detsim-verify-out-');
      const r = verifyCli(out);
      expect(r.status, r.stdout + r.stderr).toBe(0);
      const [a, b] = [jsonl(first.out), jsonl(out)].map((l) => l[l.length - 1]!) as [
        Record<string, unknown>,
        Record<string, unknown>,
      ];
      expect(b.verdict_hash).toBe(first.hash);
      expect(b.ts_build).not.toBe(a.ts_build);
      const dirs = (l: Record<string, unknown>[]) => JSON.stringify(l.find((c) => c.check === 'replay')!.physical);
      expect(dirs(jsonl(out))).not.toBe(dirs(jsonl(first.out)));
    },
  );

  it('[D6] a tampered golden gives exit 1 (red) naming the golden and the hash', { timeout: 240_000 }, () => {
    const tampered = tmp('detsim-verify-golden-');
    const g = parseStrict(readFileSync(join(goldenDir, 'tiny-walkers.json'))) as { reproHash: string };
    const flipped = `${g.reproHash.slice(0, -1)}${g.reproHash.endsWith('0') ? '1' : '0'}`;
    writeFileSync(join(tampered, 'tiny-walkers.json'), `${canonicalize({ ...g, reproHash: flipped })}\n`);
    const out = tmp('detsim-verify-out-');
    const r = verifyCli(out, [], tampered);
    expect(r.status).toBe(1);
    expect(r.stdout).toContain(
      `FAIL tiny-walkers golden [audit_golden_mismatch] {"golden":"${flipped}","reproHash":"${g.reproHash}","steps":3}`,
    );
    expect(jsonl(out).pop()).toMatchObject({ verdict: 'red', exitCode: 1 });
  });

  it(
    '[D6] a changed behaviour digest gives exit 1 (red) even when the ReproHash was re-frozen',
    { timeout: 240_000 },
    () => {
      const refrozen = tmp('detsim-verify-golden-');
      const g = parseStrict(readFileSync(join(goldenDir, 'tiny-walkers.json'))) as { behaviourDigest: string };
      const other = `${g.behaviourDigest.slice(0, -1)}${g.behaviourDigest.endsWith('0') ? '1' : '0'}`;
      writeFileSync(join(refrozen, 'tiny-walkers.json'), `${canonicalize({ ...g, behaviourDigest: other })}\n`);
      const out = tmp('detsim-verify-out-');
      const r = verifyCli(out, [], refrozen);
      expect(r.status).toBe(1);
      expect(r.stdout).toContain(
        `FAIL tiny-walkers golden [audit_golden_mismatch] {"field":"behaviourDigest","golden":"${other}","behaviourDigest":"${g.behaviourDigest}","steps":3}`,
      );
      expect(jsonl(out).pop()).toMatchObject({ verdict: 'red', exitCode: 1 });
    },
  );

  it(
    '[D6] --update-goldens adds the behaviour digest to a golden frozen without one, saying so',
    { timeout: 240_000 },
    () => {
      const old = tmp('detsim-verify-golden-');
      const g = parseStrict(readFileSync(join(goldenDir, 'tiny-walkers.json'))) as {
        behaviourDigest: string;
        reproHash: string;
      };
      const { behaviourDigest, ...withoutBehaviour } = g;
      writeFileSync(join(old, 'tiny-walkers.json'), `${canonicalize(withoutBehaviour)}\n`);
      // Without --update-goldens such a golden is refused, naming the file and the field.
      const refused = verifyCli(tmp('detsim-verify-out-'), [], old);
      expect(refused.status).toBe(2);
      expect(refused.stderr).toMatch(/\[struct_missing_field\] .*tiny-walkers\.json: behaviourDigest is missing/);
      const r = verifyCli(tmp('detsim-verify-out-'), ['--update-goldens'], old);
      expect(r.status, r.stdout + r.stderr).toBe(0);
      expect(r.stderr).toContain(`← ${g.reproHash}, behaviour ${behaviourDigest} (behaviour digest first frozen)`); // progress goes to stderr
      expect(parseStrict(readFileSync(join(old, 'tiny-walkers.json')))).toMatchObject({
        reproHash: g.reproHash,
        behaviourDigest,
      });
    },
  );

  it('[D1] an unclassified field gives exit 2 (yellow), counted and named', { timeout: 240_000 }, () => {
    const dir = tmp('detsim-verify-table-');
    mkdirSync(dir, { recursive: true });
    const file = join(dir, 'table.json');
    // A newer coordinator's field the table does not know yet (here: a physical one, so the golden still hits).
    writeFileSync(file, JSON.stringify(FIELD_TABLE.filter((r) => r.path !== 'summary.wallTimeMs')));
    const out = tmp('detsim-verify-out-');
    const r = verifyCli(out, ['--field-table', file]);
    expect(r.status, r.stdout + r.stderr).toBe(2);
    expect(r.stdout).toContain(
      'WARN tiny-walkers field-table [meta_unclassified_field] {"unknown":[{"path":"summary.wallTimeMs","count":2}]}',
    );
    expect(r.stdout).not.toMatch(/FAIL/);
    expect(jsonl(out).pop()).toMatchObject({ verdict: 'yellow', exitCode: 2 });
    expect(existsSync(join(out, 'attestation.md'))).toBe(true);
  });
});
