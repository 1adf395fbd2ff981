// `detsim fork <run-dir> --checkpoint ID [--set path=value …] [--out DIR]`: a NEW run directory that
// starts from one committed checkpoint of a parent run and continues to its total steps, the
// parent left untouched. Everything is checked before anything is written: the parent's run.json,
// the checkpoint (listed in the parent's store manifest and verified in full: an uncommitted,
// missing or corrupt one is refused by name), run.json against the checkpoint, the overrides (a
// fork may set only `steps` and `deadlines.*`, each checked by the config's own schema) and --out
// (it must not exist). The fork directory is then assembled under a temporary name beside its
// final path and renamed into place whole: run.json (the parent's composition, the overrides, and
// `fork`: the lineage {parent, checkpoint {id, envelopeDigest, boundary}, overrides[, atCheckpoint]}),
// launch.json, the trace segments that hold the steps before the boundary (the segment that
// straddles it is cut by the resume, its later lines kept under trace/abandoned-*), a store holding
// that one generation (committed through the store's own protocol) and a ledger whose first line,
// `run`, names the parent and the checkpoint. Then the resume machinery (resume.ts) restores the
// checkpoint with fresh workers in a new epoch and steps on; a resume that refuses before any
// worker starts removes the fork directory again, so nothing is left half-written.
//
// What a fork may set: `steps`, `deadlines.*`, and model params (`environment.params.*`,
// `agents[i].params.*`) that the participant's model accepts on restore. Params are bound into the
// checkpoint (each payload carries them; the profile digest, workers/checks.ts profileDigest, is
// SHA-256 over {model, modelVersion, params}, and the compatibility digests cover it), so the
// checkpoint is still verified under the parent's params, which the lineage records as
// `atCheckpoint`, and only then restored with the new ones: fork-rebind.ts, which checks runtime,
// model and every changed param before anything is written. Seeds and the composition (agents,
// models, ports, workers) cannot change: the seeds' RNG states are in the payloads, and the
// checkpoint was captured from that composition; such an override is refused
// (`struct_fork_override`), naming it. A fork's own base checkpoint (still in its store) can be
// forked again: it is checked against the params it holds (the lineage's `atCheckpoint`), and the
// new fork starts from them as that fork did, so with no --set it is that fork again.
// NOT the restore (restore.ts) nor the resume's checks (resume.ts), which run on the fork as on any run.
import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  fsyncSync,
  mkdirSync,
  openSync,
  closeSync,
  readFileSync,
  renameSync,
  rmSync,
} from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { parseStrict, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import type { Id } from '../../core/formats/scalars.js';
import type { Override } from '../overrides.js';
import { fsyncDir, writeFileDurable } from '../durable-file.js';
import { RUN_FILES, checkRunsParent, writeJsonDurable } from '../session/run-dir.js';
import { LAUNCH_FILE } from '../launch/launch-facts.js';
import { Ledger } from '../store/ledger.js';
import { CheckpointStore, generationIdentityOf, generationTemp, type GenerationRecord } from '../store/store.js';
import { TRACE_DIR, TRACE_INDEX, observationsName, readTraceIndex, traceFormatOf } from '../trace/trace-store.js';
import { guardWrite } from '../write-failure.js';
import { committedStore, storeDirOf } from './checkpointing.js';
import { checkRecordedComposition } from './recorded-composition.js';
import { forkRebind, isParamOverride, rebindForFork, runJsonAtCheckpoint } from './fork-rebind.js';
import { readRunJson } from '../session/run-json.js';
import { loadCheckpoint } from './restore.js';
import {
  abandonedCheckpoints,
  capturedTraceIndex,
  epochsSeen,
  lastRunEvent,
  refuseAbandoned,
  resumeRun,
  storeGone,
  storeManifestGone,
  type ResumeOptions,
  type ResumeResult,
} from './resume.js';
import { FAILURE_POLICY } from './run-checkpoints.js';
import { epochId } from '../session/lockstep.js';
import { readRunRecord, recordedPlanWith } from './run-record.js';
import { isRunFailure } from '../session/run-failure.js';

/** The config paths a fork may set besides model params: the total to step to and the (wall-clock) deadlines. */
const FORK_SETTABLE = /^(steps|deadlines(\.(startupMs|stepMs|captureMs))?)$/;

/** What a fork is: the parent, the checkpoint, the overrides, where it goes, and how the resume runs. */
export interface ForkOptions extends Omit<ResumeOptions, 'checkpointId' | 'steps'> {
  checkpointId: Id;
  overrides?: readonly Override[];
  /** The fork's run directory (must not exist); default `<parent>-fork-<n>` beside the parent. */
  out?: string;
}

/** The resume's result, and the lineage the fork recorded. */
export interface ForkResult extends ResumeResult {
  parent: string;
  lineage: JsonValue;
}

/**
 * A fork may set steps, deadlines and model params (each param then checked by fork-rebind.ts);
 * seeds and the composition are bound into the checkpoint.
 */
export function checkForkOverrides(overrides: readonly Override[], checkpointId: Id): void {
  for (const o of overrides) {
    if (FORK_SETTABLE.test(o.path) || isParamOverride(o.path)) continue;
    const refuse = (why: string): never => {
      throw new DetsimError('struct_fork_override', `--set ${o.path}: a fork cannot change it: ${why}`, o.path);
    };
    if (/(^|\.)params(\.|\[|$)/.test(o.path))
      refuse(
        `a fork sets the params of one participant: environment.params.<name> or agents[i].params.<name> (its run.json lists the agents one by one)`,
      );
    if (o.path === 'masterSeed')
      refuse(
        `the seeds are bound into checkpoint ${checkpointId} (compatibility digests) and the RNG states are in its payloads; run with \`detsim run --master-seed\` instead`,
      );
    refuse(
      `a fork keeps the parent's composition, which checkpoint ${checkpointId} was captured from; it may set only steps, deadlines.startupMs|stepMs|captureMs and model params the models accept on restore`,
    );
  }
}

/** Fork a run: check, assemble the fork directory whole, then resume it. See the file comment. */
export async function forkRun(parentArg: string, opts: ForkOptions): Promise<ForkResult> {
  const p = await prepareFork(parentArg, opts);
  await assemble(p);
  let result: ResumeResult;
  try {
    const { checkpointId: _c, overrides: _o, out: _d, ...resume } = opts;
    result = await resumeRun(p.forkDir, { ...resume, checkpointId: p.record.checkpointId });
  } catch (e) {
    // Refused before any worker started (or a write that failed in the way): the fork never began.
    if (!isRunFailure(e)) rmSync(p.forkDir, { recursive: true, force: true });
    // A fork stopped later is a run directory of its own, resumable like any.
    else e.runDir ??= p.forkDir;
    throw e;
  }
  return { ...result, parent: p.parent, lineage: p.lineage };
}

/** Every check before anything is written, and what the fork directory will hold. */
async function prepareFork(parentArg: string, opts: ForkOptions) {
  const parent = resolve(parentArg);
  const overrides = opts.overrides ?? [];
  const rec = readRunRecord(parent);
  checkForkOverrides(overrides, opts.checkpointId);
  const format = traceFormatOf(parent);
  if (format !== 'segments')
    throw new DetsimError(
      format === 'jsonl' ? 'struct_legacy_run' : 'struct_run_record',
      format === 'jsonl'
        ? `${parent}: a run of an older detsim (one trace.jsonl); a fork copies trace/ segments`
        : `${join(parent, TRACE_DIR, TRACE_INDEX)}: missing (the run has no trace)`,
      'trace',
    );
  const { store, record } = await committedCheckpoint(parent, opts.checkpointId);
  const loaded = await loadCheckpoint({ store, checkpointId: record.checkpointId });
  // A fork's own base checkpoint holds its parent's params (the lineage's atCheckpoint): checked
  // against those, and a fork of it starts from them, as that fork did.
  const base = forkRebind(rec, record);
  checkRecordedComposition(loaded.envelope.manifest, base ? { ...rec, ...base.checkpointComposition } : rec, parent);
  const plan = overrides.length > 0 ? recordedPlanWith(parent, overrides) : rec.plan;
  if (BigInt(plan.steps) < BigInt(record.boundary))
    throw new DetsimError(
      'struct_fork_override',
      `steps: ${plan.steps} is before the boundary ${record.boundary} of checkpoint ${record.checkpointId}; set --set steps=N with N ≥ ${record.boundary}`,
      'steps',
    );
  const recorded = parseStrict(readFileSync(join(parent, RUN_FILES.run))) as Record<string, JsonValue>;
  const runJson = base ? runJsonAtCheckpoint(recorded, rec.fork!.atCheckpoint!) : recorded;
  // Changed params: checked (runtime, model, each param) and their new profile digests, before anything is written.
  const { patch, atCheckpoint } = rebindForFork(readRunJson(runJson), runJson, plan, record.checkpointId, overrides);
  const forkDir = forkTarget(parent, opts.out);
  const lineage: Record<string, JsonValue> = {
    parent: basename(parent),
    checkpoint: { id: record.checkpointId, envelopeDigest: record.envelopeDigest, boundary: record.boundary },
    overrides: overrides.map((o) => ({ path: o.path, value: o.value })),
    ...(atCheckpoint ? { atCheckpoint: atCheckpoint as JsonValue } : {}),
    // A fork of a fork keeps its parent's lineage (the export's set.<path> values per step).
    ...(recorded.fork !== undefined ? { parentFork: recorded.fork } : {}),
  };
  const forkJson = { ...runJson, ...patch, steps: plan.steps, deadlines: { ...plan.deadlines }, fork: lineage };
  return { parent, forkDir, record, manifest: loaded.envelope.manifest, lineage, forkJson, baseEpoch: rec.epoch };
}

type PreparedFork = Awaited<ReturnType<typeof prepareFork>>;

/** The checkpoint, listed in the parent's committed store manifest (an unlisted or uncommitted one is refused by name). */
async function committedCheckpoint(
  parent: string,
  checkpointId: Id,
): Promise<{ store: CheckpointStore; record: GenerationRecord }> {
  const dir = storeDirOf(parent);
  const store = await committedStore(parent);
  const gone = storeGone(parent);
  if (gone !== null)
    throw new DetsimError('ident_checkpoint_unknown', `checkpoint ${checkpointId}: ${gone}`, '--checkpoint');
  const damaged = storeManifestGone(parent);
  if (damaged !== null) throw new DetsimError('audit_store_manifest_missing', damaged, 'store/manifest.json');
  if (!store)
    throw new DetsimError(
      'ident_checkpoint_unknown',
      `checkpoint ${checkpointId}: ${dir} has no committed checkpoint (the parent ran without --checkpoint-every, or committed none)`,
      '--checkpoint',
    );
  if (store.lookup(checkpointId) === null) {
    const listed = store.generations().map((g) => g.checkpointId);
    throw new DetsimError(
      'ident_checkpoint_unknown',
      `checkpoint ${checkpointId} is not committed in ${join(dir, 'manifest.json')} (committed: ${listed.join(', ') || 'none'})`,
      '--checkpoint',
    );
  }
  refuseAbandoned(checkpointId, abandonedCheckpoints(parent, store), store, '--checkpoint');
  return { store, record: store.select(checkpointId) };
}

/** The fork's run directory: --out as given (refused if it exists), else the first free `<parent>-fork-<n>`. */
function forkTarget(parent: string, out: string | undefined): string {
  if (out !== undefined) {
    const dir = resolve(out);
    if (existsSync(dir))
      throw new DetsimError(
        'perm_fork_target_exists',
        `--out ${dir}: exists; a fork is written into a new directory`,
        '--out',
      );
    checkRunsParent(dirname(dir), '--out', 'the fork');
    return dir;
  }
  return firstFreeDir(`${parent}-fork`);
}

/** `<base>-<n>` for the first n ≥ 1 that does not exist (a fork is written into a new directory). */
export function firstFreeDir(base: string): string {
  for (let n = 1; ; n++) {
    const dir = `${base}-${n}`;
    if (!existsSync(dir)) return dir;
  }
}

/**
 * Write the fork directory under a temporary name beside its final path and rename it into place
 * whole; a failure on the way removes the temporary and leaves nothing.
 */
async function assemble(p: PreparedFork): Promise<void> {
  const stage = join(dirname(p.forkDir), `.${basename(p.forkDir)}.fork-${process.pid}.tmp`);
  guardWrite(dirname(p.forkDir), () => mkdirSync(dirname(p.forkDir), { recursive: true }));
  rmSync(stage, { recursive: true, force: true });
  try {
    guardWrite(stage, () => mkdirSync(stage));
    writeJsonDurable(stage, RUN_FILES.run, p.forkJson);
    if (existsSync(join(p.parent, LAUNCH_FILE))) copyDurable(join(p.parent, LAUNCH_FILE), join(stage, LAUNCH_FILE));
    copyTracePrefix(p.parent, stage, BigInt(p.record.boundary));
    await commitGeneration(p, stage);
    await openLedger(p, stage);
    fsyncDir(stage);
    if (existsSync(p.forkDir))
      throw new DetsimError(
        'perm_fork_target_exists',
        `${p.forkDir}: appeared meanwhile; nothing was written`,
        '--out',
      );
    guardWrite(p.forkDir, () => renameSync(stage, p.forkDir));
    fsyncDir(dirname(p.forkDir));
  } catch (e) {
    rmSync(stage, { recursive: true, force: true });
    throw e;
  }
}

/** Copy a file and fsync the copy. */
function copyDurable(from: string, to: string): void {
  guardWrite(to, () => {
    copyFileSync(from, to);
    const fd = openSync(to, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  });
}

/** The parent's segments that hold steps before `k` (with their repro files and observations sidecars) and their index lines. */
function copyTracePrefix(parent: string, stage: string, k: bigint): void {
  const from = join(parent, TRACE_DIR);
  const to = join(stage, TRACE_DIR);
  guardWrite(to, () => mkdirSync(to));
  const kept = readTraceIndex(parent).filter((s) => BigInt(s.firstStep) < k);
  for (const [i, s] of kept.entries()) {
    // The parent's files as its index binds them: a refusal names the parent's file, not the copy's.
    parentFile(join(from, s.segment), s.sha256, `segment ${i} (steps from ${s.firstStep})`);
    copyDurable(join(from, s.segment), join(to, s.segment));
    if (s.repro) parentFile(join(from, s.repro.file), s.repro.sha256, `segment ${i}'s repro file`);
    if (s.repro) copyDurable(join(from, s.repro.file), join(to, s.repro.file));
    const observations = observationsName(s.segment);
    if (existsSync(join(from, observations))) copyDurable(join(from, observations), join(to, observations));
  }
  // The index lines as the parent wrote them (canonical), the kept ones only.
  const lines = readFileSync(join(from, TRACE_INDEX), 'utf8')
    .split('\n')
    .filter((l) => l.length > 0);
  writeFileDurable(
    join(to, TRACE_INDEX),
    lines
      .slice(0, kept.length)
      .map((l) => `${l}\n`)
      .join(''),
  );
  fsyncDir(to);
}

/** A parent's trace file must be there with the SHA-256 its index records, else the fork is refused naming it. */
function parentFile(path: string, sha256: string, what: string): void {
  if (!existsSync(path))
    throw new DetsimError(
      'audit_trace_segment_missing',
      `${path}: ${what} of the parent, listed in its trace index, is missing`,
      'trace',
    );
  if (createHash('sha256').update(readFileSync(path)).digest('hex') !== sha256)
    throw new DetsimError(
      'audit_trace_segment_tampered',
      `${path}: ${what} of the parent differs from the SHA-256 its trace index records`,
      'trace',
    );
}

/** The fork's store: the checkpoint's generation file copied in and committed by the store's own protocol. */
async function commitGeneration(p: PreparedFork, stage: string): Promise<void> {
  const store = await CheckpointStore.open(storeDirOf(stage), { create: true });
  copyDurable(join(storeDirOf(p.parent), p.record.file), join(store.dir, generationTemp(p.record.checkpointId)));
  // The resume verifies the copy in full against this record (envelope digest, the seven checks).
  await store.commit(generationIdentityOf(p.manifest), {
    written: true,
    byteLength: Number(p.record.byteLength),
    envelopeDigest: p.record.envelopeDigest,
  });
}

/**
 * The fork's ledger, opened with one `run` line: the parent's checkpoint interval and keep count
 * (what the resume continues with), the fork's total, and where it came from. Its epoch is the
 * parent's last, so the fork's own epochs come after every epoch its kept steps and checkpoint have.
 */
async function openLedger(p: PreparedFork, stage: string): Promise<void> {
  const ledger = await Ledger.open(stage);
  const { every, keep } = lastRunEvent(p.parent);
  // The trace index digest the parent's ledger recorded at the capture: the fork's resume checks
  // the copied segments' bytes against it, as a resume of the parent would, instead of re-hashing
  // every kept step (30 s for a fork at step 190,000 of a 16-walker run).
  const traceIndex = capturedTraceIndex(p.parent, p.record.checkpointId);
  await ledger.append({
    event: 'run',
    epoch: epochId(Math.max(1, epochsSeen(p.parent, p.baseEpoch))),
    sessionId: p.record.sessionId,
    boundary: p.record.boundary,
    detail: {
      checkpointEvery: String(every),
      keep: String(keep),
      policy: FAILURE_POLICY,
      steps: String(p.forkJson.steps),
      forkOf: basename(p.parent),
      checkpointId: p.record.checkpointId,
      ...(traceIndex === null ? {} : { traceIndex }),
    },
  });
  await ledger.flush();
}
