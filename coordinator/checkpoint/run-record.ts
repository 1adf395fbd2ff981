/* eslint-disable @typescript-eslint/no-explicit-any -- run.json is read untyped until it has one schema for writer and reader (issue 12) */
// Reading a run directory's run.json back into the RunPlan and participant identities it
// recorded, so `detsim resume` and `detsim replay <run-dir>` relaunch exactly the recorded
// composition (not whatever a config file says today): planFromRunJson is the one rebuild.
// NOT the run itself and not the checkpoint checks (restore-identity.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { resolveConfig, type RunPlan, type WorkerRuntimeName } from '../config.js';
import { canonicalize, parseStrict } from '../../core/formats/canonical-json.js';
import { DetsimError, isDetsimError } from '../../core/formats/errors.js';
import { readId, readObject, type Id } from '../../core/formats/scalars.js';
import { SEED_ALGORITHM } from '../../core/formats/seed.js';
import type { Identities } from '../lockstep.js';
import type { AgentInitializeResultEntry } from '../../core/protocol/index.js';
import { RUN_FILES } from '../run-dir.js';

export interface RecordedRun {
  plan: RunPlan;
  identities: Identities;
  /** The epoch the run started in and the dispatch mode it used. */
  epoch: Id;
  dispatch: 'sequential' | 'concurrent' | 'reversed';
  steps: number;
}

function fail(runDir: string, message: string, field?: string): never {
  throw new DetsimError('struct_run_record', `${join(runDir, RUN_FILES.run)}: ${message}`, field);
}

export function readRunRecord(runDir: string): RecordedRun {
  let rec: Record<string, any>;
  try {
    rec = readObject(parseStrict(readFileSync(join(runDir, RUN_FILES.run))), 'run.json') as Record<string, any>;
  } catch (e) {
    const err = e as NodeJS.ErrnoException;
    if (err.code === 'ENOENT') fail(runDir, 'missing: the run never initialized, there is nothing to resume');
    if (isDetsimError(e)) fail(runDir, e.message, e.field);
    throw e;
  }
  try {
    if (rec.format !== 'detsim-run-v1') fail(runDir, `format is ${JSON.stringify(rec.format)}, not detsim-run-v1`, 'format');
    // Resume checks the recorded seeds itself (recorded-composition.ts names masterSeed or the seed).
    const plan = planFromRunJson(rec, { keepRecordedSeeds: true });
    const env = readObject(rec.environment, 'environment') as Record<string, any>;
    const ids = new Map<Id, AgentInitializeResultEntry>();
    for (const a of rec.agents as Record<string, any>[]) {
      ids.set(a.agentId, { agentId: a.agentId, modelVersion: a.modelVersion, plasticityVersion: a.plasticityVersion, profileDigest: a.profileDigest, datasetDigest: a.datasetDigest, tickDuration: a.tickDuration, committedStep: '0' } as AgentInitializeResultEntry);
    }
    const identities: Identities = { environment: { environmentId: env.environmentId, modelVersion: env.modelVersion, profileDigest: env.profileDigest }, agents: ids };
    return { plan, identities, epoch: readId(rec.epoch, 'epoch'), dispatch: rec.dispatch ?? 'concurrent', steps: plan.steps };
  } catch (e) {
    // A seed that differs from its derivation keeps its identity code; anything else is a bad record.
    if (isDetsimError(e) && e.reason === 'ident_seed_mismatch') throw new DetsimError(e.reason, `${join(runDir, RUN_FILES.run)}: ${e.message}`, e.field);
    if (isDetsimError(e) && e.reason !== 'struct_run_record') fail(runDir, e.message, e.field);
    if (e instanceof TypeError) fail(runDir, `malformed: ${e.message}`);
    throw e;
  }
}

// ---------------------------------------------------------------------------------------------
// The one rebuild of a RunPlan from run.json, for resume (above) and replay (receipt/replay.ts).

type Obj = Record<string, unknown>;

function obj(v: unknown, field: string): Obj {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) throw new DetsimError('struct_invalid_field', `${field} is not an object`, field);
  return v as Obj;
}

function list(v: unknown, field: string): Obj[] {
  if (!Array.isArray(v)) throw new DetsimError('struct_invalid_field', `${field} is not a list`, field);
  return v.map((x, i) => obj(x, `${field}[${i}]`));
}

/**
 * The planned runtime of a recorded agent worker, from the Hello runtime run.json holds
 * ("detsim-rs/…" is the Rust worker, "detsim-ts/…" the TypeScript one, "detsim-py/…" the Python one);
 * anything else is refused.
 */
