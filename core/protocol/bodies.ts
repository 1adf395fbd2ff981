// TypeScript shapes of every params/result body documented in proto/detsim/v1/worker.proto.
// Types only (what both sides agree the JSON looks like); validation lives with each consumer.
import type { Digest, Id, RationalNsJson, Scope, U64 } from '../formats/scalars.js';

export type Role = 'agent' | 'environment';
export type JsonObject = Record<string, unknown>;

export const CAPABILITIES = {
  agentStep: 'agent-step-v1',
  worldStep: 'world-step-v1',
  checkpoint: 'checkpoint-v1',
  /**
   * The worker shares the run's checkpoint store (docs/spec/capture-file.md): StageRestore may name
   * a range of a checkpoint file in it instead of carrying the payload; State.PrefetchPayload reads
   * and hashes such a range while the coordinator verifies the file; a Capture may hold its payload
   * (`hold: true`: the reply gives the size only, no attachment) and State.WritePayload then writes
   * it into a checkpoint temp file of the store, hashing it as it goes (the reply gives the digest).
   * Offered exactly when the worker was given the store (`--store-dir`, and `--store-id` matched).
   */
  storeFiles: 'store-files-v1',
  /**
   * A held Capture may name `holdFrom` (docs/spec/capture-file.md): the payload is held only when
   * it is at least that many bytes, else sent in the reply as an unheld capture's. Offered with
   * store-files-v1.
   */
  captureHoldFrom: 'capture-hold-from-v1',
} as const;

export interface HelloParams {
  sessionId: Id;
  expectedWorkerId: Id;
  role: Role;
  supportedMajors: number[];
  contractDigest: Digest;
}
export interface HelloResult {
  selectedMajor: 1;
  selectedMinor: 0;
  workerId: Id;
  incarnationId: Id;
  role: Role;
  runtime: string;
  buildDigest: Digest;
  contractDigest: Digest;
  capabilities: Id[];
  limits: { maxAgents: number; maxMessageBytes: number; workerThreads: number };
}

export type WorkerState =
  | 'uninitialized'
  | 'ready'
  | 'preparing'
  | 'prepared'
  | 'advancing'
  | 'committing'
  | 'capturing'
  | 'staged-restore'
  | 'restoring'
  | 'failed'
  | 'stopping';
export type StatusParams = Record<string, never>;
export interface StatusResult {
  state: WorkerState;
  currentScope: Scope | null;
  lastCompletedRequestId: string | null;
  progressCounter: U64;
}
/**
 * How many lifecycle replies (Initialize, Capture, StageRestore, ActivateRestore) a worker keeps
 * unacknowledged; one more is refused BUSY. The coordinator acknowledges before it reaches it.
 */
export const LIFECYCLE_REPLY_LIMIT = 16;

export interface AcknowledgeParams {
  requestIds: string[];
}
export interface AcknowledgeResult {
  acknowledged: number;
}
export interface ShutdownParams {
  reason: Id;
}
export interface ShutdownResult {
  stopping: true;
}

export interface PortBinding {
  portId: Id;
  agentId: Id;
}
export interface EnvironmentInitializeParams {
  environmentId: Id;
  model: string;
  params: JsonObject;
  seed: number;
  stepDuration: RationalNsJson;
  ports: PortBinding[];
}
export interface AgentObservation {
  agentId: Id;
  observation: JsonObject;
}
export interface EnvironmentInitializeResult {
  environmentId: Id;
  modelVersion: string;
  profileDigest: Digest;
  boundary: '0';
  observations: AgentObservation[];
  /** A model module's identity as the worker loaded it (`module:<file>@sha256:…`); absent for a built-in model. */
  modelIdentity?: string;
}
export interface PortAction {
  portId: Id;
  agentId: Id;
  action: JsonObject;
}
export interface EnvironmentAdvanceParams {
  batchId: Id;
  actions: PortAction[];
}
export interface RewardEvent {
  agentId: Id;
  eventId: Id;
  ruleId: Id;
  value: number;
}
export interface EnvironmentAdvanceResult {
  batchId: Id;
  appliedFromStep: U64;
  nextStep: U64;
  appliedControlsDigest: Digest;
  observations: AgentObservation[];
  rewards: RewardEvent[];
  eventIds: Id[];
  worldDigest: Digest;
}

