// The worker runtime: turns one request message into exactly one reply. It owns Worker.Hello /
// Status / Acknowledge / Shutdown, session binding, the Hello-first gate (each stream serves
// nothing until it said a successful Hello), the lifecycle reply cache and the mapping of
// refusals to error replies, and dispatches the rest to the agent or environment host.
// Not the transport (core/protocol/server.ts) and not the process (workers/process.ts).
import { randomBytes } from 'node:crypto';
import { canonicalCopy, canonicalDigest, canonicalize } from '../core/formats/canonical-json.js';
import { DetsimError } from '../core/formats/errors.js';
import { readDigest, readId, readRequestId, refuseUnknownFields } from '../core/formats/scalars.js';
import { CAPABILITIES, type Role } from '../core/protocol/bodies.js';
import { bodyText, decodeBody } from '../core/protocol/body-codec.js';
import {
  CONTRACT_DIGEST,
  DEFAULT_MAX_MESSAGE_BYTES,
  PROTOCOL_MAJOR,
  PROTOCOL_MINOR,
} from '../core/protocol/contract.js';
import {
  type ErrorBody,
  METHODS,
  type Method,
  ProtocolRefusal,
  type Request,
  isMethod,
  readRequest,
} from '../core/protocol/envelope.js';
import type { Body, ReplyValue } from '../core/protocol/link.js';
import type { ResultOf } from '../core/protocol/methods.js';
import { AgentHost } from './agent-host.js';
import { captureHoldOf, withoutHold, writeHeldPayload } from './capture-file.js';
import { PrefetchedPayloads } from './restore-prefetch.js';
import { EnvironmentHost } from './environment-host.js';
import type { HostContext, HostReply } from './host-context.js';
import { LifecycleCache } from './op-cache.js';

export interface RuntimeOptions {
  role: Role;
  workerId: string;
  /** Bind to this session up front (Hello must then name it). */
  sessionId?: string;
  /** Strict mode for user models by default. */
  strict?: boolean;
  maxMessageBytes?: number;
  /** Override the incarnation id (tests); normally random per process start. */
  incarnationId?: string;
  /** Model module paths this worker may load besides the built-ins (`--model`); absolute. */
  models?: readonly string[];
  /** The run's checkpoint store directory (store-files-v1 reads and writes only under it). */
  storeDir?: string;
}

/**
 * One Session stream as the runtime sees it: a stream serves nothing but Worker.Hello until a
 * Hello on that same stream succeeded, so a second client on the worker's socket cannot ride on
 * the coordinator's introduction (docs/security.md).
 */
export interface StreamState {
  introduced: boolean;
  /**
   * Requests on this stream were printed by the coordinator's canonicalize in this process and
   * nobody else writes to it (a worker thread's port, an inline link): they are not proven
   * canonical again (body-codec.ts decodeBody). Never set for a socket or gRPC stream.
   */
  readonly printedHere?: true;
  /**
   * The stream's peer is the coordinator in this very thread (an inline link): a result reply is
   * handed over as a ReplyValue (link.ts) instead of its text, when it is plain JSON data.
   */
  readonly valueReplies?: true;
}

export interface RuntimeOutcome {
  /** The reply's canonical text (a link sends it as text or bytes), or its value on a valueReplies stream. */
  body: string | ReplyValue;
  attachment?: Uint8Array;
  /** The process should stop after this reply is sent. */
  stop?: boolean;
}

/**
 * One handler per protocol method, keyed by the method table: a handler's reply must carry its
 * method's result body (core/protocol/methods.ts). Params arrive unchecked off the wire: each
 * handler validates its own.
 */
type Handler<M extends Method> = (req: Request, attachment: Uint8Array | undefined) => Replied<ResultOf<M>>;
type Replied<R extends object> = HostReply<R> | Promise<HostReply<R>>;
export type Handlers = { readonly [M in Method]: Handler<M> };

/** Served even to a stopping worker (once the stream said Hello). */
const ALWAYS_SERVED = new Set<string>([METHODS.status, METHODS.shutdown, METHODS.acknowledge]);
const LIFECYCLE = new Set<string>([
  METHODS.agentInitialize,
  METHODS.environmentInitialize,
  METHODS.capture,
  METHODS.stageRestore,
  METHODS.activateRestore,
]);
/**
 * Calls that may change a participant's live state: a held capture refuses its write once any of
 * these was served after it (the digest it gives would be of a state past the boundary).
 */
