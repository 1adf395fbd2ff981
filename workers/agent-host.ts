// The agent side of a worker process: hosts one or more agents and implements Agent.Initialize /
// Prepare / Commit (batched: one message carries all of the process's agents) and the agent side
// of State.Capture / StageRestore / ActivateRestore. Not the transport, not Hello/Status.
import { canonicalDigest } from '../core/formats/canonical-json.js';
import { DetsimError } from '../core/formats/errors.js';
import {
  RationalNs,
  type Scope,
  readI32,
  readId,
  readObject,
  readRequestId,
  readU64,
  refuseUnknownFields,
} from '../core/formats/scalars.js';
// The results below are built as JsonObject (the step cache and the slots keep them so) and cast to
// their table type where a handler returns them: the literal that builds each one follows bodies.ts.
import type { AgentCommitResult, AgentInitializeResultEntry, PreparedDecision } from '../core/protocol/bodies.js';
import { type METHODS, ProtocolRefusal, type Request } from '../core/protocol/envelope.js';
import type { ResultOf } from '../core/protocol/methods.js';
import {
  agentCompatibilityDigest,
  checkEpoch,
  checkSession,
  checkStep,
  firstMismatch,
  profileDigest,
  readStageParams,
  requireScope,
  restoreToken,
  stagedPayload,
  type StageParams,
  PAYLOAD_VERSION,
  readPayloadHeader,
} from './checks.js';
import { checkRebind, type Rebind } from './fork-rebind.js';
import type { HostContext, HostReply } from './host-context.js';
import { callModel, invalid, loadModel, releaseState } from './model-call.js';
import { PrepareStateGuard } from './prepare-guard.js';
import {
  loadedIdentityField,
  loadedModuleIdentity,
  mismatchMessage,
  payloadModel,
  resolveAgentModel,
  restoreSpecOf,
} from './models/registry.js';
import { ONE_MS, NO_DATASET_DIGEST, type AgentModel, type AgentReward, type JsonObject } from './sdk.js';
import { exactCapture } from './capture-check.js';
import { capturedBytes, capturedPayload, encodeCapture } from './capture-encode.js';
import { StepCache, bodyKey, opKey } from './op-cache.js';
import { TickClock } from './tick-clock.js';

type Phase = 'ready' | 'prepared' | 'failed';

/** Everything fixed at Initialize: what the agent is. */
interface AgentIdentity {
  agentId: string;
  modelSpec: string;
  model: AgentModel<unknown>;
  strict: boolean;
  /** A built-in model: the shared-state guard (strict user models only) skips it. */
  builtin: boolean;
  params: JsonObject;
  seed: number;
  stepDuration: RationalNs;
  tickDuration: RationalNs;
  modelVersion: string;
  plasticityVersion: string;
  profileDigest: string;
  datasetDigest: string;
  compatibilityDigest: string;
}

/** Where the agent is on its timeline. */
interface AgentTimeline {
  state: unknown;
  clock: TickClock;
  observation: JsonObject;
  epoch: string;
  committedStep: bigint;
}

interface StagedRestore {
  token: string;
  checkpointId: string;
  scope: Scope;
  identity: AgentIdentity;
  timeline: AgentTimeline;
}

/** A model state restored ahead of its stage (the restore prefetch, store-files-v1), with the inputs it came from. */
interface WarmedState {
  model: AgentModel<unknown>;
  params: JsonObject;
  seed: number;
  strict: boolean;
  state: unknown;
}

interface AgentSlot extends AgentIdentity, AgentTimeline {
  phase: Phase;
  /** Request ids that received this step's Prepare result (a retry may use a new id). */
  preparedIds: Set<string>;
  initDigest: string;
  initResult: JsonObject;
}

/** The body identity of every Prepare entry: it holds nothing but the agent id, which is in the key. */
const PREPARE_BODY = (): string => '';

/**
 * The ticks this Prepare runs. A clock that would leave U64 fails the agent as the Rust worker does
 * (BACKEND_FAILURE, mutation unknown): the run cannot go on with a time it cannot represent.
 */
function advanceClock(slot: AgentSlot): bigint {
  try {
    return slot.clock.advance();
  } catch (e) {
    slot.phase = 'failed';
    throw new ProtocolRefusal(
      'BACKEND_FAILURE',
      `agent ${slot.agentId}: prepare failed: ${(e as Error).message}`,
      'unknown',
    );
  }
}

