// Lockstep-v1 (docs/spec/lockstep.md): the coordinator's step loop over a launched fleet. Initialize the
// environment and agents, then per step: Prepare all → one Environment.Advance in port order →
// evaluate once → Commit all → boundary k+1, producing one TransitionTrace. A failure anywhere
// fails the epoch: the next step never starts on a half-commit (opt-in pipelining relaxes that to
// "the next Advance never follows a half-commit", see StepOptions). NOT process handling, NOT files.
import type { Logger } from 'pino';
import type { RunPlan } from '../config.js';
import { canonicalize, sha256Hex, type JsonValue } from '../../core/formats/canonical-json.js';
import { DetsimError } from '../../core/formats/errors.js';
import {
  RationalNs,
  isId,
  isU64,
  readDigest,
  readU64,
  type Digest,
  type Id,
  type Scope,
} from '../../core/formats/scalars.js';
import { diagnoseCallFailure, type Fleet, type LaunchedWorker } from '../launch/launcher.js';
import {
  METHODS,
  PrintedParams,
  WorkerCallError,
  type AgentInitializeResultEntry,
  type AgentPrepareResult,
  type EnvironmentAdvanceResult,
  type JsonObject,
  type Method,
  type Mutation,
  type ParamsOf,
  type PreparedDecision,
  type ResultOf,
} from '../../core/protocol/index.js';
import { IllegalTransition } from './illegal-transition.js';
import { PlannedModels } from './loaded-models.js';
import { RunFailure, type RunPhase } from './run-failure.js';
import { batchIdFor, type TraceAgent, type TraceReward, type TransitionTrace } from '../trace/trace.js';

/** The order in which one phase's worker messages are sent. Traces must not depend on it. */
export type Dispatch = 'sequential' | 'concurrent' | 'reversed';
export const DISPATCH_MODES: readonly Dispatch[] = ['sequential', 'concurrent', 'reversed'];

export type LockstepState = 'starting' | 'ready' | 'preparing' | 'applying' | 'observing' | 'committing' | 'failed';

export interface LockstepHooks {
  /**
   * Called before each phase's messages go out (tests use it to kill or stall a worker mid-step).
   * A Prepare pipelined behind Commit(k) goes out with the Commits: its hook (step k+1, 'prepare')
   * runs right after the hook of (k, 'commit'), before any of those messages is sent.
   */
  beforePhase?: (step: bigint, phase: RunPhase) => void | Promise<void>;
}

export interface StepOptions {
  /**
   * Pipeline the next Prepare: each agent worker gets Prepare(k+1) right behind its Commit(k) on
   * the same stream, without waiting for the Commit replies. A worker handles one request at a
   * time in arrival order, so Prepare(k+1) runs after its own Commit(k). Still, Advance(k+1) is
   * only ever sent after every Commit(k) succeeded; a failed Commit fails the epoch with the
   * pipelined Prepares left unawaited. The caller must not ask for it past the run's last step, or
   * when it needs every agent Ready at boundary k+1 (a capture). Lockstep-v1's Phase D
   * (docs/spec/lockstep.md) allows the next Prepare only after every Commit succeeded, which
   * pipelining relaxes (agents on other workers may have prepared k+1 when one Commit fails): a
   * failed Commit then names the Prepare that rode behind it (RunFailure.pipelinedPrepare). The
   * session loop asks for it by default (SessionOptions.pipeline).
   */
  prepareNext?: boolean;
}

export interface LockstepOptions {
  dispatch: Dispatch;
  /** Epoch id of this timeline (e1, e2, …). */
  epoch: Id;
  /** process.hrtime.bigint() at run start: wallTimeNs is measured from here. */
  startedAt: bigint;
  logger: Logger;
  signal?: AbortSignal;
  hooks?: LockstepHooks;
}

/** What initialization established about every participant (recorded in run.json). */
export interface Identities {
  environment: { environmentId: Id; modelVersion: string; profileDigest: Digest };
  /** By agent id. */
  agents: Map<Id, AgentInitializeResultEntry>;
}

interface Reply<T> {
  worker: LaunchedWorker;
  requestId: string;
  result: T;
}

/** Prepares already sent for `step` (pipelined behind the previous Commits), in worker order. */
interface PendingPrepare {
  step: bigint;
  replies: Promise<Reply<AgentPrepareResult>>[];
  /** Workers in the order their Prepare replies arrived. */
  order: Id[];
}

/** One agent's checked decision and the request id of the Prepare that made it. */
interface Decision {
  d: PreparedDecision;
  requestId: string;
}

/** Phase A's outcome: every agent's decision, and the order the workers' replies arrived in. */
interface Prepared {
  decisions: Map<Id, Decision>;
  order: Id[];
}

/** Phases B and C's outcome: the environment's checked reply and its evaluation. */
interface Advanced {
  requestId: string;
  result: EnvironmentAdvanceResult;
  batchId: Id;
  controlDigest: Digest;
  observations: Map<Id, JsonObject>;
  /** Each observation's canonical text, printed once: for the observation digest and the Commits. */
  observationTexts: Map<Id, string>;
  /** The canonical text of the observations list as the environment returned it (what observationDigest hashes). */
  observationsText: string;
  evaluation: Evaluation;
}

/** The rewards of one transition: sorted for the trace, grouped per agent for its Commit. */
interface Evaluation {
  rewards: TraceReward[];
  byAgent: Map<Id, { eventId: Id; ruleId: Id; value: number }[]>;
}