function runtimeOf(w: Obj, field: string): WorkerRuntimeName {
  const r = w.runtime;
  if (typeof r === 'string' && r.startsWith('detsim-rs/')) return 'rust';
  if (typeof r === 'string' && r.startsWith('detsim-ts/')) return 'typescript';
  if (typeof r === 'string' && r.startsWith('detsim-py/')) return 'python';
  throw new DetsimError('struct_invalid_field', `${field}: ${JSON.stringify(r)} is not a detsim-ts/, detsim-rs/ or detsim-py/ worker runtime`, field);
}

/** `{runtime: 'python'}` when the recorded environment worker ran on Python (the default, TypeScript, stays implicit). */
function pythonEnvironment(workers: Obj[]): { runtime?: 'python' } {
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
export function planFromRunJson(runJson: unknown, opts: { keepRecordedSeeds?: boolean } = {}): RunPlan {
  const r = obj(runJson, '(top level)');
  const env = obj(r.environment, 'environment');
  const agents = list(r.agents, 'agents');
  const workers = list(r.workers, 'workers');
  const sd = obj(r.stepDuration, 'stepDuration');
  const agentWorkers = workers.map((w, i) => ({ w, i })).filter(({ w }) => w.role === 'agent');
  if (r.seedDerivation !== SEED_ALGORITHM) throw new DetsimError('struct_invalid_field', `run.json: seedDerivation ${JSON.stringify(r.seedDerivation)} is not ${SEED_ALGORITHM}`, 'seedDerivation');
  const config = {
    sessionId: r.sessionId,
    masterSeed: r.masterSeed,
    steps: r.steps,
    worldStepNs: { numerator: sd.numerator, denominator: sd.denominator },
    environment: { id: env.environmentId, model: env.model, params: env.params ?? {}, ...pythonEnvironment(workers) },
    agents: agents.map((a) => ({ id: a.agentId, model: a.model, params: a.params ?? {}, port: a.portId, ...(a.actionFields === undefined ? {} : { actionFields: a.actionFields }) })),
    workers: { agentsPerWorker: r.agentsPerWorker, transport: r.transport, runtime: agentWorkers.map(({ w, i }) => runtimeOf(w, `workers[${i}].runtime`)) },
    deadlines: r.deadlines,
  };
  // Recorded module paths are absolute already; the base directory resolves nothing.
  const plan = resolveConfig(config, { baseDir: '/' });
  checkLayout(plan, workers);
  if (opts.keepRecordedSeeds) return withRecordedSeeds(plan, agents, env);
  for (const [i, a] of agents.entries()) {
    const p = plan.agents[i]!;
    if (p.seed !== a.seed) throw new DetsimError('ident_seed_mismatch', `run.json: agents[${i}].seed ${String(a.seed)} differs from the derived ${p.seed} for ${p.agentId}`, `agents[${i}].seed`);
  }
  if (plan.environment.seed !== env.seed) throw new DetsimError('ident_seed_mismatch', `run.json: environment.seed ${String(env.seed)} differs from the derived ${plan.environment.seed}`, 'environment.seed');
  return plan;
}

/** The plan with the seeds run.json records (each must be an integer; whether it derives is the caller's check). */
function withRecordedSeeds(plan: RunPlan, agents: Obj[], env: Obj): RunPlan {
  const seedOf = (v: unknown, field: string): number => {
    if (typeof v !== 'number' || !Number.isInteger(v)) throw new DetsimError('struct_invalid_field', `run.json: ${field} is not an integer seed`, field);
    return v;
  };
  return {
    ...plan,
    environment: { ...plan.environment, seed: seedOf(env.seed, 'environment.seed') },
    agents: plan.agents.map((a, i) => ({ ...a, seed: seedOf(agents[i]!.seed, `agents[${i}].seed`) })),
  };
}

/** The recorded workers must be the layout the plan derives (ids, roles, hosted agents, in order). */
function checkLayout(plan: RunPlan, recorded: Obj[]): void {
  const derived = plan.workers.map((w) => canonicalize({ workerId: w.workerId, role: w.role, agentIds: w.agentIds }));
  const seen = recorded.map((w) => canonicalize({ workerId: w.workerId ?? null, role: w.role ?? null, agentIds: (w.agentIds ?? null) as never }));
  const i = derived.findIndex((d, k) => d !== seen[k]);
  if (i >= 0 || derived.length !== seen.length) {
    const at = i >= 0 ? i : Math.min(derived.length, seen.length);
    throw new DetsimError('struct_invalid_field', `run.json: workers[${at}] differs from the layout agentsPerWorker ${plan.agentsPerWorker} gives`, `workers[${at}]`);
  }
}