const STATE_CHANGING = new Set<string>([
  METHODS.agentInitialize,
  METHODS.environmentInitialize,
  METHODS.agentPrepare,
  METHODS.agentCommit,
  METHODS.environmentAdvance,
  METHODS.activateRestore,
]);
export const MAX_AGENTS_PER_WORKER = 64;
export const RUNTIME_NAME = `detsim-ts/${process.version}`;
/** Identifies this implementation of the contract (not the build bytes: there is no build step to hash). */
export const BUILD_DIGEST = canonicalDigest({
  implementation: 'detsim-ts-worker',
  version: '0.1.0',
  contractDigest: CONTRACT_DIGEST,
});

export class WorkerRuntime implements HostContext {
  readonly workerId: string;
  readonly incarnationId: string;
  readonly role: Role;
  readonly strictUserModels: boolean;
  readonly launchedModels: readonly string[];
  readonly storeDir: string | undefined;
  private boundSession: string | undefined;
  private progressCounter = 0n;
  /** State-changing calls served so far (STATE_CHANGING): a held capture notes the count it saw. */
  private stateChanges = 0;
  private lastCompletedRequestId: string | null = null;
  private stopping = false;
  private readonly lifecycle = new LifecycleCache();
  /** store-files-v1: payloads read and hashed ahead (State.PrefetchPayload) while the coordinator verifies their file. */
  readonly prefetched = new PrefetchedPayloads((agentId, decoded) => this.agents?.warmRestore(agentId, decoded));
  private readonly maxMessageBytes: number;
  readonly agents: AgentHost | undefined;
  readonly environment: EnvironmentHost | undefined;

  constructor(options: RuntimeOptions) {
    this.role = options.role;
    this.workerId = options.workerId;
    this.boundSession = options.sessionId;
    this.strictUserModels = options.strict ?? false;
    this.launchedModels = options.models ?? [];
    this.storeDir = options.storeDir;
    this.maxMessageBytes = options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.incarnationId = options.incarnationId ?? `inc-${randomBytes(8).toString('hex')}`;
    if (options.role === 'agent') this.agents = new AgentHost(this);
    else this.environment = new EnvironmentHost(this);
    this.handlers = this.handlersFor(this.agents, this.environment);
  }

  private readonly handlers: Handlers;

  /** The handler table: Worker.* here, steps on the role's host, lifecycle on whichever host runs. */
  private handlersFor(a: AgentHost | undefined, env: EnvironmentHost | undefined): Handlers {
    const agent = (req: Request): AgentHost => {
      if (!a) throw new ProtocolRefusal('UNSUPPORTED', `${req.method}: this worker hosts the environment`);
      return a;
    };
    const environment = (req: Request): EnvironmentHost => {
      if (!env) throw new ProtocolRefusal('UNSUPPORTED', `${req.method}: this worker hosts agents`);
      return env;
    };
    return {
      [METHODS.hello]: (req) => this.hello(req),
      [METHODS.status]: (req) => this.status(req),
      [METHODS.acknowledge]: (req) => this.acknowledge(req),
      [METHODS.shutdown]: (req) => this.shutdown(req),
      [METHODS.agentInitialize]: (req) => agent(req).initialize(req),
      [METHODS.agentPrepare]: (req) => agent(req).prepare(req),
      [METHODS.agentCommit]: (req) => agent(req).commit(req),
      [METHODS.environmentInitialize]: (req) => environment(req).initialize(req),
      [METHODS.environmentAdvance]: (req) => environment(req).advance(req),
      [METHODS.capture]: (req) => (a ? a.capture(req) : env!.capture(req)),
      [METHODS.stageRestore]: (req, attachment) =>
        a ? a.stageRestore(req, attachment) : env!.stageRestore(req, attachment),
      [METHODS.activateRestore]: (req) => (a ? a.activateRestore(req) : env!.activateRestore(req)),
      [METHODS.writePayload]: (req) => writeHeldPayload(req, this.lifecycle, this.storeDir, this.stateChanges),
      [METHODS.prefetchPayload]: (req) => this.prefetched.prefetch(req, this.storeDir),
    };
  }

