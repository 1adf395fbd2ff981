// runSession: one complete lockstep run from a RunPlan to a run directory (run.json, the trace,
// run.log, summary.json, receipt.json) and its behaviour digest and ReproHash — the fresh start of
// the one session loop (session.ts), which `detsim run`, replay and resume share. Also run.json's
// writer (runRecord). NOT the loop itself (session.ts), the step protocol (lockstep.ts) nor
// process handling (launcher.ts).
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { loadConfig, type RunPlan } from '../config.js';
import type { Id } from '../../core/formats/scalars.js';
import { collisionWarning } from '../../core/formats/seed.js';
import type { Fleet } from '../launch/launcher.js';
import { epochId, type Dispatch, type Identities } from './lockstep.js';
import { CONTRACT_DIGEST, PROTOCOL_MAJOR, PROTOCOL_MINOR } from '../../core/protocol/index.js';
import { allocateRunDir, createRunDir, RUN_FILES, RunLog, writeJsonDurable } from './run-dir.js';
import { withRunLock } from './run-lock.js';
import { WorkerIdentityRefusal, isStartupIdentityFailure, type RunFailure } from './run-failure.js';
import { RUN_FORMAT, type RunJson } from './run-json.js';
import { recordedModel } from '../launch/model-source.js';
import { prepareLaunch } from '../launch/launch-facts.js';
import { awaitRendezvous } from '../launch/rendezvous.js';
import { checkRendezvousCertificates } from '../launch/rendezvous-tls.js';
import { readTokenFile } from '../../core/formats/tls-dir.js';
import { abortWiring, runLoop, type SessionOptions, type SessionResult, type SessionStart } from './session.js';
import { SegmentedTraceWriter, type TraceSink } from '../trace/trace-store.js';

export { RUN_FORMAT } from './run-json.js';
export { closeNoting, failureOf, SUMMARY_FORMAT, writeSummary } from './session.js';
export type {
  Recovered,
  RecoveryTarget,
  RunExtension,
  RunExtensionContext,
  RunProgress,
  SessionRecovery,
} from './session.js';

export const DEFAULT_RUNS_DIR = 'runs';

/** Options of {@link runSession}: the session loop's options plus where the run directory goes and how long it runs. */
export interface RunOptions extends SessionOptions {
  /** Parent of the run directory (default `runs` in the working directory). */
  outDir?: string;
  /** Exactly this run directory instead of `<outDir>/<session>-<n>` (a sweep's run; absent or empty). */
  runDir?: string;
  /** Override the config's step count. */
  steps?: number;
  dispatch?: Dispatch;
  /** Lines for the user before the run starts (seed collisions, a wait for hand-started workers); default: stderr. */
  onWarning?: (line: string) => void;
  /** Steps per trace segment (trace/NNNNNN.jsonl.gz, docs/spec/trace-store.md; default DEFAULT_SEGMENT_STEPS). */
  segmentSteps?: number;
  /**
   * `--trace-observations`: also record each step's observations beside the trace segments
   * (trace/NNNNNN.observations.jsonl.gz; physical: run.json `traceObservations`, in no hash).
   */
  traceObservations?: boolean;
}

/** runDir, behaviourDigest, steps completed, and the ReproHash of the receipt.json the run wrote. */
export type RunResult = SessionResult;

/** The resolved composition recorded in run.json (no physical data: no pids, paths or times), in its one schema (run-json.ts). */
export function runRecord(
  plan: RunPlan,
  ids: Identities,
  fleet: Fleet,
  steps: number,
  dispatch: Dispatch,
  epoch: Id,
  traceObservations = false,
): RunJson {
  const helloOf = (workerId: Id) => fleet.all().find((w) => w.plan.workerId === workerId)!.hello;
  // Each model's record once: a module's identity hashes its files, and every agent of it has the same.
  const records = new Map<string, ReturnType<typeof recordedModel>>();
  const recorded = (model: string) => {
    let r = records.get(model);
    if (r === undefined) records.set(model, (r = recordedModel(model, plan.modelDigests)));
    return r;
  };
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
      ...recorded(plan.environment.model),
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
        ...recorded(a.model),
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
      return {
        workerId: w.workerId,
        role: w.role,
        agentIds: w.agentIds,
        runtime: h.runtime,
        buildDigest: h.buildDigest,
        capabilities: h.capabilities,
      };
    }),
    agentsPerWorker: plan.agentsPerWorker,
    transport: plan.transport,
    threadHeapMb: plan.threadHeapMb,
    deadlines: plan.deadlines,
    seedCollisions: plan.seedCollisions,
    // Only when given: a run without overrides keeps the run.json it always had.
    ...(plan.overrides?.length ? { overrides: plan.overrides } : {}),
    // Only when on (physical): a run without the sidecar keeps the run.json it always had.
    ...(traceObservations ? { traceObservations: true } : {}),
  };
}

