// A fork that changes model params (`detsim fork --set environment.params.food=N`,
// `--set agents[i].params.explore=N`): the checks before the fork is written, what its run.json
// records, and how its base checkpoint is then restored. The checkpoint keeps its ORIGINAL
// identity: it is verified (here, by restore-identity.ts and again by each worker's StageRestore)
// against the parent's params and profile digests, which the fork's lineage records as
// `atCheckpoint`; only then does each changed participant's worker restore the state with the new
// params (StageRestore `rebind`, workers/fork-rebind.ts), if its model lists every changed param in
// `forkParams` (workers/sdk.ts). From there on the fork's composition is the overridden one (its
// run.json params and profile digests, its own captures, receipts and ReproHash).
// Supported: built-in models (their rules are core/models/params.ts) on TypeScript and Python workers
// and Rust agent workers (each reads `rebind`: workers/python/detsim_worker/fork_rebind.py,
// crates-bridge/worker agent_host.rs); a model module, or an environment on another runtime, is
// refused naming the participant (struct_fork_params_unsupported).
// NOT the rest of a fork (fork.ts) nor the restore flow (restore.ts).
import { canonicalDigest, canonicalize, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import type { Digest, Id } from '../../core/formats/scalars.js';
import {
  builtinParamRules,
  changedParams,
  resolveModelParams,
  type ResolvableModel,
} from '../../core/models/params.js';
import type { JsonObject } from '../../core/protocol/index.js';
import type { RunPlan } from '../config.js';
import type { Override } from '../overrides.js';
import type { Identities } from '../session/lockstep.js';
import type { ForkLineageJson, RunJson } from '../session/run-json.js';
import type { LiveComposition } from './compatibility.js';
import type { RecordedRun } from './run-record.js';

/** A participant's params (as run.json records them) and profile digest. */
export interface ParamsAt {
  params: Record<string, unknown>;
  profileDigest: Digest;
}

/** The participants whose params a fork changed, as its checkpoint holds them (lineage `atCheckpoint`). */
export interface AtCheckpoint {
  environment?: ParamsAt;
  agents?: Record<Id, ParamsAt>;
}

/** What a restore of a fork's base checkpoint is told (restore.ts RestoreOptions.rebind). */
export interface RestoreRebind {
  /** The composition the checkpoint must match: the fork's, the changed participants' params put back. */
  checkpointComposition: Pick<LiveComposition, 'plan' | 'identities'>;
  /** StageRestore's `rebind` for a participant (null: the environment); undefined when it keeps its params. */
  stage(agentId: Id | null): { params: JsonObject; profileDigest: Digest } | undefined;
}

/** `environment.params…` or `agents[i].params…`: the config paths of model params. */
const PARAM_PATH = /^(environment|agents\[[0-9]+\])\.params(\.|\[|$)/;

/** Whether an override sets model params (which a fork may change where the model accepts it). */
export function isParamOverride(path: string): boolean {
  return PARAM_PATH.test(path);
}

/** One participant of the parent as run.json records it, with the params the fork's plan gives it. */
interface Changed {
  field: string;
  agentId: Id | null;
  kind: 'agent' | 'environment';
  model: string;
  modelVersion: string;
  runtime: string;
  before: ParamsAt;
  after: Record<string, unknown>;
}

/** The participants whose params the plan changes, in reference order (the environment, then port order). */
function changedParticipants(rec: RunJson, plan: RunPlan): Changed[] {
  const runtimeOf = (workerId: string) => rec.workers.find((w) => w.workerId === workerId)?.runtime ?? 'unknown';
  const e = rec.environment;
  const all: Changed[] = [
    {
      field: 'environment',
      agentId: null,
      kind: 'environment',
      model: e.model,
      modelVersion: e.modelVersion,
      runtime: runtimeOf(e.workerId),
      before: { params: e.params, profileDigest: e.profileDigest },
      after: plan.environment.params,
    },
    ...rec.agents.map((a, i) => ({
      field: `agents[${i}]`,
      agentId: a.agentId,
      kind: 'agent' as const,
      model: a.model,
      modelVersion: a.modelVersion,
      runtime: runtimeOf(a.workerId),
      before: { params: a.params, profileDigest: a.profileDigest },
      after: plan.agents[i]!.params,
    })),
  ];
  return all.filter((c) => canonicalize(c.before.params) !== canonicalize(c.after));
}

function unsupported(path: string, why: string): never {
  throw new DetsimError(
    'struct_fork_params_unsupported',
    `--set ${path}: a fork cannot change it: ${why}; run the changed config from the start with \`detsim run --set\``,
    path,
  );
}

/** Whether the participant's worker restores with new params: TypeScript, Python, or Rust (agents only; it hosts no environment). */
function rebindsParams(c: Changed): boolean {
  if (c.runtime.startsWith('detsim-ts/') || c.runtime.startsWith('detsim-py/')) return true;
  return c.kind === 'agent' && c.runtime.startsWith('detsim-rs/');
}

/** The worker a runtime string names, for people. */
function runtimeName(runtime: string): string {
  if (runtime.startsWith('detsim-rs/')) return `the Rust worker (${runtime})`;
  if (runtime.startsWith('detsim-py/')) return `the Python worker (${runtime})`;
  return runtime;
}

/** The participant's param rules, once its runtime and model can rebind params; else refused, naming `path`. */
function rebindableRules(c: Changed, path: string): ResolvableModel {
  const who = c.kind === 'environment' ? 'the environment' : `agent ${c.agentId}`;
  if (!rebindsParams(c))
    unsupported(
      path,
      `${who} runs on ${runtimeName(c.runtime)}; only TypeScript and Python workers (and Rust agent workers) restore a checkpoint with new params`,
    );
  const rules = builtinParamRules(c.kind, c.model);
  if (!rules)
    unsupported(path, `${who} runs model ${c.model}, not a built-in one (a fork rebinds params of walker and forage)`);
  return rules;
}

/**
 * The new profile digest of one changed participant, once its runtime, model and every changed
 * (resolved) param are ones a fork can rebind: refused before anything is written, naming the field.
 */
function reboundProfile(c: Changed, checkpointId: Id, overrides: readonly Override[]): Digest {
  const path = overrides.find((o) => o.path.startsWith(`${c.field}.params`))?.path ?? `${c.field}.params`;
  const rules = rebindableRules(c, path);
  const before = resolveModelParams(rules, c.before.params);
  const after = resolveModelParams(rules, c.after);
  const profile = (params: unknown) => canonicalDigest({ model: c.model, modelVersion: c.modelVersion, params });
  if (profile(before.params) !== c.before.profileDigest)
    unsupported(path, `the recorded profile digest is not the one model ${c.model} gives its recorded params`);
  if (before.strict !== after.strict)
    refuse(`${c.field}.params.strict`, checkpointId, "it is the worker's strict mode, not a model param");
  const accepted = rules.forkParams ?? [];
  for (const k of changedParams(before.params, after.params))
    if (!accepted.includes(k))
      refuse(
        `${c.field}.params.${k}`,
        checkpointId,
        `model ${c.modelVersion} does not accept a change of ${k} when it restores a state (it accepts: ${accepted.join(', ') || 'none'})`,
      );
  return profile(after.params);
}

function refuse(path: string, checkpointId: Id, why: string): never {
  throw new DetsimError(
    'struct_fork_override',
    `--set ${path}: a fork from checkpoint ${checkpointId} cannot change it: ${why}`,
    path,
  );
}

/**
 * The fork's changed participants checked (reboundProfile), and what the fork's run.json then
 * holds: the new params and profile digests in `environment` / `agents`, and `atCheckpoint`.
 */
export function rebindForFork(
  runJson: RunJson,
  raw: Record<string, JsonValue>,
  plan: RunPlan,
  checkpointId: Id,
  overrides: readonly Override[],
): { patch: Record<string, JsonValue>; atCheckpoint: AtCheckpoint | null } {
  const changed = changedParticipants(runJson, plan);
  if (changed.length === 0) return { patch: {}, atCheckpoint: null };
  const at: AtCheckpoint = {};
  const environment = { ...(raw.environment as Record<string, JsonValue>) };
  const agents = (raw.agents as Record<string, JsonValue>[]).map((a) => ({ ...a }));
  for (const c of changed) {
    const profileDigest = reboundProfile(c, checkpointId, overrides);
    const row = c.kind === 'environment' ? environment : agents[Number(/[0-9]+/.exec(c.field)![0])]!;
    row.params = c.after as JsonValue;
    row.profileDigest = profileDigest;
    if (c.kind === 'environment') at.environment = c.before;
    else (at.agents ??= {})[row.agentId as string] = c.before;
  }
  return { patch: { environment, agents }, atCheckpoint: at };
}

/**
 * The rebind a restore of `checkpoint` needs in a fork: its base checkpoint (id and envelope digest
 * as the lineage records them) when the fork changed params; otherwise undefined (any other restore).
 */
export function forkRebind(
  rec: RecordedRun,
  checkpoint: { checkpointId: Id; envelopeDigest: Digest },
): RestoreRebind | undefined {
  const f: ForkLineageJson | undefined = rec.fork;
  const at = f?.atCheckpoint;
  if (!f || !at || f.checkpoint.id !== checkpoint.checkpointId) return undefined;
  if (f.checkpoint.envelopeDigest !== checkpoint.envelopeDigest) return undefined;
  const { plan, identities } = rec;
  return {
    checkpointComposition: { plan: planAt(plan, at), identities: identitiesAt(identities, at) },
    stage: (agentId) => {
      if (agentId === null)
        return at.environment
          ? { params: plan.environment.params, profileDigest: identities.environment.profileDigest }
          : undefined;
      if (!at.agents?.[agentId]) return undefined;
      const a = plan.agents.find((x) => x.agentId === agentId)!;
      return { params: a.params, profileDigest: identities.agents.get(agentId)!.profileDigest };
    },
  };
}

/** The plan with the changed participants' params as the checkpoint holds them. */
function planAt(plan: RunPlan, at: AtCheckpoint): RunPlan {
  return {
    ...plan,
    environment: at.environment ? { ...plan.environment, params: at.environment.params } : plan.environment,
    agents: plan.agents.map((a) => (at.agents?.[a.agentId] ? { ...a, params: at.agents[a.agentId]!.params } : a)),
  };
}

/** The identities with the changed participants' profile digests as the checkpoint holds them. */
function identitiesAt(ids: Identities, at: AtCheckpoint): Identities {
  return {
    environment: at.environment ? { ...ids.environment, profileDigest: at.environment.profileDigest } : ids.environment,
    agents: new Map(
      [...ids.agents].map(([id, e]) => [
        id,
        at.agents?.[id] ? { ...e, profileDigest: at.agents[id]!.profileDigest } : e,
      ]),
    ),
  };
}
