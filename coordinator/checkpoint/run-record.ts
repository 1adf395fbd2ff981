// Reading a run directory's run.json back into the RunPlan and participant identities it
// recorded, so `detsim resume` and `detsim replay <run-dir>` relaunch exactly the recorded
// composition (not whatever a config file says today): planFromRunJson is the one rebuild. The
// record is read through run.json's one schema (run-json.ts), the same type its writer builds.
// NOT the run itself and not the checkpoint checks (restore-identity.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolveConfig, type RunPlan, type WorkerRuntimeName } from '../config.js';
import { canonicalize, parseStrict } from '../../core/formats/canonical-json.js';
import { DetsimError, isDetsimError } from '../../core/formats/errors.js';
import { readId, readObject, type Id } from '../../core/formats/scalars.js';
import { SEED_ALGORITHM } from '../../core/formats/seed.js';
import type { Identities } from '../session/lockstep.js';
import type { AgentInitializeResultEntry } from '../../core/protocol/index.js';
import { RUN_FILES } from '../session/run-dir.js';
import { locateRecordedModels, searchDirsFor } from '../launch/model-source.js';
import { readRunJson, RUN_FORMAT, type ForkLineageJson, type RunJson } from '../session/run-json.js';
import { resolveWithOverrides, type Override } from '../overrides.js';

export interface RecordedRun {
  plan: RunPlan;
  identities: Identities;
  /** The epoch the run started in and the dispatch mode it used. */
  epoch: Id;
  dispatch: 'sequential' | 'concurrent' | 'reversed';
  steps: number;
  /** Whether the run records its observations sidecar (run.json `traceObservations`, physical). */
  traceObservations: boolean;
  /** A fork's lineage (checkpoint/fork.ts), when the run is one. */
  fork?: ForkLineageJson;
}

const KEPT_IDENTITY_CODES: ReadonlySet<string> = new Set(['ident_seed_mismatch', 'ident_model_source_changed']);

function fail(runDir: string, message: string, field?: string): never {
  throw new DetsimError('struct_run_record', `${join(runDir, RUN_FILES.run)}: ${message}`, field);
}

export function readRunRecord(runDir: string, modelsBeside = runDir): RecordedRun {
  let raw: Record<string, unknown>;
  try {
    raw = readObject(parseStrict(readFileSync(join(runDir, RUN_FILES.run))), 'run.json');
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ENOENT') fail(runDir, 'missing: the run never initialized, there is nothing to resume');
    if (isDetsimError(e)) fail(runDir, e.message, e.field);
    throw e;
  }
  try {
    if (raw.format !== RUN_FORMAT) fail(runDir, `format is ${JSON.stringify(raw.format)}, not ${RUN_FORMAT}`, 'format');
    const rec = readRunJson(raw);
    // Resume checks the recorded seeds itself (recorded-composition.ts names masterSeed or the seed).
    const plan = planFromRecord(rec, { keepRecordedSeeds: true, searchDirs: searchDirsFor(modelsBeside) });
    return {
      plan,
      identities: identitiesOf(rec),
      epoch: readId(rec.epoch, 'epoch'),
      dispatch: rec.dispatch,
      steps: plan.steps,
      traceObservations: rec.traceObservations === true,
      ...(rec.fork ? { fork: rec.fork } : {}),
    };
  } catch (e) {
    // A seed that differs from its derivation, or a model whose source changed, keeps its identity
    // code (as `detsim replay` gives it); anything else is a bad record.
    if (isDetsimError(e) && KEPT_IDENTITY_CODES.has(e.reason))
      throw new DetsimError(e.reason, `${join(runDir, RUN_FILES.run)}: ${e.message}`, e.field);
    if (isDetsimError(e) && e.reason !== 'struct_run_record') fail(runDir, e.message, e.field);
    throw e;
  }
}