/** Phase D's outcome; `nextPrepare` when every worker got the next Prepare behind its Commit. */
interface Committed {
  order: Id[];
  requestIds: { agentId: Id; requestId: string }[];
  nextPrepare?: PendingPrepare;
}

/** The worker, phase and step a failure names (a RunFailure's context). */
type Site = { workerId: Id; agentIds: Id[]; step: string; phase: RunPhase; pipelinedPrepare?: string };

/**
 * Something that went wrong inside a step, before it is a RunFailure: a reply that breaks the
 * contract ('protocol'), a worker's error reply ('error-reply') or the run's abort ('aborted').
 */
class StepFault extends Error {
  constructor(
    readonly kind: 'protocol' | 'error-reply' | 'aborted',
    message: string,
    readonly site: Site,
  ) {
    super(message);
    this.name = 'StepFault';
  }

  toRunFailure(): RunFailure {
    return new RunFailure(this.kind, this.message, this.site);
  }
}

/** A call in flight when its transport failed: what diagnosing the failure needs. */
interface CallSite {
  worker: LaunchedWorker;
  site: Site;
  deadlineMs: number;
}

/**
 * The one place where what went wrong in the lockstep becomes the RunFailure the run reports.
 * A StepFault names its own kind; for a failed call (`call` given) a DetsimError is a protocol
 * violation and anything else (WorkerCallError: deadline, dead process, broken stream) is diagnosed
 * against the worker's process. Anything else (a test hook's error, a programming error) stays as is.
 */
async function runFailureOf(e: unknown, call?: CallSite): Promise<unknown> {
  if (e instanceof StepFault) return e.toRunFailure();
  if (!call || e instanceof RunFailure) return e;
  if (e instanceof DetsimError) return new RunFailure('protocol', e.message, call.site);
  const f = await diagnoseCallFailure(e, call.worker, call.site.step, call.site.phase, call.deadlineMs);
  return call.site.pipelinedPrepare === undefined ? f : f.withPipelinedPrepare(call.site.pipelinedPrepare);
}

export function epochId(n: number): Id {
  return `e${n}`;
}

const byString = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
/** An error reply's `mutation` as a run failure says it: whether the failed call changed the worker's state. */
const MUTATION_SAID: Record<Mutation, string> = {
  none: 'nothing changed',
  applied: 'the call took effect',
  unknown: "the worker's state may have changed",
};
/** How many distinct valid remainders the memo holds before it starts over. */
const REMAINDER_MEMO = 1024;
/** How many distinct decision texts the digest memo holds before it starts over. */
const DECISION_MEMO = 1024;
/** Longer decision texts are hashed every time (they rarely repeat, and the memo stays small). */
const DECISION_MEMO_TEXT = 256;

/** The states from which a restored group may be installed or the loop failed from outside. */
const AT_REST: readonly LockstepState[] = ['starting', 'ready', 'failed'];

/**
 * The lockstep loop's state machine. Outside code reads `state`, `boundary` and `identities`;
 * only these methods move it (anything else throws IllegalTransition):
 *
 *   starting --initialize()------------------------------------------------> ready(0)
 *   starting --adoptIdentities(ids)----------------------------------------> starting (identities known)
 *   ready(k) --step(): preparing → applying → observing → committing -------> ready(k+1)
 *   preparing | applying | observing | committing --(any failure)----------> failed
 *   starting | ready | failed --installRestored(epoch, k, observations)---> ready(k) in the new epoch
 *   starting | ready | failed --fail()------------------------------------> failed (a fenced restore)
 */
export class Lockstep {
  private currentState: LockstepState = 'starting';
  private committedBoundary = 0n;
  private knownIdentities: Identities | undefined;
  /** The current observation of every agent (installed at the last committed boundary). */
  private observations = new Map<Id, JsonObject>();
  private lastObservations: string | undefined;
  private readonly agentWorker = new Map<Id, LaunchedWorker>();
  /** Set when the last step pipelined the next Prepare (see StepOptions.prepareNext). */
  private pendingPrepare: PendingPrepare | undefined;

  constructor(
    readonly plan: RunPlan,
    readonly fleet: Fleet,
    private readonly opts: LockstepOptions,
  ) {
    for (const w of fleet.agents) for (const id of w.plan.agentIds) this.agentWorker.set(id, w);
    // One listener for the whole run, not one per call: with pipelining 2P calls are in flight,
    // more than an AbortSignal's default listener limit at P >= 6.
    opts.signal?.addEventListener(
      'abort',
      () => {
        for (const reject of [...this.abortWaiters]) reject();
      },
      { once: true },
    );
  }

  /** Rejecters of the calls in flight, run when the signal aborts. */
  private readonly abortWaiters = new Set<() => void>();

  get epoch(): Id {
    return this.restoredEpoch ?? this.opts.epoch;
  }

  get state(): LockstepState {
    return this.currentState;
  }

  /** The committed boundary k: the next step to run is k. */
  get boundary(): bigint {
    return this.committedBoundary;
  }

  /** What initialization (or adoptIdentities) established about every participant. */
  get identities(): Identities | undefined {
    return this.knownIdentities;
  }

  private expectState(transition: string, allowed: readonly LockstepState[]): void {
    if (!allowed.includes(this.currentState)) throw new IllegalTransition('lockstep', transition, this.currentState);
  }

  /**
   * Starting → Starting: take the identities a previous run recorded (run.json), for a fresh fleet
   * that is restored rather than initialized.
   */
  adoptIdentities(identities: Identities): void {
    this.expectState('adoptIdentities', ['starting']);
    this.knownIdentities = identities;
  }