function readEntries(params: JsonObject, allowed: readonly string[], method: string): JsonObject[] {
  refuseUnknownFields(params, ['agents'], 'params');
  const list = params.agents;
  if (!Array.isArray(list) || list.length === 0)
    throw new ProtocolRefusal('INVALID_ARGUMENT', `${method}: params.agents must be a non-empty list`);
  const seen = new Set<string>();
  return list.map((raw, i) => {
    const e = readObject(raw, `params.agents[${i}]`);
    refuseUnknownFields(e, allowed, `params.agents[${i}]`);
    const id = readId(e.agentId, `params.agents[${i}].agentId`);
    if (seen.has(id)) throw new ProtocolRefusal('INVALID_ARGUMENT', `${method}: agent ${id} appears twice`);
    seen.add(id);
    return e;
  });
}

function readRewards(value: unknown, field: string): AgentReward[] {
  if (!Array.isArray(value)) throw new ProtocolRefusal('INVALID_ARGUMENT', `${field} must be a list`);
  return value.map((raw, i) => {
    const r = readObject(raw, `${field}[${i}]`);
    refuseUnknownFields(r, ['eventId', 'ruleId', 'value'], `${field}[${i}]`);
    if (typeof r.value !== 'number' || !Number.isFinite(r.value))
      throw new ProtocolRefusal('INVALID_ARGUMENT', `${field}[${i}].value must be a finite number`);
    return {
      eventId: readId(r.eventId, `${field}[${i}].eventId`),
      ruleId: readId(r.ruleId, `${field}[${i}].ruleId`),
      value: r.value,
    };
  });
}

export class AgentHost {
  private readonly agents = new Map<string, AgentSlot>();
  private readonly staged = new Map<string, StagedRestore>();
  private readonly usedTokens = new Set<string>();
  private readonly cache = new StepCache<JsonObject>();
  /** The restore prefetch (store-files-v1): model state restored from a prefetched payload ahead of its stage. */
  private readonly warmed = new WeakMap<object, WarmedState>();
  /** The epoch of the last Initialize or activation (for Status). */
  currentEpoch: string | undefined;

  constructor(private readonly ctx: HostContext) {}

  // ---- Status ---------------------------------------------------------------------------------

  get state(): 'uninitialized' | 'ready' | 'prepared' | 'staged-restore' | 'failed' {
    if (this.agents.size === 0) return this.staged.size > 0 ? 'staged-restore' : 'uninitialized';
    let prepared = false;
    for (const a of this.agents.values()) {
      if (a.phase === 'failed') return 'failed';
      if (a.phase === 'prepared') prepared = true;
    }
    if (prepared) return 'prepared';
    return this.staged.size > 0 ? 'staged-restore' : 'ready';
  }

  /** The lowest committed step over hosted agents (they move together). */
  get boundary(): bigint | undefined {
    let min: bigint | undefined;
    for (const a of this.agents.values()) if (min === undefined || a.committedStep < min) min = a.committedStep;
    return min;
  }

  get agentCount(): number {
    return this.agents.size;
  }

  // ---- Agent.Initialize -----------------------------------------------------------------------

  async initialize(req: Request): Promise<HostReply<ResultOf<typeof METHODS.agentInitialize>>> {
    const scope = requireScope(req);
    checkSession(scope, this.ctx.sessionId);
    if (scope.step !== '0')
      throw new ProtocolRefusal(
        'INVALID_ARGUMENT',
        `Agent.Initialize: scope.step must be "0", not ${JSON.stringify(scope.step)}`,
      );
    let entries: JsonObject[];
    try {
      entries = readEntries(
        req.params,
        ['agentId', 'model', 'params', 'seed', 'stepDuration', 'observation'],
        req.method,
      );
    } catch (e) {
      return invalid(e);
    }
    // Validate and build every agent before installing any: a refusal leaves the worker untouched.
    const built: AgentSlot[] = [];
    const results: JsonObject[] = [];
    for (const [i, e] of entries.entries()) {
      const digest = canonicalDigest({ method: req.method, scope, entry: e });
      const existing = this.agents.get(e.agentId as string);
      if (existing) {
        if (existing.initDigest === digest && existing.epoch === scope.epoch) {
          results.push(existing.initResult);
          continue;
        }
        throw new ProtocolRefusal(
          'CONFLICT',
          `Agent.Initialize: agent ${String(e.agentId)} is already initialized with a different request`,
        );
      }
      const slot = await this.buildAgent(e, i, scope, digest);
      built.push(slot);
      results.push(slot.initResult);
    }
    for (const slot of built) this.agents.set(slot.agentId, slot);
    if (built.length > 0) {
      this.currentEpoch = scope.epoch;
      this.ctx.progress(req.requestId);
    }
    return { result: { agents: results as unknown as AgentInitializeResultEntry[] } };
  }

