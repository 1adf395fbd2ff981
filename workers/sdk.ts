// The detsim worker SDK ('detsim/sdk'): how a researcher writes an agent or environment model as
// a module. A model is plain callbacks over its own state; the runtime owns ticks, idempotency,
// epochs, capture payloads and the wire. Not the runtime itself (workers/runtime.ts).
import { createHash } from 'node:crypto';
import type { RationalNsJson } from '../core/formats/scalars.js';
import { takeOver } from './owned-bytes.js';
import { giveBack } from './recycled-bytes.js';
import type { StateValue } from './state-value.js';

export { Xorshift32 } from '../core/formats/xorshift.js';
export { StrictModeViolation } from './strict.js';
export type { StateArray, StateValue } from './state-value.js';
export { checkModel, ModelCheckError, restoreBoundaries, type CheckModelOptions } from './check-model.js';
export type { RationalNsJson } from '../core/formats/scalars.js';

/** A plain JSON object (params, observations, decisions, actions). */
export type JsonObject = Record<string, unknown>;

/** A seed's 32 bits as an unsigned integer (0 … 2^32 − 1): what most random libraries take. */
export function seedU32(seed: number): number {
  return seed >>> 0;
}

/** Dataset digest of a model without a dataset: SHA-256 of the text `detsim/no-dataset-v1`. */
export const NO_DATASET_DIGEST = createHash('sha256').update('detsim/no-dataset-v1').digest('hex');
/** Default tick: 1 ms. */
export const ONE_MS: RationalNsJson = { numerator: '1000000', denominator: '1' };

/** What an agent model's `initialize` (and `restore`) gets: its id, seed, params and first observation. */
export interface AgentInitContext {
  agentId: string;
  /**
   * The agent's derived seed as seed-derivation-v1 defines it: a signed 32-bit integer (it may be
   * negative; `seedU32(seed)` is its unsigned view, for a library that wants a non-negative seed).
   */
  seed: number;
  /** The model's params from the config (the runtime's own `strict` flag removed). */
  params: JsonObject;
  /** The observation at boundary 0. */
  observation: JsonObject;
}

/** What an agent model's `prepare` gets: the step, ticks to run now and the observation. */
export interface AgentPrepareContext {
  agentId: string;
  /** The step k being prepared. */
  step: bigint;
  /** Ticks to run now, from the exact accumulator (e.g. 16, 17, 17 for 60 Hz with 1 ms ticks). */
  ticks: number;
  /** The observation committed at boundary k. */
  observation: JsonObject;
}

/** One reward an agent receives at commit. */
export interface AgentReward {
  eventId: string;
  ruleId: string;
  value: number;
}

/** What an agent model's `commit` gets: the step just applied, the next observation and rewards. */
export interface AgentCommitContext {
  agentId: string;
  /** The step k just applied; the agent is now at boundary k + 1. */
  step: bigint;
  /** The observation at boundary k + 1 (the runtime keeps it and passes it to the next prepare). */
  observation: JsonObject;
  rewards: AgentReward[];
}

/**
 * An agent model. Callbacks must be deterministic functions of (state, context): no clock, no
 * Math.random, no unsorted iteration. `prepare` runs the ticks and returns the decision (it may change
 * its own agent's state, never another's: under strict mode the worker refuses a prepare that changed
 * another agent's state, see workers/prepare-guard.ts); `commit`
 * takes rewards without ticking; `capture` returns plain data (typed arrays as Uint8Array views),
 * `restore` rebuilds the state from exactly that data; the optional `release` is told when the
 * worker dropped a state for good (a restore's activation replaced it), see {@link recycle}.
 */
export interface AgentModel<S = unknown> {
  kind: 'agent';
  modelVersion: string;
  /** Default 'none-v1'. */
  plasticityVersion?: string;
  /** Default NO_DATASET_DIGEST. */
  datasetDigest?: string;
  /** Tick duration in ns; default 1 ms. */
  tickDuration?: RationalNsJson;
  /** Validate params and fill defaults; the result is what the profile digest covers. Default: see acceptedParams. */
  resolveParams?(params: JsonObject): JsonObject;
  /**
   * Without resolveParams: the params this model reads; any other param is refused at load, naming it
   * (a model that declares neither takes no params), so a param given in a config is never silently ignored.
   */
  acceptedParams?: readonly string[];
  /**
   * Optional: the (resolved) params a fork (`detsim fork --set`) may change when it restores this
   * model's state; `restore` then gets the new params in `ctx.params` and must build the state for
   * them (the payload was verified under the params it was captured with). A param not listed, or a
   * model that declares none, refuses the fork naming the param. See {@link EnvironmentModel.forkParams}.
   */
  forkParams?: readonly string[];
  initialize(ctx: AgentInitContext): S;
  prepare(state: S, ctx: AgentPrepareContext): JsonObject;
  commit(state: S, ctx: AgentCommitContext): void;
  capture(state: S): StateValue;
  restore(data: unknown, ctx: AgentInitContext): S;
  /** Optional: the worker dropped `state` for good (see {@link recycle}). */
  release?(state: S): void;
}

/** Which agent drives which environment port. */
export interface PortBinding {
  portId: string;
  agentId: string;
}

/** What an environment model's `initialize` (and `restore`) gets: its id, seed, params, ports, step duration. */
export interface EnvironmentInitContext {
  environmentId: string;
  seed: number;
  params: JsonObject;
  /** Ports in their configured order: the order actions are applied. */
  ports: PortBinding[];
  stepDuration: RationalNsJson;
}