  /** Starting | Ready | Failed → Failed: the group around the loop was fenced; nothing steps. */
  fail(): void {
    this.expectState('fail', AT_REST);
    this.currentState = 'failed';
  }

  // -------------------------------------------------------------------------------------------
  // Checkpoint hooks (coordinator/checkpoint): read the committed boundary's observations for a
  // capture, and install a restored group's state in a new epoch. Nothing else changes here.

  /** Set by installRestored: the epoch the group was restored into. */
  private restoredEpoch: Id | undefined;

  /** The observations installed at the committed boundary (a copy, sorted by agent id). */
  currentObservations(): { agentId: Id; observation: JsonObject }[] {
    return [...this.observations.entries()]
      .sort(([a], [b]) => byString(a, b))
      .map(([agentId, observation]) => ({ agentId, observation }));
  }

  /**
   * Install a restored group: the new epoch, the committed boundary k and the observations the
   * environment returned on activation. The loop is then at Ready(k) in that epoch.
   */
  installRestored(epoch: Id, boundary: bigint, observations: { agentId: Id; observation: JsonObject }[]): void {
    this.expectState('installRestored', AT_REST);
    if (this.pendingPrepare) {
      throw new IllegalTransition(
        'lockstep',
        'installRestored',
        `${this.currentState} (a pipelined Prepare is outstanding)`,
      );
    }
    const ctx = {
      workerId: this.fleet.environment.plan.workerId,
      agentIds: [],
      step: boundary.toString(),
      phase: 'environment-initialize' as RunPhase,
    };
    try {
      this.observations = this.readObservations(observations, ctx);
    } catch (e) {
      throw e instanceof StepFault ? e.toRunFailure() : e;
    }
    this.restoredEpoch = epoch;
    this.committedBoundary = boundary;
    this.currentState = 'ready';
  }

  // Objects that go on the wire or into the trace are built with their keys in RFC 8785 order:
  // canonicalize then prints them with JSON.stringify (its fast path) instead of its writer.
  private scope(step: bigint): Scope {
    return { epoch: this.epoch, sessionId: this.plan.sessionId, step: step.toString() };
  }

  // -------------------------------------------------------------------------------------------
  // Initialization: Environment.Initialize → initial observations → Agent.Initialize (batched).

  async initialize(): Promise<Identities> {
    this.expectState('initialize', ['starting']);
    try {
      return await this.initializeAll();
    } catch (e) {
      throw await runFailureOf(e);
    }
  }

  private async initializeAll(): Promise<Identities> {
    const { plan } = this;
    const scope = this.scope(0n);
    const deadline = Math.max(plan.deadlines.stepMs, plan.deadlines.startupMs);
    const env = await this.call(
      this.fleet.environment,
      METHODS.environmentInitialize,
      scope,
      {
        environmentId: plan.environment.environmentId,
        model: plan.environment.model,
        params: plan.environment.params,
        seed: plan.environment.seed,
        stepDuration: plan.stepDuration.toJSON(),
        ports: plan.agents.map((a) => ({ portId: a.portId, agentId: a.agentId })),
      },
      'environment-initialize',
      deadline,
    );
    const ctxEnv = this.ctx(this.fleet.environment, 'environment-initialize', 0n);
    const r = env.result;
    this.expect(
      r.environmentId === plan.environment.environmentId,
      () => `environmentId is ${JSON.stringify(r.environmentId)}`,
      ctxEnv,
    );
    this.expect(r.boundary === '0', () => `boundary is ${JSON.stringify(r.boundary)}, expected "0"`, ctxEnv);
    this.checkDigest(r.profileDigest, 'profileDigest', ctxEnv);
    const copies = new PlannedModels(plan);
    this.checkLoadedModel(plan.environment.model, r.modelIdentity, 'environment model', copies, ctxEnv);
    this.observations = this.readObservations(r.observations, ctxEnv);

    const replies = await this.dispatch(this.fleet.agents, [['agent-initialize', 0n]], (w) =>
      this.call(
        w,
        METHODS.agentInitialize,
        scope,
        {
          agents: w.plan.agentIds.map((id) => {
            const a = plan.agents.find((p) => p.agentId === id)!;
            return {
              agentId: id,
              model: a.model,
              params: a.params,
              seed: a.seed,
              stepDuration: plan.stepDuration.toJSON(),
              observation: this.observations.get(id)!,
            };
          }),
        },
        'agent-initialize',
        deadline,
      ),
    );
    const agents = new Map<Id, AgentInitializeResultEntry>();
    for (const rep of replies) {
      const ctx = this.ctx(rep.worker, 'agent-initialize', 0n);
      for (const entry of this.entriesFor(rep.worker, rep.result.agents, ctx)) {
        this.expect(
          entry.committedStep === '0',
          () => `${entry.agentId}: committedStep is ${JSON.stringify(entry.committedStep)}, expected "0"`,
          ctx,
        );
        this.checkDigest(entry.profileDigest, `${entry.agentId}.profileDigest`, ctx);
        const model = plan.agents.find((a) => a.agentId === entry.agentId)!.model;
        this.checkLoadedModel(model, entry.modelIdentity, `agent ${entry.agentId}'s model`, copies, ctx);
        this.checked(ctx, () => RationalNs.readDuration(entry.tickDuration, `${entry.agentId}.tickDuration`));
        agents.set(entry.agentId, entry);
      }
    }
    const identities: Identities = {
      environment: { environmentId: r.environmentId, modelVersion: r.modelVersion, profileDigest: r.profileDigest },
      agents,
    };
    this.knownIdentities = identities;
    await this.releaseInitializeReplies([env, ...replies]);
    this.currentState = 'ready';
    this.committedBoundary = 0n;
    return identities;
  }

