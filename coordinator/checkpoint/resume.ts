// `detsim resume`: continue a run directory from a checkpoint with fresh workers in a new epoch.
// Reads run.json (the recorded composition), selects and verifies a checkpoint from
// `<runDir>/store/`, checks the trace kept before the boundary against the behaviour chain the
// checkpoint recorded, launches fresh workers, restores the group (identity checks before
// staging), then steps to the run's total and rewrites summary.json for the whole run.
//
// trace.jsonl is kept consistent like this: after the restore succeeded (never before — a refused
// resume leaves the run directory untouched), trace.jsonl is rewritten durably (temp → fsync →
// rename) to exactly the lines of steps 0..k-1, and every line of the killed run beyond the
// boundary (steps k.. and a torn last line) is appended to trace.abandoned.jsonl; the ledger's
// `restored` event records the abandoned step range. New steps are appended in the new epoch.
// summary.json's behaviourDigest is taken over all lines rebased to the run's first epoch
// (EpochRebase), so it equals the uninterrupted run's. NOT the restore flow (restore.ts).
import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import { parseStrict, type JsonValue } from '../formats/canonical-json.js';
import { DetsimError } from '../formats/errors.js';
import type { Digest, Id } from '../formats/scalars.js';
import { launchFleet, type Fleet, type WorkerCommand } from '../launcher.js';
import { epochId, Lockstep } from '../lockstep.js';
import type { PlannedWorker } from '../config.js';
import { RUN_FILES, TraceWriter, writeJsonDurable } from '../run-dir.js';
import { withRunLock } from '../run-lock.js';
import { RunFailure } from '../run-failure.js';
import { SUMMARY_FORMAT } from '../run.js';
import { LEDGER_FILE } from '../store/ledger.js';
import { BehaviourDigest, EpochRebase, type TraceBehaviour, type TransitionTrace } from '../trace.js';
import { openCheckpointing, storeDirOf } from './checkpointing.js';
import { CheckpointGroup, RollingBehaviour } from './group.js';
import { restoreGroup, type RestoreReport } from './restore.js';
import { readRunRecord } from './run-record.js';
import { CheckpointRun, DEFAULT_KEEP, type CheckpointRunReport } from './run-checkpoints.js';
import { writeFileDurable } from '../durable-file.js';

export const ABANDONED_TRACE_FILE = 'trace.abandoned.jsonl';

export interface ResumeProgress {
  step: number;
  steps: number;
  elapsedMs: number;
}

export interface ResumeOptions {
  /** Restore this checkpoint instead of the store's high-water mark. */
  checkpointId?: Id;
  /** Continue up to this boundary (default: the run's recorded total). */
  steps?: number;
  /** Override the recorded checkpoint interval (0 = no checkpoints while resuming). */
  checkpointEvery?: number;
  onProgress?: (p: ResumeProgress) => void;
  onEvent?: (line: string) => void;
  signal?: AbortSignal;
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** Test hook: replace some workers' command. */
  commandFor?: (w: PlannedWorker) => WorkerCommand | undefined;
}

export interface ResumeResult {
  runDir: string;
  behaviourDigest: Digest;
  steps: number;
  checkpointId: Id;
  boundary: number;
  epoch: Id;
  abandonedSteps: number;
  checkpoints: CheckpointRunReport | null;
}

interface TraceSplit {
  kept: string[];
  keptBehaviours: TraceBehaviour[];
  abandoned: string[];
  /** Step numbers of abandoned complete lines (for the ledger). */
  abandonedSteps: bigint[];
  epochs: Set<Id>;
}

function refuse(reason: 'struct_run_record' | 'audit_trace_prefix_mismatch', message: string, field?: string): never {
  throw new DetsimError(reason, message, field);
}

/** Split trace.jsonl at the boundary: lines of steps < k are kept (must be exactly 0..k-1), the rest abandoned. */
export function splitTrace(text: string, k: bigint, path: string): TraceSplit {
  const lines = text.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  const out: TraceSplit = { kept: [], keptBehaviours: [], abandoned: [], abandonedSteps: [], epochs: new Set() };
  lines.forEach((line, i) => {
    let t: TransitionTrace;
    try {
      t = parseStrict(line) as unknown as TransitionTrace;
    } catch (e) {
      // Only the last line may be torn by a kill mid-append; anything else is damage.
      if (i === lines.length - 1) return void out.abandoned.push(line);
      refuse('audit_trace_prefix_mismatch', `${path} line ${i + 1} is not a trace line: ${(e as Error).message}`, `line ${i + 1}`);
    }
    const step = BigInt(t.behaviour.scope.step);
    out.epochs.add(t.behaviour.scope.epoch);
    if (step < k) {
      if (step !== BigInt(out.kept.length)) refuse('audit_trace_prefix_mismatch', `${path} line ${i + 1} is step ${step}, expected step ${out.kept.length}`, `line ${i + 1}`);
      out.kept.push(line);
      out.keptBehaviours.push(t.behaviour);
    } else {
      out.abandoned.push(line);
      out.abandonedSteps.push(step);
    }
  });
  if (BigInt(out.kept.length) !== k) refuse('audit_trace_prefix_mismatch', `${path} holds ${out.kept.length} steps before the checkpoint boundary ${k}; the run's trace is incomplete`, 'trace.jsonl');
  return out;
}