/** One action applied through a port in a step. */
export interface PortAction {
  portId: string;
  agentId: string;
  action: JsonObject;
}

/** One reward an environment grants in a step. */
export interface EnvironmentReward {
  agentId: string;
  eventId: string;
  ruleId: string;
  value: number;
}

/** What an environment model's `advance` gets: the step and one action per port. */
export interface EnvironmentAdvanceContext {
  /** The step k being applied (world goes from boundary k to k + 1). */
  step: bigint;
  /** One action per port, in port order. */
  actions: PortAction[];
}

/** What `advance` reports: the rewards and event ids of the step. */
export interface AdvanceOutcome {
  rewards: EnvironmentReward[];
  /** Event ids in the order they happened (unique within the step). */
  eventIds: string[];
}

/**
 * An environment model. `advance` applies all actions for one step and reports rewards/events;
 * `observe` returns every agent's observation at the current boundary; `digest` returns a JSON
 * value whose canonical SHA-256 is the worldDigest (keep it small and complete).
 */
export interface EnvironmentModel<S = unknown> {
  kind: 'environment';
  modelVersion: string;
  /** As for agents: validate params and fill defaults; default: see acceptedParams. */
  resolveParams?(params: JsonObject): JsonObject;
  /** As for agents: the params this model reads when it has no resolveParams; any other is refused. */
  acceptedParams?: readonly string[];
  /**
   * Optional, as for agents: the params a fork may change on restore (`restore` gets the new ones).
   * The restored environment must observe the boundary exactly as the checkpoint recorded it (the
   * agents hold that observation): a change may only act from the fork's first step on.
   */
  forkParams?: readonly string[];
  initialize(ctx: EnvironmentInitContext): S;
  /** Refuse a malformed action before anything mutates: return a message naming the field, or undefined. */
  checkAction?(action: JsonObject, portId: string): string | undefined;
  advance(state: S, ctx: EnvironmentAdvanceContext): AdvanceOutcome;
  observe(state: S): Record<string, JsonObject>;
  digest(state: S): unknown;
  capture(state: S): StateValue;
  restore(data: unknown, ctx: EnvironmentInitContext): S;
  /** Optional: the worker dropped `state` for good (see {@link recycle}). */
  release?(state: S): void;
}

/** Any model module: an agent or an environment model. */
export type Model = AgentModel<never> | EnvironmentModel<never>;

/** Identity helpers that give a model module its type (and a kind tag the loader checks). */
export function defineAgentModel<S>(model: Omit<AgentModel<S>, 'kind'>): AgentModel<S> {
  return { kind: 'agent', ...model };
}

/** Identity helper for an environment model module (adds the kind tag the loader checks). */
export function defineEnvironmentModel<S>(model: Omit<EnvironmentModel<S>, 'kind'>): EnvironmentModel<S> {
  return { kind: 'environment', ...model };
}

/** A little-endian byte view of a Float64Array (no copy): what capture() should return. */
export function bytesOf(array: ArrayBufferView): Uint8Array {
  return new Uint8Array(array.buffer, array.byteOffset, array.byteLength);
}

/**
 * The bytes as a Float64Array: a copy (they may be unaligned, and the caller's buffer may be reused),
 * or, for a large state field a restore read into memory of its own, that memory itself, taken over
 * without a copy (at most once; see owned-bytes.ts). Either way the values are the bytes' values.
 */
export function f64FromBytes(bytes: Uint8Array): Float64Array {
  if (bytes.byteLength % 8 !== 0) throw new Error(`${bytes.byteLength} bytes is not a whole number of f64`);
  const own = takeOver(bytes, 8);
  if (own) return new Float64Array(own);
  const out = new Float64Array(bytes.byteLength / 8);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

/** The bytes as a Float32Array: a copy, or a restore's own memory taken over (as f64FromBytes). */
export function f32FromBytes(bytes: Uint8Array): Float32Array {
  if (bytes.byteLength % 4 !== 0) throw new Error(`${bytes.byteLength} bytes is not a whole number of f32`);
  const own = takeOver(bytes, 4);
  if (own) return new Float32Array(own);
  const out = new Float32Array(bytes.byteLength / 4);
  new Uint8Array(out.buffer).set(bytes);
  return out;
}

/**
 * Give back a large typed array the model will never touch again, from its `release(state)` hook
 * (called once a restore's activation replaced `state`): a later restore may read a state field of
 * the same byte length into its memory instead of fresh memory, overwriting every byte. Kept only
 * when the array spans its whole ArrayBuffer of at least 64 KiB (and 512 MiB wait at most);
 * otherwise the garbage collector frees it as usual. Never give back memory still in use.
 */
export function recycle(array: ArrayBufferView): void {
  giveBack(array);
}

// Param helpers live in the kernel so the coordinator's plan-time check runs the same code.
export { ParamError, intParam, onlyParams } from '../core/models/params.js';
export type { ParamObject } from '../core/models/params.js';

/** Seed 0 would lock Xorshift32 at 0 forever: the built-in models substitute this constant. */
export const ZERO_SEED_SUBSTITUTE = 0x2545f491;

/** The seed to start a Xorshift32 with: the derived seed, or {@link ZERO_SEED_SUBSTITUTE} for 0. */
export function rngSeed(seed: number): number {
  return seed === 0 ? ZERO_SEED_SUBSTITUTE : seed | 0;
}