  private async buildAgent(e: JsonObject, i: number, scope: Scope, initDigest: string): Promise<AgentSlot> {
    const field = `params.agents[${i}]`;
    let agentId: string,
      modelSpec: string,
      seed: number,
      stepDuration: RationalNs,
      observation: JsonObject,
      rawParams: JsonObject;
    try {
      agentId = readId(e.agentId, `${field}.agentId`);
      if (typeof e.model !== 'string' || e.model.length === 0)
        throw new DetsimError(
          'struct_invalid_field',
          `${field}.model must be a model name or module path`,
          `${field}.model`,
        );
      modelSpec = e.model;
      rawParams = readObject(e.params, `${field}.params`);
      seed = readI32(e.seed, `${field}.seed`);
      stepDuration = RationalNs.readDuration(e.stepDuration, `${field}.stepDuration`);
      observation = readObject(e.observation, `${field}.observation`);
    } catch (err) {
      return invalid(err);
    }
    const identity = await this.identityFor(agentId, modelSpec, rawParams, seed, stepDuration, field);
    const state = callModel(identity.strict, `agent ${agentId}`, 'initialize', 'none', () =>
      identity.model.initialize({ agentId, seed, params: identity.params, observation }),
    );
    const initResult: JsonObject = {
      agentId,
      modelVersion: identity.modelVersion,
      plasticityVersion: identity.plasticityVersion,
      profileDigest: identity.profileDigest,
      datasetDigest: identity.datasetDigest,
      tickDuration: identity.tickDuration.toJSON(),
      committedStep: '0',
      ...loadedIdentityField(identity),
    };
    return {
      ...identity,
      state,
      clock: new TickClock(stepDuration, identity.tickDuration),
      observation,
      epoch: scope.epoch,
      committedStep: 0n,
      phase: 'ready',
      preparedIds: new Set(),
      initDigest,
      initResult,
    };
  }

  /** Resolve the model and everything the profile and compatibility digests cover. */
  private async identityFor(
    agentId: string,
    modelSpec: string,
    rawParams: JsonObject,
    seed: number,
    stepDuration: RationalNs,
    field: string,
  ): Promise<AgentIdentity> {
    const { model, strict, params, builtin } = await loadModel(
      (spec) => resolveAgentModel(spec, this.ctx.launchedModels),
      modelSpec,
      rawParams,
      field,
      this.ctx.strictUserModels,
    );
    let tickDuration: RationalNs;
    try {
      tickDuration = RationalNs.readDuration(model.tickDuration ?? ONE_MS, `model ${modelSpec} tickDuration`);
    } catch (err) {
      return invalid(err);
    }
    const modelVersion = model.modelVersion;
    const plasticityVersion = model.plasticityVersion ?? 'none-v1';
    const datasetDigest = model.datasetDigest ?? NO_DATASET_DIGEST;
    // A module model enters by its path-free identity (name and content digest), never its path.
    const profile = profileDigest(builtin ? modelSpec : loadedModuleIdentity(modelSpec), modelVersion, params);
    const compatibilityDigest = agentCompatibilityDigest({
      agentId,
      profileDigest: profile,
      datasetDigest,
      modelVersion,
      plasticityVersion,
      seed,
    });
    return {
      agentId,
      modelSpec,
      model,
      strict,
      builtin,
      params,
      seed,
      stepDuration,
      tickDuration,
      modelVersion,
      plasticityVersion,
      profileDigest: profile,
      datasetDigest,
      compatibilityDigest,
    };
  }

  // ---- Agent.Prepare --------------------------------------------------------------------------