/** The participant identities run.json recorded (what Initialize returned), as the lockstep holds them. */
function identitiesOf(rec: RunJson): Identities {
  const agents = new Map<Id, AgentInitializeResultEntry>();
  for (const a of rec.agents) {
    const { agentId, modelVersion, plasticityVersion, profileDigest, datasetDigest, tickDuration } = a;
    agents.set(agentId, {
      agentId,
      modelVersion,
      plasticityVersion,
      profileDigest,
      datasetDigest,
      tickDuration,
      committedStep: '0',
    });
  }
  const { environmentId, modelVersion, profileDigest } = rec.environment;
  return { environment: { environmentId, modelVersion, profileDigest }, agents };
}

// ---------------------------------------------------------------------------------------------
// The one rebuild of a RunPlan from run.json, for resume (above) and replay (receipt/replay.ts).

/**
 * The planned runtime of a recorded agent worker, from the Hello runtime run.json holds
 * ("detsim-rs/…" is the Rust worker, "detsim-ts/…" the TypeScript one, "detsim-py/…" the Python one);
 * anything else is refused.
 */
function runtimeOf(w: RunJson['workers'][number], field: string): WorkerRuntimeName {
  const r = w.runtime;
  if (r.startsWith('detsim-rs/')) return 'rust';
  if (r.startsWith('detsim-ts/')) return 'typescript';
  if (r.startsWith('detsim-py/')) return 'python';
  throw new DetsimError(
    'struct_invalid_field',
    `${field}: ${JSON.stringify(r)} is not a detsim-ts/, detsim-rs/ or detsim-py/ worker runtime`,
    field,
  );
}

/** `{runtime: 'python'}` when the recorded environment worker ran on Python (the default, TypeScript, stays implicit). */
function pythonEnvironment(workers: RunJson['workers']): { runtime?: 'python' } {
  const i = workers.findIndex((w) => w.role === 'environment');
  return i >= 0 && runtimeOf(workers[i]!, `workers[${i}].runtime`) === 'python' ? { runtime: 'python' } : {};
}

/**
 * Rebuild the RunPlan a run recorded in its run.json: the composition goes back through
 * resolveConfig (every config check, seeds derived again) with every planned field the record holds
 * (ports, action fields, per-worker runtimes, deadlines, layout), so the result equals the plan the
 * run started from; a recorded seed or worker layout that differs from its derivation is refused.
 * `keepRecordedSeeds` leaves the seeds as run.json records them instead (unchecked), for a caller
 * that checks them itself and names what was edited (resume: recorded-composition.ts).
 */
export interface PlanFromRecordOptions {
  keepRecordedSeeds?: boolean;
  /** Where module models are looked for after their recorded paths (model-source.ts searchDirsFor). */
  searchDirs?: readonly string[];
}

export function planFromRunJson(runJson: unknown, opts: PlanFromRecordOptions = {}): RunPlan {
  return planFromRecord(readRunJson(runJson), opts);
}

/**
 * The composition a run directory recorded with `--set` overrides applied through the config's own
 * schema (overrides.ts): a fork's plan (checkpoint/fork.ts). Read it with readRunRecord first: this
 * takes the record as valid, and passes a refusal of an override on as it is (naming the override).
 */
export function recordedPlanWith(runDir: string, overrides: readonly Override[]): RunPlan {
  const rec = readRunJson(parseStrict(readFileSync(join(runDir, RUN_FILES.run))));
  const located = locateRecordedModels(rec, searchDirsFor(runDir));
  return resolveWithOverrides(recordedConfig(located.record), overrides, { baseDir: '/' });
}

