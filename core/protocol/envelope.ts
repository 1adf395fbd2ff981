// The request and reply envelopes of the worker protocol (worker.proto "Envelopes"): method names,
// the 15 error codes and mutation rules, readers that refuse malformed envelopes, and builders.
// Not the method bodies (bodies.ts) and not the transport: nothing here knows about gRPC.
import { DetsimError } from '../formats/errors.js';
import {
  type Id,
  type Scope,
  readId,
  readObject,
  readRequestId,
  readScope,
  refuseUnknownFields,
} from '../formats/scalars.js';

export const METHODS = {
  hello: 'Worker.Hello',
  status: 'Worker.Status',
  acknowledge: 'Worker.Acknowledge',
  shutdown: 'Worker.Shutdown',
  environmentInitialize: 'Environment.Initialize',
  environmentAdvance: 'Environment.Advance',
  agentInitialize: 'Agent.Initialize',
  agentPrepare: 'Agent.Prepare',
  agentCommit: 'Agent.Commit',
  capture: 'State.Capture',
  stageRestore: 'State.StageRestore',
  activateRestore: 'State.ActivateRestore',
  /** store-files-v1 only (a minor addition: no proto message changes, a worker without it never gets it). */
  writePayload: 'State.WritePayload',
  /** store-files-v1 only (same kind of minor addition as State.WritePayload). */
  prefetchPayload: 'State.PrefetchPayload',
} as const;
export type Method = (typeof METHODS)[keyof typeof METHODS];
export const ALL_METHODS: readonly Method[] = Object.values(METHODS);

export function isMethod(value: unknown): value is Method {
  return typeof value === 'string' && (ALL_METHODS as readonly string[]).includes(value);
}

export const ERROR_CODES = [
  'INVALID_ARGUMENT',
  'UNSUPPORTED',
  'IDENTITY_MISMATCH',
  'STALE_EPOCH',
  'STALE_STEP',
  'FUTURE_STEP',
  'INVALID_PHASE',
  'CONFLICT',
  'IN_PROGRESS',
  'BUSY',
  'BUFFER_INVALID',
  'RESULT_EXPIRED',
  'INCOMPATIBLE_STATE',
  'BACKEND_FAILURE',
  'INTERNAL',
] as const;
export type ErrorCode = (typeof ERROR_CODES)[number];

/** Codes that may report a mutation; every other code is a refusal before mutation ("none"). */
export const MAY_MUTATE_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'RESULT_EXPIRED',
  'BACKEND_FAILURE',
  'INTERNAL',
]);
export const MUTATIONS = ['none', 'applied', 'unknown'] as const;
export type Mutation = (typeof MUTATIONS)[number];

export function isBeforeMutationCode(code: ErrorCode): boolean {
  return !MAY_MUTATE_CODES.has(code);
}

export type Params = Record<string, unknown>;

export interface Request {
  method: string;
  requestId: string;
  scope: Scope | null;
  params: Params;
}

interface ReplyBase {
  requestId: string;
  workerId: Id;
  incarnationId: Id;
  scope: Scope | null;
}
export interface ResultReply extends ReplyBase {
  type: 'result';
  result: Record<string, unknown>;
}
export interface ErrorBody {
  code: ErrorCode;
  message: string;
  mutation: Mutation;
}
export interface ErrorReply extends ReplyBase {
  type: 'error';
  error: ErrorBody;
}
export type Reply = ResultReply | ErrorReply;

function readScopeOrNull(value: unknown, field: string): Scope | null {
  return value === null ? null : readScope(value, field);
}

function requireField(obj: Record<string, unknown>, key: string, field: string): unknown {
  if (!(key in obj)) throw new DetsimError('struct_missing_field', `${field}.${key} is missing`, `${field}.${key}`);
  return obj[key];
}

