// `detsim verify` as a library function: the single entry that runs every DIFF=0 check (field
// table, canonical form, replay, sensitivity, physical diff, goldens, golden marker, honesty) on
// the given configurations and writes the attestation; with `predict`, first ledgers what each
// configuration's golden predicts (prediction.ts). Judging and rendering are attestation.ts.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join, relative } from 'node:path';
import type { RunPlan } from '../config.js';
import { loadConfig } from '../config.js';
import { DetsimError } from '../../core/formats/errors.js';
import { type Attestation, buildAttestation, checkAttestationWritable, writeAttestation } from './attestation.js';
import { conformanceRecord } from './conformance.js';
import { FIELD_TABLE, type FieldRule, validateFieldTable } from '../receipt/fields.js';
import {
  DEFAULT_GOLDEN_DIR,
  type Golden,
  exampleName,
  goldenCheck,
  parseJsonFile,
  readGolden,
  writeGolden,
} from './goldens.js';
import type { Receipt } from '../receipt/receipt.js';
import { materialize, type ReceiptView } from '../receipt/receipt-view.js';
import { type OpenPrediction, PredictionLedger, predictionFromGolden } from './prediction.js';
import { type Check, makeCheck, replay } from './replay.js';
import { reproHash } from '../receipt/reprohash.js';

/** Options of {@link verify}. */
export interface VerifyOptions {
  /** Config files; default every examples/*.yaml|yml|json, sorted. */
  readonly configs?: readonly string[];
  /** Where attestation.md/.jsonl go (default reports). */
  readonly outDir?: string;
  /** Parent of the replay run directories (default runs/verify). */
  readonly runsDir?: string;
  readonly goldenDir?: string;
  /** Fresh runs per configuration (≥ 2, default 2). */
  readonly runs?: number;
  /** Steps for configurations without a golden value (default: the config's own). */
  readonly steps?: number;
  /** Write goldens for configurations whose runs agree (never when they do not). */
  readonly updateGoldens?: boolean;
  readonly table?: readonly FieldRule[];
  /** false disables stripping (only to prove the physical-diff check can fail). */
  readonly stripPhysical?: boolean;
  /** Run the [golden] commit-marker guard when in a git checkout (default true). */
  readonly goldenMarker?: boolean;
  readonly onProgress?: (line: string) => void;
  /** ts_build (physical); default now. */
  readonly tsBuild?: string;
  /**
   * Before any replay, append each configuration's prediction (its golden's ReproHash and behaviour
   * digest) to `<outDir>/ledger.jsonl`; then its evidence; the attestation judges both (prediction.ts).
   */
  readonly predict?: boolean;
  /** The conformance file to record (conformance.ts); default reports/conformance.json when it exists. */
  readonly conformance?: string;
}

/** What {@link verify} wrote: the attestation and the paths of attestation.md and attestation.jsonl. */
export interface VerifyResult {
  readonly attestation: Attestation;
  readonly files: { md: string; jsonl: string };
}

export function defaultConfigs(dir = 'examples'): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => /\.(ya?ml|json)$/.test(f))
    .sort()
    .map((f) => join(dir, f));
}

export function tableCheck(table: readonly FieldRule[]): Check {
  const problems = validateFieldTable(table);
  return problems.length === 0
    ? makeCheck('table', 'detsim', 'pass', 'meta_field_table_ok', { rows: table.length })
    : makeCheck('table', 'detsim', 'fail', 'meta_field_table_invalid', { problems });
}

/** R2/R3 on a real receipt: reordered lists and float jitter below the precision keep the hash. */
export function canonicalCheck(subject: string, receipt: Receipt, table?: readonly FieldRule[]): Check {
  const opts = { table };
  const h0 = reproHash(receipt, opts).reproHash;
  const reordered = structuredClone(receipt) as unknown as {
    run: { agents: unknown[] };
    steps: { behaviour: { agents: unknown[]; rewards: unknown[] } }[];
  };
  reordered.steps.reverse();
  for (const s of reordered.steps) {
    s.behaviour?.agents?.reverse();
    s.behaviour?.rewards?.reverse();
  }
  reordered.run?.agents?.reverse();
  const withParam = (v: number) => {
    const r = structuredClone(receipt) as unknown as { run: { environment: { params: Record<string, unknown> } } };
    r.run.environment.params = { ...r.run.environment.params, jitter: v };
    return reproHash(r, opts).reproHash;
  };
  const failures: string[] = [];
  if (reproHash(reordered, opts).reproHash !== h0)
    failures.push('R2: reordering steps, agents and rewards changed the hash');
  if (withParam(0.1 + 0.2) !== withParam(0.3))
    failures.push('R3: 0.1+0.2 and 0.3 hash differently at the default precision');
  if (withParam(-0) !== withParam(0)) failures.push('R3: -0 and 0 hash differently');
  if (withParam(0.3) === withParam(0.4)) failures.push('R3: 0.3 and 0.4 hash the same (numbers do not reach the hash)');
  return failures.length === 0
    ? makeCheck('canonical', subject, 'pass', 'audit_canonical_ok', { probes: 4 })
    : makeCheck('canonical', subject, 'fail', 'audit_canonical_failed', { failures });
}