/**
 * Run one session: launch the workers, initialize, step to `steps`, write the run directory (and,
 * as the last act, receipt.json) and return its behaviour digest and ReproHash. On failure the
 * workers are stopped, summary.json records the failure, and the RunFailure is thrown.
 */
export async function runSession(config: RunPlan | string, opts: RunOptions = {}): Promise<RunResult> {
  const plan = typeof config === 'string' ? loadConfig(config) : config;
  const steps = opts.steps ?? plan.steps;
  const dispatch = opts.dispatch ?? 'concurrent';
  const warn = opts.onWarning ?? ((l: string) => process.stderr.write(`${l}\n`));
  for (const c of plan.seedCollisions) warn(collisionWarning(c));

  // Workers placed by rendezvous are found before the run directory exists: a refusal writes nothing.
  const existingWorkers = await findExistingWorkers(plan, opts, warn);
  const runDir = opts.runDir
    ? createRunDir(opts.runDir)
    : allocateRunDir(opts.outDir ?? DEFAULT_RUNS_DIR, plan.sessionId);
  // launch.json (and a per-run TLS set) before any worker starts: resume relaunches the same way.
  const launched = prepareLaunch(plan, runDir);
  const session = existingWorkers ? { ...opts, existingWorkers } : opts;
  try {
    return await withRunLock(runDir, 'detsim run', () =>
      runLoop(freshStart(launched, runDir, steps, dispatch, opts), session),
    );
  } catch (e) {
    // A worker refused for its identity at launch: the run never began, and leaves nothing behind
    // (its directory was this run's alone, and its lock is released by now).
    if (e instanceof WorkerIdentityRefusal) rmSync(runDir, { recursive: true, force: true });
    throw e;
  }
}

/**
 * With `workers.placement: rendezvous` and workers started by hand: wait (interruptibly) for every
 * worker's record. Slurm's srun steps register later, once the launcher started them (slurm/).
 */
export async function findExistingWorkers(
  plan: RunPlan,
  opts: Pick<RunOptions, 'signal' | 'handleSignals'>,
  onWaiting?: (line: string) => void,
): Promise<SessionOptions['existingWorkers']> {
  if (!plan.rendezvous || plan.launcher?.kind === 'slurm') return undefined;
  // The token the hand-started workers hold: unreadable, the run is refused before anything is written.
  if (plan.rendezvous.tokenFile !== undefined) readTokenFile(plan.rendezvous.tokenFile, 'workers.rendezvous.tokenFile');
  const { signal, release } = abortWiring(opts);
  try {
    const found = await awaitRendezvous(plan, plan.rendezvous, signal, onWaiting);
    await checkRendezvousCertificates(plan, plan.rendezvous, found);
    return found;
  } finally {
    release();
  }
}

/**
 * The fresh start, in a freshly allocated and locked run directory: run.log and the trace are
 * created before any worker starts (one that cannot be stops the run there); once launched, the
 * workers are initialized and run.json records the composition. A worker refused for its identity
 * before that (Hello, certificate) is a refusal: the files are closed and the run directory goes.
 */
function freshStart(
  plan: RunPlan,
  runDir: string,
  steps: number,
  dispatch: Dispatch,
  trace: Pick<RunOptions, 'segmentSteps' | 'traceObservations'> = {},
): SessionStart {
  const log = new RunLog(join(runDir, RUN_FILES.log));
  // A run.log that cannot even be created stops the run before any worker starts.
  log.throwIfFailed();
  let traces: TraceSink;
  try {
    traces = new SegmentedTraceWriter(runDir, {
      segmentSteps: trace.segmentSteps,
      observations: trace.traceObservations === true,
      expectedSteps: steps,
    });
  } catch (e) {
    log.close();
    throw e;
  }
  const epoch = epochId(1);
  let began = false;
  return {
    kind: 'run',
    plan,
    runDir,
    steps,
    dispatch,
    log,
    traces,
    lockstepEpoch: epoch,
    epoch,
    baseEpoch: epoch,
    startedFields: { runDir, steps, dispatch, agents: plan.agents.length, workers: plan.workers.length },
    // A refusal until the run began, and at its Initialize (a worker's copy of a model differs): no run.json yet.
    accepted: (e) => !isStartupIdentityFailure(e) || (began && (e.phase === 'startup' || e.phase === 'hello')),
    begin: async ({ fleet, lockstep, logger }) => {
      began = true;
      const ids = await lockstep.initialize();
      const record = runRecord(plan, ids, fleet, steps, dispatch, epoch, trace.traceObservations);
      writeJsonDurable(runDir, RUN_FILES.run, record);
      logger.info('initialized');
      return traces;
    },
    refused: async (e) => {
      log.close();
      try {
        await traces.close();
      } catch {
        // nothing to keep: the run directory is removed with it
      }
      return new WorkerIdentityRefusal(e as RunFailure);
    },
    summaryFields: () => ({}),
    end: async () => undefined,
  };
}