  get sessionId(): string {
    return this.boundSession ?? '';
  }

  progress(requestId: string): void {
    this.progressCounter++;
    this.lastCompletedRequestId = requestId;
  }

  /** Handle one request message arriving on `stream`; always produces exactly one reply. */
  async handle(body: Body, attachment: Uint8Array | undefined, stream: StreamState): Promise<RuntimeOutcome> {
    let req: Request;
    try {
      req = readRequest(decodeBody(body, stream.printedHere === true));
    } catch (e) {
      return {
        body: this.errorEnvelope(salvageRequestId(body), null, {
          code: 'INVALID_ARGUMENT',
          message: `malformed request: ${(e as Error).message}`,
          mutation: 'none',
        }),
      };
    }
    try {
      const reply = await this.dispatch(req, attachment, stream);
      const out: RuntimeOutcome = {
        body:
          (stream.valueReplies === true && this.valueReply(req, reply.result)) || this.encodeResult(req, reply.result),
      };
      if (reply.attachment) out.attachment = reply.attachment;
      if (req.method === METHODS.shutdown) out.stop = true;
      return out;
    } catch (e) {
      return { body: this.errorEnvelope(req.requestId, req.scope, toErrorBody(e)) };
    }
  }

  private async dispatch(req: Request, attachment: Uint8Array | undefined, stream: StreamState): Promise<HostReply> {
    if (req.method === METHODS.hello) {
      const reply = this.handlers[METHODS.hello](req, attachment);
      stream.introduced = true;
      return reply;
    }
    // Nothing, not even Status or Shutdown, is served to a stream that has not introduced itself.
    if (!stream.introduced) throw new ProtocolRefusal('INVALID_PHASE', `${req.method} before Worker.Hello`);
    if (STATE_CHANGING.has(req.method)) this.stateChanges++;
    if (ALWAYS_SERVED.has(req.method)) return this.route(req, attachment);
    if (this.stopping) throw new ProtocolRefusal('INVALID_PHASE', 'the worker is stopping');
    if (!LIFECYCLE.has(req.method)) return this.route(req, attachment);
    // Lifecycle replies are kept until acknowledged: the same id and body replays the reply.
    // The attachment is not hashed here: StageRestore's params name its digest and the host verifies
    // it, so the params already identify the request (and a 256 MiB payload is hashed only once).
    const digest = canonicalDigest({ method: req.method, scope: req.scope, params: req.params });
    const holdFrom = req.method === METHODS.capture ? captureHoldOf(req, this.storeDir) : undefined;
    const cached = this.lifecycle.get(req.requestId);
    if (cached) {
      if (cached.digest !== digest)
        throw new ProtocolRefusal(
          'CONFLICT',
          `${req.requestId} was already used for a different ${req.method} request`,
        );
      return cached.attachment ? { result: cached.result, attachment: cached.attachment } : { result: cached.result };
    }
    if (this.lifecycle.full) {
      throw new ProtocolRefusal(
        'BUSY',
        `${LifecycleCache.LIMIT} lifecycle replies await Worker.Acknowledge; acknowledge them first`,
      );
    }
    const reply = await (holdFrom !== undefined
      ? this.captureHeld(withoutHold(req), holdFrom)
      : this.route(req, attachment));
    this.lifecycle.put(
      req.requestId,
      reply.pieces
        ? { digest, result: reply.result, held: { pieces: reply.pieces, stateChanges: this.stateChanges } }
        : reply.attachment
          ? { digest, result: reply.result, attachment: reply.attachment }
          : { digest, result: reply.result },
    );
    // A held payload stays here until Worker.Acknowledge; State.WritePayload writes it to a file.
    return reply.pieces ? { result: reply.result } : reply;
  }

  /** A Capture that may hold its payload (store-files-v1): a held one the host keeps as pieces, not one buffer. */
  private captureHeld(req: Request, holdFrom: number): HostReply {
    return this.agents ? this.agents.capture(req, holdFrom) : this.environment!.capture(req, holdFrom);
  }

  private route(req: Request, attachment: Uint8Array | undefined): HostReply | Promise<HostReply> {
    if (!isMethod(req.method)) throw new ProtocolRefusal('UNSUPPORTED', `unknown method ${JSON.stringify(req.method)}`);
    return this.handlers[req.method](req, attachment);
  }

