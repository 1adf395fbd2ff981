// runSession: one complete lockstep run from a RunPlan to a run directory (run.json, trace.jsonl,
// run.log, summary.json) and its behaviour digest. The library entry that `detsim run` (and later
// resume/replay/verify) call. A file it cannot write (a full disk) ends the run as an io failure
// naming the file, with what was written before left whole (write-failure.ts).
// NOT the step protocol (lockstep.ts) nor process handling (launcher.ts).
import { existsSync, rmSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import { loadConfig, type PlannedWorker, type RunPlan } from './config.js';
import type { Digest, Id } from '../core/formats/scalars.js';
import { collisionWarning } from '../core/formats/seed.js';
import { launchFleet, type Fleet, type WorkerCommand } from './launcher.js';
import { Lockstep, epochId, type Dispatch, type Identities, type LockstepHooks } from './lockstep.js';
import { CONTRACT_DIGEST, PROTOCOL_MAJOR, PROTOCOL_MINOR } from '../core/protocol/index.js';
import { allocateRunDir, RUN_FILES, RunLog, TraceWriter, writeJsonDurable } from './run-dir.js';
import { withRunLock } from './run-lock.js';
import { RunFailure, type RunPhase } from './run-failure.js';
import { isWriteFailure, writeFailureOfErrno } from './write-failure.js';
import { BehaviourDigest, canonicalBehaviour, traceLine, type TransitionTrace } from './trace.js';

export const RUN_FORMAT = 'detsim-run-v1';
export const SUMMARY_FORMAT = 'detsim-summary-v1';
export const DEFAULT_RUNS_DIR = 'runs';

/** Progress of a running session, as passed to `onProgress`. */
export interface RunProgress {
  /** Steps completed so far (the committed boundary). */
  step: number;
  steps: number;
  /** Milliseconds since stepping began (after start-up and initialization). */
  elapsedMs: number;
}

/** Options of {@link runSession}. */
export interface RunOptions {
  /** Parent of the run directory (default `runs` in the working directory). */
  outDir?: string;
  /** Override the config's step count. */
  steps?: number;
  dispatch?: Dispatch;
  onProgress?: (p: RunProgress) => void;
  /** Warnings (seed collisions) as one line each; default: stderr. */
  onWarning?: (line: string) => void;
  /** Abort the run from outside; workers are stopped and a RunFailure('aborted') is thrown. */
  signal?: AbortSignal;
  /** Turn SIGINT/SIGTERM into an abort for the duration of the run (the CLI sets this). */
  handleSignals?: boolean;
  /** Test hooks: per-phase callback and worker command override. */
  hooks?: LockstepHooks & { commandFor?: (w: PlannedWorker) => WorkerCommand | undefined; onLaunched?: (fleet: Fleet) => void };
  logLevel?: 'debug' | 'info' | 'warn' | 'error';
  /** Optional plug-in around the step loop (checkpoints: coordinator/checkpoint/run-checkpoints.ts). */
  extension?: RunExtension;
  /**
   * Opt-in, default false: pipeline each step's Prepare behind the previous step's Commits
   * (lockstep StepOptions.prepareNext); never past the last step nor into a boundary the extension
   * needs Ready. Behaviour traces are the same either way, but it relaxes lockstep-v1's Phase D
   * rule (the next Prepare only after every Commit succeeded): when one Commit fails, agents on
   * other workers may already have prepared the next step. The run fails either way.
   */
  pipeline?: boolean;
}

/** What a run extension sees once every participant is initialized. */
export interface RunExtensionContext {
  plan: RunPlan;
  runDir: string;
  fleet: Fleet;
  lockstep: Lockstep;
  traces: TraceWriter;
  logger: Logger;
  epoch: Id;
  steps: number;
  signal: AbortSignal;
}

/**
 * A plug-in around the step loop: `started` after initialization, `afterStep` after each committed
 * step (its trace already appended), `finish` before summary.json is written (its result becomes
 * summary fields). A throw from started/afterStep fails the run like any step failure.
 */
export interface RunExtension {
  started(ctx: RunExtensionContext): Promise<void>;
  /** Whether afterStep will need every agent Ready (not prepared ahead) at this boundary, e.g. to capture it. */
  needsReadyAt?(boundary: bigint): boolean;
  afterStep(trace: TransitionTrace): Promise<void>;
  finish(failure: RunFailure | undefined): Promise<Record<string, unknown>>;
}

/** A finished run: its directory, behaviour digest and steps completed. */
export interface RunResult {
  runDir: string;
  behaviourDigest: Digest;
  /** Steps completed. */
  steps: number;
}

/** The resolved composition recorded in run.json (no physical data: no pids, paths or times). */
export function runRecord(plan: RunPlan, ids: Identities, fleet: Fleet, steps: number, dispatch: Dispatch, epoch: Id): Record<string, unknown> {
  const helloOf = (workerId: Id) => fleet.all().find((w) => w.plan.workerId === workerId)!.hello;
  return {
    format: RUN_FORMAT,
    sessionId: plan.sessionId,
    masterSeed: plan.masterSeed,
    seedDerivation: plan.seedAlgorithm,
    steps,
    stepDuration: plan.stepDuration.toJSON(),
    epoch,
    dispatch,
    protocol: { major: PROTOCOL_MAJOR, minor: PROTOCOL_MINOR, contractDigest: CONTRACT_DIGEST },
    environment: {
      environmentId: plan.environment.environmentId,
      model: plan.environment.model,
      modelVersion: ids.environment.modelVersion,
      profileDigest: ids.environment.profileDigest,
      params: plan.environment.params,
      seed: plan.environment.seed,
      workerId: plan.environment.workerId,
    },
    agents: plan.agents.map((a) => {
      const id = ids.agents.get(a.agentId)!;
      return {
        agentId: a.agentId,
        portId: a.portId,
        model: a.model,
        modelVersion: id.modelVersion,
        plasticityVersion: id.plasticityVersion,
        profileDigest: id.profileDigest,
        datasetDigest: id.datasetDigest,
        tickDuration: id.tickDuration,
        params: a.params,
        // Only when configured: the executor projection is part of the composition identity.
        ...(a.actionFields ? { actionFields: a.actionFields } : {}),
        seed: a.seed,
        workerId: a.workerId,
      };
    }),
    workers: plan.workers.map((w) => {
      const h = helloOf(w.workerId);
      return { workerId: w.workerId, role: w.role, agentIds: w.agentIds, runtime: h.runtime, buildDigest: h.buildDigest, capabilities: h.capabilities };
    }),
    agentsPerWorker: plan.agentsPerWorker,
    transport: plan.transport,
    deadlines: plan.deadlines,
    seedCollisions: plan.seedCollisions,
  };
}

function abortSignalFor(opts: RunOptions): { signal: AbortSignal; release: () => void } {
  const controller = new AbortController();
  const onAbort = () => controller.abort();
  opts.signal?.addEventListener('abort', onAbort, { once: true });
  if (opts.signal?.aborted) controller.abort();
  const onSignal = () => controller.abort();
  if (opts.handleSignals) {
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
  }
  return {
    signal: controller.signal,
    release: () => {
      opts.signal?.removeEventListener('abort', onAbort);
      process.off('SIGINT', onSignal);
      process.off('SIGTERM', onSignal);
    },
  };
}

/**
 * Run one session: launch the workers, initialize, step to `steps`, write the run directory and
 * return its behaviour digest. On failure the workers are stopped, summary.json records the
 * failure, and the RunFailure is thrown.
 */
export async function runSession(config: RunPlan | string, opts: RunOptions = {}): Promise<RunResult> {
  const plan = typeof config === 'string' ? loadConfig(config) : config;
  const steps = opts.steps ?? plan.steps;
  const dispatch = opts.dispatch ?? 'concurrent';
  const warn = opts.onWarning ?? ((l: string) => process.stderr.write(`${l}\n`));
  for (const c of plan.seedCollisions) warn(collisionWarning(c));

  const runDir = allocateRunDir(opts.outDir ?? DEFAULT_RUNS_DIR, plan.sessionId);
  return withRunLock(runDir, 'detsim run', () => runInDir(plan, runDir, steps, dispatch, opts));
}

/** The run itself, in a freshly allocated and locked run directory. */
async function runInDir(plan: RunPlan, runDir: string, steps: number, dispatch: Dispatch, opts: RunOptions): Promise<RunResult> {
  const log = new RunLog(join(runDir, RUN_FILES.log));
  // A run.log that cannot even be created stops the run before any worker starts.
  log.throwIfFailed();
  const logger: Logger = pino({ level: opts.logLevel ?? 'info', base: { sessionId: plan.sessionId } }, log);
  const startedAt = process.hrtime.bigint();
  const startedWall = Date.now();
  const epoch = epochId(1);
  const digest = new BehaviourDigest();
  let traces: TraceWriter;
  try {
    traces = new TraceWriter(join(runDir, RUN_FILES.trace));
  } catch (e) {
    log.close();
    throw e;
  }
  const { signal, release } = abortSignalFor(opts);
  let fleet: Fleet | undefined;
  let failure: RunFailure | undefined;
  logger.info({ runDir, steps, dispatch, agents: plan.agents.length, workers: plan.workers.length }, 'run started');

  try {
    fleet = await launchFleet(plan, { logger, signal, commandFor: opts.hooks?.commandFor });
    opts.hooks?.onLaunched?.(fleet);
    const lockstep = new Lockstep(plan, fleet, { dispatch, epoch, startedAt, logger, signal, hooks: opts.hooks });
    const ids = await lockstep.initialize();
    writeJsonDurable(runDir, RUN_FILES.run, runRecord(plan, ids, fleet, steps, dispatch, epoch));
    logger.info('initialized');
    await opts.extension?.started({ plan, runDir, fleet, lockstep, traces, logger, epoch, steps, signal });
    // Progress rates count stepping only, from here (start-up is not a step).
    const loopStart = Date.now();
    opts.onProgress?.({ step: 0, steps, elapsedMs: 0 });
    for (let k = 0; k < steps; k++) {
      if (signal.aborted) throw new RunFailure('aborted', 'the run was interrupted', { step: String(k), phase: 'prepare' });
      // Prepare(k+1) may ride behind Commit(k) unless k+1 is the end or the extension captures there.
      const next = BigInt(k + 1);
      const prepareNext = (opts.pipeline ?? false) && k + 1 < steps && !(opts.extension?.needsReadyAt?.(next) ?? false);
      const trace = await lockstep.step({ prepareNext });
      const behaviourText = canonicalBehaviour(trace.behaviour);
      traces.appendLine(traceLine(behaviourText, trace.operational));
      digest.addCanonical(behaviourText);
      logger.debug({ step: k, wallTimeNs: trace.operational.wallTimeNs }, 'step committed');
      await opts.extension?.afterStep(trace);
      log.throwIfFailed();
      opts.onProgress?.({ step: k + 1, steps, elapsedMs: Date.now() - loopStart });
    }
    log.throwIfFailed();
  } catch (e) {
    failure = failureOf(e, String(digest.steps), 'prepare');
    if (signal.aborted && failure.kind !== 'aborted') {
      // Ctrl-C reaches the workers too; their deaths are a consequence, not the cause.
      failure = new RunFailure('aborted', `the run was interrupted (${failure.message})`, { step: failure.step, phase: failure.phase });
    }
    logger.error({ failure: failure.toJSON() }, 'run failed');
  } finally {
    release();
    await fleet?.shutdown(failure ? 'run-failed' : 'run-complete', failure ? 500 : 2_000);
    failure = closeNoting(() => traces.close(), failure, String(digest.steps));
  }
  const extensionSummary = opts.extension ? await opts.extension.finish(failure) : {};

  const summary = {
    format: SUMMARY_FORMAT,
    sessionId: plan.sessionId,
    status: failure ? (failure.kind === 'aborted' ? 'aborted' : 'failed') : 'completed',
    stepsPlanned: steps,
    stepsDone: digest.steps,
    epoch,
    behaviourDigest: digest.digest(),
    behaviourDigestAlgorithm: 'sha256 over canonical(behaviour)+"\\n" per step, in step order',
    failure: failure ? failure.toJSON() : null,
    wallTimeMs: Date.now() - startedWall,
    ...extensionSummary,
  };
  failure = writeSummary(runDir, summary, failure, String(digest.steps));
  logger.info({ summary }, 'run finished');
  log.close();
  failure ??= log.failure ? RunFailure.ofWrite(log.failure, { step: String(digest.steps), phase: 'shutdown' }) : undefined;
  if (failure) {
    failure.runDir = resolve(runDir);
    throw failure;
  }
  return { runDir: resolve(runDir), behaviourDigest: summary.behaviourDigest, steps: digest.steps };
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

/**
 * Write summary.json, the run directory's last file. An older summary.json (a resumed run's)
 * describes files that have changed since: when there is no room to replace it, it is removed and
 * the write tried once more in the room it leaves, so the directory never keeps a stale summary.
 * A summary that still cannot be written ends the run as an io failure that says so, folded into
 * the run's own failure when it has one.
 */
export function writeSummary(runDir: string, summary: unknown, failure: RunFailure | undefined, step: string): RunFailure | undefined {
  try {
    writeSummaryMakingRoom(runDir, summary);
    return failure;
  } catch (e) {
    if (!isWriteFailure(e)) throw e;
    if (!failure) return RunFailure.ofWrite(e, { step, phase: 'shutdown' });
    const folded = new RunFailure(failure.kind, `${failure.detail}; ${RUN_FILES.summary} was not written either (${e.code})`, { workerId: failure.workerId, agentIds: failure.agentIds, step: failure.step, phase: failure.phase });
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
