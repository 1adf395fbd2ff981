// The environment side of a worker process: one environment model behind Environment.Initialize /
// Advance and the environment side of State.Capture / StageRestore / ActivateRestore.
// Not the transport, not Hello/Status, not reward evaluation policy (the model reports rewards).
import { canonicalDigest } from '../core/formats/canonical-json.js';
import { RationalNs, type Scope, readI32, readId, readObject, refuseUnknownFields } from '../core/formats/scalars.js';
// The step results below are built as JsonObject (the step cache keeps them so) and cast to their
// table type where a handler returns them: the literal that builds each one follows bodies.ts.
import type { EnvironmentAdvanceResult, EnvironmentInitializeResult } from '../core/protocol/bodies.js';
import { type METHODS, ProtocolRefusal, type Request } from '../core/protocol/envelope.js';
import type { ResultOf } from '../core/protocol/methods.js';
import {
  checkEpoch,
  checkSession,
  checkStep,
  environmentCompatibilityDigest,
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
import {
  BUILTIN_ENVIRONMENT_MODELS,
  loadedIdentityField,
  loadedModuleIdentity,
  mismatchMessage,
  payloadModel,
  resolveEnvironmentModel,
  restoreSpecOf,
} from './models/registry.js';
import { StepCache, bodyKey, opKey } from './op-cache.js';
import type { EnvironmentModel, JsonObject, PortAction, PortBinding } from './sdk.js';
import { exactCapture } from './capture-check.js';
import { capturedBytes, capturedPayload, encodeCapture } from './capture-encode.js';

interface EnvIdentity {
  environmentId: string;
  modelSpec: string;
  model: EnvironmentModel<unknown>;
  strict: boolean;
  /** A built-in model (no module identity to report). */
  builtin: boolean;
  params: JsonObject;
  seed: number;
  stepDuration: RationalNs;
  ports: PortBinding[];
  modelVersion: string;
  profileDigest: string;
  compatibilityDigest: string;
}

interface EnvTimeline {
  state: unknown;
  epoch: string;
  boundary: bigint;
}

interface EnvSlot extends EnvIdentity, EnvTimeline {
  failed: boolean;
  initDigest: string;
  initResult: JsonObject;
}

interface Staged {
  token: string;
  checkpointId: string;
  scope: Scope;
  identity: EnvIdentity;
  timeline: EnvTimeline;
}

function readPorts(value: unknown, field: string): PortBinding[] {
  if (!Array.isArray(value) || value.length === 0)
    throw new ProtocolRefusal('INVALID_ARGUMENT', `${field} must be a non-empty list`);
  const ports = new Set<string>();
  const agents = new Set<string>();
  return value.map((raw, i) => {
    const p = readObject(raw, `${field}[${i}]`);
    refuseUnknownFields(p, ['portId', 'agentId'], `${field}[${i}]`);
    const portId = readId(p.portId, `${field}[${i}].portId`);
    const agentId = readId(p.agentId, `${field}[${i}].agentId`);
    if (ports.has(portId)) throw new ProtocolRefusal('INVALID_ARGUMENT', `${field}: port ${portId} appears twice`);
    if (agents.has(agentId))
      throw new ProtocolRefusal('INVALID_ARGUMENT', `${field}: agent ${agentId} is bound to two ports`);
    ports.add(portId);
    agents.add(agentId);
    return { portId, agentId };
  });
}

function byAgentId(observations: Record<string, JsonObject>): { agentId: string; observation: JsonObject }[] {
  return Object.keys(observations)
    .sort()
    .map((agentId) => ({ agentId, observation: observations[agentId]! }));
}

export class EnvironmentHost {
  private env: EnvSlot | undefined;
  private staged: Staged | undefined;
  private readonly usedTokens = new Set<string>();
  private readonly cache = new StepCache<JsonObject>();

  constructor(private readonly ctx: HostContext) {}

  get state(): 'uninitialized' | 'ready' | 'staged-restore' | 'failed' {
    if (this.env?.failed) return 'failed';
    if (this.staged) return 'staged-restore';
    return this.env ? 'ready' : 'uninitialized';
  }

  get currentEpoch(): string | undefined {
    return this.env?.epoch;
  }

  get boundary(): bigint | undefined {
    return this.env?.boundary;
  }

  // ---- Environment.Initialize -----------------------------------------------------------------

  async initialize(req: Request): Promise<HostReply<ResultOf<typeof METHODS.environmentInitialize>>> {
    const scope = requireScope(req);
    checkSession(scope, this.ctx.sessionId);
    if (scope.step !== '0')
      throw new ProtocolRefusal(
        'INVALID_ARGUMENT',
        `Environment.Initialize: scope.step must be "0", not ${JSON.stringify(scope.step)}`,
      );
    const digest = canonicalDigest({ method: req.method, scope, params: req.params });
    if (this.env) {
      if (this.env.initDigest === digest && this.env.epoch === scope.epoch)
        return { result: this.env.initResult as unknown as EnvironmentInitializeResult };
      throw new ProtocolRefusal(
        'CONFLICT',
        'Environment.Initialize: the environment is already initialized with a different request',
      );
    }
    let environmentId: string,
      modelSpec: string,
      rawParams: JsonObject,
      seed: number,
      stepDuration: RationalNs,
      ports: PortBinding[];
    try {
      const p = req.params;
      refuseUnknownFields(p, ['environmentId', 'model', 'params', 'seed', 'stepDuration', 'ports'], 'params');
      environmentId = readId(p.environmentId, 'params.environmentId');
      if (typeof p.model !== 'string' || p.model.length === 0)
        throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.model must be a model name or module path');
      modelSpec = p.model;
      rawParams = readObject(p.params, 'params.params');
      seed = readI32(p.seed, 'params.seed');
      stepDuration = RationalNs.readDuration(p.stepDuration, 'params.stepDuration');
      ports = readPorts(p.ports, 'params.ports');
    } catch (e) {
      return invalid(e);
    }
    const identity = await this.identityFor(environmentId, modelSpec, rawParams, seed, stepDuration, ports, 'params');
    const state = callModel(identity.strict, `environment ${environmentId}`, 'initialize', 'none', () =>
      identity.model.initialize({
        environmentId,
        seed,
        params: identity.params,
        ports,
        stepDuration: stepDuration.toJSON(),
      }),
    );
    const observations = callModel(identity.strict, `environment ${environmentId}`, 'observe', 'none', () =>
      identity.model.observe(state),
    );
    const initResult: JsonObject = {
      environmentId,
      modelVersion: identity.modelVersion,
      profileDigest: identity.profileDigest,
      boundary: '0',
      observations: byAgentId(observations),
      ...loadedIdentityField(identity),
    };
    this.env = { ...identity, state, epoch: scope.epoch, boundary: 0n, failed: false, initDigest: digest, initResult };
    this.ctx.progress(req.requestId);
    return { result: initResult as unknown as EnvironmentInitializeResult };
  }

  private async identityFor(
    environmentId: string,
    modelSpec: string,
    rawParams: JsonObject,
    seed: number,
    stepDuration: RationalNs,
    ports: PortBinding[],
    field: string,
  ): Promise<EnvIdentity> {
    const { model, strict, params, builtin } = await loadModel(
      (spec) => resolveEnvironmentModel(spec, this.ctx.launchedModels),
      modelSpec,
      rawParams,
      field,
      this.ctx.strictUserModels,
    );
    const modelVersion = model.modelVersion;
    // A module model enters by its path-free identity (name and content digest), never its path.
    const profile = profileDigest(builtin ? modelSpec : loadedModuleIdentity(modelSpec), modelVersion, params);
    const compatibilityDigest = environmentCompatibilityDigest({
      environmentId,
      profileDigest: profile,
      modelVersion,
      seed,
      ports,
    });
    return {
      environmentId,
      modelSpec,
      model,
      strict,
      builtin,
      params,
      seed,
      stepDuration,
      ports,
      modelVersion,
      profileDigest: profile,
      compatibilityDigest,
    };
  }

  private live(): EnvSlot {
    if (!this.env) throw new ProtocolRefusal('INVALID_PHASE', 'the environment is not initialized');
    if (this.env.failed)
      throw new ProtocolRefusal('INVALID_PHASE', 'the environment failed earlier and must be restored');
    return this.env;
  }

  // ---- Environment.Advance --------------------------------------------------------------------

  advance(req: Request): HostReply<ResultOf<typeof METHODS.environmentAdvance>> {
    const scope = requireScope(req);
    checkSession(scope, this.ctx.sessionId);
    const env = this.live();
    checkEpoch(scope, env.epoch, `environment ${env.environmentId}`);
    const key = opKey(scope, req.method, null);
    const digest = bodyKey(req.params); // method and scope are part of the key
    const hit = this.cache.get(key);
    if (hit) {
      if (hit.digest !== digest)
        throw new ProtocolRefusal(
          'CONFLICT',
          `Environment.Advance for step ${scope.step} was already answered for a different body`,
        );
      return { result: hit.result as unknown as EnvironmentAdvanceResult };
    }
    if (BigInt(scope.step) < env.boundary && this.cache.hasExpired(req.requestId)) {
      throw new ProtocolRefusal(
        'RESULT_EXPIRED',
        `environment: the result of ${req.requestId} (step ${scope.step}) is no longer kept`,
        'applied',
      );
    }
    const step = checkStep(scope, env.boundary, `environment ${env.environmentId}`);
    let batchId: string;
    const actions: PortAction[] = [];
    try {
      refuseUnknownFields(req.params, ['batchId', 'actions'], 'params');
      batchId = readId(req.params.batchId, 'params.batchId');
      const list = req.params.actions;
      if (!Array.isArray(list) || list.length !== env.ports.length) {
        throw new ProtocolRefusal(
          'INVALID_ARGUMENT',
          `params.actions must hold one action per port (${env.ports.length}), in port order`,
        );
      }
      for (const [i, raw] of list.entries()) {
        const a = readObject(raw, `params.actions[${i}]`);
        refuseUnknownFields(a, ['portId', 'agentId', 'action'], `params.actions[${i}]`);
        const port = env.ports[i]!;
        if (a.portId !== port.portId || a.agentId !== port.agentId) {
          throw new ProtocolRefusal(
            'INVALID_ARGUMENT',
            `params.actions[${i}] is ${JSON.stringify(a.portId)}/${JSON.stringify(a.agentId)}; port order expects ${port.portId}/${port.agentId}`,
          );
        }
        const action = readObject(a.action, `params.actions[${i}].action`);
        const bad = env.model.checkAction?.(action, port.portId);
        if (bad) throw new ProtocolRefusal('INVALID_ARGUMENT', bad);
        actions.push({ portId: port.portId, agentId: port.agentId, action });
      }
    } catch (e) {
      return invalid(e);
    }
    const who = `environment ${env.environmentId}`;
    let outcome, observations, world;
    try {
      outcome = callModel(env.strict, who, 'advance', 'unknown', () => env.model.advance(env.state, { step, actions }));
      observations = callModel(env.strict, who, 'observe', 'unknown', () => env.model.observe(env.state));
      world = callModel(env.strict, who, 'digest', 'unknown', () => env.model.digest(env.state));
    } catch (e) {
      env.failed = true;
      throw e;
    }
    env.boundary = step + 1n;
    // Keys in RFC 8785 order, so the reply encodes on the canonical fast path.
    const result: JsonObject = {
      appliedControlsDigest: canonicalDigest(req.params.actions),
      appliedFromStep: step.toString(),
      batchId,
      eventIds: outcome.eventIds,
      nextStep: env.boundary.toString(),
      observations: byAgentId(observations),
      rewards: outcome.rewards,
      worldDigest: canonicalDigest(world),
    };
    this.cache.put(key, step, { digest, result, requestId: req.requestId });
    if (env.boundary >= 2n) this.cache.evictBefore(env.boundary - 2n);
    this.ctx.progress(req.requestId);
    return { result: result as unknown as EnvironmentAdvanceResult };
  }

  // ---- State.Capture --------------------------------------------------------------------------

  /**
   * State.Capture; with `holdFrom` (store-files-v1) a payload of at least that many bytes is held:
   * kept as pieces for State.WritePayload, unhashed.
   */
  capture(req: Request, holdFrom?: number): HostReply<ResultOf<typeof METHODS.capture>> {
    const scope = requireScope(req);
    checkSession(scope, this.ctx.sessionId);
    let checkpointId: string;
    try {
      refuseUnknownFields(req.params, ['checkpointId', 'agentId'], 'params');
      checkpointId = readId(req.params.checkpointId, 'params.checkpointId');
      if (req.params.agentId !== null)
        throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.agentId must be null: this worker hosts the environment');
    } catch (e) {
      return invalid(e);
    }
    const env = this.live();
    checkEpoch(scope, env.epoch, `environment ${env.environmentId}`);
    const boundary = checkStep(scope, env.boundary, `environment ${env.environmentId}`);
    const modelState = callModel(env.strict, `environment ${env.environmentId}`, 'capture', 'none', () =>
      env.model.capture(env.state),
    );
    if (env.strict && !Object.hasOwn(BUILTIN_ENVIRONMENT_MODELS, env.modelSpec)) {
      const ctx = {
        environmentId: env.environmentId,
        seed: env.seed,
        params: env.params,
        ports: env.ports,
        stepDuration: env.stepDuration.toJSON(),
      };
      const model = env.model;
      exactCapture(
        { restore: (d) => model.restore(d, ctx), capture: (s) => model.capture(s) },
        modelState,
        env.strict,
        `environment ${env.environmentId}`,
        env.state,
      );
    }
    const payload = {
      payloadVersion: PAYLOAD_VERSION,
      kind: 'environment',
      environmentId: env.environmentId,
      checkpointId,
      sourceScope: scope,
      committedStep: boundary.toString(),
      model: payloadModel(env),
      params: env.params,
      strict: env.strict,
      seed: env.seed,
      stepDuration: env.stepDuration.toJSON(),
      ports: env.ports,
      modelVersion: env.modelVersion,
      profileDigest: env.profileDigest,
      state: modelState,
    };
    const encoded = encodeCapture(payload, `environment ${env.environmentId}`, holdFrom);
    return {
      result: {
        checkpointId,
        agentId: null,
        boundary: boundary.toString(),
        compatibilityDigest: env.compatibilityDigest,
        payload: capturedPayload(encoded),
      },
      ...capturedBytes(encoded),
    };
  }

  // ---- State.StageRestore ---------------------------------------------------------------------

  async stageRestore(
    req: Request,
    attachment: Uint8Array | undefined,
  ): Promise<HostReply<ResultOf<typeof METHODS.stageRestore>>> {
    const scope = requireScope(req);
    checkSession(scope, this.ctx.sessionId);
    let staged: StageParams;
    try {
      staged = readStageParams(req.params, scope, 'environment');
    } catch (e) {
      return invalid(e);
    }
    const { checkpointId, sourceScope, compatibilityDigest, ref } = staged;
    const live = this.env;
    if (live && scope.epoch === live.epoch)
      throw new ProtocolRefusal(
        'STALE_EPOCH',
        `environment: the restore epoch ${scope.epoch} must be new (it is the current epoch)`,
      );
    if (this.staged) throw new ProtocolRefusal('CONFLICT', 'the environment already has a staged restore');
    const payload = this.readPayload(
      await stagedPayload(attachment, staged, this.ctx.storeDir, this.ctx.prefetched),
      checkpointId,
      sourceScope,
    );
    const verified = await this.restoredIdentity(payload, live, compatibilityDigest);
    // A fork's new params: verified above under the payload's own, the state is restored with these.
    const identity = staged.rebind ? await this.rebound(verified, staged.rebind) : verified;
    const where = `restore at boundary ${String(payload.committedStep)}`;
    const state = callModel(identity.strict, `environment ${identity.environmentId}`, where, 'none', () =>
      identity.model.restore(payload.state, {
        environmentId: identity.environmentId,
        seed: identity.seed,
        params: identity.params,
        ports: identity.ports,
        stepDuration: identity.stepDuration.toJSON(),
      }),
    );
    const token = restoreToken(checkpointId, scope, ref.digest, this.ctx.incarnationId);
    this.staged = {
      token,
      checkpointId,
      scope,
      identity,
      timeline: { state, epoch: scope.epoch, boundary: BigInt(scope.step) },
    };
    return { result: { checkpointId, agentId: null, restoreToken: token, ...loadedIdentityField(identity) } };
  }

  /** A fork's new params (fork-rebind.ts): the identity they give, once the model accepts the change. */
  private async rebound(identity: EnvIdentity, rebind: Rebind): Promise<EnvIdentity> {
    const { environmentId, modelSpec, seed, stepDuration, ports } = identity;
    const next = await this.identityFor(
      environmentId,
      modelSpec,
      rebind.params,
      seed,
      stepDuration,
      ports,
      'params.rebind',
    );
    checkRebind('environment', identity, next, rebind);
    return { ...next, strict: identity.strict };
  }

  /**
   * The identity the payload restores into: the live environment's with the payload's seed, or (a
   * fresh worker) one built from the payload; either must be the payload's and give `expectDigest`.
   */
  private async restoredIdentity(
    payload: JsonObject,
    live: EnvSlot | undefined,
    expectDigest: string,
  ): Promise<EnvIdentity> {
    let identity: EnvIdentity;
    if (live) {
      const seed = payload.seed as number;
      identity = { ...live, seed, compatibilityDigest: environmentCompatibilityDigest({ ...live, seed }) };
    } else {
      let ports: PortBinding[], stepDuration: RationalNs;
      try {
        ports = readPorts(payload.ports, 'payload.ports');
        stepDuration = RationalNs.readDuration(payload.stepDuration, 'payload.stepDuration');
      } catch (e) {
        throw new ProtocolRefusal('INCOMPATIBLE_STATE', `environment: ${(e as Error).message}`);
      }
      let spec: string;
      try {
        spec = restoreSpecOf(payload.model as string, this.ctx.launchedModels);
      } catch (e) {
        throw new ProtocolRefusal('INCOMPATIBLE_STATE', `environment: ${(e as Error).message}`);
      }
      identity = await this.identityFor(
        payload.environmentId as string,
        spec,
        payload.params as JsonObject,
        payload.seed as number,
        stepDuration,
        ports,
        'payload',
      );
      if (typeof payload.strict === 'boolean') identity.strict = payload.strict;
    }
    const mismatch = firstMismatch(payload, identity as unknown as Record<string, unknown>, [
      'environmentId',
      'modelVersion',
      'profileDigest',
      'ports',
    ]);
    if (mismatch) throw new ProtocolRefusal('INCOMPATIBLE_STATE', mismatchMessage('environment', mismatch, identity));
    if (identity.compatibilityDigest !== expectDigest)
      throw new ProtocolRefusal(
        'INCOMPATIBLE_STATE',
        `environment: compatibilityDigest ${expectDigest} differs from the recomputed ${identity.compatibilityDigest} (seed ${identity.seed})`,
      );
    return identity;
  }

  private readPayload(bytes: Uint8Array, checkpointId: string, sourceScope: Scope): JsonObject {
    const { payload, expect } = readPayloadHeader(bytes, 'environment', {
      kind: 'environment',
      checkpointId,
      sourceScope,
    });
    expect('environmentId', typeof payload.environmentId === 'string', 'must be a string');
    expect('model', typeof payload.model === 'string', 'must be a string');
    expect('params', typeof payload.params === 'object' && payload.params !== null, 'must be an object');
    expect('seed', typeof payload.seed === 'number' && Number.isInteger(payload.seed), 'must be an i32');
    expect('strict', typeof payload.strict === 'boolean', 'must be a boolean');
    return payload;
  }

  // ---- State.ActivateRestore ------------------------------------------------------------------

  activateRestore(req: Request): HostReply<ResultOf<typeof METHODS.activateRestore>> {
    const scope = requireScope(req);
    checkSession(scope, this.ctx.sessionId);
    let token: string;
    try {
      refuseUnknownFields(req.params, ['restoreToken', 'agentId'], 'params');
      token = readId(req.params.restoreToken, 'params.restoreToken');
      if (req.params.agentId !== null)
        throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.agentId must be null: this worker hosts the environment');
    } catch (e) {
      return invalid(e);
    }
    if (this.usedTokens.has(token))
      throw new ProtocolRefusal('CONFLICT', `environment: restore token ${token} was already activated`);
    const staged = this.staged;
    if (!staged) throw new ProtocolRefusal('INVALID_PHASE', 'environment: nothing is staged to activate');
    if (staged.token !== token)
      throw new ProtocolRefusal(
        'IDENTITY_MISMATCH',
        `environment: restore token ${token} is not the staged one (the staged restore is kept)`,
      );
    if (staged.scope.epoch !== scope.epoch || staged.scope.step !== scope.step) {
      throw new ProtocolRefusal(
        'IDENTITY_MISMATCH',
        `environment: scope ${scope.epoch}/${scope.step} differs from the staged ${staged.scope.epoch}/${staged.scope.step}`,
      );
    }
    const id = staged.identity;
    const observations = callModel(id.strict, `environment ${id.environmentId}`, 'observe', 'none', () =>
      id.model.observe(staged.timeline.state),
    );
    const old = this.env;
    this.env = {
      ...id,
      ...staged.timeline,
      failed: false,
      initDigest: old?.initDigest ?? '',
      initResult: old?.initResult ?? {},
    };
    this.staged = undefined;
    this.usedTokens.add(token);
    if (old) releaseState(old.model, old.state);
    this.cache.evictAgent(null);
    this.ctx.progress(req.requestId);
    return {
      result: {
        checkpointId: staged.checkpointId,
        agentId: null,
        committedStep: scope.step,
        observation: { observations: byAgentId(observations) },
      },
    };
  }
}