  // ---- Worker.* -------------------------------------------------------------------------------

  private hello(req: Request): HostReply<ResultOf<typeof METHODS.hello>> {
    if (req.scope !== null) throw new ProtocolRefusal('INVALID_ARGUMENT', 'Worker.Hello takes scope null');
    const p = req.params;
    let sessionId: string, expectedWorkerId: string, contractDigest: string;
    try {
      refuseUnknownFields(p, ['sessionId', 'expectedWorkerId', 'role', 'supportedMajors', 'contractDigest'], 'params');
      sessionId = readId(p.sessionId, 'params.sessionId');
      expectedWorkerId = readId(p.expectedWorkerId, 'params.expectedWorkerId');
      contractDigest = readDigest(p.contractDigest, 'params.contractDigest');
    } catch (e) {
      throw asInvalid(e);
    }
    if (!Array.isArray(p.supportedMajors) || !p.supportedMajors.every((m) => Number.isInteger(m))) {
      throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.supportedMajors must be a list of integers');
    }
    if (contractDigest !== CONTRACT_DIGEST) {
      throw new ProtocolRefusal(
        'IDENTITY_MISMATCH',
        `contractDigest: the caller has ${contractDigest}, this worker speaks ${CONTRACT_DIGEST}`,
      );
    }
    // Identity refusals say which check failed, never this worker's own id or bound session.
    if (expectedWorkerId !== this.workerId) {
      throw new ProtocolRefusal('IDENTITY_MISMATCH', 'workerId: params.expectedWorkerId does not name this worker');
    }
    if (p.role !== 'agent' && p.role !== 'environment')
      throw new ProtocolRefusal('UNSUPPORTED', `role: ${JSON.stringify(p.role)} is not a worker role`);
    if (p.role !== this.role)
      throw new ProtocolRefusal('UNSUPPORTED', `role: the caller asks for ${p.role}, this worker runs as ${this.role}`);
    if (!p.supportedMajors.includes(PROTOCOL_MAJOR)) {
      throw new ProtocolRefusal(
        'UNSUPPORTED',
        `supportedMajors: ${JSON.stringify(p.supportedMajors)} does not include ${PROTOCOL_MAJOR}`,
      );
    }
    if (this.boundSession !== undefined && this.boundSession !== sessionId) {
      throw new ProtocolRefusal(
        'IDENTITY_MISMATCH',
        'sessionId: params.sessionId is not the session this worker is bound to',
      );
    }
    this.boundSession = sessionId;
    return {
      result: {
        selectedMajor: PROTOCOL_MAJOR,
        selectedMinor: PROTOCOL_MINOR,
        workerId: this.workerId,
        incarnationId: this.incarnationId,
        role: this.role,
        runtime: RUNTIME_NAME,
        buildDigest: BUILD_DIGEST,
        contractDigest: CONTRACT_DIGEST,
        capabilities: [
          this.role === 'agent' ? CAPABILITIES.agentStep : CAPABILITIES.worldStep,
          CAPABILITIES.checkpoint,
          // Only a worker given the run's store reads, writes and prefetches payload files in it; one
          // without (a hand-started worker) streams its capture and restore payloads instead.
          ...(this.storeDir !== undefined ? [CAPABILITIES.storeFiles, CAPABILITIES.captureHoldFrom] : []),
        ].sort(),
        limits: {
          maxAgents: this.role === 'agent' ? MAX_AGENTS_PER_WORKER : 0,
          maxMessageBytes: this.maxMessageBytes,
          workerThreads: 1,
        },
      },
    };
  }

  private status(req: Request): HostReply<ResultOf<typeof METHODS.status>> {
    try {
      refuseUnknownFields(req.params, [], 'params');
    } catch (e) {
      throw asInvalid(e);
    }
    const host = this.agents ?? this.environment!;
    const epoch = host.currentEpoch;
    const boundary = host.boundary;
    const currentScope =
      this.boundSession && epoch !== undefined && boundary !== undefined
        ? { sessionId: this.boundSession, epoch, step: boundary.toString() }
        : null;
    return {
      result: {
        state: this.stopping ? 'stopping' : host.state,
        currentScope,
        lastCompletedRequestId: this.lastCompletedRequestId,
        progressCounter: this.progressCounter.toString(),
      },
    };
  }