  prepare(req: Request): HostReply<ResultOf<typeof METHODS.agentPrepare>> {
    const scope = requireScope(req);
    checkSession(scope, this.ctx.sessionId);
    let entries: JsonObject[];
    try {
      entries = readEntries(req.params, ['agentId'], req.method);
    } catch (e) {
      return invalid(e);
    }
    // A Prepare entry is exactly {agentId} (readEntries), which the operation key already names.
    const plan = this.planStep(req, scope, entries, PREPARE_BODY, (slot) => {
      if (slot.phase !== 'ready')
        throw new ProtocolRefusal(
          'INVALID_PHASE',
          `agent ${slot.agentId} is ${slot.phase}, not ready, at step ${scope.step}`,
        );
    });
    const out: JsonObject[] = [];
    const guard = new PrepareStateGuard();
    for (const p of plan) {
      if (p.cached) {
        p.slot.preparedIds.add(req.requestId);
        out.push(p.cached);
        continue;
      }
      const slot = p.slot;
      const ticks = advanceClock(slot);
      const decision = this.runModel(slot, 'prepare', () =>
        slot.model.prepare(slot.state, {
          agentId: slot.agentId,
          step: slot.committedStep,
          ticks: Number(ticks),
          observation: slot.observation,
        }),
      );
      if (typeof decision !== 'object' || decision === null || Array.isArray(decision)) {
        slot.phase = 'failed';
        throw new ProtocolRefusal(
          'BACKEND_FAILURE',
          `agent ${slot.agentId}: prepare returned no decision object`,
          'unknown',
        );
      }
      // Keys (also the remainder's) in RFC 8785 order, so the reply encodes on the canonical fast path.
      const { denominator, numerator } = slot.clock.remainder.toJSON();
      const result: JsonObject = {
        agentId: slot.agentId,
        brainTicks: slot.clock.brainTicks.toString(),
        decision,
        remainder: { denominator, numerator },
        ticksAdvanced: ticks.toString(),
      };
      slot.phase = 'prepared';
      slot.preparedIds.clear();
      slot.preparedIds.add(req.requestId);
      this.cache.put(p.key, slot.committedStep, { digest: p.digest, result, requestId: req.requestId });
      this.ctx.progress(req.requestId);
      out.push(result);
      // Strict user models only: two captures per agent-step cost up to a quarter of a lif step.
      if (slot.strict && !slot.builtin) guard.record(slot.agentId, () => slot.model.capture(slot.state));
    }
    guard.check((agentId) => (this.agents.get(agentId)!.phase = 'failed'));
    return { result: { agents: out as unknown as PreparedDecision[] } };
  }

  // ---- Agent.Commit ---------------------------------------------------------------------------

  commit(req: Request): HostReply<ResultOf<typeof METHODS.agentCommit>> {
    const scope = requireScope(req);
    checkSession(scope, this.ctx.sessionId);
    let entries: JsonObject[];
    const parsed = new Map<string, { observation: JsonObject; rewards: AgentReward[]; preparedRequestId: string }>();
    try {
      entries = readEntries(req.params, ['agentId', 'preparedRequestId', 'observation', 'rewards'], req.method);
      for (const [i, e] of entries.entries()) {
        const f = `params.agents[${i}]`;
        parsed.set(e.agentId as string, {
          preparedRequestId: readRequestId(e.preparedRequestId, `${f}.preparedRequestId`),
          observation: readObject(e.observation, `${f}.observation`),
          rewards: readRewards(e.rewards, `${f}.rewards`),
        });
      }
    } catch (e) {
      return invalid(e);
    }
    const plan = this.planStep(req, scope, entries, bodyKey, (slot) => {
      if (slot.phase !== 'prepared')
        throw new ProtocolRefusal(
          'INVALID_PHASE',
          `agent ${slot.agentId} is ${slot.phase}, not prepared, at step ${scope.step}`,
        );
      const prepId = parsed.get(slot.agentId)!.preparedRequestId;
      if (!slot.preparedIds.has(prepId)) {
        throw new ProtocolRefusal(
          'CONFLICT',
          `agent ${slot.agentId}: preparedRequestId ${prepId} is not the Prepare that prepared step ${scope.step}`,
        );
      }
    });
    const out: JsonObject[] = [];
    for (const p of plan) {
      if (p.cached) {
        out.push(p.cached);
        continue;
      }
      const slot = p.slot;
      const c = parsed.get(slot.agentId)!;
      const step = slot.committedStep;
      this.runModel(slot, 'commit', () =>
        slot.model.commit(slot.state, { agentId: slot.agentId, step, observation: c.observation, rewards: c.rewards }),
      );
      slot.observation = c.observation;
      slot.committedStep = step + 1n;
      slot.phase = 'ready';
      slot.preparedIds.clear();
      const result: JsonObject = { agentId: slot.agentId, committedStep: slot.committedStep.toString() };
      this.cache.put(p.key, step, { digest: p.digest, result, requestId: req.requestId });
      this.ctx.progress(req.requestId);
      out.push(result);
    }
    // Keep results of the current and the previous step only.
    const b = this.boundary;
    if (b !== undefined && b >= 2n) this.cache.evictBefore(b - 2n);
    return { result: { agents: out as unknown as AgentCommitResult['agents'] } };
  }