  /**
   * Acknowledge the Initialize replies once the whole group is initialized. A worker keeps at most
   * 16 unacknowledged lifecycle replies (session-protocol §3); left cached, the Initialize reply
   * took one of them for the whole run, so a worker hosting 16 agents could not be captured.
   */
  private async releaseInitializeReplies(replies: { worker: LaunchedWorker; requestId: string }[]): Promise<void> {
    for (const { worker, requestId } of replies) {
      const phase = worker === this.fleet.environment ? 'environment-initialize' : 'agent-initialize';
      const ctx = this.ctx(worker, phase, 0n);
      const rep = await this.withAbort(
        worker.client.call(
          METHODS.acknowledge,
          null,
          { requestIds: [requestId] },
          { deadlineMs: this.plan.deadlines.stepMs },
        ),
        ctx,
      );
      if (rep.reply.type === 'error')
        throw new StepFault(
          'error-reply',
          `${METHODS.acknowledge}: ${rep.reply.error.code}: ${rep.reply.error.message}`,
          ctx,
        );
    }
  }

  // -------------------------------------------------------------------------------------------
  // One lockstep transition k → k+1.

  /** Whether the agent workers already hold the Prepare of the next step (pipelined): not Ready for a capture. */
  get preparedAhead(): boolean {
    return this.pendingPrepare !== undefined;
  }

  /**
   * The canonical JSON text of the observations the last committed step returned (in the
   * environment's order): exactly what its trace's observationDigest is the SHA-256 of.
   */
  get lastObservationsText(): string | undefined {
    return this.lastObservations;
  }

  async step(opts: StepOptions = {}): Promise<TransitionTrace> {
    this.expectState('step', ['ready']);
    const k = this.committedBoundary;
    try {
      return await this.transition(k, opts.prepareNext === true);
    } catch (e) {
      this.currentState = 'failed';
      throw await runFailureOf(e);
    }
  }

  /** Send one worker's Prepare for `step`; its reply is awaited by the step that needs it. */
  private sendPrepare(w: LaunchedWorker, step: bigint, order: Id[]): Promise<Reply<AgentPrepareResult>> {
    const scope = this.scope(step);
    return this.call(
      w,
      METHODS.agentPrepare,
      scope,
      { agents: w.plan.agentIds.map((agentId) => ({ agentId })) },
      'prepare',
      this.plan.deadlines.stepMs,
    ).then((rep) => {
      order.push(w.plan.workerId);
      return rep;
    });
  }

  /** Phase A's replies: the pipelined Prepares if the last step sent them, else a fresh dispatch. */
  private async prepareReplies(k: bigint): Promise<{ prepared: Reply<AgentPrepareResult>[]; order: Id[] }> {
    const pending = this.pendingPrepare;
    this.pendingPrepare = undefined;
    if (pending) {
      if (pending.step !== k)
        throw new Error(`lockstep: a Prepare for step ${pending.step} is outstanding at step ${k}`);
      // Like a concurrent dispatch: every reply settles, then the first failure in worker order.
      const settled = await Promise.allSettled(pending.replies);
      const failed = settled.find((s) => s.status === 'rejected');
      if (failed) throw (failed as PromiseRejectedResult).reason;
      return {
        prepared: settled.map((s) => (s as PromiseFulfilledResult<Reply<AgentPrepareResult>>).value),
        order: pending.order,
      };
    }
    const order: Id[] = [];
    const prepared = await this.dispatch(this.fleet.agents, [['prepare', k]], (w) => this.sendPrepare(w, k, order));
    return { prepared, order };
  }

  /**
   * One transition k → k+1 as its phases: Prepare (A), Advance and its evaluation (B, C), Commit
   * (D); the boundary moves only when every Commit succeeded. Each phase throws what went wrong as
   * it is; step() turns it into the run's RunFailure (runFailureOf).
   */
  private async transition(k: bigint, prepareNext: boolean): Promise<TransitionTrace> {
    const scope = this.scope(k);
    const prepared = await this.preparePhase(k);
    const advanced = await this.advancePhase(k, scope, prepared.decisions);
    const committed = await this.commitPhase(k, scope, prepared.decisions, advanced, prepareNext);
    this.observations = advanced.observations;
    this.committedBoundary = k + 1n;
    if (committed.nextPrepare) this.pendingPrepare = committed.nextPrepare;
    this.currentState = 'ready';
    return this.traceOf(k, scope, prepared, advanced, committed);
  }

  /** Phase A: Prepare every agent (one message per worker); each decision checked. */
  private async preparePhase(k: bigint): Promise<Prepared> {
    this.currentState = 'preparing';
    const { prepared, order } = await this.prepareReplies(k);
    const decisions = new Map<Id, Decision>();
    for (const rep of prepared) {
      const ctx = this.ctx(rep.worker, 'prepare', k);
      for (const d of this.entriesFor(rep.worker, rep.result.agents, ctx)) {
        if (!isU64(d.ticksAdvanced) || !isU64(d.brainTicks) || !this.isKnownRemainder(d.remainder)) {
          this.checked(ctx, () => {
            readU64(d.ticksAdvanced, `${d.agentId}.ticksAdvanced`);
            readU64(d.brainTicks, `${d.agentId}.brainTicks`);
            RationalNs.read(d.remainder, `${d.agentId}.remainder`);
          });
          this.rememberRemainder(d.remainder);
        }
        this.expect(isObject(d.decision), () => `${d.agentId}: decision is not an object`, ctx);
        decisions.set(d.agentId, { d, requestId: rep.requestId });
      }
    }
    return { decisions, order };
  }

