// checkModel: a test-runner-friendly determinism check for a TypeScript model, as the Python SDK's
// check_model. It runs the model twice from one seed and compares every step's decision (agents) or
// outcome, observations and world digest (environments) and captured state; it restores a capture
// (capture → encodeState → decodeState → restore, as the worker does) at every boundary of a short
// window and at seeded random boundaries of the longer run, checks each restored copy equals the live
// state as data (capture-check.ts liveDifference) and continues identically to the end. It throws
// ModelCheckError naming the step, the first differing field by path and both values. Agents: the two
// copies prepare one after the other, as two agents on one worker do, and a copy whose prepare changed
// the other's state (shared mutable state) fails. NOT the worker protocol: no process, no gRPC.
import { canonicalDigest, canonicalize, type JsonValue } from '../core/formats/canonical-json.js';
import { RationalNs } from '../core/formats/scalars.js';
import { Xorshift32 } from '../core/formats/xorshift.js';
import { firstDifference, liveDifference } from './capture-check.js';
import { decodeState, encodeState } from './state-codec.js';
import { TickClock } from './tick-clock.js';
import type { AgentModel, EnvironmentModel, JsonObject, PortBinding } from './sdk.js';

/** The first step and field at which a model was found nondeterministic or not exactly restorable. */
export class ModelCheckError extends Error {
  constructor(
    readonly step: number,
    readonly field: string,
    message: string,
  ) {
    super(message);
    this.name = 'ModelCheckError';
  }
}

/** `value` when it is JSON as a run sends it (a run refuses anything else at that step), else ModelCheckError. */
function asJson<T>(step: number, what: string, value: T): T {
  try {
    canonicalize(value as JsonValue);
  } catch (e) {
    throw new ModelCheckError(step, what, `step ${step}: ${what} is not JSON: ${(e as Error).message}`);
  }
  return value;
}

/** What checkModel runs: params, length, seed, where it restores, and the inputs it feeds the model. */
export interface CheckModelOptions {
  params?: JsonObject;
  /** Steps of the run (default 200). */
  steps?: number;
  seed?: number;
  /** Restore at every boundary below this (default 20). */
  window?: number;
  /** Boundaries drawn at random (seeded by `seed`) from the rest of the run (default 10). */
  randomBoundaries?: number;
  /** Restore exactly here instead. */
  boundaries?: readonly number[];
  /** Agents: the observation at boundary k (default: a small deterministic pattern). */
  observation?: (k: number) => JsonObject;
  /** Environments: the action of `port` at step k (default: `{}`). */
  action?: (k: number, port: PortBinding) => JsonObject;
  /** Environments: the ports (default p0/a0, p1/a1). */
  ports?: PortBinding[];
}

const STEP_60HZ = { numerator: '50000000', denominator: '3' };
const ONE_MS = { numerator: '1000000', denominator: '1' };

/** Where checkModel restores: every boundary 1 … window-1 and `count` drawn from the rest by Xorshift32(seed). */
export function restoreBoundaries(steps: number, seed: number, window = 20, count = 10): number[] {
  const marks = new Set<number>();
  for (let k = 1; k < Math.min(window, steps); k++) marks.add(k);
  const rest: number[] = [];
  for (let k = Math.max(window, 1); k < steps; k++) rest.push(k);
  const rng = new Xorshift32(seed === 0 ? 0x2545f491 : seed);
  for (let i = 0; i < count && rest.length > 0; i++) marks.add(rest.splice(rng.nextUint() % rest.length, 1)[0]!);
  return [...marks].sort((a, b) => a - b);
}

const shown = (v: unknown): string => {
  let text: string;
  try {
    text = typeof v === 'bigint' ? `${v}n` : ArrayBuffer.isView(v) ? `<${v.byteLength} bytes>` : canonicalize(v);
  } catch {
    text = String(v);
  }
  return text.length <= 120 ? text : `${text.slice(0, 117)}...`;
};

function compare(step: number, what: string, a: unknown, b: unknown): void {
  const [x, y] = [encodeState(a), encodeState(b)];
  if (x.equals(y)) return;
  const field = (firstDifference(decodeState(x), decodeState(y), '$') ?? '$').replace(/^\$/, what);
  throw new ModelCheckError(step, field, `step ${step}: ${field} differs: ${shown(a)} vs ${shown(b)}`);
}

function sameLive(boundary: number, live: unknown, copy: unknown): void {
  const found = liveDifference(live, copy);
  if (found === null) return;
  const field = `state${found[0].slice(1)}`;
  throw new ModelCheckError(
    boundary,
    field,
    `boundary ${boundary}: ${field} differs right after a restore: ${shown(found[1])} live, ${shown(found[2])} restored (capture must return everything restore needs, exactly)`,
  );
}

/** fn on a copy restored at `since`; an error names the step, the phase and the boundary. */
function afterRestore<T>(since: number, step: number, phase: string, fn: () => T): T {
  try {
    return fn();
  } catch (e) {
    if (e instanceof ModelCheckError) throw e;
    const why = e instanceof Error ? e.message : String(e);
    throw new ModelCheckError(
      step,
      phase,
      `step ${step}: ${phase} failed on the copy restored at boundary ${since}: ${why}`,
    );
  }
}

const roundTrip = (captured: unknown): unknown => decodeState(encodeState(captured));