/** run.json's composition as a config document (what resolveConfig takes), every planned field it holds. */
function recordedConfig(r: RunJson) {
  const env = r.environment;
  const agentWorkers = r.workers.map((w, i) => ({ w, i })).filter(({ w }) => w.role === 'agent');
  return {
    sessionId: r.sessionId,
    masterSeed: r.masterSeed,
    steps: r.steps,
    worldStepNs: { numerator: r.stepDuration.numerator, denominator: r.stepDuration.denominator },
    environment: { id: env.environmentId, model: env.model, params: env.params, ...pythonEnvironment(r.workers) },
    agents: r.agents.map((a) => ({
      id: a.agentId,
      model: a.model,
      params: a.params,
      port: a.portId,
      ...(a.actionFields === undefined ? {} : { actionFields: a.actionFields }),
    })),
    workers: {
      agentsPerWorker: r.agentsPerWorker,
      transport: r.transport,
      threadHeapMb: r.threadHeapMb,
      runtime: agentWorkers.map(({ w, i }) => runtimeOf(w, `workers[${i}].runtime`)),
    },
    deadlines: r.deadlines,
  };
}

function planFromRecord(recorded: RunJson, opts: PlanFromRecordOptions): RunPlan {
  const located = locateRecordedModels(recorded, opts.searchDirs ?? [process.cwd()]);
  const r = located.record;
  const env = r.environment;
  if (r.seedDerivation !== SEED_ALGORITHM)
    throw new DetsimError(
      'struct_invalid_field',
      `run.json: seedDerivation ${JSON.stringify(r.seedDerivation)} is not ${SEED_ALGORITHM}`,
      'seedDerivation',
    );
  // Module models are located by their identity above (absolute paths); the base directory resolves nothing.
  const plan = resolveConfig(recordedConfig(r), { baseDir: '/' });
  if (plan.modelDirs) plan.modelDirs = located.modelDirs;
  if (Object.keys(located.pythonDigests).length) plan.modelDigests = located.pythonDigests;
  checkLayout(plan, r.workers);
  if (opts.keepRecordedSeeds) return withRecordedSeeds(plan, r);
  for (const [i, a] of r.agents.entries()) {
    const p = plan.agents[i]!;
    if (p.seed !== a.seed)
      throw new DetsimError(
        'ident_seed_mismatch',
        `run.json: agents[${i}].seed ${String(a.seed)} differs from the derived ${p.seed} for ${p.agentId}`,
        `agents[${i}].seed`,
      );
  }
  if (plan.environment.seed !== env.seed)
    throw new DetsimError(
      'ident_seed_mismatch',
      `run.json: environment.seed ${String(env.seed)} differs from the derived ${plan.environment.seed}`,
      'environment.seed',
    );
  return plan;
}

/** The plan with the seeds run.json records (each must be an integer; whether it derives is the caller's check). */
function withRecordedSeeds(plan: RunPlan, r: RunJson): RunPlan {
  const { agents, environment: env } = r;
  const seedOf = (v: unknown, field: string): number => {
    if (typeof v !== 'number' || !Number.isInteger(v))
      throw new DetsimError('struct_invalid_field', `run.json: ${field} is not an integer seed`, field);
    return v;
  };
  return {
    ...plan,
    environment: { ...plan.environment, seed: seedOf(env.seed, 'environment.seed') },
    agents: plan.agents.map((a, i) => ({ ...a, seed: seedOf(agents[i]!.seed, `agents[${i}].seed`) })),
  };
}

/** The recorded workers must be the layout the plan derives (ids, roles, hosted agents, in order). */
function checkLayout(plan: RunPlan, recorded: RunJson['workers']): void {
  const derived = plan.workers.map((w) => canonicalize({ workerId: w.workerId, role: w.role, agentIds: w.agentIds }));
  const seen = recorded.map((w) => canonicalize({ workerId: w.workerId, role: w.role, agentIds: w.agentIds }));
  const i = derived.findIndex((d, k) => d !== seen[k]);
  if (i >= 0 || derived.length !== seen.length) {
    const at = i >= 0 ? i : Math.min(derived.length, seen.length);
    throw new DetsimError(
      'struct_invalid_field',
      `run.json: workers[${at}] differs from the layout agentsPerWorker ${plan.agentsPerWorker} gives`,
      `workers[${at}]`,
    );
  }
}
