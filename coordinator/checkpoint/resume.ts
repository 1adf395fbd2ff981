// `detsim resume`: continue a run directory from a checkpoint with fresh workers in a new epoch.
// Reads run.json (the recorded composition), selects and verifies a checkpoint from
// `<runDir>/store/`, checks run.json against the checkpoint (seeds re-derived from masterSeed),
// the boundary against the steps and the trace kept before the boundary against the behaviour
// digest state the checkpoint recorded — all before any worker starts — then launches fresh workers,
// restores the group (identity checks again, against the live workers, before staging), steps to
// the run's total and rewrites summary.json (and receipt.json) for the whole run. The launch,
// step loop, abort wiring, summary and receipt are the session loop's (session.ts), the same as a
// run's: this file only prepares and checks the restored start.
//
// A refused resume leaves the run directory as it was: run.log is held in memory until the
// restore is accepted, and the trace cut is only staged. The trace is cut all-or-nothing
// (trace-store.ts stageSegmentedCut): before launch the segment that straddles the boundary is
// resealed with its earlier lines and the new index written and fsynced as temporaries — a full
// disk refuses here, naming the file — and once the restore succeeded they are renamed into place
// and the segments beyond the boundary move to trace/abandoned-<epoch>-*. The ledger's `restored`
// event records the abandoned step range. New steps are appended in the new epoch. summary.json's
// behaviourDigest continues from the digest state at the boundary over steps rebased to the run's
// first epoch (EpochRebase), so it equals the uninterrupted run's. A run of an older detsim
// (trace.jsonl) is refused by name. A write that fails after the restore ends the resume as an io
// failure naming the file. NOT the restore flow (restore.ts).
import { existsSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { parseExpectedCanonical, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import type { Id } from '../../core/formats/scalars.js';
import type { WorkerCommand } from '../launch/launcher.js';
import { epochId, type Dispatch } from '../session/lockstep.js';
import {
  IN_COORDINATOR,
  withEnvironmentTransport,
  type LauncherKind,
  type PlannedWorker,
  type RunPlan,
  type Transport,
} from '../config.js';
import { readLaunchFacts, relaunchPlan } from '../launch/launch-facts.js';
import { findExistingWorkers } from '../session/run.js';
import { checkSlurmLauncher } from '../slurm/srun.js';
import { checkWorkerTls } from '../launch/tls.js';
import { RUN_FILES, RunLog } from '../session/run-dir.js';
import { runLockHeld, withRunLock } from '../session/run-lock.js';
import {
  runLoop,
  type RunProgress,
  type SessionOptions,
  type SessionRecovery,
  type SessionResult,
  type SessionStart,
} from '../session/session.js';
import { LEDGER_FILE } from '../store/ledger.js';
import { canonicalBehaviour, EpochRebase, type TransitionTrace } from '../trace/trace.js';
import {
  publishSegmentedCut,
  SegmentedTraceWriter,
  stageSegmentedCut,
  TRACE_DIR,
  TRACE_INDEX,
  TRACE_JSONL,
  traceFormatOf,
  type SegmentedCut,
} from '../trace/trace-store.js';
import { openCheckpointing, storeDirOf } from './checkpointing.js';
import { CheckpointGroup } from './group.js';
import type { BehaviourPrefix } from './manifest.js';
import { checkTracePrefix, loadCheckpoint, restoreGroup, type RestoreReport } from './restore.js';
import { checkRecordedComposition } from './recorded-composition.js';
import { forkRebind } from './fork-rebind.js';
import { readRunRecord } from './run-record.js';
import { CheckpointRun, DEFAULT_KEEP, type CheckpointRunReport } from './run-checkpoints.js';
import { discardStaged } from '../durable-file.js';
import { isWriteFailure, writeFailureOfErrno } from '../write-failure.js';
import { orphanedGenerationFiles, type CheckpointStore, type GenerationRecord } from '../store/store.js';

/** Progress of a resumed run, as passed to `onProgress` (the same shape as a run's). */
export type ResumeProgress = RunProgress;

/** The session loop's options (progress, abort, SIGINT/SIGTERM, pipelining, hooks) plus what to restore. */
export interface ResumeOptions extends Omit<SessionOptions, 'extension'> {
  /** Restore this checkpoint instead of the store's high-water mark. */
  checkpointId?: Id;
  /** Continue up to this boundary (default: the run's recorded total). */
  steps?: number;
  /** Override the recorded checkpoint interval (0 = no checkpoints while resuming). */
  checkpointEvery?: number;
  /** Override the recorded number of generations the store keeps (default: the run's `--keep`). */
  keep?: number;
  /**
   * Wait for each capture to be committed before the next step, so that none is refused because the
   * writer is busy (`detsim bisect` captures after every step and needs every one).
   */
  settleEachCapture?: boolean;
  onEvent?: (line: string) => void;
  /** Reach the workers this way instead of the recorded transport (physical: the ReproHash is the same). */
  transport?: Transport;
  /** Send each phase's messages in this order instead of the recorded one (physical, like the transport). */
  dispatch?: Dispatch;
  /** Start the workers this way instead of the launcher launch.json records (physical, like the transport). */
  launcher?: LauncherKind;
  /**
   * Host the environment inline in this thread (`inline`) or on the workers' transport (`workers`)
   * instead of what launch.json records (physical, like the transport: the ReproHash is the same).
   */
  environmentTransport?: 'inline' | 'workers';
  /**
   * Find the run's model modules as for this run directory, not the one resumed: a copy resumed
   * elsewhere (`detsim bisect`'s scratch copy) looks beside the run it was copied from.
   */
  modelsBeside?: string;
  /** Test hook: replace some workers' command. */
  commandFor?: (w: PlannedWorker) => WorkerCommand | undefined;
  /** Recover lost workers from the resumed run's checkpoints (`--max-restarts N`: recovery.ts recoveryWith). */
  recover?: (checkpoints: CheckpointRun) => SessionRecovery;
}

/** The session's result (runDir, behaviourDigest over the whole run, steps, ReproHash) and what was restored. */
export interface ResumeResult extends SessionResult {
  checkpointId: Id;
  boundary: number;
  epoch: Id;
  abandonedSteps: number;
  checkpoints: CheckpointRunReport | null;
}

function refuse(reason: 'struct_run_record' | 'audit_trace_prefix_mismatch', message: string, field?: string): never {
  throw new DetsimError(reason, message, field);
}

/** The run's trace must be segments: a trace.jsonl run of an older detsim is refused by name, a missing trace as one. */
function requireSegmentedTrace(runDir: string): void {
  const format = traceFormatOf(runDir);
  if (format === 'segments') return;
  if (format === 'jsonl')
    throw new DetsimError(
      'struct_legacy_run',
      `${join(runDir, TRACE_JSONL)}: a run of an older detsim (one trace.jsonl); this detsim resumes only trace/ segments (verify, diff and replay still read it)`,
      TRACE_JSONL,
    );
  refuse('struct_run_record', `${join(runDir, TRACE_DIR, TRACE_INDEX)}: missing (the run has no trace)`, 'trace');
}

/**
 * The cut of the trace at k, staged, and the behaviour digest's state at k that the checkpoint must
 * carry (from the index's saved states and the straddling segment: no earlier segment is hashed
 * again). Refuses a trace that does not reach k.
 */
export function stageSegmentedResume(
  runDir: string,
  k: bigint,
  baseEpoch: Id,
  checkpointId: Id,
  note = 'resume refused before any worker started; nothing in the run directory changed',
): { cut: SegmentedCut; expect: BehaviourPrefix } {
  const rebasedText = (line: string) => {
    const b = (parseExpectedCanonical(line) as unknown as TransitionTrace).behaviour;
    return canonicalBehaviour(b.scope.epoch === baseEpoch ? b : new EpochRebase(b.scope.epoch, baseEpoch).apply(b));
  };
  // Every kept segment is read once and checked against its index entry, and the kept entries
  // against the index digest the capture recorded in the ledger (bench/README.md measures it); a
  // run whose ledger has none gets every kept step hashed again. The digest state then meets the checkpoint's.
  const recorded = capturedTraceIndex(runDir, checkpointId);
  const check = recorded === null ? ({ verifyKept: 'full' } as const) : keptBytesCheck(recorded, checkpointId);
  let cut: SegmentedCut;
  try {
    cut = stageSegmentedCut(runDir, k, rebasedText, check);
  } catch (e) {
    throw isWriteFailure(e) ? e.withNote(note) : e;
  }
  if (cut.keptSteps !== k) {
    discardStaged(cut.staged);
    refuse(
      'audit_trace_prefix_mismatch',
      `${join(runDir, 'trace')}: holds ${cut.keptSteps} steps before the checkpoint boundary ${k}; the run's trace is incomplete`,
      'trace',
    );
  }
  return { cut, expect: { baseEpoch, steps: k.toString(), state: cut.hashes.digest } };
}

/** The cut's check of the kept segments: their bytes, and their entries against the digest the capture recorded. */
function keptBytesCheck(recorded: string, checkpointId: Id) {
  return {
    verifyKept: 'bytes',
    keptIndexDigest: recorded,
    keptIndexSource: `${LEDGER_FILE} when ${checkpointId} was captured`,
  } as const;
}

/** Every epoch id the run directory mentions (run.json, ledger lines). */
export function epochsSeen(runDir: string, first: Id): number {
  const nums = [first]
    .map((e) => /^e([0-9]+)$/.exec(e)?.[1])
    .filter((x): x is string => x !== undefined)
    .map(Number);
  const ledger = join(runDir, LEDGER_FILE);
  if (existsSync(ledger))
    for (const m of readFileSync(ledger, 'utf8').matchAll(/"epoch":"e([0-9]+)"/g)) nums.push(Number(m[1]));
  return Math.max(0, ...nums);
}

/**
 * The plan a resume launches: run.json's composition, started the way launch.json records (launcher,
 * placement, TLS, inline environment; `--launcher`/`--transport`/`--environment-transport` override),
 * checked before anything starts.
 */
function relaunchPlanFor(runDir: string, recorded: RunPlan, opts: ResumeOptions): RunPlan {
  const relaunched = relaunchPlan(recorded, readLaunchFacts(runDir), runDir, opts.launcher);
  const plan: RunPlan = { ...relaunched, ...(opts.transport ? { transport: opts.transport } : {}) };
  // A local run on threads resumed under Slurm (--launcher slurm): srun starts processes, on Unix sockets
  // unless --transport says otherwise (the recorded transport was the local launch's, not the run's).
  if (plan.launcher?.kind === 'slurm' && !opts.transport && IN_COORDINATOR.includes(plan.transport))
    plan.transport = 'unix';
  // The recorded placement of the environment (launch.json), or --environment-transport's; checked either way.
  const recordedPlace = plan.environmentTransport === 'inline' ? 'inline' : 'workers';
  const placed = withEnvironmentTransport(plan, opts.environmentTransport ?? recordedPlace, '--environment-transport');
  checkWorkerTls(placed);
  checkSlurmLauncher(placed);
  return placed;
}

/** Resume a run directory. Throws DetsimError/CheckpointRefusal before touching it, RunFailure after. */
export async function resumeRun(runDirArg: string, opts: ResumeOptions = {}): Promise<ResumeResult> {
  const runDir = resolve(runDirArg);
  // A missing directory is refused by readRunRecord (in resumeLocked), naming it; there is nothing to lock.
  if (!existsSync(runDir)) return resumeLocked(runDir, opts);
  return withRunLock(
    runDir,
    'detsim resume',
    () => resumeLocked(runDir, opts),
    (stale) => opts.onEvent?.(`run.lock left by ${stale.command} (pid ${stale.pid}), which is gone: taken over`),
  );
}

async function resumeLocked(runDir: string, opts: ResumeOptions): Promise<ResumeResult> {
  const p = await prepareResume(runDir, opts);
  // Workers started by hand announce themselves again (launch.json recorded a rendezvous placement).
  const existingWorkers = await findExistingWorkers(p.plan, opts, opts.onEvent);
  const checkpoints =
    p.every > 0
      ? new CheckpointRun({
          every: p.every,
          keep: p.keep,
          baseEpoch: p.baseEpoch,
          resumedFrom: p.record.checkpointId,
          rebindFor: (r) => forkRebind(p.rec, r),
          ...(opts.settleEachCapture ? { settleEach: true } : {}),
          ...(opts.onEvent ? { onEvent: opts.onEvent } : {}),
        })
      : undefined;
  if (checkpoints && opts.recover) checkpoints.recovery = opts.recover(checkpoints);
  const state: { restored?: RestoreReport } = {};
  const start = resumeStart(runDir, p, checkpoints, state, opts.dispatch);
  const hooks = { ...opts.hooks, ...(opts.commandFor ? { commandFor: opts.commandFor } : {}) };
  const result = await runLoop(start, {
    ...opts,
    hooks,
    ...(checkpoints ? { extension: checkpoints } : {}),
    ...(existingWorkers ? { existingWorkers } : {}),
  });
  return {
    ...result,
    checkpointId: state.restored!.checkpointId,
    boundary: Number(state.restored!.boundary),
    epoch: p.epoch,
    abandonedSteps: p.cut.abandonedSteps,
    checkpoints: checkpoints?.result ?? null,
  };
}

/**
 * Everything a resume checks before any worker starts: the checkpoint is read and verified,
 * run.json must be its composition, the boundary must fit the steps, the trace must hold every kept
 * step unchanged and give the checkpoint's behaviour digest state. The cut trace is written (and
 * fsynced) beside the files it replaces: running out of space refuses the resume with nothing
 * changed; after the restore only renames remain. What the resume then needs.
 */
async function prepareResume(runDir: string, opts: ResumeOptions) {
  const rec = readRunRecord(runDir, opts.modelsBeside);
  const plan = relaunchPlanFor(runDir, rec.plan, opts);
  requireStore(runDir);
  requireSegmentedTrace(runDir);
  const runEvent = lastRunEvent(runDir);
  // The store rotates to the keep the run recorded (or --keep), the same the resumed run reports.
  const keep = opts.keep ?? runEvent.keep;
  const ck = await openCheckpointing(runDir, { keep });
  const record = selectCheckpoint(ck.store, opts.checkpointId, runDir);
  const loaded = await loadCheckpoint({ store: ck.store, checkpointId: record.checkpointId });
  // A fork's base checkpoint, when the fork changed params, is checked against the params it holds (fork-rebind.ts).
  const rebind = forkRebind(rec, record);
  checkRecordedComposition(
    loaded.envelope.manifest,
    rebind ? { ...rec, ...rebind.checkpointComposition } : rec,
    runDir,
  );
  const k = BigInt(record.boundary);
  const total = opts.steps ?? rec.steps;
  checkTotal(total, opts.steps !== undefined, k, record.checkpointId, runDir);
  // The trace is cut reading only the segment that straddles k (trace-store.ts).
  const { cut, expect } = stageSegmentedResume(runDir, k, rec.epoch, record.checkpointId);
  await checkTracePrefix(loaded, expect).catch((e: unknown) => {
    discardStaged(cut.staged);
    throw e;
  });
  const epoch = epochId(epochsSeen(runDir, rec.epoch) + 1);
  const every = opts.checkpointEvery ?? runEvent.every;
  if (opts.recover && every === 0)
    throw new DetsimError(
      'struct_invalid_field',
      '--max-restarts: a recovery returns to a checkpoint, and this resume takes none (the run recorded no interval, or --checkpoint-every 0)',
      '--max-restarts',
    );
  return {
    rec,
    plan,
    ck,
    record,
    loaded,
    k,
    total,
    cut,
    expect,
    baseEpoch: rec.epoch,
    epoch,
    every,
    keep,
    rebind,
  };
}

type PreparedResume = Awaited<ReturnType<typeof prepareResume>>;

/**
 * The session start of a resume: fresh workers restore the checkpoint into the new epoch, and only
 * then does the run directory change (run.log accepted, the trace cut published by renames).
 */
function resumeStart(
  runDir: string,
  p: PreparedResume,
  checkpoints: CheckpointRun | undefined,
  state: { restored?: RestoreReport },
  dispatch: Dispatch = p.rec.dispatch,
): SessionStart {
  const { rec, plan, ck, record, cut, epoch, k } = p;
  // run.log is held in memory until the restore is accepted: a refused resume leaves it untouched.
  const log = new RunLog(join(runDir, RUN_FILES.log), { deferred: true });
  return {
    kind: 'resume',
    plan,
    runDir,
    steps: p.total,
    dispatch,
    log,
    // Fresh workers hold no epoch yet; the loop starts in the checkpoint's epoch and the restore moves it to the new one.
    lockstepEpoch: record.epoch,
    epoch,
    baseEpoch: p.baseEpoch,
    keptDigest: { state: cut.hashes.digest, steps: Number(k) },
    startedFields: { checkpointId: record.checkpointId, boundary: record.boundary, epoch, total: p.total },
    storeDir: storeDirOf(runDir),
    accepted: () => state.restored !== undefined,
    begin: async ({ fleet, lockstep, logger }) => {
      lockstep.adoptIdentities(rec.identities);
      const group = new CheckpointGroup({
        plan,
        fleet,
        lockstep,
        logger,
        writer: ck.writer,
        ledger: ck.ledger,
        baseEpoch: p.baseEpoch,
        ...(checkpoints ? { behaviourAt: checkpoints.behaviourAt } : {}),
      });
      const restored = await restoreGroup(
        group,
        { store: ck.store, checkpointId: record.checkpointId, loaded: p.loaded },
        {
          epoch,
          expectBehaviour: p.expect,
          ledgerDetail: abandonedDetail(cut),
          ...(p.rebind ? { rebind: p.rebind } : {}),
        },
      );
      state.restored = restored;
      // The restore succeeded: only now does the run directory change (log, then the trace cut by renames).
      log.accept();
      publishSegmentedCut(runDir, cut, epoch);
      group.resume();
      const shown = { checkpointId: restored.checkpointId, boundary: String(restored.boundary), epoch };
      logger.info({ restored: { ...shown, abandoned: cut.abandonedSteps } }, 'restored');
      // The checkpoint extension continues on the restored group (and its store) instead of a new one.
      checkpoints?.adopt(group, ck);
      // The observations sidecar continues as the run recorded it (run.json `traceObservations`).
      return new SegmentedTraceWriter(runDir, {
        observations: rec.traceObservations,
        expectedSteps: p.total - Number(k),
      });
    },
    refused: (e) => {
      // Refused before anything in the run directory changed: drop the held log and the staged
      // trace cut, and pass the refusal on (a failed write named as one).
      log.discard();
      log.close();
      discardStaged(cut.staged);
      return writeFailureOfErrno(e) ?? e;
    },
    summaryFields: () => ({
      resume: {
        checkpointId: state.restored!.checkpointId,
        boundary: state.restored!.boundary.toString(),
        fromEpoch: state.restored!.fromEpoch,
        epoch,
        abandonedLines: cut.abandonedSteps,
        abandonedFile: cut.abandonedSteps === 0 ? null : `trace/abandoned-${epoch}-*`,
      },
    }),
    end: async () => {
      // A trace cut that was never published (its rename failed) leaves nothing behind.
      discardStaged(cut.staged);
      await ck.ledger.flush().catch(() => undefined);
    },
  };
}

/** The ledger detail of a restore: the steps of the killed run abandoned. */
function abandonedDetail(cut: SegmentedCut): Record<string, JsonValue> {
  const detail: Record<string, JsonValue> = {};
  if (cut.abandoned) detail.abandonedSteps = { from: cut.abandoned.from.toString(), to: cut.abandoned.to.toString() };
  return detail;
}

/**
 * The run must have a checkpoint store; a run that checkpoints but never committed one is told so, and
 * a run whose ledger records commits but whose store is gone (a copy without store/) is told that.
 */
function requireStore(runDir: string): void {
  const store = storeDirOf(runDir);
  if (existsSync(join(store, 'manifest.json'))) return;
  const gone = storeGone(runDir);
  if (gone !== null)
    refuse('struct_run_record', `${gone} Copy it with store/ to resume (replay and diff need no store)`, 'store');
  const damaged = storeManifestGone(runDir);
  if (damaged !== null) throw new DetsimError('audit_store_manifest_missing', damaged, 'store/manifest.json');
  if (existsSync(store) || lastRunEvent(runDir).every > 0) refuseNoCommit(runDir);
  refuse(
    'struct_run_record',
    `${store}: no checkpoint store (run with --checkpoint-every K to make a run resumable)`,
    'store',
  );
}

function refuseNoCommit(runDir: string): never {
  const every = lastRunEvent(runDir).every;
  const how = every > 0 ? `the run checkpoints every ${every} steps and ` : '';
  throw new DetsimError(
    'ident_store_empty',
    `${storeDirOf(runDir)}: no checkpoint was committed yet (${how}it stopped before its first checkpoint was committed); there is nothing to resume from`,
    'store',
  );
}

/**
 * The named checkpoint, or the last one of the run's current history: the store's high-water mark
 * unless a later resume abandoned its steps (then the last committed checkpoint it did not); an
 * empty store is "no checkpoint committed yet". A named checkpoint of abandoned steps is refused.
 */
function selectCheckpoint(store: CheckpointStore, checkpointId: Id | undefined, runDir: string): GenerationRecord {
  if (checkpointId === undefined && store.highWater() === null) refuseNoCommit(runDir);
  const abandoned = abandonedCheckpoints(runDir, store);
  if (checkpointId !== undefined) {
    refuseAbandoned(checkpointId, abandoned, store, '--checkpoint');
    return store.select(checkpointId);
  }
  const last = store
    .generations()
    .filter((g) => !abandoned.has(g.checkpointId))
    .at(-1);
  if (last !== undefined) return last;
  refuseAbandoned(store.highWater()!.checkpointId, abandoned, store, 'store');
  return store.select(undefined);
}

/** A checkpoint a restore abandoned: the restore's checkpoint and epoch, and the abandoned steps' first. */
interface Abandoned {
  restored: Id;
  epoch: Id;
}

/**
 * The run's committed checkpoints whose steps a later resume abandoned (restored from an earlier
 * boundary, the trace beyond it moved to trace/abandoned-*): by id, what abandoned them. Read from
 * the ledger's `committed` and `restored` events, in order; boundaries from the store's records.
 */
export function abandonedCheckpoints(runDir: string, store: CheckpointStore): Map<Id, Abandoned> {
  const out = new Map<Id, Abandoned>();
  const committed: Id[] = [];
  const boundary = (id: Id): bigint | null => {
    const r = store.lookup(id);
    return r === null ? null : BigInt(r.boundary);
  };
  for (const e of ledgerEvents(runDir, (line) => /"event":"(committed|restored)"/.test(line))) {
    if (typeof e.checkpointId !== 'string') continue;
    if (e.event === 'committed') committed.push(e.checkpointId);
    if (e.event !== 'restored') continue;
    // The boundary restored to: where the steps it abandoned begin (none abandoned: nothing to mark).
    const steps = e.detail?.abandonedSteps as { from?: unknown } | undefined;
    if (typeof steps?.from !== 'string' || !/^[0-9]+$/.test(steps.from)) continue;
    const from = BigInt(steps.from);
    for (const id of committed) {
      const b = boundary(id);
      if (b !== null && b > from && !out.has(id))
        out.set(id, { restored: e.checkpointId, epoch: typeof e.epoch === 'string' ? e.epoch : '?' });
    }
  }
  return out;
}

/** Refuse a checkpoint whose steps a later resume abandoned, naming the resume and what to use instead. */
export function refuseAbandoned(
  checkpointId: Id,
  abandoned: ReadonlyMap<Id, Abandoned>,
  store: CheckpointStore,
  field: string,
): void {
  const a = abandoned.get(checkpointId);
  if (a === undefined) return;
  const current = store
    .generations()
    .filter((g) => !abandoned.has(g.checkpointId))
    .map((g) => g.checkpointId);
  throw new DetsimError(
    'ident_checkpoint_unknown',
    `checkpoint ${checkpointId} belongs to steps a resume from ${a.restored} (into epoch ${a.epoch}) abandoned: their trace is in trace/abandoned-${a.epoch}-*, not this run's; use a checkpoint of its current history (${current.join(', ') || 'none committed'})`,
    field,
  );
}

/** The boundary must not lie beyond the steps to continue to; the message names where that total came from. */
function checkTotal(total: number, fromFlag: boolean, k: bigint, checkpointId: Id, runDir: string): void {
  if (BigInt(total) >= k) return;
  if (fromFlag)
    refuse(
      'struct_run_record',
      `--steps ${total} is before the boundary ${k} of checkpoint ${checkpointId}`,
      '--steps',
    );
  refuse(
    'struct_run_record',
    `checkpoint ${checkpointId} is at boundary ${k} (${join(storeDirOf(runDir), 'manifest.json')}), beyond the run's total of ${total} steps (${join(runDir, RUN_FILES.run)} steps); pass --steps N with N ≥ ${k} to continue past it`,
    'steps',
  );
}

/**
 * The trace index digest the ledger recorded for `checkpointId`, or null (none, or an older run):
 * its `captured` event's, or — in a fork's directory — the fork's opening `run` event's, which
 * carries the digest the parent's ledger recorded when that checkpoint was captured (fork.ts).
 */
export function capturedTraceIndex(runDir: string, checkpointId: Id): string | null {
  let found: string | null = null;
  const id = `"checkpointId":${JSON.stringify(checkpointId)}`;
  for (const e of ledgerEvents(runDir, (line) => line.includes(id) && /"event":"(captured|run)"/.test(line))) {
    const forked = e.event === 'run' && e.detail?.checkpointId === checkpointId;
    const captured = e.event === 'captured' && e.checkpointId === checkpointId;
    if ((forked || captured) && typeof e.detail?.traceIndex === 'string') found = e.detail.traceIndex;
  }
  return found;
}

/** A ledger line, parsed as far as the readers here look into it. */
interface LedgerLine {
  event?: unknown;
  checkpointId?: unknown;
  epoch?: unknown;
  detail?: Record<string, unknown>;
}

/** The run ledger's lines that `wanted` picks (a cheap text test before parsing), parsed; a torn line is skipped. */
function* ledgerEvents(runDir: string, wanted: (line: string) => boolean): Generator<LedgerLine> {
  const path = join(runDir, LEDGER_FILE);
  if (!existsSync(path)) return;
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!wanted(line)) continue;
    try {
      yield JSON.parse(line) as LedgerLine;
    } catch {
      // a torn last line carries nothing
    }
  }
}

