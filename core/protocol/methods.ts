// The method table: one entry per worker protocol method (METHODS), tying its name to the shapes
// of its params and result (bodies.ts). The client's call(), the worker runtime's handler table
// and the tests' helpers are typed by it, so a params or result shape can only change here.
// Types only, NOT validation (each consumer checks what it reads) and NOT the wire format.
import type {
  AcknowledgeParams,
  AcknowledgeResult,
  ActivateRestoreParams,
  ActivateRestoreResult,
  AgentCommitParams,
  AgentCommitResult,
  AgentInitializeParams,
  AgentInitializeResult,
  AgentPrepareParams,
  AgentPrepareResult,
  CaptureParams,
  CaptureResult,
  EnvironmentAdvanceParams,
  EnvironmentAdvanceResult,
  EnvironmentInitializeParams,
  EnvironmentInitializeResult,
  HelloParams,
  HelloResult,
  ShutdownParams,
  ShutdownResult,
  StageRestoreParams,
  StageRestoreResult,
  StatusParams,
  StatusResult,
  WritePayloadParams,
  WritePayloadResult,
  PrefetchPayloadParams,
  PrefetchPayloadResult,
} from './bodies.js';
import type { ErrorReply, METHODS, Method, ResultReply } from './envelope.js';

type Entry<P, R> = { params: P; result: R };

/** Every method's params and result body. A method missing here fails to compile (see Check below). */
export interface MethodTable {
  [METHODS.hello]: Entry<HelloParams, HelloResult>;
  [METHODS.status]: Entry<StatusParams, StatusResult>;
  [METHODS.acknowledge]: Entry<AcknowledgeParams, AcknowledgeResult>;
  [METHODS.shutdown]: Entry<ShutdownParams, ShutdownResult>;
  [METHODS.environmentInitialize]: Entry<EnvironmentInitializeParams, EnvironmentInitializeResult>;
  [METHODS.environmentAdvance]: Entry<EnvironmentAdvanceParams, EnvironmentAdvanceResult>;
  [METHODS.agentInitialize]: Entry<AgentInitializeParams, AgentInitializeResult>;
  [METHODS.agentPrepare]: Entry<AgentPrepareParams, AgentPrepareResult>;
  [METHODS.agentCommit]: Entry<AgentCommitParams, AgentCommitResult>;
  [METHODS.capture]: Entry<CaptureParams, CaptureResult>;
  [METHODS.stageRestore]: Entry<StageRestoreParams, StageRestoreResult>;
  [METHODS.activateRestore]: Entry<ActivateRestoreParams, ActivateRestoreResult>;
  [METHODS.writePayload]: Entry<WritePayloadParams, WritePayloadResult>;
  [METHODS.prefetchPayload]: Entry<PrefetchPayloadParams, PrefetchPayloadResult>;
}

// The table covers exactly the methods of METHODS: a method added there without a row here fails.
type Check<T extends true> = T;
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
export type MethodTableIsComplete = Check<Same<Method, keyof MethodTable>>;

export type ParamsOf<M extends Method> = MethodTable[M]['params'];
export type ResultOf<M extends Method> = MethodTable[M]['result'];

/**
 * A reply to method M: its result body typed by the table, or an error. An intersection, so a
 * typed reply is still a Reply (code that handles any reply keeps working).
 */
export type ReplyOf<M extends Method> = ErrorReply | (ResultReply & { result: ResultOf<M> });