  /**
   * Phases B and C: the action batch in port order, exactly one Environment.Advance, then the
   * transition checked and evaluated exactly once.
   */
  private async advancePhase(k: bigint, scope: Scope, decisions: Map<Id, Decision>): Promise<Advanced> {
    this.currentState = 'applying';
    const { plan } = this;
    const actions = plan.agents.map((a) => ({
      action: this.execute(a.actionFields, decisions.get(a.agentId)!.d, k),
      agentId: a.agentId,
      portId: a.portId,
    }));
    // The batch is printed once: its digest and the Advance carry the same text.
    const actionsText = canonicalize(actions);
    const controlDigest = sha256Hex(actionsText);
    const batchId = batchIdFor(this.epoch, k);
    await this.opts.hooks?.beforePhase?.(k, 'advance');
    const adv = await this.call(
      this.fleet.environment,
      METHODS.environmentAdvance,
      scope,
      new PrintedParams(`{"actions":${actionsText},"batchId":${JSON.stringify(batchId)}}`),
      'advance',
      plan.deadlines.stepMs,
    );

    this.currentState = 'observing';
    const next = (k + 1n).toString();
    const envCtx = this.ctx(this.fleet.environment, 'advance', k);
    const a = adv.result;
    this.expect(
      a.batchId === batchId,
      () => `batchId is ${JSON.stringify(a.batchId)}, expected ${JSON.stringify(batchId)}`,
      envCtx,
    );
    this.expect(
      a.appliedFromStep === k.toString(),
      () => `appliedFromStep is ${JSON.stringify(a.appliedFromStep)}, expected "${k}"`,
      envCtx,
    );
    this.expect(a.nextStep === next, () => `nextStep is ${JSON.stringify(a.nextStep)}, expected "${next}"`, envCtx);
    // The environment echoes the canonical digest of the batch it applied: it must be ours.
    this.expect(
      a.appliedControlsDigest === controlDigest,
      () =>
        `appliedControlsDigest ${JSON.stringify(a.appliedControlsDigest)} is not the digest of the batch sent (${controlDigest})`,
      envCtx,
    );
    this.checkDigest(a.worldDigest, 'worldDigest', envCtx);
    const observations = this.readObservations(a.observations, envCtx);
    const printed = this.printObservations(a.observations, envCtx);
    const evaluation = this.evaluate(a, envCtx);
    return { requestId: adv.requestId, result: a, batchId, controlDigest, observations, ...printed, evaluation };
  }

  /**
   * Print each observation once (the list checked by readObservations): its canonical text for the
   * Commit that carries it, and the list's text in the environment's order — an entry of exactly
   * {agentId, observation} built from them, any other entry printed whole — which is
   * canonicalize(list), what observationDigest hashes.
   */
  private printObservations(
    list: { agentId: Id; observation: JsonObject }[],
    ctx: Site,
  ): { observationTexts: Map<Id, string>; observationsText: string } {
    const observationTexts = new Map<Id, string>();
    let observationsText = '[';
    this.checked(ctx, () => {
      for (let i = 0; i < list.length; i++) {
        const o = list[i]!;
        const text = canonicalize(o.observation);
        observationTexts.set(o.agentId, text);
        if (i > 0) observationsText += ',';
        observationsText +=
          Object.keys(o).length === 2
            ? `{"agentId":${JSON.stringify(o.agentId)},"observation":${text}}`
            : canonicalize(o);
      }
    });
    return { observationTexts, observationsText: `${observationsText}]` };
  }

  /**
   * Phase D: Commit every agent. With prepareNext each worker's Prepare(k+1) follows its Commit(k)
   * on the stream; it is awaited by step k+1, which never starts (no Advance(k+1)) unless every
   * Commit(k) succeeded.
   */
  private async commitPhase(
    k: bigint,
    scope: Scope,
    decisions: Map<Id, Decision>,
    advanced: Advanced,
    prepareNext: boolean,
  ): Promise<Committed> {
    this.currentState = 'committing';
    const next = (k + 1n).toString();
    const order: Id[] = [];
    const hooks: [RunPhase, bigint][] = prepareNext
      ? [
          ['commit', k],
          ['prepare', k + 1n],
        ]
      : [['commit', k]];
    const pending: PendingPrepare = { step: k + 1n, replies: [], order: [] };
    const byWorker = new Map<Id, Promise<Reply<AgentPrepareResult>>>();
    const committed = await this.dispatch(this.fleet.agents, hooks, async (w) => {
      // Never after an abort: the run is stopping.
      const behind = prepareNext && !this.opts.signal?.aborted;
      const commit = this.call(
        w,
        METHODS.agentCommit,
        scope,
        commitParams(w.plan.agentIds, decisions, advanced),
        'commit',
        this.plan.deadlines.stepMs,
        behind ? next : undefined,
      );
      if (behind) {
        const p = this.sendPrepare(w, k + 1n, pending.order);
        p.catch(() => undefined); // observed by step k+1, or dropped with a failed epoch
        byWorker.set(w.plan.workerId, p);
      }
      const rep = await commit;
      order.push(w.plan.workerId);
      return rep;
    });
    const requestIds: { agentId: Id; requestId: string }[] = [];
    for (const rep of committed) {
      const ctx = this.ctx(rep.worker, 'commit', k);
      for (const c of this.entriesFor(rep.worker, rep.result.agents, ctx)) {
        this.expect(
          c.committedStep === next,
          () => `${c.agentId}: committedStep is ${JSON.stringify(c.committedStep)}, expected "${next}"`,
          ctx,
        );
        requestIds.push({ agentId: c.agentId, requestId: rep.requestId });
      }
    }
    if (byWorker.size !== this.fleet.agents.length) return { order, requestIds };
    pending.replies = this.fleet.agents.map((w) => byWorker.get(w.plan.workerId)!);
    return { order, requestIds, nextPrepare: pending };
  }