  /**
   * The shared front half of a step mutation: epoch, dedup (before any phase check), then step and
   * phase checks for entries that will execute. Throws before anything mutates.
   */
  private planStep(
    req: Request,
    scope: Scope,
    entries: JsonObject[],
    identify: (entry: JsonObject) => string,
    phaseCheck: (slot: AgentSlot) => void,
  ): { slot: AgentSlot; key: string; digest: string; cached?: JsonObject }[] {
    const plan: { slot: AgentSlot; key: string; digest: string; cached?: JsonObject }[] = [];
    // Parsed once per message; the checks below build their refusal texts only when they refuse.
    const step = BigInt(scope.step);
    for (const e of entries) {
      const slot = this.slot(e.agentId as string);
      if (scope.epoch !== slot.epoch) checkEpoch(scope, slot.epoch, `agent ${slot.agentId}`);
      const key = opKey(scope, req.method, slot.agentId);
      // The key already fixes method and scope: the entry identifies the body.
      const digest = identify(e);
      const hit = this.cache.get(key);
      if (hit) {
        if (hit.digest !== digest)
          throw new ProtocolRefusal(
            'CONFLICT',
            `agent ${slot.agentId}: ${req.method} for step ${scope.step} was already answered for a different body`,
          );
        plan.push({ slot, key, digest, cached: hit.result });
        continue;
      }
      if (step < slot.committedStep && this.cache.hasExpired(req.requestId)) {
        throw new ProtocolRefusal(
          'RESULT_EXPIRED',
          `agent ${slot.agentId}: the result of ${req.requestId} (${req.method}, step ${scope.step}) is no longer kept`,
          'applied',
        );
      }
      if (step !== slot.committedStep) checkStep(scope, slot.committedStep, `agent ${slot.agentId}`);
      phaseCheck(slot);
      plan.push({ slot, key, digest });
    }
    return plan;
  }

  private slot(agentId: string): AgentSlot {
    const slot = this.agents.get(agentId);
    if (!slot) {
      if (this.agents.size === 0)
        throw new ProtocolRefusal('INVALID_PHASE', `agent ${agentId} is not initialized on this worker`);
      throw new ProtocolRefusal('INVALID_ARGUMENT', `agent ${agentId} is not hosted by this worker`);
    }
    if (slot.phase === 'failed')
      throw new ProtocolRefusal('INVALID_PHASE', `agent ${agentId} failed earlier and must be restored`);
    return slot;
  }

  private runModel<T>(slot: AgentSlot, callback: string, fn: () => T): T {
    try {
      return callModel(slot.strict, `agent ${slot.agentId}`, callback, 'unknown', fn);
    } catch (e) {
      slot.phase = 'failed';
      throw e;
    }
  }

  // ---- State.Capture --------------------------------------------------------------------------

