// The one session loop: `detsim run`, `detsim resume` and replay's runs all step through runLoop.
// A starting state says how the session begins — fresh (initialize, write run.json: run.ts) or
// restored (a group restored at boundary k with its kept trace prefix, in a new epoch:
// checkpoint/resume.ts) — and the loop does the rest the same way for both: launch the workers,
// one abort wiring (a signal, optionally SIGINT/SIGTERM), the step loop with the same extensions
// (checkpoints) and pipelining, one summary builder (with the session's wall time, rate and reward
// totals: metrics.ts), and receipt.json written as its last act.
// A file it cannot write (a full disk) ends the session as an io failure naming the file.
// NOT how a start is prepared or checked (run.ts, checkpoint/resume.ts), not the step protocol
// (lockstep.ts), not process handling (launcher.ts).
import { existsSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import type { PlannedWorker, RunPlan } from '../config.js';
import { DetsimError } from '../../core/formats/errors.js';
import type { Digest, Id } from '../../core/formats/scalars.js';
import { launchFleet, type Fleet, type LaunchOptions, type WorkerCommand } from '../launch/launcher.js';
import { Lockstep, type Dispatch, type LockstepHooks } from './lockstep.js';
import { starterForPlan } from '../slurm/srun.js';
import { RUN_FILES, writeJsonDurable, type RunLog } from './run-dir.js';
import type { TraceSink } from '../trace/trace-store.js';
import { Sha256Stream, type Sha256State } from '../trace/sha256-state.js';
import { RunFailure, type RunPhase } from './run-failure.js';
import { isWriteFailure, writeFailureOfErrno, type WriteFailure } from '../write-failure.js';
import {
  BehaviourDigest,
  canonicalBehaviour,
  EpochRebase,
  traceLine,
  type TraceBehaviour,
  type TransitionTrace,
} from '../trace/trace.js';
import { writeReceipt, type ReceiptResult } from '../receipt/receipt.js';
import { platformFingerprint, type PlatformFingerprint } from '../receipt/platform.js';
import { PACKAGE_ROOT } from '../launch/package-root.js';
import { RewardTally, rewardTotalsOnDisk, stepsPerSecond, type SessionMetrics } from './metrics.js';

export const SUMMARY_FORMAT = 'detsim-summary-v1';

/** Progress of a run or a resumed run, as passed to `onProgress`. */
export interface RunProgress {
  /** Steps completed so far (the committed boundary). */
  step: number;
  steps: number;
  /** Milliseconds since stepping began (after start-up and initialization or restore). */
  elapsedMs: number;
}

/** Test and bench hooks: per-phase callback, worker command or starter override, the launched fleet. */
export type SessionHooks = LockstepHooks & {
  commandFor?: (w: PlannedWorker) => WorkerCommand | undefined;
  /** Start some workers another way (the bench's inline ceiling hosts them in this thread). */
  startWorker?: LaunchOptions['startWorker'];
  onLaunched?: (fleet: Fleet) => void;
};

/** What a run extension sees once every participant is initialized (or restored). */
export interface RunExtensionContext {
  plan: RunPlan;
  runDir: string;
  fleet: Fleet;
  lockstep: Lockstep;
  traces: TraceSink;
  logger: Logger;
  epoch: Id;
  steps: number;
  signal: AbortSignal;
}

/**
 * A plug-in around the step loop: `started` after initialization (or restore), `afterStep` after
 * each committed step (its trace already appended), `finish` before summary.json is written (its
 * result becomes summary fields). A throw from started/afterStep fails the session like any step failure.
 */
export interface RunExtension {
  /** The store directory the workers are launched with (`--store-dir`), if the extension keeps one. */
  storeDirFor?(runDir: string): string;
  started(ctx: RunExtensionContext): Promise<void>;
  /** Whether afterStep will need every agent Ready (not prepared ahead) at this boundary, e.g. to capture it. */
  needsReadyAt?(boundary: bigint): boolean;
  afterStep(trace: TransitionTrace): Promise<void>;
  finish(failure: RunFailure | undefined): Promise<Record<string, unknown>>;
  /** Recovery from a lost worker (`--max-restarts N`, coordinator/checkpoint/recovery.ts); absent: none. */
  recovery?: SessionRecovery;
}

/** Where a recovery returns to, once it agreed to recover: the replacement workers read restores from storeDir. */
export interface RecoveryTarget {
  readonly storeDir: string;
}

/** What the loop continues from after a recovery: the new epoch, the trace steps kept, the writer for new steps. */
export interface Recovered {
  readonly epoch: Id;
  /** The behaviour digest's state after the kept steps (the trace's saved state at the boundary). */
  readonly keptDigest: { state: Sha256State; steps: number };
  readonly traces: TraceSink;
}

/**
 * Recovery from a lost worker. The session loop fences the old fleet and starts the replacement
 * through the same launcher; the recovery decides whether it may, and restores the new group.
 */
export interface SessionRecovery {
  /**
   * After a step failed: undefined when it is not a loss this recovers from (the failure stands as
   * it is), a RunFailure saying why it cannot (restarts exhausted, no committed checkpoint), or where to return.
   */
  consider(failure: RunFailure): Promise<RecoveryTarget | RunFailure | undefined>;
  /** With the replacement fleet up (its trace writer closed): restore into a new epoch, cut the trace back. */
  restore(target: RecoveryTarget, live: LiveSession & { traces: TraceSink }): Promise<Recovered>;
  /** summary.json fields: how many recoveries, and each one. */
  summaryFields(): Record<string, unknown>;
}

/** How the loop runs, whatever the start: the same options for run and resume. */
export interface SessionOptions {
  onProgress?: (p: RunProgress) => void;
  /** Abort from outside; workers are stopped and a RunFailure('aborted') is thrown. */
  signal?: AbortSignal;
  /** Turn SIGINT/SIGTERM into an abort for the duration of the session (the CLIs set this). */
  handleSignals?: boolean;
  hooks?: SessionHooks;
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** Optional plug-in around the step loop (checkpoints: coordinator/checkpoint/run-checkpoints.ts). */
  extension?: RunExtension;
  /**
   * Default true: pipeline each step's Prepare behind the previous step's Commits (lockstep
   * StepOptions.prepareNext); never past the last step nor into a boundary the extension needs
   * Ready (a capture). Behaviour traces are the same either way; it relaxes lockstep-v1's Phase D
   * rule (the next Prepare only after every Commit succeeded): when one Commit fails, agents on
   * other workers may already have prepared the next step, and the failure says so. The epoch
   * fails either way. `false`: Phase D exactly, one more dependent round trip per step.
   */
  pipeline?: boolean;
  /** `--verbose`: Python workers put a model's traceback in its failure message. */
  verbose?: boolean;
  /** Workers already running elsewhere (rendezvous), by worker id: connected to, never started nor killed. */
  existingWorkers?: LaunchOptions['existing'];
}

/** What the live session hands a start once its workers are up. */
export interface LiveSession {
  fleet: Fleet;
  lockstep: Lockstep;
  logger: Logger;
}

/** Where a session begins: a fresh initialization (run.ts) or a restored group (checkpoint/resume.ts). */
export interface SessionStart {
  /** Names the session in log lines and failure messages. */
  readonly kind: 'run' | 'resume';
  readonly plan: RunPlan;
  readonly runDir: string;
  /** The boundary to step to. */
  readonly steps: number;
  readonly dispatch: Dispatch;
  /** run.log (a restored start holds it in memory until the restore is accepted). */
  readonly log: RunLog;
  /** A trace writer opened before launch (a fresh start: a trace that cannot be created starts no worker). */
  readonly traces?: TraceSink;
  /** The epoch the lockstep starts in (a restored start: the checkpoint's; the restore moves it on). */
  readonly lockstepEpoch: Id;
  /** The epoch new steps are taken in. */
  readonly epoch: Id;
  /** The run's first epoch: summary.json's behaviourDigest is over every step rebased onto it. */
  readonly baseEpoch: Id;
  /** A restored start: the behaviour digest's saved state after the steps the trace keeps (nothing re-read). */
  readonly keptDigest?: { state: Sha256State; steps: number };
  /** Fields of the "started" log line. */
  readonly startedFields: Record<string, unknown>;
  /** The store directory the workers read restores from (a restored start). */
  readonly storeDir?: string;
  /** false while a failure (`e`) is still a refusal that must leave the run directory as it was. */
  accepted(e: unknown): boolean;
  /** Once launched: initialize and write run.json, or restore; the trace writer new steps go to. */
  begin(live: LiveSession): Promise<TraceSink>;
  /** A failure before acceptance: undo what was staged; the error to throw (or a promise of it). */
  refused(e: unknown): unknown;
  /** Summary fields this start adds (a resume block). */
  summaryFields(): Record<string, unknown>;
  /** The last work before summary.json (drop leftovers, flush the ledger). */
  end(): Promise<void>;
}

/** A finished run or resume: its directory, behaviour digest over the whole run, steps completed and the ReproHash of the receipt it wrote. */
export interface SessionResult {
  runDir: string;
  behaviourDigest: Digest;
  /** Steps completed (the boundary reached). */
  steps: number;
  /** The ReproHash of the receipt.json written as the session's last act. */
  reproHash: string;
  receipt: ReceiptResult;
  /** Wall time, mean steps/s and reward totals (also in summary.json, physical). */
  metrics: SessionMetrics;
}

/**
 * The session completed and wrote summary.json, but receipt.json could not be written: the run
 * files are complete. Carries the write failure's reason code and names the file.
 */
export class ReceiptNotWritten extends DetsimError {
  constructor(
    readonly write: WriteFailure,
    kind: SessionStart['kind'],
    readonly runDir: string,
  ) {
    super(
      write.reason,
      `${kind} completed but its receipt was not written: ${write.message}; run.json, the trace and summary.json are complete`,
      write.field,
    );
    this.name = 'ReceiptNotWritten';
  }
}

/** The session's one abort wiring: the caller's signal and, when asked, SIGINT/SIGTERM. */
export function abortWiring(opts: { signal?: AbortSignal; handleSignals?: boolean }): {
  signal: AbortSignal;
  release: () => void;
} {
  const controller = new AbortController();
  const onAbort = () => controller.abort();
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  if (opts.signal?.aborted) controller.abort();
  if (opts.handleSignals) {
    process.on('SIGINT', onAbort);
    process.on('SIGTERM', onAbort);
  }
  return {
    signal: controller.signal,
    release: () => {
      opts.signal?.removeEventListener('abort', onAbort);
      process.off('SIGINT', onAbort);
      process.off('SIGTERM', onAbort);
    },
  };
}

/** Launch options for a store directory: workers may then read restore payloads and write capture payloads there. */
function withStoreDir(storeDir: string | undefined): { storeDir?: string } {
  return storeDir ? { storeDir } : {};
}

/**
 * Run a session from its start to `start.steps`: launch, begin (initialize or restore), step,
 * write summary.json and then receipt.json. A refusal before the start is accepted is thrown as
 * the start's refusal; a failure after it is written to summary.json and thrown as a RunFailure.
 */
export async function runLoop(start: SessionStart, opts: SessionOptions): Promise<SessionResult> {
  const { plan, runDir, steps, log, kind } = start;
  const logger: Logger = pino({ level: opts.logLevel ?? 'info', base: { sessionId: plan.sessionId } }, log);
  const startedAt = process.hrtime.bigint();
  const startedWall = Date.now();
  // Steps in the trace so far; the behaviour digest itself is hashed off the loop by the trace writer.
  let done: StepCount = { steps: start.keptDigest?.steps ?? 0 };
  // Steps committed and time spent stepping in this session, and the rewards of the steps it took.
  const pace: Pace = { steps: 0, ms: 0, recovered: false, tally: new RewardTally(plan.agents.map((a) => a.agentId)) };
  const { signal, release } = abortWiring(opts);
  let fleet: Fleet | undefined;
  let traces = start.traces;
  let failure: RunFailure | undefined;
  let refusal: { e: unknown } | undefined;
  let lastEpoch = start.epoch;
  logger.info(start.startedFields, `${kind} started`);

  const launch = (storeDir: string | undefined): Promise<Fleet> =>
    launchFleet(plan, {
      logger,
      signal,
      commandFor: opts.hooks?.commandFor,
      // launcher: slurm starts each worker as an srun job step (slurm/srun.ts); a hook's starter wins.
      startWorker: opts.hooks?.startWorker ?? starterForPlan(plan, opts.verbose),
      verbose: opts.verbose,
      ...(opts.existingWorkers ? { existing: opts.existingWorkers } : {}),
      ...withStoreDir(storeDir),
    }).then((f) => (opts.hooks?.onLaunched?.(f), f));
  const lockstepOn = (f: Fleet, epoch: Id) =>
    new Lockstep(plan, f, { dispatch: start.dispatch, epoch, startedAt, logger, signal, hooks: opts.hooks });

  try {
    fleet = await launch(start.storeDir ?? opts.extension?.storeDirFor?.(runDir));
    let lockstep = lockstepOn(fleet, start.lockstepEpoch);
    traces = await start.begin({ fleet, lockstep, logger });
    let epoch = start.epoch;
    await opts.extension?.started({ plan, runDir, fleet, lockstep, traces, logger, epoch, steps, signal });
    for (;;) {
      try {
        await stepLoop(start, { lockstep, traces, logger, done, signal, epoch, pace }, opts);
        break;
      } catch (e) {
        // A lost worker: fence the old group, start replacements the same way, restore, continue.
        // Unless the death is the first sign of a Ctrl-C or scancel: never relaunch into that.
        const lost = failureOf(e, String(done.steps), 'prepare');
        await graceForInterruption(lost, signal);
        const recovery = signal.aborted ? undefined : opts.extension?.recovery;
        const target = await recovery?.consider(lost);
        if (target === undefined) throw e;
        if (target instanceof RunFailure) throw target;
        const next = await replaceGroup({ fleet, lockstep, logger, traces }, lost, recovery!, target, {
          // The replacement is the fleet to stop at the end, even if its restore fails.
          launch: async () => (fleet = await launch(target.storeDir)),
          lockstepOn,
        });
        ({ lockstep, traces, epoch } = next);
        lastEpoch = epoch;
        pace.recovered = true;
        done = { steps: next.keptDigest.steps };
      }
    }
  } catch (e) {
    if (!start.accepted(e)) refusal = { e };
    else {
      failure = await interruptedOr(failureOf(e, String(done.steps), 'prepare'), signal, kind);
      // An interrupt (Ctrl-C, SIGTERM) is not a failure: run.log (and the report's timeline) says which.
      if (failure.kind === 'aborted') logger.warn({ failure: failure.toJSON() }, `${kind} interrupted`);
      else logger.error({ failure: failure.toJSON() }, `${kind} failed`);
    }
  } finally {
    release();
    const stopped = failure ?? refusal;
    await fleet?.shutdown(stopped ? 'run-failed' : 'run-complete', stopped ? 500 : 2_000);
  }
  if (refusal) throw await start.refused(refusal.e);
  return conclude(start, opts, { failure, traces, done, epoch: lastEpoch, startedWall, logger, fleet, pace });
}

/**
 * The end of a session that began: close the trace, let the extension finish, write summary.json,
 * and (a completed one) receipt.json as the very last act; a failure is thrown with its run directory.
 */
async function conclude(
  start: SessionStart,
  opts: SessionOptions,
  s: {
    failure: RunFailure | undefined;
    traces: TraceSink | undefined;
    done: StepCount;
    epoch: Id;
    startedWall: number;
    logger: Logger;
    /** The fleet that finished the session (after a recovery, the replacement): the receipt's platform fingerprint. */
    fleet: Fleet | undefined;
    pace: Pace;
  },
): Promise<SessionResult> {
  const { runDir, log, kind } = start;
  const { logger } = s;
  let failure = await closeNotingAsync(() => s.traces?.close(), s.failure, String(s.done.steps));
  // summary.json describes the trace on disk (when the trace could not take every step, its
  // steps): the behaviour digest from the state the trace writer hashed off the loop.
  const onDisk = s.traces?.durable() ?? start.keptDigest ?? { state: new Sha256Stream().state(), steps: 0 };
  const digest = new BehaviourDigest(onDisk);
  const extensionFields = opts.extension ? await opts.extension.finish(failure) : {};
  await start.end();

  const metrics = metricsOf(start, s.pace, digest.steps, Date.now() - s.startedWall);
  const summary = summaryOf(start, { failure, digest, epoch: s.epoch, metrics, extensionFields });
  failure = writeSummary(runDir, summary, failure, String(digest.steps));
  logger.info({ summary }, `${kind} finished`);
  log.close();
  failure ??= log.failure
    ? RunFailure.ofWrite(log.failure, { step: String(digest.steps), phase: 'shutdown' })
    : undefined;
  if (failure) {
    failure.runDir = resolve(runDir);
    throw failure;
  }
  // The last act: the run files are final, so the receipt gathers exactly what they hold.
  const receipt = receiptOf(kind, resolve(runDir), fingerprintOf(s.fleet));
  return {
    runDir: resolve(runDir),
    behaviourDigest: summary.behaviourDigest,
    steps: digest.steps,
    reproHash: receipt.reproHash,
    receipt,
    metrics,
  };
}

/** Steps this session committed, its stepping time, whether it recovered, and the rewards of its steps. */
interface Pace {
  steps: number;
  ms: number;
  recovered: boolean;
  tally: RewardTally;
}

/**
 * The session's metrics. Its own tally covers the trace on disk when the session took every step
 * of it; a resumed or recovered session, or one whose trace did not take every step, reads the
 * trace back once for the rewards instead.
 */
function metricsOf(start: SessionStart, pace: Pace, stepsOnDisk: number, wallTimeMs: number): SessionMetrics {
  const own = start.keptDigest === undefined && !pace.recovered && pace.steps === stepsOnDisk;
  const agentIds = start.plan.agents.map((a) => a.agentId);
  return {
    wallTimeMs,
    stepsPerSecond: stepsPerSecond(pace.steps, pace.ms),
    rewards: own ? pace.tally.totals() : rewardTotalsOnDisk(start.runDir, agentIds),
  };
}

/** The step loop, its stepping time added to the session's pace (steps/s counts stepping only). */
async function stepLoop(
  start: SessionStart,
  live: {
    lockstep: Lockstep;
    traces: TraceSink;
    logger: Logger;
    done: StepCount;
    signal: AbortSignal;
    /** The epoch new steps are taken in (a recovery moves it on). */
    epoch: Id;
    pace: Pace;
  },
  opts: SessionOptions,
): Promise<void> {
  const { pace } = live;
  // Progress rates count stepping only, from here (start-up is not a step).
  const loopStart = Date.now();
  try {
    await stepUntilDone(start, live, opts, loopStart);
  } finally {
    pace.ms += Date.now() - loopStart;
  }
}

/** The step loop proper, the same for a fresh and a restored start. */
async function stepUntilDone(
  start: SessionStart,
  live: Parameters<typeof stepLoop>[1],
  opts: SessionOptions,
  loopStart: number,
): Promise<void> {
  const { lockstep, traces, logger, done, signal, epoch, pace } = live;
  const { steps, kind, log } = start;
  opts.onProgress?.({ step: done.steps, steps, elapsedMs: 0 });
  while (done.steps < steps) {
    const k = done.steps;
    if (signal.aborted)
      throw new RunFailure('aborted', `the ${kind} was interrupted`, { step: String(k), phase: 'prepare' });
    // Prepare(k+1) may ride behind Commit(k) unless k+1 is the end or the extension captures there.
    const prepareNext =
      (opts.pipeline ?? true) && k + 1 < steps && !(opts.extension?.needsReadyAt?.(BigInt(k + 1)) ?? false);
    const trace = await lockstep.step({ prepareNext });
    const behaviourText = canonicalBehaviour(trace.behaviour);
    const digestText =
      epoch === start.baseEpoch ? behaviourText : canonicalBehaviour(rebase(trace.behaviour, start.baseEpoch));
    // The trace seals off the loop (and hashes digestText there); a promise here is its back-pressure.
    const appended = traces.appendLine(
      traceLine(behaviourText, trace.operational),
      digestText,
      lockstep.lastObservationsText,
    );
    if (appended) await appended;
    done.steps++;
    pace.steps++;
    pace.tally.add(trace.behaviour.rewards);
    logger.debug({ step: k, wallTimeNs: trace.operational.wallTimeNs }, 'step committed');
    await opts.extension?.afterStep(trace);
    log.throwIfFailed();
    opts.onProgress?.({ step: k + 1, steps, elapsedMs: Date.now() - loopStart });
  }
  log.throwIfFailed();
}

/**
 * Replace a lost group: fence the old fleet (clients closed, workers killed), close the trace
 * writer, launch the replacement the same way and let the recovery restore it into a new epoch.
 * A failure on the way ends the run as the loss it tried to recover from, saying how.
 */
async function replaceGroup(
  old: LiveSession & { traces: TraceSink },
  lost: RunFailure,
  recovery: SessionRecovery,
  target: RecoveryTarget,
  how: { launch: () => Promise<Fleet>; lockstepOn: (f: Fleet, epoch: Id) => Lockstep },
): Promise<Recovered & { lockstep: Lockstep }> {
  try {
    await old.fleet.fence('recovery');
    await old.traces.close();
    const fleet = await how.launch();
    const lockstep = how.lockstepOn(fleet, old.lockstep.epoch);
    lockstep.adoptIdentities(old.lockstep.identities!);
    const recovered = await recovery.restore(target, { fleet, lockstep, logger: old.logger, traces: old.traces });
    return { ...recovered, lockstep };
  } catch (e) {
    throw recoveryFailed(lost, e);
  }
}

/** A recovery that itself failed ends the run as the loss it tried to recover from, saying how it failed. */
function recoveryFailed(lost: RunFailure, e: unknown): RunFailure {
  const why = e instanceof Error ? e.message : String(e);
  return lost.withDetail(`${lost.detail}; recovery failed: ${why}`);
}

/** How long a worker death that looks like an interruption waits for that interruption to reach us. */
const INTERRUPT_GRACE_MS = 2_000;

/**
 * A worker that ended by SIGINT, SIGTERM or SIGHUP (the TypeScript worker answers those with exit
 * code 0, and exits 0 for nothing else mid-run), or an srun step Slurm cancelled: what a Ctrl-C to
 * the process group or an scancel of the job does to every process, this one included.
 */
function looksInterrupted(failure: RunFailure): boolean {
  return (
    failure.kind === 'worker-exited' &&
    /exited \((?:signal SIG(?:INT|TERM|HUP)|exit code 0)\)|\bCANCELLED AT\b/.test(failure.message)
  );
}

/**
 * Ctrl-C and scancel reach the workers too; their deaths are a consequence of the abort, not its
 * cause. Which process sees the signal first is up to the kernel or slurmstepd, so a death that
 * looks like an interruption waits (at most INTERRUPT_GRACE_MS) for the abort to arrive here.
 */
async function interruptedOr(
  failure: RunFailure,
  signal: AbortSignal,
  kind: SessionStart['kind'],
): Promise<RunFailure> {
  await graceForInterruption(failure, signal);
  if (!signal.aborted || failure.kind === 'aborted') return failure;
  return new RunFailure('aborted', `the ${kind} was interrupted (${failure.message})`, {
    step: failure.step,
    phase: failure.phase,
  });
}

/** Wait (at most INTERRUPT_GRACE_MS) for the abort that a death looking like an interruption foretells. */
async function graceForInterruption(failure: RunFailure, signal: AbortSignal): Promise<void> {
  if (!signal.aborted && looksInterrupted(failure)) await abortWithin(signal, INTERRUPT_GRACE_MS);
}

/** Resolve once `signal` aborts or `ms` have passed, whichever is first. */
function abortWithin(signal: AbortSignal, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/** Steps taken so far (kept steps of a restored start included). */
interface StepCount {
  steps: number;
}

/** The one summary.json builder: status, steps, the (rebased) behaviour digest, failure, extension and start fields. */
function summaryOf(
  start: SessionStart,
  end: {
    failure: RunFailure | undefined;
    digest: BehaviourDigest;
    /** The epoch the session ended in (a recovery moves it on). */
    epoch: Id;
    metrics: SessionMetrics;
    extensionFields: Record<string, unknown>;
  },
) {
  const { failure } = end;
  const rebased =
    start.kind === 'resume' || end.epoch !== start.baseEpoch
      ? `, each rebased to epoch ${start.baseEpoch} (EpochRebase)`
      : '';
  return {
    format: SUMMARY_FORMAT,
    sessionId: start.plan.sessionId,
    status: failure ? (failure.kind === 'aborted' ? 'aborted' : 'failed') : 'completed',
    stepsPlanned: start.steps,
    stepsDone: end.digest.steps,
    epoch: start.baseEpoch,
    behaviourDigest: end.digest.digest(),
    behaviourDigestAlgorithm: `sha256 over canonical(behaviour)+"\\n" per step, in step order${rebased}`,
    failure: failure ? failure.toJSON() : null,
    wallTimeMs: end.metrics.wallTimeMs,
    stepsPerSecond: end.metrics.stepsPerSecond,
    ...(end.metrics.rewards ? { rewards: end.metrics.rewards } : {}),
    ...start.summaryFields(),
    ...end.extensionFields,
  };
}

function rebase(b: TraceBehaviour, base: Id): TraceBehaviour {
  return b.scope.epoch === base ? b : new EpochRebase(b.scope.epoch, base).apply(b);
}

/**
 * The platform fingerprint of this coordinator and the fleet that finished the session, from the
 * Hello replies already at hand. A resumed run's receipt carries the fingerprint of the machine
 * that finished it (earlier epochs ran wherever their receipt-less sessions ran: not recorded).
 */
function fingerprintOf(fleet: Fleet | undefined): PlatformFingerprint {
  const workers = (fleet?.all() ?? []).map((w) => ({
    workerId: w.plan.workerId,
    role: w.hello.role,
    runtime: w.hello.runtime,
    buildDigest: w.hello.buildDigest,
  }));
  return platformFingerprint(PACKAGE_ROOT, workers);
}

/** receipt.json for a completed session; a failed write is ReceiptNotWritten (the run files are complete). */
function receiptOf(kind: SessionStart['kind'], runDir: string, platform: PlatformFingerprint): ReceiptResult {
  try {
    return writeReceipt(runDir, { platform });
  } catch (e) {
    if (!isWriteFailure(e)) throw e;
    throw new ReceiptNotWritten(e, kind, runDir);
  }
}

/** Why a run or resume stopped: a RunFailure as it is, a failed write as an io failure, anything else internal. */
export function failureOf(e: unknown, step: string, phase: RunPhase): RunFailure {
  if (e instanceof RunFailure) return e;
  const write = writeFailureOfErrno(e);
  if (write) return RunFailure.ofWrite(write, { step, phase });
  return new RunFailure('internal', e instanceof Error ? e.message : String(e), { step, phase });
}

/** Close a file at the end of a run, noting a failed final write as the run's failure unless it already has one. */
export function closeNoting(close: () => void, failure: RunFailure | undefined, step: string): RunFailure | undefined {
  try {
    close();
    return failure;
  } catch (e) {
    return failure ?? failureOf(e, step, 'shutdown');
  }
}

/** closeNoting for a file whose close is asynchronous (a segmented trace writer drains and fsyncs). */
async function closeNotingAsync(
  close: () => void | Promise<void>,
  failure: RunFailure | undefined,
  step: string,
): Promise<RunFailure | undefined> {
  try {
    await close();
    return failure;
  } catch (e) {
    return failure ?? failureOf(e, step, 'shutdown');
  }
}

/**
 * Write summary.json, the run directory's last run file. An older summary.json (a resumed run's)
 * describes files that have changed since: when there is no room to replace it, it is removed and
 * the write tried once more in the room it leaves, so the directory never keeps a stale summary.
 * A summary that still cannot be written ends the run as an io failure that says so, folded into
 * the run's own failure when it has one.
 */
export function writeSummary(
  runDir: string,
  summary: unknown,
  failure: RunFailure | undefined,
  step: string,
): RunFailure | undefined {
  try {
    writeSummaryMakingRoom(runDir, summary);
    return failure;
  } catch (e) {
    if (!isWriteFailure(e)) throw e;
    if (!failure) return RunFailure.ofWrite(e, { step, phase: 'shutdown' });
    const folded = failure.withDetail(`${failure.detail}; ${RUN_FILES.summary} was not written either (${e.code})`);
    folded.reason = failure.reason ?? e.reason;
    return folded;
  }
}

function writeSummaryMakingRoom(runDir: string, summary: unknown): void {
  const path = join(runDir, RUN_FILES.summary);
  try {
    writeJsonDurable(runDir, RUN_FILES.summary, summary);
  } catch (e) {
    if (!isWriteFailure(e) || e.reason !== 'size_no_space' || !existsSync(path)) throw e;
    rmSync(path);
    writeJsonDurable(runDir, RUN_FILES.summary, summary);
  }
}