/** Read a request envelope. The method must be a string; whether it is supported is the worker's call. */
export function readRequest(value: unknown, field = 'request'): Request {
  const obj = readObject(value, field);
  refuseUnknownFields(obj, ['method', 'requestId', 'scope', 'params'], field);
  const method = requireField(obj, 'method', field);
  if (typeof method !== 'string' || method.length === 0 || method.length > 64) {
    throw new DetsimError('struct_invalid_field', `${field}.method must be a method name`, `${field}.method`);
  }
  return {
    method,
    requestId: readRequestId(requireField(obj, 'requestId', field), `${field}.requestId`),
    scope: readScopeOrNull(requireField(obj, 'scope', field), `${field}.scope`),
    params: readObject(requireField(obj, 'params', field), `${field}.params`),
  };
}

export function readErrorBody(value: unknown, field: string): ErrorBody {
  const obj = readObject(value, field);
  refuseUnknownFields(obj, ['code', 'message', 'mutation'], field);
  const code = requireField(obj, 'code', field);
  if (!(ERROR_CODES as readonly unknown[]).includes(code)) {
    throw new DetsimError(
      'struct_invalid_field',
      `${field}.code ${JSON.stringify(code)} is not one of the 15 error codes`,
      `${field}.code`,
    );
  }
  const message = requireField(obj, 'message', field);
  if (typeof message !== 'string')
    throw new DetsimError('struct_invalid_field', `${field}.message must be a string`, `${field}.message`);
  const mutation = requireField(obj, 'mutation', field);
  if (!(MUTATIONS as readonly unknown[]).includes(mutation)) {
    throw new DetsimError(
      'struct_invalid_field',
      `${field}.mutation must be none, applied or unknown`,
      `${field}.mutation`,
    );
  }
  if (isBeforeMutationCode(code as ErrorCode) && mutation !== 'none') {
    throw new DetsimError(
      'struct_invalid_field',
      `${field}: ${code} is a refusal before mutation and must carry mutation "none", not ${JSON.stringify(mutation)}`,
      `${field}.mutation`,
    );
  }
  return { code: code as ErrorCode, message, mutation: mutation as Mutation };
}

/** Read a reply envelope (result or error); the bodies inside `result` are the method's business. */
export function readReply(value: unknown, field = 'reply'): Reply {
  const obj = readObject(value, field);
  const type = requireField(obj, 'type', field);
  if (type !== 'result' && type !== 'error')
    throw new DetsimError('struct_invalid_field', `${field}.type must be "result" or "error"`, `${field}.type`);
  const payloadKey = type === 'result' ? 'result' : 'error';
  refuseUnknownFields(obj, ['type', 'requestId', 'workerId', 'incarnationId', 'scope', payloadKey], field);
  const base = {
    requestId: readRequestId(requireField(obj, 'requestId', field), `${field}.requestId`),
    workerId: readId(requireField(obj, 'workerId', field), `${field}.workerId`),
    incarnationId: readId(requireField(obj, 'incarnationId', field), `${field}.incarnationId`),
    scope: readScopeOrNull(requireField(obj, 'scope', field), `${field}.scope`),
  };
  if (type === 'result')
    return { type, ...base, result: readObject(requireField(obj, 'result', field), `${field}.result`) };
  return { type, ...base, error: readErrorBody(requireField(obj, 'error', field), `${field}.error`) };
}

/** Build an error body, enforcing the before-mutation rule at the source. */
export function errorBody(code: ErrorCode, message: string, mutation: Mutation = 'none'): ErrorBody {
  if (isBeforeMutationCode(code) && mutation !== 'none') throw new Error(`${code} must carry mutation "none"`);
  return { code, message, mutation };
}

/** A domain refusal raised inside a worker and turned into an error reply by the runtime. */
export class ProtocolRefusal extends Error {
  readonly body: ErrorBody;
  constructor(code: ErrorCode, message: string, mutation: Mutation = 'none') {
    super(message);
    this.name = 'ProtocolRefusal';
    this.body = errorBody(code, message, mutation);
  }
  get code(): ErrorCode {
    return this.body.code;
  }
}