/** Every epoch id the run directory mentions (run.json, trace lines, ledger lines). */
function epochsSeen(runDir: string, first: Id, traceEpochs: Set<Id>): number {
  const nums = [first, ...traceEpochs].map((e) => /^e([0-9]+)$/.exec(e)?.[1]).filter((x): x is string => x !== undefined).map(Number);
  const ledger = join(runDir, LEDGER_FILE);
  if (existsSync(ledger)) for (const m of readFileSync(ledger, 'utf8').matchAll(/"epoch":"e([0-9]+)"/g)) nums.push(Number(m[1]));
  return Math.max(0, ...nums);
}

/** Resume a run directory. Throws DetsimError/CheckpointRefusal before touching it, RunFailure after. */
export async function resumeRun(runDirArg: string, opts: ResumeOptions = {}): Promise<ResumeResult> {
  const runDir = resolve(runDirArg);
  // A missing directory is refused by readRunRecord (in resumeLocked), naming it; there is nothing to lock.
  if (!existsSync(runDir)) return resumeLocked(runDir, opts);
  return withRunLock(runDir, 'detsim resume', () => resumeLocked(runDir, opts), (stale) => opts.onEvent?.(`run.lock left by ${stale.command} (pid ${stale.pid}), which is gone: taken over`));
}