  private acknowledge(req: Request): HostReply<ResultOf<typeof METHODS.acknowledge>> {
    const ids = req.params.requestIds;
    try {
      refuseUnknownFields(req.params, ['requestIds'], 'params');
      if (!Array.isArray(ids) || ids.length < 1 || ids.length > 16)
        throw new ProtocolRefusal('INVALID_ARGUMENT', 'params.requestIds must hold 1..16 request ids');
      ids.forEach((id, i) => readRequestId(id, `params.requestIds[${i}]`));
    } catch (e) {
      throw asInvalid(e);
    }
    return { result: { acknowledged: this.lifecycle.acknowledge(ids as string[]) } };
  }

  private shutdown(req: Request): HostReply<ResultOf<typeof METHODS.shutdown>> {
    try {
      refuseUnknownFields(req.params, ['reason'], 'params');
      readId(req.params.reason, 'params.reason');
    } catch (e) {
      throw asInvalid(e);
    }
    this.stopping = true;
    return { result: { stopping: true } };
  }

  // ---- envelopes ------------------------------------------------------------------------------

  /**
   * The result envelope, or a BACKEND_FAILURE naming the offending value when model output in the
   * result is not JSON data (NaN, Infinity, a function…): the request must still get its one reply.
   */
  private encodeResult(req: Request, result: object): string {
    try {
      return this.resultEnvelope(req, result);
    } catch (e) {
      const message = `${req.method}: the model returned a value that is not JSON data: ${(e as Error).message}`;
      return this.errorEnvelope(req.requestId, req.scope, { code: 'BACKEND_FAILURE', message, mutation: 'unknown' });
    }
  }

  /** The result envelope as a ReplyValue, or undefined when it is not plain JSON data (the text path then prints or refuses it). */
  private valueReply(req: Request, result: object): ReplyValue | undefined {
    const envelope = canonicalCopy(this.envelopeOf(req, result));
    return envelope === undefined ? undefined : { envelope: envelope as object };
  }

  // Keys in RFC 8785 order: with a result built the same way, canonicalize takes its fast path.
  private envelopeOf(req: Request, result: object): object {
    return {
      incarnationId: this.incarnationId,
      requestId: req.requestId,
      result,
      scope: req.scope,
      type: 'result',
      workerId: this.workerId,
    };
  }

  private resultEnvelope(req: Request, result: object): string {
    return canonicalize(this.envelopeOf(req, result));
  }

  private errorEnvelope(requestId: string, scope: Request['scope'], error: ErrorBody): string {
    return canonicalize({
      type: 'error',
      requestId,
      workerId: this.workerId,
      incarnationId: this.incarnationId,
      scope,
      // A message may quote a model's value: a lone surrogate in it would make the reply itself
      // unprintable (and the request go without its one reply), so it is shown as U+FFFD.
      error: { ...error, message: (error.message as unknown as { toWellFormed(): string }).toWellFormed() },
    });
  }

  /** For the process: the message size limit in force. */
  get limits(): { maxMessageBytes: number } {
    return { maxMessageBytes: this.maxMessageBytes };
  }
}

function asInvalid(e: unknown): unknown {
  return e instanceof DetsimError ? new ProtocolRefusal('INVALID_ARGUMENT', e.message) : e;
}

function toErrorBody(e: unknown): ErrorBody {
  if (e instanceof ProtocolRefusal) return e.body;
  if (e instanceof DetsimError) return { code: 'INVALID_ARGUMENT', message: e.message, mutation: 'none' };
  const msg = e instanceof Error ? e.message : String(e);
  return { code: 'INTERNAL', message: `internal error: ${msg}`, mutation: 'unknown' };
}

/** Best effort: the request id of an unreadable request, so the reply still correlates. */
function salvageRequestId(body: Body): string {
  const head = bodyText(typeof body === 'string' ? body.slice(0, 4096) : body.subarray(0, 4096));
  const m = /"requestId":"(req-(?:0|[1-9][0-9]{0,19}))"/.exec(head);
  if (m) {
    try {
      return readRequestId(m[1], 'requestId');
    } catch {
      // fall through
    }
  }
  return 'req-0';
}