  /** The committed transition's trace: behaviour (what reproduces) and operational facts. */
  private traceOf(
    k: bigint,
    scope: Scope,
    prepared: Prepared,
    advanced: Advanced,
    committed: Committed,
  ): TransitionTrace {
    const next = (k + 1n).toString();
    const a = advanced.result;
    // The text observationDigest hashes, kept for the trace's observations sidecar (no extra work).
    this.lastObservations = advanced.observationsText;
    const agents: TraceAgent[] = [...prepared.decisions.values()]
      .map(({ d }) => ({
        agentId: d.agentId,
        brainTicks: d.brainTicks,
        committedStep: next,
        decision: d.decision as JsonValue,
        decisionDigest: this.decisionDigest(d.decision),
        profileDigest: this.knownIdentities!.agents.get(d.agentId)!.profileDigest,
        remainder: d.remainder,
        ticksAdvanced: d.ticksAdvanced,
      }))
      .sort((x, y) => byString(x.agentId, y.agentId));
    return {
      behaviour: {
        acknowledgedBoundary: next,
        agents,
        batchId: advanced.batchId,
        controlDigest: advanced.controlDigest,
        eventIds: [...a.eventIds],
        observationDigest: sha256Hex(this.lastObservations),
        publishedBoundary: next,
        rewards: advanced.evaluation.rewards,
        scope,
        worldDigest: a.worldDigest,
      },
      operational: {
        advanceRequestId: advanced.requestId,
        commitRequestIds: committed.requestIds.sort((x, y) => byString(x.agentId, y.agentId)),
        completionOrder: { commit: committed.order, prepare: prepared.order },
        pids: this.fleet.pids().map(({ pid, workerId }) => ({ pid, workerId })),
        prepareRequestIds: [...prepared.decisions.entries()]
          .map(([agentId, v]) => ({ agentId, requestId: v.requestId }))
          .sort((x, y) => byString(x.agentId, y.agentId)),
        wallTimeNs: (process.hrtime.bigint() - this.opts.startedAt).toString(),
      },
    };
  }

  /**
   * Remainders (numerator/denominator) already read as valid rationals: an agent's remainder cycles
   * through a few values, and reading one (BigInts, a gcd) per agent per step is the check's cost.
   */
  private readonly validRemainders = new Set<string>();

  /** Whether `value` is exactly {denominator, numerator} with a pair RationalNs.read accepted before. */
  private isKnownRemainder(value: unknown): boolean {
    const key = remainderKey(value);
    return key !== undefined && this.validRemainders.has(key);
  }

  /** Remember a remainder RationalNs.read just accepted (the set is bounded: it starts over when full). */
  private rememberRemainder(value: unknown): void {
    const key = remainderKey(value);
    if (key === undefined) return;
    if (this.validRemainders.size >= REMAINDER_MEMO) this.validRemainders.clear();
    this.validRemainders.add(key);
  }

  /** Digests of decision texts seen lately: agents mostly repeat a few decisions. */
  private readonly decisionDigests = new Map<string, Digest>();

  /** The canonical digest of a decision, hashing each distinct decision text once (a bounded memo). */
  private decisionDigest(decision: JsonObject): Digest {
    const text = canonicalize(decision);
    if (text.length > DECISION_MEMO_TEXT) return sha256Hex(text);
    let digest = this.decisionDigests.get(text);
    if (digest === undefined) {
      if (this.decisionDigests.size >= DECISION_MEMO) this.decisionDigests.clear();
      digest = sha256Hex(text);
      this.decisionDigests.set(text, digest);
    }
    return digest;
  }

  /**
   * The executor of Phase B: a decision becomes its port's action. With `actionFields` only those
   * fields travel (a model may report diagnostics beside its move); every one must be present.
   */
  private execute(fields: string[] | null, d: PreparedDecision, k: bigint): JsonObject {
    if (fields === null) return d.decision;
    const ctx = this.ctx(this.agentWorker.get(d.agentId)!, 'prepare', k);
    const action: JsonObject = {};
    for (const f of fields) {
      this.expect(
        Object.hasOwn(d.decision, f),
        () => `${d.agentId}: decision has no field ${JSON.stringify(f)} (actionFields)`,
        ctx,
      );
      action[f] = d.decision[f];
    }
    return action;
  }

