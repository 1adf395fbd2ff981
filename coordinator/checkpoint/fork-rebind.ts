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
// crates-bridge/worker agent_host.rs), and TypeScript model modules (their own resolveParams /
// acceptedParams and forkParams, asked in a child process: launch/module-probe.ts) and Python user
// models (resolve_params and fork_params, asked in one interpreter: launch/python-runtime.ts); an
// environment on a runtime that hosts none is refused naming it (struct_fork_params_unsupported).
// NOT the rest of a fork (fork.ts) nor the restore flow (restore.ts).
import { canonicalDigest, canonicalize, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import type { Digest, Id } from '../../core/formats/scalars.js';
import { builtinParamRules, changedParams, resolveModelParams, type ResolvedParams } from '../../core/models/params.js';
import { defaultWorkerCommand } from '../launch/launcher.js';
import { moduleForkParams, type ModuleForkParams } from '../launch/module-probe.js';
import { pythonForkParams } from '../launch/python-runtime.js';
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
  /** The plan's model: a built-in's name, a module's absolute path, or `python:…`. */
  planModel: string;
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
      planModel: plan.environment.model,
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
      planModel: plan.agents[i]!.model,
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

/** A participant's params resolved by its model's own rules, before and after, and what it lets a fork change. */
interface Resolved {
  before: ResolvedParams;
  after: ResolvedParams;
  forkParams: readonly string[];
}

const pathOf = (c: Changed, overrides: readonly Override[]) =>
  overrides.find((o) => o.path.startsWith(`${c.field}.params`))?.path ?? `${c.field}.params`;
const whoOf = (c: Changed) => (c.kind === 'environment' ? 'the environment' : `agent ${c.agentId}`);

/** A built-in model's params resolved by its rules (core/models/params.ts); a model without rules refused, naming `path`. */
function resolvedBuiltin(c: Changed, path: string): Resolved {
  const rules = builtinParamRules(c.kind, c.model);
  if (!rules) unsupported(path, `${whoOf(c)} runs model ${c.model}, which has no param rules a fork can ask`);
  return {
    before: resolveModelParams(rules, c.before.params),
    after: resolveModelParams(rules, c.after),
    forkParams: rules.forkParams ?? [],
  };
}

/**
 * Every changed participant's params as its model resolves them: a built-in's by its rules here, a
 * module's by the module itself in the plan-time check's child process (never imported here). A
 * runtime that cannot restore with new params, or a module that refuses them, is refused by name.
 */
function resolveChanged(
  changed: readonly Changed[],
  plan: RunPlan,
  checkpointId: Id,
  overrides: readonly Override[],
): Resolved[] {
  for (const c of changed)
    if (!rebindsParams(c))
      unsupported(
        pathOf(c, overrides),
        `${whoOf(c)} runs on ${runtimeName(c.runtime)}; only TypeScript and Python workers (and Rust agent workers) restore a checkpoint with new params`,
      );
  const asCheck = (c: Changed) => ({ field: c.field, before: c.before.params, after: c.after });
  const modules = changed.filter((c) => c.planModel.startsWith('/'));
  const pythons = changed.filter((c) => c.planModel.startsWith('python:'));
  const answers = [
    ...moduleForkParams(
      modules.map((c) => ({ kind: c.kind, path: c.planModel, ...asCheck(c) })),
      defaultWorkerCommand(),
    ),
    ...(pythonForkParams(
      pythons.map((c) => ({ model: c.planModel, ...asCheck(c) })),
      plan.modelDirs ?? [],
    ) as ModuleForkParams[]),
  ];
  return changed.map((c) => {
    const m = answers.find((x) => x.field === c.field);
    if (m === undefined) return resolvedBuiltin(c, pathOf(c, overrides));
    if ('refused' in m)
      refuse(`${c.field}.params.${m.refused.param.replace(/^params\./, '')}`, checkpointId, m.refused.message);
    return { before: m.before as ResolvedParams, after: m.after as ResolvedParams, forkParams: m.forkParams };
  });
}

/**
 * The new profile digest of one changed participant, once every changed (resolved) param is one
 * its model lets a fork change: refused before anything is written, naming the field.
 */
function reboundProfile(c: Changed, r: Resolved, checkpointId: Id, overrides: readonly Override[]): Digest {
  const path = pathOf(c, overrides);
  // A Python user model's profile names its spec as the worker loads it (run.json adds its source digest).
  const model = c.planModel.startsWith('python:') ? c.planModel : c.model;
  const profile = (params: unknown) => canonicalDigest({ model, modelVersion: c.modelVersion, params });
  if (profile(r.before.params) !== c.before.profileDigest)
    unsupported(path, `the recorded profile digest is not the one model ${c.model} gives its recorded params`);
  if (r.before.strict !== r.after.strict)
    refuse(`${c.field}.params.strict`, checkpointId, "it is the worker's strict mode, not a model param");
  for (const k of changedParams(r.before.params, r.after.params))
    if (!r.forkParams.includes(k))
      refuse(
        `${c.field}.params.${k}`,
        checkpointId,
        `model ${c.modelVersion} does not accept a change of ${k} when it restores a state (it accepts: ${r.forkParams.join(', ') || 'none'})${forkParamsHint(c)}`,
      );
  return profile(r.after.params);
}

/** Where a model of one's own lists the params a fork may change (a built-in model's are fixed). */
function forkParamsHint(c: Changed): string {
  if (c.planModel.startsWith('python:'))
    return '; a Python model lists the params a fork may change in its fork_params';
  if (c.planModel.startsWith('/')) return '; a model lists the params a fork may change in its forkParams';
  return '';
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
  const resolved = resolveChanged(changed, plan, checkpointId, overrides);
  for (const [i, c] of changed.entries()) {
    const profileDigest = reboundProfile(c, resolved[i]!, checkpointId, overrides);
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

/**
 * A fork's run.json with the changed participants' params and profile digests as its base
 * checkpoint holds them (`atCheckpoint` put back): the composition a fork OF that checkpoint starts
 * from, as the fork itself did.
 */
export function runJsonAtCheckpoint(raw: Record<string, JsonValue>, at: AtCheckpoint): Record<string, JsonValue> {
  const env = raw.environment as Record<string, JsonValue>;
  const put = (row: Record<string, JsonValue>, p: ParamsAt | undefined) =>
    p ? { ...row, params: p.params as JsonValue, profileDigest: p.profileDigest } : row;
  return {
    ...raw,
    environment: put(env, at.environment),
    agents: (raw.agents as Record<string, JsonValue>[]).map((a) => put(a, at.agents?.[a.agentId as string])),
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
