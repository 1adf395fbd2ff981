// The identities a checkpoint is bound to, computed on the coordinator side from the live
// composition: the six-field compatibility block, the expected per-participant compatibility
// digests (the agent one covers the resolved seed), the composition digest and the port map.
// NOT the comparison with a checkpoint (restore-identity.ts) and nothing that talks to workers.
import { createHash } from 'node:crypto';
import type { RunPlan } from '../config.js';
import { canonicalDigest } from '../../core/formats/canonical-json.js';
import type { Digest, Id } from '../../core/formats/scalars.js';
import type { Identities } from '../session/lockstep.js';
import { CONTRACT_DIGEST } from '../../core/protocol/index.js';
import { STATE_FORMAT_ID } from '../store/store.js';
import { recordedModel } from '../launch/model-source.js';

export const SCHEDULER_ID = 'lockstep-v1';
/** One episode per run in detsim (no resets). */
export const EPISODE_ID = 'episode-1';
/** The observation schema the coordinator installs (the parser's identity). */
export const INSPECTION_SCHEMA = 'detsim-observation-v1';
/** How a decision becomes a port action: the decision, or only its `actionFields` (lockstep Phase B). */
export const EXECUTOR_ID = 'decision-fields-v1';

/** Field order of the compatibility block check (docs/spec/checkpoint-store.md, restore step 2). */
export const COMPATIBILITY_FIELDS = [
  'stateFormatId',
  'backendDigest',
  'contentDigest',
  'patchDigest',
  'controllerDigest',
  'parserDigest',
] as const;
export type CompatibilityBlock = Record<(typeof COMPATIBILITY_FIELDS)[number], string>;

/** Short names used in refusals ("parser", "backend", …). */
export function compatibilityFieldName(field: (typeof COMPATIBILITY_FIELDS)[number]): string {
  return field === 'stateFormatId' ? 'stateFormatId' : field.replace(/Digest$/, '');
}

/** What the live group is: the plan, the participants' initialized identities and their Hello facts. */
export interface LiveComposition {
  plan: RunPlan;
  identities: Identities;
  /** Per worker: build digest and runtime from Worker.Hello. */
  workers: { workerId: Id; role: 'agent' | 'environment'; buildDigest: Digest; runtime: string }[];
}

export function portMapOf(plan: RunPlan): { portId: Id; agentId: Id }[] {
  return plan.agents.map((a) => ({ portId: a.portId, agentId: a.agentId }));
}

/** Each plan's model names, computed once per plan (a module's identity hashes its files). */
const namesByPlan = new WeakMap<RunPlan, Map<string, string>>();

/**
 * How a checkpoint names a planned model: a module by its path-free identity, as run.json does
 * (model-source.ts recordedModel), never its absolute path — a checkpoint's bytes and digests do not
 * depend on where the researcher's files live, and a colleague's copy elsewhere resumes it. A
 * built-in's or a Python model's name as it is.
 */
export function checkpointModelName(plan: RunPlan, model: string): string {
  let names = namesByPlan.get(plan);
  if (names === undefined) namesByPlan.set(plan, (names = new Map()));
  let name = names.get(model);
  // run.json's own naming (recordedModel), without a Python model's digest: its name already binds.
  if (name === undefined) names.set(model, (name = recordedModel(model, undefined).model));
  return name;
}

/**
 * The block a checkpoint of this composition carries. `modelsByPath`: as an older detsim's
 * checkpoints of a module model computed it, naming the module by its absolute path (their restore
 * on the machine that took them stays possible; restore-identity.ts).
 */
export function compatibilityBlock(live: LiveComposition, modelsByPath = false): CompatibilityBlock {
  const { plan, identities } = live;
  const named = (model: string) => (modelsByPath ? model : checkpointModelName(plan, model));
  const uniq = (xs: string[]) => [...new Set(xs)].sort();
  return {
    // The code that computes: the worker protocol and every worker implementation/runtime.
    backendDigest: canonicalDigest({
      contractDigest: CONTRACT_DIGEST,
      buildDigests: uniq(live.workers.map((w) => w.buildDigest)),
      runtimes: uniq(live.workers.map((w) => w.runtime)),
    }),
    // What is simulated: the models and versions of every participant.
    contentDigest: canonicalDigest({
      environment: {
        model: named(plan.environment.model),
        modelVersion: identities.environment.modelVersion,
        profileDigest: identities.environment.profileDigest,
      },
      agents: plan.agents.map((a) => {
        const id = identities.agents.get(a.agentId)!;
        return {
          agentId: a.agentId,
          model: named(a.model),
          modelVersion: id.modelVersion,
          plasticityVersion: id.plasticityVersion,
          profileDigest: id.profileDigest,
          datasetDigest: id.datasetDigest,
        };
      }),
    }),
    // The configuration patch: clock, ids, ports and params (seeds are checked one by one instead).
    patchDigest: canonicalDigest({
      sessionId: plan.sessionId,
      seedAlgorithm: plan.seedAlgorithm,
      stepDuration: plan.stepDuration.toJSON(),
      environment: {
        environmentId: plan.environment.environmentId,
        model: named(plan.environment.model),
        params: plan.environment.params,
      },
      agents: plan.agents.map((a) => ({
        agentId: a.agentId,
        portId: a.portId,
        model: named(a.model),
        params: a.params,
      })),
    }),
    // How decisions reach ports: [{portId, controls}] in port order.
    controllerDigest: canonicalDigest(
      plan.agents.map((a) => ({
        portId: a.portId,
        controls: { agentId: a.agentId, executor: EXECUTOR_ID, actionFields: a.actionFields ?? null },
      })),
    ),
    // How observations are read back: the inspection schema of the environment model.
    parserDigest: canonicalDigest({
      inspectionSchema: INSPECTION_SCHEMA,
      environmentModelVersion: identities.environment.modelVersion,
    }),
    stateFormatId: STATE_FORMAT_ID,
  };
}