  /** Evaluate the environment's rewards and events once: validated, grouped per agent. */
  private evaluate(a: EnvironmentAdvanceResult, ctx: Site): Evaluation {
    this.expect(Array.isArray(a.eventIds) && a.eventIds.every(isId), 'eventIds is not a list of Ids', ctx);
    this.expect(new Set(a.eventIds).size === a.eventIds.length, 'eventIds repeats an id', ctx);
    this.expect(Array.isArray(a.rewards), 'rewards is not a list', ctx);
    const byAgent = new Map<Id, { eventId: Id; ruleId: Id; value: number }[]>();
    const rewards: TraceReward[] = [];
    for (const r of a.rewards) {
      this.expect(
        this.agentWorker.has(r.agentId),
        () => `a reward names unknown agent ${JSON.stringify(r.agentId)}`,
        ctx,
      );
      this.expect(
        isId(r.eventId) && isId(r.ruleId),
        () => `a reward for ${r.agentId} has a bad eventId or ruleId`,
        ctx,
      );
      this.expect(
        typeof r.value === 'number' && Number.isFinite(r.value),
        () => `a reward for ${r.agentId} has a non-finite value`,
        ctx,
      );
      const list = byAgent.get(r.agentId) ?? [];
      list.push({ eventId: r.eventId, ruleId: r.ruleId, value: r.value });
      byAgent.set(r.agentId, list);
      rewards.push({ agentId: r.agentId, eventId: r.eventId, ruleId: r.ruleId, value: r.value });
    }
    rewards.sort(
      (x, y) => byString(x.agentId, y.agentId) || byString(x.eventId, y.eventId) || byString(x.ruleId, y.ruleId),
    );
    return { rewards, byAgent };
  }

  // -------------------------------------------------------------------------------------------
  // Dispatch and calls.

  /**
   * Send one message per worker in the configured order and collect every reply, returned in
   * worker order whatever the completion order. The first failure in worker order is thrown
   * after the in-flight calls settled, so no reply is left unobserved.
   */
  private async dispatch<T>(
    workers: LaunchedWorker[],
    phases: [RunPhase, bigint][],
    send: (w: LaunchedWorker) => Promise<Reply<T>>,
  ): Promise<Reply<T>[]> {
    for (const [phase, step] of phases) await this.opts.hooks?.beforePhase?.(step, phase);
    const mode = this.opts.dispatch;
    if (mode === 'concurrent') {
      const settled = await Promise.allSettled(workers.map((w) => send(w)));
      const failed = settled.find((s) => s.status === 'rejected');
      if (failed) throw (failed as PromiseRejectedResult).reason;
      return settled.map((s) => (s as PromiseFulfilledResult<Reply<T>>).value);
    }
    const order = mode === 'reversed' ? [...workers].reverse() : workers;
    const byWorker = new Map<Id, Reply<T>>();
    for (const w of order) byWorker.set(w.plan.workerId, await send(w));
    return workers.map((w) => byWorker.get(w.plan.workerId)!);
  }

  /**
   * One request to one worker, typed by the method table. An error reply, a reply from another
   * worker or scope, a transport failure, deadline or abort is thrown as a RunFailure (runFailureOf).
   */
  private async call<M extends Method>(
    w: LaunchedWorker,
    method: M,
    scope: Scope,
    params: ParamsOf<M> | PrintedParams,
    phase: RunPhase,
    deadlineMs: number,
    pipelinedPrepare?: string,
  ): Promise<Reply<ResultOf<M>>> {
    // scope.step is this.scope(k).step, already the decimal string a Site carries.
    const ctx: Site = { workerId: w.plan.workerId, agentIds: w.plan.agentIds, step: scope.step, phase };
    if (pipelinedPrepare !== undefined) ctx.pipelinedPrepare = pipelinedPrepare;
    let requestId: string | undefined;
    for (let attempt = 0; ; attempt++) {
      try {
        const rep = await this.withAbort(
          w.client.call(method, scope, params, requestId ? { deadlineMs, requestId } : { deadlineMs }),
          ctx,
        );
        const reply = rep.reply;
        if (reply.type === 'error') {
          notLaunched(reply.error.message, ctx);
          throw new StepFault(
            'error-reply',
            `${method} ${rep.requestId}: ${reply.error.code}: ${reply.error.message} (${MUTATION_SAID[reply.error.mutation]})`,
            ctx,
          );
        }
        this.expect(
          reply.workerId === w.plan.workerId,
          () => `reply from worker ${JSON.stringify(reply.workerId)}`,
          ctx,
        );
        this.expect(
          sameScope(reply.scope, scope),
          () => `reply scope ${JSON.stringify(reply.scope)} differs from the request's`,
          ctx,
        );
        return { worker: w, requestId: rep.requestId, result: reply.result };
      } catch (e) {
        // A reply lost in transport: re-send the same request id and body once; the worker's
        // idempotency cache answers without executing again (docs/spec/lockstep.md, uncertain call).
        if (e instanceof WorkerCallError && e.kind === 'reply-dropped' && attempt === 0 && e.requestId) {
          this.opts.logger.warn(
            { workerId: w.plan.workerId, method, requestId: e.requestId },
            'reply dropped; re-sending the same request',
          );
          requestId = e.requestId;
          continue;
        }
        throw await runFailureOf(e, { worker: w, site: ctx, deadlineMs });
      }
    }
  }

  private withAbort<T>(p: Promise<T>, ctx: Site): Promise<T> {
    const signal = this.opts.signal;
    if (!signal) return p;
    if (signal.aborted) return Promise.reject(new StepFault('aborted', 'the run was interrupted', ctx));
    return new Promise<T>((res, rej) => {
      const onAbort = () => rej(new StepFault('aborted', 'the run was interrupted', ctx));
      this.abortWaiters.add(onAbort);
      p.then(
        (v) => {
          this.abortWaiters.delete(onAbort);
          res(v);
        },
        (e) => {
          this.abortWaiters.delete(onAbort);
          rej(e);
        },
      );
    });
  }