export interface AgentInitializeEntry {
  agentId: Id;
  model: string;
  params: JsonObject;
  seed: number;
  stepDuration: RationalNsJson;
  observation: JsonObject;
}
export interface AgentInitializeParams {
  agents: AgentInitializeEntry[];
}
export interface AgentInitializeResultEntry {
  agentId: Id;
  modelVersion: string;
  plasticityVersion: string;
  profileDigest: Digest;
  datasetDigest: Digest;
  tickDuration: RationalNsJson;
  committedStep: '0';
  /** A model module's identity as the worker loaded it (`module:<file>@sha256:…`); absent for a built-in model. */
  modelIdentity?: string;
}
export interface AgentInitializeResult {
  agents: AgentInitializeResultEntry[];
}

export interface AgentPrepareParams {
  agents: { agentId: Id }[];
}
export interface PreparedDecision {
  agentId: Id;
  ticksAdvanced: U64;
  brainTicks: U64;
  remainder: RationalNsJson;
  decision: JsonObject;
}
export interface AgentPrepareResult {
  agents: PreparedDecision[];
}

export interface AgentReward {
  eventId: Id;
  ruleId: Id;
  value: number;
}
export interface AgentCommitEntry {
  agentId: Id;
  preparedRequestId: string;
  observation: JsonObject;
  rewards: AgentReward[];
}
export interface AgentCommitParams {
  agents: AgentCommitEntry[];
}
export interface AgentCommitResult {
  agents: { agentId: Id; committedStep: U64 }[];
}

export interface PayloadRef {
  digest: Digest;
  byteLength: U64;
}
export interface CaptureParams {
  checkpointId: Id;
  agentId: Id | null;
  /** store-files-v1: keep the payload until acknowledged, reply with its size only (HeldCaptureResult). */
  hold?: true;
  /** capture-hold-from-v1, only with `hold`: hold only a payload of at least this many bytes. */
  holdFrom?: U64;
}
export interface CaptureResult {
  checkpointId: Id;
  agentId: Id | null;
  boundary: U64;
  compatibilityDigest: Digest;
  /** A held capture replies with the size alone (HeldCaptureResult). */
  payload: PayloadRef;
}
/** store-files-v1: the reply to a held Capture: the digest comes with State.WritePayload. */
export type HeldCaptureResult = Omit<CaptureResult, 'payload'> & { payload: { byteLength: U64 } };
/** store-files-v1: write the payload a held Capture (its request id) keeps at `offset` of `path`. */
export interface WritePayloadParams {
  captureRequestId: string;
  file: { path: string; offset: U64 };
}
export interface WritePayloadResult {
  byteLength: U64;
  /** The SHA-256 of the bytes written (hashed as they were written). */
  digest: Digest;
}
/**
 * store-files-v1: read the range `payload.file` names and check it against `payload` (null:
 * drop what was prefetched for this participant). `matched` only says whether the bytes hash to
 * `payload.digest`, never what they hash to.
 */
export interface PrefetchPayloadParams {
  agentId: Id | null;
  payload: (PayloadRef & { file: { path: string; offset: U64 } }) | null;
}
export interface PrefetchPayloadResult {
  matched: boolean;
}
export interface StageRestoreParams {
  checkpointId: Id;
  agentId: Id | null;
  sourceScope: Scope;
  compatibilityDigest: Digest;
  payload: PayloadRef & { file?: { path: string; offset: U64 } };
  /**
   * Only in a fork that changes this participant's params (TypeScript workers; coordinator/checkpoint/
   * fork-rebind.ts): the payload is verified under the params it holds, then restored with these
   * params (as configured) if the model accepts the change; profileDigest is the one they must give.
   */
  rebind?: { params: JsonObject; profileDigest: Digest };
}
export interface StageRestoreResult {
  checkpointId: Id;
  agentId: Id | null;
  restoreToken: Id;
  /** A user model's identity as the worker loaded it (as in the Initialize results); absent for a built-in model. */
  modelIdentity?: string;
}
export interface ActivateRestoreParams {
  restoreToken: Id;
  agentId: Id | null;
}
export interface ActivateRestoreResult {
  checkpointId: Id;
  agentId: Id | null;
  committedStep: U64;
  observation: JsonObject | null;
}