/**
 * When the run's store/ is missing though its ledger records committed checkpoints (a run directory
 * copied without it), the sentence that says so; else null.
 */
export function storeGone(runDir: string): string | null {
  const store = storeDirOf(runDir);
  const last = existsSync(store) ? null : lastCommitted(runDir);
  if (last === null) return null;
  return `${store}: missing, though the run's ledger records committed checkpoints (the last ${last}): was the run copied without its store/?`;
}

/**
 * When the run's store/ is there without its manifest.json though the ledger records committed
 * checkpoints (a damaged store: its generations are unreferenced, never restore candidates), the
 * sentence that says so; else null.
 */
export function storeManifestGone(runDir: string): string | null {
  const store = storeDirOf(runDir);
  const manifest = join(store, 'manifest.json');
  if (!existsSync(store) || existsSync(manifest)) return null;
  const last = lastCommitted(runDir);
  if (last === null) return null;
  const files = orphanedGenerationFiles(store).length;
  const remain = files > 0 ? ` and ${files} generation file(s) remain beside it` : '';
  return `${manifest}: missing, though the run's ledger records committed checkpoints (the last ${last})${remain}: the store is damaged (\`detsim store verify ${runDir}\` names what is there)`;
}

/**
 * Why the run directory's receipt.json and summary.json may be of the run before its last resume:
 * a run or resume holds its lock now, or the ledger records a restore into an epoch summary.json
 * does not (that resume was killed); null when neither.
 */
