// Predictions before replay, end to end through the built CLI on lif-pair (60 steps, its golden):
// `verify --predict` ledgers the golden's values before any run and the evidence after, and the
// attestation shows prediction, outcome and their order (green); a doctored golden is refuted (red)
// naming expected and observed, its prediction still first; `replay <run-dir> --predict` predicts
// from the receipt; a config without a golden is "no prediction" (verify: yellow; replay: refused);
// and `ledger verify` refuses a tampered, removed, reordered or re-chained prediction entry, and a
// ledger re-chained whole through the attestation that records it.
import { spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { canonicalize, parseStrict, sha256Hex } from '../../core/formats/canonical-json.js';
import { LEDGER_GENESIS } from '../../coordinator/store/ledger.js';
import { CLI_MAIN, expectCliRefusal } from '../cli-refusal.js';

const CONFIG = join('examples', 'lif-pair.yaml');
const GOLDEN_FILE = join('fixtures', 'golden', 'lif-pair.json');
const GOLDEN = parseStrict(readFileSync(GOLDEN_FILE)) as { reproHash: string; behaviourDigest: string; steps: number };
const tmp = (p: string) => mkdtempSync(join(tmpdir(), p));
const runsDir = tmp('detsim-predict-runs-');

type Obj = Record<string, any>;

function detsim(args: string[]) {
  return spawnSync(process.execPath, [CLI_MAIN, ...args], { encoding: 'utf8', timeout: 180_000 });
}

function verifyPredict(out: string, goldenDir = join('fixtures', 'golden'), config = CONFIG) {
  return detsim([
    'verify',
    '--predict',
    '--config',
    config,
    '--golden-dir',
    goldenDir,
    '--out',
    out,
    '--runs-dir',
    runsDir,
    '--no-golden-marker',
  ]);
}

const ledgerText = (dir: string) => readFileSync(join(dir, 'ledger.jsonl'), 'utf8');
const ledgerLines = (dir: string): Obj[] =>
  ledgerText(dir)
    .split('\n')
    .filter(Boolean)
    .map((l) => parseStrict(l) as Obj);
const lineDigests = (dir: string) =>
  ledgerText(dir)
    .split('\n')
    .filter(Boolean)
    .map((l) => sha256Hex(l));
const attestation = (dir: string): Obj[] =>
  readFileSync(join(dir, 'attestation.jsonl'), 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => parseStrict(l) as Obj);
const checkOf = (dir: string, check: string) => attestation(dir).find((c) => c.check === check)!;

/**
 * Write `lines` as a ledger a forger would: seq renumbered, every `prev` recomputed, the head
 * rewritten; with `fixRefs`, each reference to an earlier line takes that line's new SHA-256.
 */
function rechain(dir: string, lines: Obj[], fixRefs = true): string[] {
  const digests: string[] = [];
  const text = lines.map((l, i) => {
    const line = structuredClone(l);
    line.seq = String(i + 1);
    line.prev = i === 0 ? LEDGER_GENESIS : digests[i - 1]!;
    const refs: Obj[] = [line.detail?.prediction, ...(line.detail?.observations ?? [])].filter(Boolean);
    for (const r of refs) if (fixRefs && Number(r.seq) <= i) r.digest = digests[Number(r.seq) - 1]!;
    const t = canonicalize(line);
    digests.push(sha256Hex(t));
    return t;
  });
  writeFileSync(join(dir, 'ledger.jsonl'), `${text.join('\n')}\n`);
  const head = { lastHash: digests.at(-1)!, ledgerVersion: 1, lines: String(lines.length) };
  writeFileSync(join(dir, 'ledger.head.json'), canonicalize(head));
  return digests;
}

/** A copy of a report directory to tamper with. */
function copyOf(dir: string): string {
  const copy = tmp('detsim-predict-tamper-');
  cpSync(dir, copy, { recursive: true });
  return copy;
}

/** `ledger verify` refused with exit 1 and exactly one line. */
function refused(dir: string): string {
  const r = detsim(['ledger', 'verify', dir]);
  expect(r.status, r.stdout + r.stderr).toBe(1);
  const lines = r.stderr.trim().split('\n');
  expect(lines, r.stderr).toHaveLength(1);
  expect(r.stdout).toBe('');
  return lines[0]!;
}

describe('detsim verify --predict (CLI, real runs)', () => {
  let green: string;
  let red: string;

  it(
    'ledgers the golden prediction before any run and the evidence after it; the attestation shows prediction, outcome and order (green)',
    { timeout: 180_000 },
    () => {
      green = tmp('detsim-predict-out-');
      const r = verifyPredict(green);
      expect(r.status, r.stdout + r.stderr).toBe(0);
      expect(r.stdout).toMatch(/grade full, verdict green/);
      // The prediction is made (and said) before the first run starts.
      const predicted = r.stderr.indexOf('predict lif-pair: reproHash');
      expect(predicted, r.stderr).toBeGreaterThanOrEqual(0);
      expect(predicted).toBeLessThan(r.stderr.indexOf('  run 1 '));

      const lines = ledgerLines(green);
      expect(lines.map((l) => `${l.seq} ${l.event}`)).toEqual([
        '1 prediction',
        '2 observation',
        '3 observation',
        '4 evaluation',
      ]);
      const digests = lineDigests(green);
      expect(lines[0]!.detail).toMatchObject({
        subject: 'lif-pair',
        command: 'verify',
        steps: String(GOLDEN.steps),
        expected: { reproHash: GOLDEN.reproHash, behaviourDigest: GOLDEN.behaviourDigest },
        source: { kind: 'golden', file: 'lif-pair.json', sha256: sha256Hex(readFileSync(GOLDEN_FILE)) },
      });
      for (const l of lines.slice(1)) expect(l.detail.prediction).toEqual({ seq: '1', digest: digests[0] });
      expect(lines[3]!.detail).toMatchObject({ result: 'confirmed', reason: 'audit_prediction_confirmed' });

      const prediction = checkOf(green, 'prediction');
      expect(prediction).toMatchObject({ status: 'pass', reason: 'audit_prediction_confirmed', subject: 'lif-pair' });
      expect(prediction.detail.prediction).toMatchObject({
        seq: '1',
        digest: digests[0],
        expected: lines[0]!.detail.expected,
      });
      expect(prediction.detail.outcome.result).toBe('confirmed');
      expect(prediction.detail.outcome.observed.map((o: Obj) => o.reproHash)).toEqual([
        GOLDEN.reproHash,
        GOLDEN.reproHash,
      ]);
      const order = checkOf(green, 'prediction-order');
      expect(order).toMatchObject({ status: 'pass', reason: 'audit_prediction_precedes' });
      expect(order.detail.evidence.map((e: Obj) => [e.seq, e.digest])).toEqual(
        [2, 3, 4].map((s) => [String(s), digests[s - 1]]),
      );
      expect(checkOf(green, 'ledger')).toMatchObject({
        status: 'pass',
        reason: 'audit_ledger_intact',
        detail: { file: 'ledger.jsonl', lines: '4', lastHash: digests[3] },
      });
      const md = readFileSync(join(green, 'attestation.md'), 'utf8');
      expect(md).toContain('## Predictions');
      expect(md).toMatch(
        /\| lif-pair \| ReproHash `b81089a6d78ee70f`.*\| line 1 `[0-9a-f]{16}` \|.*\| pass match \| pass: line 1 < 2, 3, 4 \|/,
      );

      const ok = detsim(['ledger', 'verify', green]);
      expect(ok.status, ok.stderr).toBe(0);
      expect(ok.stdout).toContain(
        '4 line(s), hash chain intact; 1 prediction(s), each before its evidence (1 confirmed',
      );
      expect(ok.stdout).toContain(
        'attestation.jsonl records 5 of its entries (head: line 4) and its verdict_hash recomputes',
      );
    },
  );

  it(
    'the ledger holds no physical fact: a second verify --predict elsewhere gives the same ledger and verdict_hash',
    { timeout: 180_000 },
    () => {
      const again = tmp('detsim-predict-out-');
      const r = verifyPredict(again);
      expect(r.status, r.stdout + r.stderr).toBe(0);
      expect(ledgerText(again)).toBe(ledgerText(green));
      expect(attestation(again).pop()!.verdict_hash).toBe(attestation(green).pop()!.verdict_hash);
    },
  );

  it(
    'a doctored golden is refuted: red, naming expected and observed, with the prediction still ledgered first',
    { timeout: 180_000 },
    () => {
      const doctored = tmp('detsim-predict-golden-');
      cpSync(join('fixtures', 'golden'), doctored, { recursive: true });
      const g = parseStrict(readFileSync(join(doctored, 'lif-pair.json'))) as Obj;
      const flipped = `${GOLDEN.reproHash.slice(0, -1)}${GOLDEN.reproHash.endsWith('0') ? '1' : '0'}`;
      writeFileSync(join(doctored, 'lif-pair.json'), `${canonicalize({ ...g, reproHash: flipped })}\n`);
      red = tmp('detsim-predict-out-');
      const r = verifyPredict(red, doctored);
      expect(r.status, r.stdout + r.stderr).toBe(1);
      expect(r.stdout).toContain('FAIL lif-pair prediction [audit_prediction_refuted]');
      for (const run of ['1', '2'])
        expect(r.stdout).toContain(
          `{"run":"${run}","field":"reproHash","expected":"${flipped}","observed":"${GOLDEN.reproHash}"}`,
        );
      expect(attestation(red).pop()).toMatchObject({ verdict: 'red', exitCode: 1 });
      const lines = ledgerLines(red);
      expect(lines.map((l) => l.event)).toEqual(['prediction', 'observation', 'observation', 'evaluation']);
      expect(lines[0]!.detail.expected.reproHash).toBe(flipped);
      expect(lines[3]!.detail).toMatchObject({ result: 'refuted', reason: 'audit_prediction_refuted' });
      expect(checkOf(red, 'prediction-order')).toMatchObject({ status: 'pass' });
      // A refuted prediction is evidence too: the ledger itself is intact.
      const ok = detsim(['ledger', 'verify', red]);
      expect(ok.status, ok.stderr).toBe(0);
      expect(ok.stdout).toContain('(0 confirmed, 1 refuted, 0 without a prediction)');
    },
  );

  it('a configuration without a golden is recorded as "no prediction": one line, yellow', { timeout: 180_000 }, () => {
    const out = tmp('detsim-predict-out-');
    const empty = tmp('detsim-predict-golden-');
    const r = verifyPredict(out, empty, join('test', 'receipt', 'fixtures', 'tiny-walkers.yaml'));
    expect(r.status, r.stdout + r.stderr).toBe(2);
    expect(r.stderr).toContain(`predict tiny-walkers: no prediction (no golden tiny-walkers.json in ${empty})`);
    expect(r.stdout).toMatch(/^WARN tiny-walkers prediction \[meta_prediction_missing\]/m);
    expect(r.stdout).not.toMatch(/FAIL/);
    const lines = ledgerLines(out);
    expect(lines[0]).toMatchObject({
      event: 'prediction',
      detail: { expected: null, why: 'no golden tiny-walkers.json' },
    });
    expect(lines.at(-1)!.detail.result).toBe('unpredicted');
  });

  it('--predict with --update-goldens is refused before anything runs', () => {
    const out = join(tmp('detsim-predict-out-'), 'reports');
    const r = detsim(['verify', '--predict', '--update-goldens', '--config', CONFIG, '--out', out]);
    expectCliRefusal(r, 'struct_invalid_field', '--predict');
    expect(existsSync(out)).toBe(false);
  });

  describe('ledger verify refuses a doctored prediction ledger, naming the entry and the check', () => {
    it('a tampered prediction (an expected value changed)', () => {
      const dir = copyOf(green);
      writeFileSync(join(dir, 'ledger.jsonl'), ledgerText(dir).replace(GOLDEN.reproHash, '0000000000000000'));
      expect(refused(dir)).toMatch(
        /^detsim: \[audit_ledger_chain\] .*ledger\.jsonl line 1 \(prediction lif-pair\): line 1 was changed/,
      );
    });

    it('a removed prediction', () => {
      const dir = copyOf(green);
      writeFileSync(join(dir, 'ledger.jsonl'), ledgerText(dir).split('\n').slice(1).join('\n'));
      expect(refused(dir)).toMatch(
        /^detsim: \[audit_ledger_chain\] .*ledger\.jsonl line 1 \(observation lif-pair run 1\): line 1: seq is 2, expected 1: line 1 is missing \(removed\)/,
      );
    });

    it('a prediction swapped with the evidence after it', () => {
      const dir = copyOf(green);
      const [p, o, ...rest] = ledgerText(dir).split('\n');
      writeFileSync(join(dir, 'ledger.jsonl'), [o, p, ...rest].join('\n'));
      expect(refused(dir)).toMatch(
        /^detsim: \[audit_ledger_chain\] .*ledger\.jsonl line 1 \(observation lif-pair run 1\): line 1: seq is 2, expected 1: .*reordered/,
      );
    });

    it('a prediction moved after its evidence and the whole ledger re-chained', () => {
      const dir = copyOf(green);
      const [p, ...evidence] = ledgerLines(dir);
      // The evidence now names the prediction's new place; no SHA-256 can name a later line.
      for (const e of evidence) e.detail.prediction.seq = String(evidence.length + 1);
      rechain(dir, [...evidence, p!]);
      expect(refused(dir)).toMatch(
        /^detsim: \[audit_prediction_order\] .*ledger\.jsonl line 1 \(observation lif-pair run 1\): its prediction is line 4, which does not precede it/,
      );
    });

    it('a prediction changed in place and re-chained, its evaluation left as it was', () => {
      const dir = copyOf(green);
      const lines = ledgerLines(dir);
      lines[0]!.detail.expected.reproHash = '0000000000000000';
      rechain(dir, lines);
      expect(refused(dir)).toMatch(
        /^detsim: \[audit_prediction_inconsistent\] .*ledger\.jsonl line 4 \(evaluation lif-pair\): its expected values differ from those of its prediction \(line 1\)/,
      );
    });

    it('a refuted prediction forged into a confirmed one and re-chained whole: the attestation binds it, and its verdict_hash binds the attestation', () => {
      const dir = copyOf(red);
      const before = lineDigests(dir);
      const lines = ledgerLines(dir);
      // Predict what was observed, judge it confirmed: a ledger consistent in itself.
      const observed = { reproHash: GOLDEN.reproHash, behaviourDigest: GOLDEN.behaviourDigest };
      lines[0]!.detail.expected = observed;
      Object.assign(lines[3]!.detail, {
        expected: observed,
        result: 'confirmed',
        reason: 'audit_prediction_confirmed',
        mismatches: [],
      });
      const after = rechain(dir, lines);
      // The chain alone cannot tell: without the attestation the forgery passes.
      const alone = copyOf(dir);
      rmSync(join(alone, 'attestation.jsonl'));
      const pass = detsim(['ledger', 'verify', alone]);
      expect(pass.status, pass.stderr).toBe(0);
      expect(pass.stdout).toContain('(1 confirmed, 0 refuted');
      // The attestation written with the ledger records the prediction's SHA-256 (and the head).
      expect(refused(dir)).toMatch(
        new RegExp(
          `^detsim: \\[audit_attestation_ledger_mismatch\\] .*ledger\\.jsonl line 1 \\(prediction lif-pair\\): its SHA-256 is ${after[0]!.slice(0, 16)}…, attestation\\.jsonl records ${before[0]!.slice(0, 16)}…`,
        ),
      );
      // Rewriting the attestation's records to match breaks its verdict_hash.
      let text = readFileSync(join(dir, 'attestation.jsonl'), 'utf8');
      before.forEach((d, i) => (text = text.split(d).join(after[i]!)));
      writeFileSync(join(dir, 'attestation.jsonl'), text);
      expect(refused(dir)).toMatch(
        /^detsim: \[audit_verdict_hash_mismatch\] .*attestation\.jsonl: attestation\.jsonl's verdict_hash [0-9a-f]{16}… does not recompute from its lines/,
      );
    });
  });
});

describe('detsim replay --predict (CLI, real runs)', () => {
  let recorded: string;

  it(
    'replay <run-dir> --predict: predicted from its receipt, ledgered in --out, confirmed (green)',
    { timeout: 180_000 },
    () => {
      const r0 = detsim(['run', CONFIG, '--steps', '20', '--out', runsDir, '--json']);
      expect(r0.status, r0.stderr).toBe(0);
      recorded = (parseStrict(r0.stdout) as { runDir: string }).runDir;
      const receipt = parseStrict(readFileSync(join(recorded, 'receipt.json'))) as Obj;
      const out = tmp('detsim-predict-replay-');
      const r = detsim(['replay', recorded, '--predict', '--out', out, '--json']);
      expect(r.status, r.stdout + r.stderr).toBe(0);
      const j = parseStrict(r.stdout) as Obj;
      expect(j.prediction).toMatchObject({
        ledger: join(out, 'ledger.jsonl'),
        seq: '1',
        digest: lineDigests(out)[0],
        steps: 20,
        expected: { reproHash: receipt.reproHash, behaviourDigest: receipt.summary.behaviourDigest },
        source: { kind: 'receipt', sha256: sha256Hex(readFileSync(join(recorded, 'receipt.json'))) },
      });
      expect(j.outcome).toMatchObject({ result: 'confirmed', mismatches: [] });
      expect(j.outcome.evidence.map((e: Obj) => e.seq)).toEqual(['2', '3', '4']);
      expect(
        j.checks
          .filter((c: Obj) => c.check.startsWith('prediction') || c.check === 'ledger')
          .map((c: Obj) => `${c.check} ${c.status}`),
      ).toEqual(['prediction pass', 'prediction-order pass', 'ledger pass']);
      expect(ledgerLines(out).map((l) => l.event)).toEqual(['prediction', 'observation', 'observation', 'evaluation']);
      expect(detsim(['ledger', 'verify', out]).status).toBe(0);
    },
  );

  it(
    'a receipt.json whose recorded reproHash was changed predicts wrong: refuted, while its rebuilt receipt still replays',
    { timeout: 180_000 },
    () => {
      const copy = join(tmp('detsim-predict-copy-'), 'lif-pair-1');
      cpSync(recorded, copy, { recursive: true });
      const path = join(copy, 'receipt.json');
      const receipt = parseStrict(readFileSync(path)) as Obj;
      const claimed = `${receipt.reproHash.slice(0, -1)}${receipt.reproHash.endsWith('0') ? '1' : '0'}`;
      writeFileSync(path, `${canonicalize({ ...receipt, reproHash: claimed })}\n`);
      const r = detsim(['replay', copy, '--predict', '--out', tmp('detsim-predict-replay-')]);
      expect(r.status, r.stdout + r.stderr).toBe(1);
      expect(r.stdout).toMatch(/^PASS replay /m);
      expect(r.stdout).toMatch(/^ {2}outcome {3}refuted \(2 mismatch\(es\)\)/m);
      expect(r.stdout).toContain(`FAIL prediction    [audit_prediction_refuted]`);
      expect(r.stdout).toContain(`"expected":"${claimed}","field":"reproHash","observed":"${receipt.reproHash}"`);
    },
  );

  it('replay <config> --predict without a golden is refused in one line, before any run or ledger line', () => {
    const out = tmp('detsim-predict-replay-');
    const empty = tmp('detsim-predict-golden-');
    const r = detsim(['replay', CONFIG, '--predict', '--golden-dir', empty, '--out', out]);
    expectCliRefusal(r, 'meta_prediction_missing', '--predict');
    expect(r.stderr).toContain(`no golden lif-pair.json in ${empty}`);
    expect(existsSync(join(out, 'ledger.jsonl'))).toBe(false);
  });

  it("replay <config> --predict at steps other than its golden's is refused, naming --steps", () => {
    const r = detsim(['replay', CONFIG, '--predict', '--steps', '10', '--out', tmp('detsim-predict-replay-')]);
    expectCliRefusal(r, 'struct_invalid_field', '--steps');
    expect(r.stderr).toContain(`the ${GOLDEN.steps} steps the prediction (golden lif-pair.json) holds for`);
  });
});
