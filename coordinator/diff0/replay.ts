// Replay (docs/spec/diff0.md "Replay"): run one configuration N ≥ 2 times, each
// with fresh worker processes (runSession), and check that the ReproHashes agree, that the hash
// is sensitive (self-check) and that stripping removed physical fields that really differed.
// A fork's run directory is replayed as it was made: the same fork of its parent (the checkpoint
// and overrides its lineage records) N times, each compared with the recorded fork.
// It does not render reports (attestation.ts) and knows nothing of goldens (goldens.ts).
import type { JsonValue } from '../../core/formats/canonical-json.js';
import { loadConfig, withEnvironmentTransport, type RunPlan, type Transport } from '../config.js';
import { planFromRunJson } from '../checkpoint/run-record.js';
import { searchDirsFor } from '../launch/model-source.js';
import { checkWorkerBinaries } from '../launch/launcher.js';
import { DetsimError } from '../../core/formats/errors.js';
import { type Check, makeCheck } from './check.js';
import type { Dispatch } from '../session/lockstep.js';
import { runSession, type RunOptions } from '../session/run.js';
import type { CanonicalOptions, UnknownField } from '../receipt/canonical.js';
import type { FieldRule } from '../receipt/fields.js';
import { type Divergence, describeDivergence, diagnoseViews } from './diagnosis.js';
import { type HonestyWarning, honestyWarnings } from '../receipt/honesty.js';
import { receiptDisagreement } from '../receipt/receipt.js';
import {
  hashView,
  runReceiptView,
  viewOf,
  type PassProgress,
  type ReceiptSource,
  type ReceiptView,
} from '../receipt/receipt-view.js';
import { type ResumeCheckResult, resumeCheck } from './resume-check.js';
import { hashWithProbes, physicalDifferences, type SensitivityProbe } from './self-checks.js';
import { existsSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { firstFreeDir, forkRun } from '../checkpoint/fork.js';
import { committedStore } from '../checkpoint/checkpointing.js';
import type { Override } from '../overrides.js';
import { readRunJson, type ForkLineageJson } from '../session/run-json.js';
import type { SessionResult } from '../session/session.js';

export { makeCheck } from './check.js';
export type { Check, CheckStatus } from './check.js';
export { physicalDifferences, sensitivityProbes, type SensitivityProbe } from './self-checks.js';

/** One fresh run of a replay, with its receipt and ReproHash. */
export interface ReplayRun {
  readonly runDir: string;
  readonly dispatch: Dispatch;
  readonly reproHash: string;
  readonly unknownFields: readonly UnknownField[];
  readonly honesty: readonly HonestyWarning[];
  /** Its receipt, rebased; the steps are read from the run's trace on each pass (receipt-view.ts). */
  readonly receipt: ReceiptView;
}

/** What {@link replay} found: the runs, whether their hashes agree, the first divergence and the checks. */
export interface ReplayReport {
  readonly subject: string;
  readonly runs: readonly ReplayRun[];
  /** The recorded run a run directory replay was compared against (null for a config). */
  readonly reference: { runDir: string; reproHash: string } | null;
  readonly stable: boolean;
  readonly divergence: Divergence | null;
  readonly sensitivity: readonly SensitivityProbe[];
  readonly checks: readonly Check[];
  /** The --resume-at comparison, when asked for. */
  readonly resume: { checkpointId: string; uninterruptedDir: string; resumedDir: string } | null;
  /** A fork's replay: the run each fresh run forked again (the parent, or `own`: the fork itself), and the checkpoint. */
  readonly fork: { parentDir: string; checkpointId: string; own: boolean } | null;
}

/** Options of {@link replay}. */
export interface ReplayOptions {
  /** Number of fresh runs, at least 2 (default 2). */
  readonly runs?: number;
  /** One mode for every run; by default the runs cycle concurrent, reversed, sequential. */
  readonly dispatch?: Dispatch;
  readonly outDir?: string;
  readonly steps?: number;
  /** Reach the workers this way (physical: the ReproHash must not change with it). */
  readonly transport?: Transport | undefined;
  /** false disables stripping of physical fields (only to prove the physical-diff check fails). */
  readonly stripPhysical?: boolean;
  /** Another classification table (to check a table change); the published one by default. */
  readonly table?: readonly FieldRule[];
  /** Also checkpoint at K, interrupt, resume in a new epoch and compare with an uninterrupted run. */
  readonly resumeAt?: number;
  readonly onRun?: (index: number, run: ReplayRun) => void;
  /** Told how far each pass over a run's trace has read (the checks read every run again). */
  readonly onPass?: PassProgress;
  /** Passed to runSession (test hooks, warnings). */
  readonly runOptions?: Omit<RunOptions, 'outDir' | 'steps' | 'dispatch'>;
  /** A fork's parent run directory (default: beside the fork, under the name its lineage records). */
  readonly parent?: string;
  /** Host the environment inline or on the workers' transport, whatever was configured (physical, like the transport). */
  readonly environmentTransport?: 'inline' | 'workers';
}

const DEFAULT_CYCLE: readonly Dispatch[] = ['concurrent', 'reversed', 'sequential'];

/** A run directory (has run.json) or a config file. */
export function isRunDir(path: string): boolean {
  return existsSync(path) && statSync(path).isDirectory() && existsSync(join(path, 'run.json'));
}

/** Rebuild the RunPlan of a recorded run from its run.json (the one rebuild, shared with resume). */
export function planFromRunRecord(runJson: unknown, runDir?: string): RunPlan {
  try {
    return planFromRunJson(runJson, runDir === undefined ? {} : { searchDirs: searchDirsFor(runDir) });
  } catch (e) {
    if (e instanceof DetsimError && !e.message.startsWith('run.json: '))
      throw new DetsimError(e.reason, `run.json: ${e.message}`, e.field);
    throw e;
  }
}

// ---------------------------------------------------------------------------------------------

/** What replayChecks found. */
export interface ReplayChecked {
  checks: Check[];
  divergence: Divergence | null;
  sensitivity: SensitivityProbe[];
  stable: boolean;
  /** The reference's ReproHash with these options (null without one): hashed once, here. */
  referenceHash: string | null;
}

/**
 * The replay checks on receipts already made (used by replay() and by tests on fixed receipts), in
 * flat memory: each receipt is hashed in one pass (the first with its sensitivity probes), two
 * receipts are diagnosed and compared for physical differences step by step.
 */
export function replayChecks(
  subject: string,
  sources: readonly ReceiptSource[],
  reference: ReceiptSource | null,
  opts: CanonicalOptions = {},
): ReplayChecked {
  const checks: Check[] = [];
  const receipts = sources.map((r) => viewOf(r));
  const probed = receipts[0] ? hashWithProbes(receipts[0], opts) : null;
  const hashed = receipts.map((r, i) => (i === 0 && probed ? probed.hash : hashView(r, opts)));
  const hashes = hashed.map((h) => h.reproHash);
  const ref = reference === null ? null : viewOf(reference);
  const all = ref ? [ref, ...receipts] : receipts;
  const referenceHash = ref ? hashView(ref, opts).reproHash : null;
  const allHashes = referenceHash !== null ? [referenceHash, ...hashes] : hashes;
  const mismatch = allHashes.findIndex((h) => h !== allHashes[0]);
  const stable = receipts.length >= 2 && mismatch < 0;
  const divergence = mismatch >= 0 ? diagnoseViews(all[0]!, all[mismatch]!, opts) : null;
  checks.push(
    stable
      ? makeCheck('replay', subject, 'pass', 'audit_replay_stable', { runs: receipts.length, reproHash: allHashes[0]! })
      : makeCheck('replay', subject, 'fail', 'audit_repro_hash_mismatch', {
          runs: receipts.length,
          reproHashes: allHashes,
          divergence: divergence ? (divergence as unknown as JsonValue) : null,
          diagnosis: divergence
            ? describeDivergence(divergence, ['first run', `run ${mismatch + 1}`])
            : receipts.length < 2
              ? 'fewer than 2 runs'
              : 'hashes differ with equal ReproCore views',
        }),
  );
  const sensitivity = probed?.probes ?? [];
  const insensitive = sensitivity.filter((p) => p.before === p.after);
  checks.push(
    sensitivity.length > 0 && insensitive.length === 0
      ? makeCheck('sensitivity', subject, 'pass', 'audit_sensitivity_ok', { fields: sensitivity.map((p) => p.field) })
      : makeCheck('sensitivity', subject, 'fail', 'audit_sensitivity_failed', {
          unchanged: insensitive.map((p) => p.field),
        }),
  );
  const diffs = receipts.length >= 2 ? physicalDifferences(receipts[0]!, receipts[1]!, opts) : [];
  checks.push(
    diffs.length > 0
      ? makeCheck(
          'physical-diff',
          subject,
          'pass',
          'audit_physical_diff_ok',
          { stripping: 'enabled' },
          { differing: diffs },
        )
      : makeCheck(
          'physical-diff',
          subject,
          'fail',
          'audit_no_physical_diff',
          { stripping: opts.stripPhysical === false ? 'disabled' : 'enabled' },
          { differing: [] },
        ),
  );
  const unknown = new Map<string, number>();
  for (const h of hashed) for (const u of h.unknownFields) unknown.set(u.path, (unknown.get(u.path) ?? 0) + u.count);
  checks.push(
    unknown.size === 0
      ? makeCheck('field-table', subject, 'pass', 'meta_field_table_ok', { unknown: 0 })
      : makeCheck('field-table', subject, 'warn', 'meta_unclassified_field', {
          unknown: [...unknown.entries()].sort().map(([path, count]) => ({ path, count })),
        }),
  );
  const honesty = receipts.flatMap((r, i) => honestyWarnings(r.head, `run ${i + 1} receipt`));
  checks.push(
    honesty.length === 0
      ? makeCheck('honesty', subject, 'pass', 'hon_evidence_ok', { receipts: receipts.length })
      : makeCheck('honesty', subject, 'warn', honesty[0]!.reason, {
          warnings: honesty.map((h) => ({ check: h.check, reason: h.reason, message: h.message })),
        }),
  );
  return { checks, divergence, sensitivity, stable, referenceHash };
}

/** What a replay runs again, and how each fresh run is made. */
interface ReplaySubject {
  subject: string;
  plan: RunPlan;
  reference: { runDir: string; receipt: ReceiptView } | null;
  fork: ForkSource | null;
}

/**
 * Where a fork's replay forks from: its parent at the lineage's checkpoint with the lineage's
 * overrides, or (`own`: the parent is not there) the fork itself at its own copy of that
 * checkpoint, which a fork of a fork's base reproduces with no overrides (fork.ts).
 */
interface ForkSource {
  parentDir: string;
  checkpointId: string;
  lineage: ForkLineageJson;
  own: boolean;
}

async function replaySubject(source: string | RunPlan, opts: ReplayOptions): Promise<ReplaySubject> {
  if (typeof source !== 'string' || !isRunDir(source)) {
    const plan = typeof source === 'string' ? loadConfig(source) : source;
    return { subject: plan.sessionId, plan, reference: null, fork: null };
  }
  // The recorded run's receipt is rebuilt from its files (a receipt.json on disk is not trusted);
  // a resumed run's later epochs are rebased onto its first (only epoch-derived fields change).
  const recorded = runReceiptView(source, opts.onPass);
  const plan = planFromRunRecord(recorded.head.run, source);
  // Before any replay starts: a model whose source changed since the recorded run is refused by name.
  checkWorkerBinaries(plan);
  const reference = { runDir: source, receipt: recorded };
  const lineage = readRunJson(recorded.head.run).fork;
  return { subject: plan.sessionId, plan, reference, fork: lineage ? await forkSource(source, lineage, opts) : null };
}

/**
 * A fork's parent: --parent, else the directory its lineage names beside the fork; without either,
 * the fork's own copy of its base checkpoint while its store still holds it; else refused by name.
 */
async function forkSource(forkDir: string, lineage: ForkLineageJson, opts: ReplayOptions): Promise<ForkSource> {
  const checkpointId = lineage.checkpoint.id;
  if (opts.resumeAt !== undefined)
    throw new DetsimError(
      'struct_invalid_field',
      `--resume-at: ${forkDir} is a fork, replayed from checkpoint ${checkpointId}; check resuming on its parent`,
      '--resume-at',
    );
  const parentDir = resolve(opts.parent ?? join(dirname(resolve(forkDir)), lineage.parent));
  if (isRunDir(parentDir)) {
    const listed = await listedCheckpoint(parentDir, checkpointId);
    const want = lineage.checkpoint;
    if (listed && (listed.envelopeDigest !== want.envelopeDigest || listed.boundary !== want.boundary))
      throw new DetsimError(
        'ident_fork_parent_mismatch',
        `--parent ${parentDir}: its checkpoint ${checkpointId} (boundary ${listed.boundary}, envelope ${listed.envelopeDigest.slice(0, 16)}…) is not the one the fork started from (boundary ${want.boundary}, envelope ${want.envelopeDigest.slice(0, 16)}…)`,
        '--parent',
      );
    // One the parent no longer lists is left to the fork, which refuses it by name before writing anything.
    return { parentDir, checkpointId, lineage, own: false };
  }
  const own = opts.parent === undefined ? await listedCheckpoint(resolve(forkDir), checkpointId) : null;
  if (own?.envelopeDigest === lineage.checkpoint.envelopeDigest)
    return { parentDir: resolve(forkDir), checkpointId, lineage, own: true };
  throw new DetsimError(
    'struct_fork_parent_missing',
    `--parent: ${forkDir} is a fork of ${lineage.parent} at checkpoint ${checkpointId}; no run directory is at ${parentDir}${opts.parent === undefined ? `, and its own store no longer holds ${checkpointId}` : ''}; give the parent with --parent <run-dir>`,
    '--parent',
  );
}

/** The store record of `checkpointId` in a run directory's store, or null. */
async function listedCheckpoint(runDir: string, checkpointId: string) {
  return (await committedStore(runDir))?.lookup(checkpointId) ?? null;
}

/** One fresh run: a session of the plan, or the recorded fork made again from its parent (or its own base). */
async function freshRun(s: ReplaySubject, opts: ReplayOptions, dispatch: Dispatch): Promise<SessionResult> {
  if (!s.fork) {
    const steps = opts.steps ?? (s.reference ? s.plan.steps : undefined);
    return runSession(s.plan, { ...opts.runOptions, outDir: opts.outDir, steps, dispatch });
  }
  const { lineage, own } = s.fork;
  const overrides: Override[] = own
    ? []
    : lineage.overrides.map((o) => ({ path: o.path, value: o.value as JsonValue }));
  if (opts.steps !== undefined) overrides.push({ path: 'steps', value: opts.steps });
  return forkRun(s.fork.parentDir, {
    ...opts.runOptions,
    checkpointId: s.fork.checkpointId,
    overrides,
    out: firstFreeDir(join(resolve(opts.outDir ?? 'runs'), `${basename(resolve(s.reference!.runDir))}-replay`)),
    dispatch,
    ...(opts.transport ? { transport: opts.transport } : {}),
    ...(opts.environmentTransport ? { environmentTransport: opts.environmentTransport } : {}),
  });
}

/** Run a configuration (file, plan or recorded run directory) N ≥ 2 times and check DIFF=0. */
export async function replay(source: string | RunPlan, opts: ReplayOptions = {}): Promise<ReplayReport> {
  const n = opts.runs ?? 2;
  if (!Number.isInteger(n) || n < 2)
    throw new DetsimError(
      'struct_invalid_field',
      `--runs: ${n} is not a whole number ≥ 2 (one run cannot show replay)`,
      '--runs',
    );
  const s = await replaySubject(source, opts);
  if (opts.transport) s.plan = { ...s.plan, transport: opts.transport };
  if (opts.environmentTransport)
    s.plan = withEnvironmentTransport(s.plan, opts.environmentTransport, '--environment-transport');
  const { subject, plan, reference } = s;
  const strip: CanonicalOptions = { stripPhysical: opts.stripPhysical, table: opts.table };
  const runs: ReplayRun[] = [];
  for (let i = 0; i < n; i++) {
    const dispatch = opts.dispatch ?? DEFAULT_CYCLE[i % DEFAULT_CYCLE.length]!;
    const result = await freshRun(s, opts, dispatch);
    // The run wrote its receipt.json as its last act (session.ts); replay hashes it with its own options.
    // receipt.json binds the trace: its steps are read back (and the binding checked) to hash with
    // these options, one pass and flat memory (the first run's pass also makes the sensitivity probes).
    // A fork's epochs are rebased onto its first, as the recorded fork's are.
    const w = result.receipt;
    const receipt = runReceiptView(result.runDir, opts.onPass);
    const h = i === 0 ? hashWithProbes(receipt, strip).hash : hashView(receipt, strip);
    const run: ReplayRun = {
      runDir: result.runDir,
      dispatch,
      reproHash: h.reproHash,
      unknownFields: h.unknownFields,
      honesty: w.honesty,
      receipt,
    };
    runs.push(run);
    opts.onRun?.(i, run);
  }
  const {
    checks,
    divergence,
    sensitivity,
    stable,
    referenceHash: recorded,
  } = replayChecks(
    subject,
    runs.map((r) => r.receipt),
    reference?.receipt ?? null,
    strip,
  );
  let resume: ResumeCheckResult | null = null;
  if (opts.resumeAt !== undefined) {
    resume = await resumeCheck(plan, opts.resumeAt, {
      outDir: opts.outDir,
      steps: opts.steps ?? plan.steps,
      canonical: strip,
      verbose: opts.runOptions?.verbose === true,
    });
    checks.push(resume.check);
  }
  // The recorded run's receipt.json must say what its files give (with the published table's stripping).
  const disagrees =
    reference && recorded !== null && opts.stripPhysical === undefined && opts.table === undefined
      ? receiptDisagreement(reference.runDir, recorded)
      : null;
  if (disagrees)
    checks.push(
      makeCheck('receipt', subject, 'fail', 'audit_report_receipt_differs', {
        file: disagrees.file,
        recorded: disagrees.recorded,
        recomputed: disagrees.recomputed,
      }),
    );
  return {
    subject,
    runs,
    reference: reference && recorded !== null ? { runDir: reference.runDir, reproHash: recorded } : null,
    stable,
    divergence: divergence ?? resume?.divergence ?? null,
    sensitivity,
    checks,
    resume: resume
      ? { checkpointId: resume.checkpointId, uninterruptedDir: resume.uninterruptedDir, resumedDir: resume.resumedDir }
      : null,
    fork: s.fork && { parentDir: s.fork.parentDir, checkpointId: s.fork.checkpointId, own: s.fork.own },
  };
}