async function resumeLocked(runDir: string, opts: ResumeOptions): Promise<ResumeResult> {
  const rec = readRunRecord(runDir);
  const plan = rec.plan;
  const total = opts.steps ?? rec.steps;
  if (!existsSync(join(storeDirOf(runDir), 'manifest.json'))) refuse('struct_run_record', `${storeDirOf(runDir)}: no checkpoint store (run with --checkpoint-every K to make a run resumable)`, 'store');
  const tracePath = join(runDir, RUN_FILES.trace);
  if (!existsSync(tracePath)) refuse('struct_run_record', `${tracePath}: missing`, 'trace.jsonl');

  const ck = await openCheckpointing(runDir, { keep: DEFAULT_KEEP });
  const record = ck.store.select(opts.checkpointId);
  const k = BigInt(record.boundary);
  if (BigInt(total) < k) refuse('struct_run_record', `--steps ${total} is before the checkpoint boundary ${k} of ${record.checkpointId}`, '--steps');
  const split = splitTrace(readFileSync(tracePath, 'utf8'), k, tracePath);
  const baseEpoch = split.keptBehaviours[0]?.scope.epoch ?? rec.epoch;
  const chain = new RollingBehaviour(baseEpoch);
  for (const b of split.keptBehaviours) chain.add(b);
  const epoch = epochId(epochsSeen(runDir, rec.epoch, split.epochs) + 1);
  const runEvent = lastRunEvent(runDir);
  const every = opts.checkpointEvery ?? runEvent.every;

  const dest = pino.destination({ dest: join(runDir, RUN_FILES.log), sync: true, append: true });
  const logger: Logger = pino({ level: opts.logLevel ?? 'info', base: { sessionId: plan.sessionId } }, dest);
  const startedAt = process.hrtime.bigint();
  const startedWall = Date.now();
  const controller = new AbortController();
  const onAbort = () => controller.abort();
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  logger.info({ checkpointId: record.checkpointId, boundary: record.boundary, epoch, total }, 'resume started');

  let fleet: Fleet | undefined;
  let traces: TraceWriter | undefined;
  let failure: RunFailure | undefined;
  let restored: RestoreReport | undefined;
  let checkpoints: CheckpointRun | undefined;
  const digest = new BehaviourDigest();
  let done = Number(k);
  try {
    fleet = await launchFleet(plan, { logger, signal: controller.signal, commandFor: opts.commandFor, storeDir: storeDirOf(runDir) });
    // Fresh workers hold no epoch yet; the loop starts in the checkpoint's epoch and the restore moves it to the new one.
    const lockstep = new Lockstep(plan, fleet, { dispatch: rec.dispatch, epoch: record.epoch, startedAt, logger, signal: controller.signal });
    lockstep.identities = rec.identities;
    const group = new CheckpointGroup({ plan, fleet, lockstep, logger, writer: ck.writer, ledger: ck.ledger, baseEpoch });
    const ledgerDetail: Record<string, JsonValue> = { tornLines: String(split.abandoned.length - split.abandonedSteps.length) };
    if (split.abandonedSteps.length > 0) ledgerDetail.abandonedSteps = { from: split.abandonedSteps[0]!.toString(), to: split.abandonedSteps[split.abandonedSteps.length - 1]!.toString() };
    restored = await restoreGroup(group, { store: ck.store, checkpointId: record.checkpointId }, { epoch, expectBehaviour: chain.prefix(), ledgerDetail });
    // The restore succeeded: only now is the run directory's trace cut back to the boundary.
    if (split.abandoned.length > 0) appendFileSync(join(runDir, ABANDONED_TRACE_FILE), `${split.abandoned.join('\n')}\n`);
    writeFileDurable(join(runDir, RUN_FILES.trace), split.kept.length > 0 ? `${split.kept.join('\n')}\n` : '');
    for (const b of split.keptBehaviours) digest.add(rebase(b, baseEpoch));
    group.resume();
    logger.info({ restored: { checkpointId: restored.checkpointId, boundary: String(restored.boundary), epoch, abandoned: split.abandoned.length } }, 'restored');

    traces = new TraceWriter(tracePath);
    if (every > 0) {
      checkpoints = new CheckpointRun({ every, keep: runEvent.keep, baseEpoch, ...(opts.onEvent ? { onEvent: opts.onEvent } : {}) });
      checkpoints.attach({ plan, runDir, fleet, lockstep, traces, logger, epoch, steps: total, signal: controller.signal }, group, ck);
      await ck.ledger.append({ event: 'run', epoch, sessionId: plan.sessionId, boundary: k.toString(), detail: { checkpointEvery: String(every), keep: String(runEvent.keep), policy: 'continue', steps: String(total), resumedFrom: record.checkpointId } });
    }
    opts.onProgress?.({ step: done, steps: total, elapsedMs: 0 });
    while (done < total) {
      if (controller.signal.aborted) throw new RunFailure('aborted', 'the resume was interrupted', { step: String(done), phase: 'prepare' });
      const trace = await group.step();
      traces.append(trace);
      digest.add(rebase(trace.behaviour, baseEpoch));
      done++;
      await checkpoints?.maybeCapture();
      opts.onProgress?.({ step: done, steps: total, elapsedMs: Date.now() - startedWall });
    }
  } catch (e) {
    if (!restored) {
      // Refused before anything in the run directory changed: stop the workers and pass the refusal on.
      await fleet?.shutdown('run-failed', 500);
      opts.signal?.removeEventListener('abort', onAbort);
      dest.flushSync();
      throw e;
    }
    failure = e instanceof RunFailure ? e : new RunFailure('protocol', e instanceof Error ? e.message : String(e), { phase: 'prepare', step: String(done) });
    logger.error({ failure: failure.toJSON() }, 'resume failed');
  } finally {
    opts.signal?.removeEventListener('abort', onAbort);
    await fleet?.shutdown(failure ? 'run-failed' : 'run-complete', failure ? 500 : 2_000);
    traces?.close();
  }
  const extra = checkpoints ? await checkpoints.finish(failure) : {};
  await ck.ledger.flush().catch(() => undefined);
  const summary = {
    format: SUMMARY_FORMAT,
    sessionId: plan.sessionId,
    status: failure ? (failure.kind === 'aborted' ? 'aborted' : 'failed') : 'completed',
    stepsPlanned: total,
    stepsDone: done,
    epoch: baseEpoch,
    behaviourDigest: digest.digest(),
    behaviourDigestAlgorithm: `sha256 over canonical(behaviour)+"\\n" per step, in step order, each rebased to epoch ${baseEpoch} (EpochRebase)`,
    failure: failure ? failure.toJSON() : null,
    wallTimeMs: Date.now() - startedWall,
    resume: {
      checkpointId: restored!.checkpointId,
      boundary: restored!.boundary.toString(),
      fromEpoch: restored!.fromEpoch,
      epoch,
      abandonedLines: split.abandoned.length,
      abandonedFile: split.abandoned.length > 0 ? ABANDONED_TRACE_FILE : null,
    },
    ...extra,
  };
  writeJsonDurable(runDir, RUN_FILES.summary, summary);
  logger.info({ summary }, 'resume finished');
  dest.flushSync();
  if (failure) {
    failure.runDir = runDir;
    throw failure;
  }
  return {
    runDir,
    behaviourDigest: summary.behaviourDigest,
    steps: done,
    checkpointId: restored!.checkpointId,
    boundary: Number(restored!.boundary),
    epoch,
    abandonedSteps: split.abandonedSteps.length,
    checkpoints: checkpoints?.result ?? null,
  };
}

function rebase(b: TraceBehaviour, base: Id): TraceBehaviour {
  return b.scope.epoch === base ? b : new EpochRebase(b.scope.epoch, base).apply(b);
}

/** The checkpoint interval and keep count the run recorded in its ledger (the last `run` event). */
function lastRunEvent(runDir: string): { every: number; keep: number } {
  let every = 0;
  let keep = DEFAULT_KEEP;
  for (const line of readFileSync(join(runDir, LEDGER_FILE), 'utf8').split('\n')) {
    if (!line.includes('"event":"run"')) continue;
    try {
      const d = (JSON.parse(line) as { detail?: { checkpointEvery?: string; keep?: string } }).detail;
      if (d?.checkpointEvery) every = Number(d.checkpointEvery);
      if (d?.keep) keep = Number(d.keep);
    } catch {
      // a torn last line carries nothing
    }
  }
  return { every, keep };
}