/** The agent capture compatibility digest (covers the resolved seed), as the worker computes it. */
export function expectedAgentDigest(a: {
  agentId: Id;
  profileDigest: Digest;
  datasetDigest: Digest;
  modelVersion: string;
  plasticityVersion: string;
  seed: number;
}): Digest {
  return canonicalDigest({
    agentId: a.agentId,
    profileDigest: a.profileDigest,
    datasetDigest: a.datasetDigest,
    modelVersion: a.modelVersion,
    plasticityVersion: a.plasticityVersion,
    seed: a.seed,
  });
}

/** The environment capture compatibility digest: {environmentId, modelVersion, ports, profileDigest, seed}. */
export function expectedEnvironmentDigest(e: {
  environmentId: Id;
  modelVersion: string;
  profileDigest: Digest;
  seed: number;
  ports: { portId: Id; agentId: Id }[];
}): Digest {
  return canonicalDigest({
    environmentId: e.environmentId,
    profileDigest: e.profileDigest,
    modelVersion: e.modelVersion,
    seed: e.seed,
    ports: e.ports.map((p) => ({ portId: p.portId, agentId: p.agentId })),
  });
}

/** Composition digest (docs/spec/checkpoint-envelope.md): session, epoch, contract, one line per agent by id. */
export function compositionDigest(live: LiveComposition, epoch: Id): Digest {
  const h = createHash('sha256');
  h.update(`detsim/composition-v1\nsession=${live.plan.sessionId}\nepoch=${epoch}\ncontract=${CONTRACT_DIGEST}\n`);
  const rows = live.plan.agents.map((a) => ({
    agentId: a.agentId,
    portId: a.portId,
    profile: live.identities.agents.get(a.agentId)!.profileDigest,
  }));
  rows.sort((x, y) => (x.agentId < y.agentId ? -1 : x.agentId > y.agentId ? 1 : 0));
  for (const r of rows) h.update(`agent=${r.agentId} port=${r.portId} profile=${r.profile}\n`);
  return h.digest('hex');
}

/** Live per-agent slot facts (sorted by agent id) that a checkpoint's agent rows must equal. */
export function liveAgentRows(live: LiveComposition): {
  agentId: Id;
  portId: Id;
  workerId: Id;
  profileDigest: Digest;
  datasetDigest: Digest;
  modelVersion: string;
  plasticityVersion: string;
  seed: number;
  compatibilityDigest: Digest;
}[] {
  return live.plan.agents
    .map((a) => {
      const id = live.identities.agents.get(a.agentId)!;
      const row = {
        agentId: a.agentId,
        portId: a.portId,
        workerId: a.workerId,
        profileDigest: id.profileDigest,
        datasetDigest: id.datasetDigest,
        modelVersion: id.modelVersion,
        plasticityVersion: id.plasticityVersion,
        seed: a.seed,
      };
      return { ...row, compatibilityDigest: expectedAgentDigest(row) };
    })
    .sort((x, y) => (x.agentId < y.agentId ? -1 : x.agentId > y.agentId ? 1 : 0));
}

export function liveEnvironment(live: LiveComposition): {
  workerId: Id;
  environmentId: Id;
  model: string;
  modelVersion: string;
  profileDigest: Digest;
  seed: number;
  compatibilityDigest: Digest;
} {
  const { plan, identities } = live;
  const row = {
    environmentId: plan.environment.environmentId,
    modelVersion: identities.environment.modelVersion,
    profileDigest: identities.environment.profileDigest,
    seed: plan.environment.seed,
    ports: portMapOf(plan),
  };
  return {
    workerId: plan.environment.workerId,
    environmentId: row.environmentId,
    model: checkpointModelName(plan, plan.environment.model),
    modelVersion: row.modelVersion,
    profileDigest: row.profileDigest,
    seed: row.seed,
    compatibilityDigest: expectedEnvironmentDigest(row),
  };
}