  /**
   * State.Capture; with `holdFrom` (store-files-v1) a payload of at least that many bytes is held:
   * kept as pieces for State.WritePayload, unhashed.
   */
  capture(req: Request, holdFrom?: number): HostReply<ResultOf<typeof METHODS.capture>> {
    const scope = requireScope(req);
    checkSession(scope, this.ctx.sessionId);
    let checkpointId: string, agentId: string;
    try {
      refuseUnknownFields(req.params, ['checkpointId', 'agentId'], 'params');
      checkpointId = readId(req.params.checkpointId, 'params.checkpointId');
      if (req.params.agentId === null)
        throw new ProtocolRefusal(
          'INVALID_ARGUMENT',
          'params.agentId is null but this worker hosts agents, not the environment',
        );
      agentId = readId(req.params.agentId, 'params.agentId');
    } catch (e) {
      return invalid(e);
    }
    const slot = this.slot(agentId);
    checkEpoch(scope, slot.epoch, `agent ${agentId}`);
    const boundary = checkStep(scope, slot.committedStep, `agent ${agentId}`);
    if (slot.phase !== 'ready')
      throw new ProtocolRefusal(
        'INVALID_PHASE',
        `agent ${agentId} is ${slot.phase}: capture only at a committed boundary`,
      );
    const modelState = callModel(slot.strict, `agent ${agentId}`, 'capture', 'none', () =>
      slot.model.capture(slot.state),
    );
    if (slot.strict && !slot.builtin) {
      const ctx = { agentId, seed: slot.seed, params: slot.params, observation: slot.observation };
      const model = slot.model;
      exactCapture(
        { restore: (d) => model.restore(d, ctx), capture: (s) => model.capture(s as never) },
        modelState,
        slot.strict,
        `agent ${agentId}`,
        slot.state,
      );
    }
    const payload = {
      payloadVersion: PAYLOAD_VERSION,
      kind: 'agent',
      agentId,
      checkpointId,
      sourceScope: scope,
      committedStep: boundary.toString(),
      model: payloadModel(slot),
      params: slot.params,
      strict: slot.strict,
      seed: slot.seed,
      stepDuration: slot.stepDuration.toJSON(),
      modelVersion: slot.modelVersion,
      plasticityVersion: slot.plasticityVersion,
      profileDigest: slot.profileDigest,
      datasetDigest: slot.datasetDigest,
      accumulator: {
        tickDuration: slot.tickDuration.toJSON(),
        remainder: slot.clock.remainder.toJSON(),
        brainTicks: slot.clock.brainTicks.toString(),
      },
      observation: slot.observation,
      state: modelState,
    };
    const encoded = encodeCapture(payload, `agent ${agentId}`, holdFrom);
    return {
      result: {
        checkpointId,
        agentId,
        boundary: boundary.toString(),
        compatibilityDigest: slot.compatibilityDigest,
        payload: capturedPayload(encoded),
      },
      ...capturedBytes(encoded),
    };
  }

  // ---- State.StageRestore ---------------------------------------------------------------------

  /**
   * The restore prefetch (store-files-v1): while the coordinator still verifies the file, run a
   * live agent's model restore on the prefetched payload into new state (the live agent is
   * untouched). The stage of that very payload takes the result only if its identity gives the
   * model the same inputs; any error here is dropped, so the stage restores again and refuses
   * exactly as it would have.
   */
  warmRestore(agentId: string | null, decoded: unknown): void {
    const live = agentId === null ? undefined : this.agents.get(agentId);
    if (!live || typeof decoded !== 'object' || decoded === null) return;
    const payload = decoded as JsonObject;
    const { seed, observation } = payload;
    if (payload.kind !== 'agent' || payload.agentId !== agentId || !Number.isInteger(seed)) return;
    if (typeof observation !== 'object' || observation === null) return;
    try {
      const inputs = { model: live.model, params: live.params, seed: seed as number, strict: live.strict };
      const state = this.restoreModelState(inputs, live.agentId, payload);
      this.warmed.set(payload, { ...inputs, state });
    } catch {
      // Left to the stage.
    }
  }

  /** The model's restore of `payload.state` (a fresh state; nothing live is touched). */
  private restoreModelState(inputs: Omit<WarmedState, 'state'>, agentId: string, payload: JsonObject): unknown {
    const { model, params, seed, strict } = inputs;
    const observation = payload.observation as JsonObject;
    // The callback names the boundary: an error in a model's restore says where it was restoring to.
    return callModel(strict, `agent ${agentId}`, `restore at boundary ${String(payload.committedStep)}`, 'none', () =>
      model.restore(payload.state, { agentId, seed, params, observation }),
    );
  }

  /** The warmed state of this payload when it was made from the same inputs, else a restore now. */
  private stagedModelState(identity: AgentIdentity, payload: JsonObject): unknown {
    const warm = this.warmed.get(payload);
    this.warmed.delete(payload);
    const same =
      warm !== undefined &&
      warm.model === identity.model &&
      warm.params === identity.params &&
      warm.seed === identity.seed &&
      warm.strict === identity.strict;
    return same ? warm.state : this.restoreModelState(identity, identity.agentId, payload);
  }