  // -------------------------------------------------------------------------------------------
  // Checks on replies.

  private ctx(w: LaunchedWorker, phase: RunPhase, step: bigint): Site {
    return { workerId: w.plan.workerId, agentIds: w.plan.agentIds, step: step.toString(), phase };
  }

  /** A contract check on a reply; the message is built only when the check fails (these run per agent per step). */
  private expect(cond: boolean, what: string | (() => string), ctx: Site): asserts cond {
    if (!cond) throw new StepFault('protocol', typeof what === 'string' ? what : what(), ctx);
  }

  /** Run a scalar reader on a reply field; its refusal becomes a protocol failure naming the worker. */
  private checked(ctx: Site, read: () => unknown): void {
    try {
      read();
    } catch (e) {
      if (e instanceof DetsimError) throw new StepFault('protocol', e.message, ctx);
      throw e;
    }
  }

  /** A worker that loaded another copy of a user model than this machine's is refused (loaded-models.ts). */
  private checkLoadedModel(planned: string, reported: unknown, who: string, copies: PlannedModels, ctx: Site): void {
    const why = copies.mismatch(planned, reported, who);
    if (why !== undefined) throw RunFailure.ofIdentity('ident_model_source_changed', why, ctx);
  }

  private checkDigest(value: unknown, field: string, ctx: Site): void {
    try {
      readDigest(value, field);
    } catch (e) {
      throw new StepFault('protocol', (e as Error).message, ctx);
    }
  }

  /** A batched reply must carry exactly the worker's agents, each once. */
  private entriesFor<E extends { agentId: Id }>(w: LaunchedWorker, entries: E[] | undefined, ctx: Site): E[] {
    this.expect(Array.isArray(entries), 'reply has no agents list', ctx);
    const got = entries.map((e) => e.agentId).sort(byString);
    const want = this.sortedAgentIds(w);
    this.expect(
      got.length === want.length && got.every((id, i) => id === want[i]),
      () => `reply covers agents [${got.join(', ')}], expected [${want.join(', ')}]`,
      ctx,
    );
    return entries;
  }

  private readonly sortedIds = new Map<Id, Id[]>();

  /** The worker's agent ids in order, computed once (replies are checked against them every step). */
  private sortedAgentIds(w: LaunchedWorker): Id[] {
    let ids = this.sortedIds.get(w.plan.workerId);
    if (!ids) this.sortedIds.set(w.plan.workerId, (ids = [...w.plan.agentIds].sort(byString)));
    return ids;
  }

  /** Observations must cover every agent exactly once. */
  private readObservations(
    list: { agentId: Id; observation: JsonObject }[] | undefined,
    ctx: Site,
  ): Map<Id, JsonObject> {
    this.expect(Array.isArray(list), 'observations is not a list', ctx);
    const out = new Map<Id, JsonObject>();
    for (const o of list) {
      this.expect(
        this.agentWorker.has(o.agentId),
        () => `observation for unknown agent ${JSON.stringify(o.agentId)}`,
        ctx,
      );
      this.expect(!out.has(o.agentId), () => `two observations for ${o.agentId}`, ctx);
      this.expect(isObject(o.observation), () => `observation for ${o.agentId} is not an object`, ctx);
      out.set(o.agentId, o.observation);
    }
    this.expect(
      out.size === this.agentWorker.size,
      () => `observations cover ${out.size} of ${this.agentWorker.size} agents`,
      ctx,
    );
    return out;
  }
}

/**
 * A worker that refuses to initialize a model it was not launched with is not the worker this run
 * needs (a hand-started one given other --model paths): an identity refusal, so nothing is written.
 */
function notLaunched(message: string, ctx: Site): void {
  if (!/^(agent|environment)-initialize$/.test(ctx.phase) || !message.includes('(perm_model_not_launched)')) return;
  throw RunFailure.ofIdentity(
    'perm_model_not_launched',
    `worker ${ctx.workerId} refused its models: ${message}; a worker started by hand must be given each model with --model at the path this coordinator names (the same files there)`,
    ctx,
  );
}

/**
 * One worker's Commit params, printed: each entry {agentId, observation, preparedRequestId,
 * rewards} in RFC 8785 key order with the observation's text as printed for the step (ids are Ids
 * and request ids, which JSON.stringify prints canonically).
 */
function commitParams(agentIds: readonly Id[], decisions: Map<Id, Decision>, advanced: Advanced): PrintedParams {
  const entries = agentIds.map(
    (agentId) =>
      `{"agentId":${JSON.stringify(agentId)},"observation":${advanced.observationTexts.get(agentId)!},` +
      `"preparedRequestId":${JSON.stringify(decisions.get(agentId)!.requestId)},` +
      `"rewards":${canonicalize(advanced.evaluation.byAgent.get(agentId) ?? [])}}`,
  );
  return new PrintedParams(`{"agents":[${entries.join(',')}]}`);
}

/** `numerator/denominator` of a plain {denominator, numerator} object of two strings, else undefined. */
function remainderKey(value: unknown): string | undefined {
  if (!isObject(value)) return undefined;
  let keys = 0;
  for (const key in value) if (Object.hasOwn(value, key)) keys++;
  const { numerator, denominator } = value;
  if (keys !== 2 || typeof numerator !== 'string' || typeof denominator !== 'string') return undefined;
  return `${numerator}/${denominator}`;
}

function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function sameScope(a: Scope | null, b: Scope): boolean {
  return a !== null && a.sessionId === b.sessionId && a.epoch === b.epoch && a.step === b.step;
}