export function unendedResume(runDir: string): string | null {
  if (runLockHeld(runDir))
    return `a detsim run or resume is writing it now (${join(runDir, 'run.lock')}): wait until it ends`;
  let restoredInto: unknown;
  for (const e of ledgerEvents(runDir, (line) => line.includes('"event":"restored"')))
    if (e.event === 'restored') restoredInto = e.epoch;
  if (typeof restoredInto !== 'string') return null;
  let summary: { epoch?: unknown; status?: unknown; resume?: { epoch?: unknown }; failure?: { step?: unknown } };
  try {
    summary = JSON.parse(readFileSync(join(runDir, 'summary.json'), 'utf8')) as typeof summary;
  } catch {
    return null;
  }
  // A resumed run's summary names the epoch it resumed into (resume.epoch); its epoch is the run's first.
  if ((summary.resume?.epoch ?? summary.epoch) !== restoredInto)
    return `a resume of it into epoch ${restoredInto} did not end (killed?): \`detsim resume ${runDir}\` finishes it`;
  if (summary.status === 'completed') return null;
  const at = summary.failure?.step === undefined ? '' : ` at step ${String(summary.failure.step)}`;
  return `its last resume, into epoch ${restoredInto}, ${String(summary.status)}${at} (summary.json says why): \`detsim resume ${runDir}\` tries again from its last checkpoint`;
}

/** The last checkpoint the run's ledger records as committed, or null (no ledger, none committed). */
function lastCommitted(runDir: string): Id | null {
  let last: Id | null = null;
  for (const e of ledgerEvents(runDir, (line) => line.includes('"event":"committed"')))
    if (e.event === 'committed' && typeof e.checkpointId === 'string') last = e.checkpointId;
  return last;
}

/** The checkpoint interval and keep count the run recorded in its ledger (the last `run` event). */
export function lastRunEvent(runDir: string): { every: number; keep: number } {
  let every = 0;
  let keep = DEFAULT_KEEP;
  for (const { detail: d } of ledgerEvents(runDir, (line) => line.includes('"event":"run"'))) {
    if (d?.checkpointEvery) every = Number(d.checkpointEvery);
    if (d?.keep) keep = Number(d.keep);
  }
  return { every, keep };
}