  async stageRestore(
    req: Request,
    attachment: Uint8Array | undefined,
  ): Promise<HostReply<ResultOf<typeof METHODS.stageRestore>>> {
    const scope = requireScope(req);
    checkSession(scope, this.ctx.sessionId);
    let staged: StageParams;
    try {
      staged = readStageParams(req.params, scope, 'agent');
    } catch (e) {
      return invalid(e);
    }
    const { checkpointId, sourceScope, compatibilityDigest, ref } = staged;
    const agentId = staged.agentId!;
    const live = this.agents.get(agentId);
    if (live) {
      if (live.phase === 'prepared')
        throw new ProtocolRefusal(
          'INVALID_PHASE',
          `agent ${agentId} is prepared: restore only from ready or uninitialized`,
        );
      if (scope.epoch === live.epoch)
        throw new ProtocolRefusal(
          'STALE_EPOCH',
          `agent ${agentId}: the restore epoch ${scope.epoch} must be new (it is the current epoch)`,
        );
    }
    if (this.staged.has(agentId))
      throw new ProtocolRefusal('CONFLICT', `agent ${agentId} already has a staged restore`);
    const payload = this.readPayload(
      await stagedPayload(attachment, staged, this.ctx.storeDir, this.ctx.prefetched),
      agentId,
      checkpointId,
      sourceScope,
    );
    // Compatibility is recomputed from this worker's own config (or, on a fresh worker, from the
    // model code it would load) plus the payload's seed, never taken from the payload.
    const identity = live
      ? {
          ...live,
          compatibilityDigest: agentCompatibilityDigest({ ...live, seed: payload.seed as number }),
          seed: payload.seed as number,
        }
      : await this.identityFor(
          agentId,
          this.restoreSpec(payload.model as string, `agent ${agentId}`),
          payload.params as JsonObject,
          payload.seed as number,
          RationalNs.read(payload.stepDuration, 'payload.stepDuration'),
          'payload',
        );
    if (!live && typeof payload.strict === 'boolean') identity.strict = payload.strict;
    const order = ['modelVersion', 'plasticityVersion', 'datasetDigest', 'profileDigest'] as const;
    const mismatch = firstMismatch(payload, identity as unknown as Record<string, unknown>, order);
    if (mismatch)
      throw new ProtocolRefusal('INCOMPATIBLE_STATE', mismatchMessage(`agent ${agentId}`, mismatch, identity));
    if (identity.compatibilityDigest !== compatibilityDigest) {
      throw new ProtocolRefusal(
        'INCOMPATIBLE_STATE',
        `agent ${agentId}: compatibilityDigest ${compatibilityDigest} differs from the recomputed ${identity.compatibilityDigest} (seed ${identity.seed})`,
      );
    }
    // A fork's new params: verified above under the payload's own, the state is restored with these.
    const bound = staged.rebind ? await this.rebound(identity, staged.rebind) : identity;
    const timeline = this.timelineFrom(payload, bound, scope);
    const token = restoreToken(checkpointId, scope, ref.digest, this.ctx.incarnationId);
    this.staged.set(agentId, { token, checkpointId, scope, identity: bound, timeline });
    return { result: { checkpointId, agentId, restoreToken: token, ...loadedIdentityField(bound) } };
  }

  /** The spec a fresh worker restores a payload's model with (models/registry.ts restoreSpecOf), or a refusal. */
  private restoreSpec(model: string, who: string): string {
    try {
      return restoreSpecOf(model, this.ctx.launchedModels);
    } catch (e) {
      throw new ProtocolRefusal('INCOMPATIBLE_STATE', `${who}: ${(e as Error).message}`);
    }
  }

  /** A fork's new params (fork-rebind.ts): the identity they give, once the model accepts the change. */
  private async rebound(identity: AgentIdentity, rebind: Rebind): Promise<AgentIdentity> {
    const { agentId, modelSpec, seed, stepDuration } = identity;
    const next = await this.identityFor(agentId, modelSpec, rebind.params, seed, stepDuration, 'params.rebind');
    checkRebind(`agent ${agentId}`, identity, next, rebind);
    return { ...next, strict: identity.strict };
  }