/**
 * A classification table file (`--field-table`): the `fields` array of `detsim fields --json`, or
 * the array alone. Every refusal names the file; each row must have a string path and class (the
 * table check then judges the rows' meaning).
 */
export function readFieldTableFile(file: string): FieldRule[] {
  const refuse = (why: string): never => {
    throw new DetsimError('struct_invalid_field', `--field-table: ${file}: ${why}`, '--field-table');
  };
  let v: unknown;
  try {
    v = parseJsonFile(file);
  } catch (e) {
    if (e instanceof DetsimError) throw new DetsimError(e.reason, `--field-table: ${e.message}`, '--field-table');
    if (typeof (e as NodeJS.ErrnoException).code === 'string')
      refuse(`cannot be read (${(e as NodeJS.ErrnoException).code})`);
    throw e;
  }
  const rows = Array.isArray(v)
    ? v
    : v !== null && typeof v === 'object'
      ? (v as { fields?: unknown }).fields
      : undefined;
  if (!Array.isArray(rows)) return refuse('holds no list of fields (an array, or an object with `fields`)');
  rows.forEach((r: unknown, i) => {
    const row = r as Partial<Record<keyof FieldRule, unknown>> | null;
    if (row === null || typeof row !== 'object' || typeof row.path !== 'string' || typeof row.cls !== 'string')
      refuse(`row ${i} is not a field rule {path, cls, summary}`);
  });
  return rows as FieldRule[];
}

/** The [golden] marker guard (scripts/check-goldens.mjs) over the checkout's history. */
export function goldenMarkerCheck(root = process.cwd()): Check | null {
  const script = join(root, 'scripts', 'check-goldens.mjs');
  if (!existsSync(script) || !existsSync(join(root, '.git'))) return null;
  const r = spawnSync(process.execPath, [script], { cwd: root, encoding: 'utf8' });
  if (r.status === 0)
    return makeCheck('golden-marker', 'detsim', 'pass', 'audit_golden_marked', { guard: 'scripts/check-goldens.mjs' });
  const first = (r.stderr || r.stdout || '').split('\n').find((l) => l.length > 0) ?? `exit ${r.status}`;
  // A history the guard cannot see (a shallow clone) is its own failure, not an unmarked commit.
  const reason = first.includes('[meta_golden_history_incomplete]')
    ? 'meta_golden_history_incomplete'
    : 'audit_golden_unmarked';
  return makeCheck('golden-marker', 'detsim', 'fail', reason, { guard: 'scripts/check-goldens.mjs', message: first });
}

/** A configuration's plan; a refusal names the config file. */
function loadPlan(config: string): RunPlan {
  try {
    return loadConfig(config);
  } catch (e) {
    if (e instanceof DetsimError) throw new DetsimError(e.reason, `${config}: ${e.message}`, e.field);
    throw e;
  }
}

async function verifyConfig(
  config: string,
  opts: VerifyOptions,
  say: (l: string) => void,
  predicted?: OpenPrediction,
): Promise<Check[]> {
  const goldenDir = opts.goldenDir ?? DEFAULT_GOLDEN_DIR;
  const name = exampleName(config);
  const plan = loadPlan(config);
  // A golden's refusals name the golden file itself (goldens.ts), not the config it belongs to.
  let golden: Golden | null = readGolden(goldenDir, name, { forUpdate: opts.updateGoldens });
  const steps = golden?.steps ?? opts.steps ?? plan.steps;
  say(`verify ${name}: ${opts.runs ?? 2} fresh runs of ${steps} steps`);
  const report = await replay(plan, {
    runs: opts.runs ?? 2,
    steps,
    outDir: opts.runsDir ?? join('runs', 'verify'),
    stripPhysical: opts.stripPhysical,
    table: opts.table,
    onRun: (i, r) => {
      say(`  run ${i + 1} ${r.reproHash} ${r.dispatch} ${r.runDir}`);
      predicted?.observe(i, { ...r, behaviourDigest: behaviourDigestOf(r.receipt) });
    },
  });
  await predicted?.evaluate();
  const runDirs = report.runs.map((r) => r.runDir);
  const checks: Check[] = report.checks.map((c) =>
    c.check === 'replay' ? { ...c, subject: name, physical: { runDirs } } : { ...c, subject: name },
  );
  const first = report.runs[0]!;
  // A whole receipt: the example runs are short (R2/R3 reorder every step list in a copy).
  checks.push(canonicalCheck(name, materialize(first.receipt), opts.table));
  const behaviour = behaviourDigestOf(first.receipt);
  if (opts.updateGoldens && report.stable && behaviour !== null) {
    const rel = relative(process.cwd(), config) || config;
    const g: Golden = {
      example: name,
      config: rel,
      steps,
      reproHash: first.reproHash,
      behaviourDigest: behaviour,
      evidence_class: 'simulated',
      how: `detsim verify --update-goldens: ${report.runs.length} fresh runs (${report.runs.map((r) => r.dispatch).join(', ')}) agreed`,
    };
    if (golden?.reproHash !== g.reproHash || golden.behaviourDigest !== g.behaviourDigest || golden.steps !== steps) {
      // Say whether behaviour moved: a re-freeze after a proto comment edit keeps the behaviour digest.
      const moved =
        golden === null
          ? 'new'
          : golden.behaviourDigest === ''
            ? 'behaviour digest first frozen'
            : golden.behaviourDigest === g.behaviourDigest
              ? 'behaviour unchanged'
              : `BEHAVIOUR CHANGED (was ${golden.behaviourDigest})`;
      say(`  golden ${writeGolden(goldenDir, g)} ← ${g.reproHash}, behaviour ${g.behaviourDigest} (${moved})`);
    }
    golden = g;
  }
  checks.push(goldenCheck(name, golden, first.reproHash, behaviour));
  return checks;
}