/** Throw ModelCheckError at the first nondeterministic step or field; return when the model passes. */
export function checkModel(
  model: AgentModel<unknown> | EnvironmentModel<unknown>,
  options: CheckModelOptions = {},
): void {
  const steps = options.steps ?? 200;
  const seed = options.seed ?? 12345;
  const chosen = options.boundaries ?? restoreBoundaries(steps, seed, options.window, options.randomBoundaries);
  const marks = new Set(chosen.filter((k) => k >= 1 && k < steps));
  const params = model.resolveParams ? model.resolveParams(options.params ?? {}) : (options.params ?? {});
  const run: CheckRun = { params, steps, seed, marks, o: options };
  if (model.kind === 'agent') checkAgent(model, run);
  else checkEnvironment(model, run);
}

/** One check's resolved inputs. */
interface CheckRun {
  params: JsonObject;
  steps: number;
  seed: number;
  marks: Set<number>;
  o: CheckModelOptions;
}

interface AgentRun {
  state: unknown;
  clock: TickClock;
  obs: JsonObject;
}

function checkAgent(model: AgentModel<unknown>, { params, steps, seed, marks, o }: CheckRun): void {
  const observe = o.observation ?? ((k: number) => ({ foodDx: (k % 5) - 2, foodDy: 1 - (k % 3) }));
  const stepNs = RationalNs.readDuration(STEP_60HZ, 'stepDuration');
  const tickNs = RationalNs.readDuration(model.tickDuration ?? ONE_MS, 'tickDuration');
  const init = (obs: JsonObject) => ({ agentId: 'agent-0', seed, params, observation: obs });
  const start = (): AgentRun => ({
    state: model.initialize(init(observe(0))),
    clock: new TickClock(stepNs, tickNs),
    obs: observe(0),
  });
  const prepare = (run: AgentRun, k: number): JsonObject => {
    const ticks = Number(run.clock.advance());
    const decision = model.prepare(run.state, { agentId: 'agent-0', step: BigInt(k), ticks, observation: run.obs });
    return asJson(k, 'the decision prepare returned', decision);
  };
  const commit = (run: AgentRun, k: number): void => {
    run.obs = observe(k + 1);
    const rewards = [{ eventId: `r-${k}`, ruleId: 'r', value: (k % 3) * 0.5 }];
    model.commit(run.state, { agentId: 'agent-0', step: BigInt(k), observation: run.obs, rewards });
  };
  const captured = (run: AgentRun) => roundTrip(model.capture(run.state));
  const a = start();
  const b = start();
  const restored: [number, AgentRun][] = [];
  for (let k = 0; k < steps; k++) {
    if (marks.has(k)) {
      const state = afterRestore(k, k, 'restore', () => model.restore(captured(a), init(a.obs)));
      sameLive(k, a.state, state);
      restored.push([
        k,
        { state, clock: new TickClock(stepNs, tickNs, a.clock.remainder, a.clock.brainTicks), obs: a.obs },
      ]);
    }
    const da = prepare(a, k);
    const before = encodeState(model.capture(a.state));
    const db = prepare(b, k);
    if (!encodeState(model.capture(a.state)).equals(before))
      throw new ModelCheckError(
        k,
        'state',
        `step ${k}: prepare changed another agent's state (agents must not share mutable state)`,
      );
    commit(a, k);
    commit(b, k);
    compare(k, 'decision', da, db);
    compare(k, 'state', captured(a), captured(b));
    for (const [since, copy] of restored) {
      const dc = afterRestore(since, k, 'prepare or commit', () => {
        const d = prepare(copy, k);
        commit(copy, k);
        return d;
      });
      compare(k, `decision (restored at boundary ${since})`, da, dc);
      compare(k, `state (restored at boundary ${since})`, captured(a), captured(copy));
    }
  }
}

function checkEnvironment(model: EnvironmentModel<unknown>, { params, steps, seed, marks, o }: CheckRun): void {
  const ports = o.ports ?? [
    { portId: 'p0', agentId: 'a0' },
    { portId: 'p1', agentId: 'a1' },
  ];
  const action = o.action ?? (() => ({}));
  const ctx = { environmentId: 'env-0', seed, params, ports, stepDuration: STEP_60HZ };
  const advance = (state: unknown, k: number) => {
    const actions = ports.map((p) => ({ portId: p.portId, agentId: p.agentId, action: action(k, p) }));
    const outcome = asJson(k, 'what advance returned', model.advance(state, { step: BigInt(k), actions }));
    const observations = asJson(k, 'what observe returned', model.observe(state));
    return { outcome, observations, world: canonicalDigest(asJson(k, 'what digest returned', model.digest(state))) };
  };
  const a = model.initialize(ctx);
  const b = model.initialize(ctx);
  compare(0, 'observations', asJson(0, 'what observe returned', model.observe(a)), model.observe(b));
  const restored: [number, unknown][] = [];
  for (let k = 0; k < steps; k++) {
    if (marks.has(k)) {
      const copy = afterRestore(k, k, 'restore', () => model.restore(roundTrip(model.capture(a)), ctx));
      sameLive(k, a, copy);
      restored.push([k, copy]);
    }
    const ra = advance(a, k);
    compare(k, 'step', ra, advance(b, k));
    compare(k, 'state', roundTrip(model.capture(a)), roundTrip(model.capture(b)));
    for (const [since, copy] of restored)
      compare(
        k,
        `step (restored at boundary ${since})`,
        ra,
        afterRestore(since, k, 'advance', () => advance(copy, k)),
      );
  }
}
