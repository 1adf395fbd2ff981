// Reading a run directory's run.json back into the RunPlan and participant identities it
// recorded, so `detsim resume` relaunches exactly the recorded composition (not whatever a config
// file says today). NOT the run itself and not the checkpoint checks (restore-identity.ts).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { PlannedAgent, PlannedWorker, RunPlan } from '../config.js';
import { parseStrict } from '../formats/canonical-json.js';
import { DetsimError, isDetsimError } from '../formats/errors.js';
import { RationalNs, readId, readObject, readU64, type Id } from '../formats/scalars.js';
import type { Identities } from '../lockstep.js';
import type { AgentInitializeResultEntry } from '../protocol/index.js';
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
    const env = readObject(rec.environment, 'environment') as Record<string, any>;
    const agents: PlannedAgent[] = (rec.agents as Record<string, any>[]).map((a) => ({ agentId: readId(a.agentId, 'agents[].agentId'), portId: readId(a.portId, 'agents[].portId'), model: String(a.model), params: a.params ?? {}, seed: a.seed, workerId: readId(a.workerId, 'agents[].workerId'), actionFields: a.actionFields === undefined ? null : a.actionFields }));
    const workers: PlannedWorker[] = (rec.workers as Record<string, any>[]).map((w) => ({ workerId: readId(w.workerId, 'workers[].workerId'), role: w.role, agentIds: [...w.agentIds], ...runtimeOf(w) }));
    const plan: RunPlan = {
      sessionId: readId(rec.sessionId, 'sessionId'),
      masterSeed: readU64(rec.masterSeed, 'masterSeed'),
      seedAlgorithm: rec.seedDerivation,
      steps: rec.steps,
      stepDuration: RationalNs.readDuration(rec.stepDuration, 'stepDuration'),
      environment: { environmentId: readId(env.environmentId, 'environment.environmentId'), model: String(env.model), params: env.params ?? {}, seed: env.seed, workerId: readId(env.workerId, 'environment.workerId') },
      agents,
      workers,
      agentsPerWorker: rec.agentsPerWorker,
      transport: rec.transport,
      deadlines: rec.deadlines,
      seedCollisions: rec.seedCollisions ?? [],
      baseDir: runDir,
    };
    const ids = new Map<Id, AgentInitializeResultEntry>();
    for (const a of rec.agents as Record<string, any>[]) {
      ids.set(a.agentId, { agentId: a.agentId, modelVersion: a.modelVersion, plasticityVersion: a.plasticityVersion, profileDigest: a.profileDigest, datasetDigest: a.datasetDigest, tickDuration: a.tickDuration, committedStep: '0' } as AgentInitializeResultEntry);
    }
    const identities: Identities = { environment: { environmentId: env.environmentId, modelVersion: env.modelVersion, profileDigest: env.profileDigest }, agents: ids };
    if (!Number.isInteger(rec.steps) || rec.steps < 0) fail(runDir, 'steps is not a whole number', 'steps');
    return { plan, identities, epoch: readId(rec.epoch, 'epoch'), dispatch: rec.dispatch ?? 'concurrent', steps: rec.steps };
  } catch (e) {
    if (isDetsimError(e) && e.reason !== 'struct_run_record') fail(runDir, e.message, e.field);
    if (e instanceof TypeError) fail(runDir, `malformed: ${e.message}`);
    throw e;
  }
}

/**
 * The runtime an agent worker ran on, from the Hello runtime recorded in run.json
 * ("detsim-rs/…" is the Rust worker), so a resumed run puts each worker back on its language.
 */
function runtimeOf(w: Record<string, unknown>): Pick<PlannedWorker, 'runtime'> {
  return w.role === 'agent' && typeof w.runtime === 'string' && w.runtime.startsWith('detsim-rs/') ? { runtime: 'rust' } : {};
}