/** summary.behaviourDigest of a receipt, or null when the run wrote none. */
function behaviourDigestOf(receipt: ReceiptView): string | null {
  const summary = receipt.head.summary as { behaviourDigest?: unknown } | null;
  return typeof summary?.behaviourDigest === 'string' ? summary.behaviourDigest : null;
}

/**
 * Before any replay: append one prediction per configuration (its golden's values, or "no
 * prediction" when it has none) to `<outDir>/ledger.jsonl`, each durable before the first run.
 */
async function predictAll(
  configs: readonly string[],
  opts: VerifyOptions,
  say: (l: string) => void,
): Promise<{ ledger: PredictionLedger; open: OpenPrediction[] }> {
  const goldenDir = opts.goldenDir ?? DEFAULT_GOLDEN_DIR;
  const bases = configs.map((config) => {
    const plan = loadPlan(config);
    const name = exampleName(config);
    const base = { subject: name, sessionId: plan.sessionId, command: 'verify' as const, runs: opts.runs ?? 2 };
    return predictionFromGolden(goldenDir, name, { ...base, steps: opts.steps ?? plan.steps });
  });
  const ledger = await PredictionLedger.open(opts.outDir ?? 'reports', 'detsim verify --predict');
  try {
    const open: OpenPrediction[] = [];
    for (const p of bases) {
      const o = await ledger.predict(p);
      say(
        p.expected
          ? `predict ${p.subject}: reproHash ${p.expected.reproHash}, behaviour ${p.expected.behaviourDigest} (${p.source!.file}) at ledger line ${o.ref.seq}`
          : `predict ${p.subject}: no prediction (${p.why} in ${goldenDir}): recorded at ledger line ${o.ref.seq}; the prediction check warns (yellow)`,
      );
      open.push(o);
    }
    return { ledger, open };
  } catch (e) {
    ledger.release();
    throw e;
  }
}

/** Run every check and write reports/attestation.md and reports/attestation.jsonl. */
export async function verify(opts: VerifyOptions = {}): Promise<VerifyResult> {
  const say = opts.onProgress ?? (() => undefined);
  if (opts.predict && opts.updateGoldens)
    throw new DetsimError(
      'struct_invalid_field',
      '--predict: cannot be combined with --update-goldens (a prediction is taken from the goldens before the runs that would rewrite them)',
      '--predict',
    );
  const configs = opts.configs && opts.configs.length > 0 ? [...opts.configs] : defaultConfigs();
  if (configs.length === 0)
    throw new DetsimError(
      'struct_missing_field',
      'no configuration to verify: give --config FILE (here is no examples/ directory, as in a checkout of detsim)',
      '--config',
    );
  for (const c of configs)
    if (!existsSync(c)) throw new DetsimError('struct_invalid_field', `--config: ${c} does not exist`, '--config');
  // An unwritable --out is refused now, not after minutes of replays.
  checkAttestationWritable(opts.outDir ?? 'reports');
  // Read now, before any replay: a bad --conformance costs no run, and later test runs cannot change it.
  const conformance = conformanceRecord(opts.conformance);
  const table = opts.table ?? FIELD_TABLE;
  const checks: Check[] = [tableCheck(table)];
  if (opts.goldenMarker !== false) {
    const m = goldenMarkerCheck();
    if (m) checks.push(m);
  }
  const book = opts.predict ? await predictAll(configs, opts, say) : null;
  try {
    for (const [i, config] of configs.entries())
      checks.push(...(await verifyConfig(config, { ...opts, table }, say, book?.open[i])));
    if (book) checks.push(...(await book.ledger.finish('detsim')));
  } finally {
    book?.ledger.release();
  }
  const attestation = { ...buildAttestation(checks, opts.tsBuild ?? new Date().toISOString()), conformance };
  const files = writeAttestation(opts.outDir ?? 'reports', attestation);
  return { attestation, files };
}