  private readPayload(bytes: Uint8Array, agentId: string, checkpointId: string, sourceScope: Scope): JsonObject {
    const { payload, expect } = readPayloadHeader(bytes, `agent ${agentId}`, {
      kind: 'agent',
      agentId,
      checkpointId,
      sourceScope,
    });
    expect('model', typeof payload.model === 'string', 'must be a string');
    expect('params', typeof payload.params === 'object' && payload.params !== null, 'must be an object');
    expect('observation', typeof payload.observation === 'object' && payload.observation !== null, 'must be an object');
    expect('strict', typeof payload.strict === 'boolean', 'must be a boolean');
    try {
      readI32(payload.seed, 'payload.seed');
    } catch (e) {
      throw new ProtocolRefusal('INCOMPATIBLE_STATE', `agent ${agentId}: ${(e as Error).message}`);
    }
    return payload;
  }

  /** Rebuild the timeline from a payload into new objects (the live agent is untouched until activation). */
  private timelineFrom(payload: JsonObject, identity: AgentIdentity, scope: Scope): AgentTimeline {
    const agentId = identity.agentId;
    let clock: TickClock;
    try {
      const acc = readObject(payload.accumulator, 'payload.accumulator');
      const tick = RationalNs.readDuration(acc.tickDuration, 'payload.accumulator.tickDuration');
      if (!tick.equals(identity.tickDuration))
        throw new Error(`payload tickDuration ${tick} differs from the model's ${identity.tickDuration}`);
      const step = RationalNs.readDuration(payload.stepDuration, 'payload.stepDuration');
      if (!step.equals(identity.stepDuration))
        throw new Error(`payload stepDuration ${step} differs from this agent's ${identity.stepDuration}`);
      clock = new TickClock(
        step,
        tick,
        RationalNs.read(acc.remainder, 'payload.accumulator.remainder'),
        BigInt(readU64(acc.brainTicks, 'payload.accumulator.brainTicks')),
      );
    } catch (e) {
      throw new ProtocolRefusal('INCOMPATIBLE_STATE', `agent ${agentId}: ${(e as Error).message}`);
    }
    const observation = payload.observation as JsonObject;
    const state = this.stagedModelState(identity, payload);
    return { state, clock, observation, epoch: scope.epoch, committedStep: BigInt(scope.step) };
  }

  // ---- State.ActivateRestore ------------------------------------------------------------------

  activateRestore(req: Request): HostReply<ResultOf<typeof METHODS.activateRestore>> {
    const scope = requireScope(req);
    checkSession(scope, this.ctx.sessionId);
    let token: string, agentId: string;
    try {
      refuseUnknownFields(req.params, ['restoreToken', 'agentId'], 'params');
      token = readId(req.params.restoreToken, 'params.restoreToken');
      if (req.params.agentId === null)
        throw new ProtocolRefusal(
          'INVALID_ARGUMENT',
          'params.agentId is null but this worker hosts agents, not the environment',
        );
      agentId = readId(req.params.agentId, 'params.agentId');
    } catch (e) {
      return invalid(e);
    }
    if (this.usedTokens.has(token))
      throw new ProtocolRefusal('CONFLICT', `agent ${agentId}: restore token ${token} was already activated`);
    const staged = this.staged.get(agentId);
    if (!staged) throw new ProtocolRefusal('INVALID_PHASE', `agent ${agentId}: nothing is staged to activate`);
    if (staged.token !== token)
      throw new ProtocolRefusal(
        'IDENTITY_MISMATCH',
        `agent ${agentId}: restore token ${token} is not the staged one (the staged restore is kept)`,
      );
    if (staged.scope.epoch !== scope.epoch || staged.scope.step !== scope.step) {
      throw new ProtocolRefusal(
        'IDENTITY_MISMATCH',
        `agent ${agentId}: scope ${scope.epoch}/${scope.step} differs from the staged ${staged.scope.epoch}/${staged.scope.step}`,
      );
    }
    const { identity, timeline } = staged;
    const old = this.agents.get(agentId);
    const slot: AgentSlot = {
      ...identity,
      ...timeline,
      phase: 'ready',
      preparedIds: new Set(),
      initDigest: old?.initDigest ?? '',
      initResult: old?.initResult ?? {},
    };
    this.agents.set(agentId, slot);
    this.staged.delete(agentId);
    this.usedTokens.add(token);
    if (old) releaseState(old.model, old.state);
    this.cache.evictAgent(agentId);
    this.currentEpoch = scope.epoch;
    this.ctx.progress(req.requestId);
    return { result: { checkpointId: staged.checkpointId, agentId, committedStep: scope.step, observation: null } };
  }
}
