// WorkerClient: the coordinator's end of one worker's link (a gRPC stream, the socket wire or a
// thread's port: any Link). Request tracking lives here once for every transport: request ids,
// replies correlated in request order, a deadline per call (one timer per client), and link end,
// worker exit and deadlines reported as distinct failures. Not the transport (link.ts and its
// implementations), not the lockstep logic.
import type * as grpc from '@grpc/grpc-js';
import { DetsimError } from '../formats/errors.js';
import type { Id, Scope } from '../formats/scalars.js';
import { decodeBody, encodeBody } from './body-codec.js';
import { CAPABILITIES, type HelloParams, type HelloResult, type Role } from './bodies.js';
import { CONTRACT_DIGEST, PROTOCOL_MAJOR } from './contract.js';
import { type ErrorCode, METHODS, type Method, type Params, type Reply, readReply } from './envelope.js';
import { GrpcConnectError, connectGrpcLink } from './grpc-link.js';
import { SocketConnectError, connectSocketLink } from './socket-link.js';
import { isReplyValue, type Body, type Link, type LinkEndKind, type ReplyValue } from './link.js';
import type { ParamsOf, ReplyOf } from './methods.js';

/** Why a call did not get its reply. Every kind but 'never-connected' leaves the mutation unknown. */
export type CallFailureKind =
  'never-connected' | 'stream-ended' | 'process-exited' | 'deadline' | 'reply-dropped' | 'protocol' | 'closed';

export class WorkerCallError extends Error {
  readonly mutation: 'unknown' | 'none';
  constructor(
    readonly kind: CallFailureKind,
    message: string,
    readonly address: string,
    readonly method: string | undefined,
    readonly requestId: string | undefined,
  ) {
    super(message);
    this.name = 'WorkerCallError';
    // Only a request that never left can be known not to have mutated anything.
    this.mutation = kind === 'never-connected' || (kind === 'closed' && requestId === undefined) ? 'none' : 'unknown';
  }
}

/**
 * A call's params printed by the caller: the RFC 8785 canonical text of the params object, sent as
 * it is (the lockstep prints each observation once, for its digest and for the Commits that carry
 * it). The caller vouches for the text; a worker proves it like any body it did not print.
 */
export class PrintedParams {
  constructor(readonly text: string) {}
}

/**
 * A request envelope's canonical text. Around printed params the keys are written in the order
 * canonicalize gives them (method < params < requestId < scope).
 */
export function requestText(
  method: string,
  params: Params | PrintedParams,
  requestId: string,
  scope: Scope | null,
): string {
  if (!(params instanceof PrintedParams)) return encodeBody({ method, params, requestId, scope });
  return `{"method":${JSON.stringify(method)},"params":${params.text},"requestId":${JSON.stringify(requestId)},"scope":${scope === null ? 'null' : encodeBody(scope)}}`;
}

/** Hello was answered but the worker is not the one expected (or refused the hello itself). */
export class HelloRefusedError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly field: string | undefined,
  ) {
    super(message);
    this.name = 'HelloRefusedError';
  }
}

/** How a worker's process (or thread) ended. */
export interface ProcessExitInfo {
  code: number | null;
  signal: string | null;
  /** A thread that died of an uncaught error or ran out of memory: what happened, in one line. */
  error?: string;
}

/** How a client watches the worker behind its link. */
export interface ClientOptions {
  /** Resolves when the worker's process (or thread) exits; pending calls then fail as 'process-exited'. */
  processExit?: Promise<ProcessExitInfo>;
  /**
   * After the link ends, wait this long for processExit before calling it 'stream-ended'; and after
   * the process exits, this long for the link to end (delivering the replies the worker sent before
   * it exited) before the calls still waiting fail as 'process-exited'.
   */
  exitGraceMs?: number;
  /** A label for messages (e.g. the worker id); defaults to the address. */
  label?: string;
}

export interface ConnectOptions extends ClientOptions {
  maxMessageBytes?: number;
  /** How long to wait for the channel to become ready ("never connected" after that). */
  connectTimeoutMs?: number;
  credentials?: grpc.ChannelCredentials;
  /** The TLS server name to send instead of the address's host (see GrpcLinkOptions.serverName). */
  serverName?: string;
  /** The longest reply attachment received (GrpcLinkOptions.maxAttachmentBytes; tests lower it). */
  maxAttachmentBytes?: number;
  /** A plaintext TCP worker's per-run secret (GrpcLinkOptions.token). */
  token?: string;
  /** `socket`: the worker speaks the socket wire on its unix socket (socket-link.ts), not gRPC. */
  wire?: 'grpc' | 'socket';
}

export interface CallOptions {
  attachment?: Uint8Array;
  /** Application timer for this call; on expiry the call fails with kind 'deadline'. */
  deadlineMs?: number;
  /** Re-send under an earlier request id (a retry must reuse the id and body). */
  requestId?: string;
}

/** A call's reply; `R` is the reply typed by the method table when the call named its method. */
export interface CallReply<R = Reply> {
  requestId: string;
  reply: R;
  attachment?: Buffer;
  /** The reply's attachment was this long, past what the link carries, and was dropped (link.ts). */
  droppedAttachmentBytes?: number;
}

export interface HelloExpectation {
  sessionId: Id;
  workerId: Id;
  role: Role;
  contractDigest?: string;
  /** Capabilities the worker must offer; defaults to the role's step capability. */
  requiredCapabilities?: string[];
  deadlineMs?: number;
}

/** The reply of a call that named its method: result typed by the method table. */
type Typed<M extends Method> = CallReply<ReplyOf<M>>;

interface Pending {
  method: string;
  requestId: string;
  resolve: (r: CallReply) => void;
  reject: (e: WorkerCallError) => void;
  /** performance.now() by which the reply is due; undefined: no deadline. */
  deadlineAt: number | undefined;
  deadlineMs: number | undefined;
  /** Settled already (deadline or dropped): the late reply is consumed and discarded. */
  abandoned: boolean;
}

/** Test hooks that simulate transport faults without touching the worker. */
export class ClientFaults {
  private readonly dropFor = new Map<string, number>();

  /** Discard the next reply to `method`; its call fails at once as 'reply-dropped' (mutation unknown). */
  dropNextReply(method: string): void {
    this.dropFor.set(method, (this.dropFor.get(method) ?? 0) + 1);
  }

  /** @internal */
  takeDrop(method: string): boolean {
    const n = this.dropFor.get(method) ?? 0;
    if (n === 0) return false;
    if (n === 1) this.dropFor.delete(method);
    else this.dropFor.set(method, n - 1);
    return true;
  }
}

/** Open the link `options.wire` names to the worker at `address`. */
function connectLink(address: string, options: ConnectOptions & { connectTimeoutMs: number }): Promise<Link> {
  const limits = {
    ...(options.maxMessageBytes !== undefined ? { maxMessageBytes: options.maxMessageBytes } : {}),
    ...(options.maxAttachmentBytes !== undefined ? { maxAttachmentBytes: options.maxAttachmentBytes } : {}),
  };
  if (options.wire === 'socket')
    return connectSocketLink(address, { connectTimeoutMs: options.connectTimeoutMs, ...limits });
  return connectGrpcLink(address, {
    connectTimeoutMs: options.connectTimeoutMs,
    ...limits,
    ...(options.credentials ? { credentials: options.credentials } : {}),
    ...(options.serverName !== undefined ? { serverName: options.serverName } : {}),
    ...(options.token !== undefined ? { token: options.token } : {}),
  });
}

export class WorkerClient {
  readonly faults = new ClientFaults();
  readonly address: string;
  readonly label: string;
  private readonly pending: Pending[] = [];
  private nextId = 1;
  private failure: WorkerCallError | undefined;
  private exitInfo: ProcessExitInfo | undefined;
  private endTimer: NodeJS.Timeout | undefined;
  /** Set when the link ended (everything the worker sent has been delivered). */
  private linkEnded = false;
  /** Running from the process's exit until the link ends, at most exitGraceMs. */
  private exitTimer: NodeJS.Timeout | undefined;
  private helloResult: HelloResult | undefined;
  private readonly exitGraceMs: number;
  /** One timer for all of this client's deadlines, not one per call (a step sends several calls). */
  private readonly deadlines = new DeadlineTimer((now) => this.expireDeadlines(now));

  /** A client over an open link (any transport). */
  constructor(
    private readonly link: Link,
    options: ClientOptions = {},
  ) {
    this.address = link.address;
    this.label = options.label ?? link.address;
    this.exitGraceMs = options.exitGraceMs ?? 250;
    link.open({
      message: (body, attachment, dropped) => this.onMessage(body, attachment, dropped),
      ended: (kind, why) => this.onLinkEnd(kind, why),
    });
    options.processExit?.then((info) => this.notifyProcessExit(info));
  }

  /** Connect to one gRPC worker and open its session stream. Fails as 'never-connected' if it never comes up. */
  static async connect(address: string, options: ConnectOptions = {}): Promise<WorkerClient> {
    const label = options.label ?? address;
    const timeout = options.connectTimeoutMs ?? 10_000;
    let exited: ProcessExitInfo | undefined;
    options.processExit?.then((info) => {
      exited = info;
    });
    let link: Link;
    try {
      link = await connectLink(address, { ...options, connectTimeoutMs: timeout });
    } catch (e) {
      if (!(e instanceof GrpcConnectError || e instanceof SocketConnectError)) throw e;
      const why = exited
        ? `its process exited (${describeExit(exited)})`
        : e instanceof SocketConnectError
          ? e.why
          : `not ready within ${timeout} ms`;
      throw new WorkerCallError(
        'never-connected',
        `worker ${label} at ${address} never connected: ${why}`,
        address,
        undefined,
        undefined,
      );
    }
    return new WorkerClient(link, { ...options, label });
  }

  /** The Hello result once hello() succeeded. */
  get identity(): HelloResult | undefined {
    return this.helloResult;
  }

  /**
   * Send one request; resolves with the worker's reply (result or in-band error), rejects on
   * transport failure. Params and result are typed by the method table (methods.ts); the result is
   * the worker's word, not yet checked: each caller validates what it reads.
   */
  call<M extends Method>(
    method: M,
    scope: Scope | null,
    params: ParamsOf<M> | PrintedParams,
    options: CallOptions = {},
  ): Promise<Typed<M>> {
    return this.callUnchecked(method, scope, params as unknown as Params, options) as Promise<Typed<M>>;
  }

  /** call() for any method name and params, unchecked: for tests that send what a real caller never would. */
  callUnchecked(
    method: string,
    scope: Scope | null,
    params: Params | PrintedParams,
    options: CallOptions = {},
  ): Promise<CallReply> {
    const requestId = options.requestId ?? `req-${this.nextId++}`;
    if (this.failure) {
      return Promise.reject(
        new WorkerCallError(this.failure.kind, this.failure.message, this.address, method, requestId),
      );
    }
    // Keys in RFC 8785 order: with canonical params the encoder takes its fast path.
    const body = requestText(method, params, requestId, scope);
    return new Promise<CallReply>((resolve, reject) => {
      const { deadlineMs } = options;
      const deadlineAt = deadlineMs === undefined ? undefined : performance.now() + deadlineMs;
      const entry: Pending = { method, requestId, resolve, reject, deadlineAt, deadlineMs, abandoned: false };
      if (deadlineAt !== undefined) this.deadlines.watch(deadlineAt);
      this.pending.push(entry);
      const failed = (e: Error): void => {
        this.settleFailure(
          entry,
          new WorkerCallError(
            'stream-ended',
            `worker ${this.label}: sending ${method} ${requestId} failed: ${e.message}`,
            this.address,
            method,
            requestId,
          ),
        );
      };
      try {
        this.link.send(body, options.attachment).catch(failed);
      } catch (e) {
        failed(e as Error); // a stream that is already gone may throw synchronously
      }
    });
  }

  /** Worker.Hello, then check the worker is the expected one; refuses with IDENTITY_MISMATCH / UNSUPPORTED naming the field. */
  async hello(expected: HelloExpectation): Promise<HelloResult> {
    const contractDigest = expected.contractDigest ?? CONTRACT_DIGEST;
    const params: HelloParams = {
      sessionId: expected.sessionId,
      expectedWorkerId: expected.workerId,
      role: expected.role,
      supportedMajors: [PROTOCOL_MAJOR],
      contractDigest,
    };
    const { reply } = await this.call(METHODS.hello, null, params, { deadlineMs: expected.deadlineMs ?? 10_000 });
    if (reply.type === 'error') {
      // The worker's message starts with the field it refused ("contractDigest: ...").
      const field = /^(contractDigest|workerId|role|sessionId|supportedMajors)\b/.exec(reply.error.message)?.[1];
      throw new HelloRefusedError(
        reply.error.code,
        `worker ${this.label} refused Hello: ${reply.error.code}: ${reply.error.message}`,
        field,
      );
    }
    const r = reply.result;
    const mismatch = (code: ErrorCode, field: string, got: unknown, want: unknown): HelloRefusedError =>
      new HelloRefusedError(
        code,
        `worker ${this.label}: ${code}: ${field} is ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`,
        field,
      );
    if (r.contractDigest !== contractDigest)
      throw mismatch('IDENTITY_MISMATCH', 'contractDigest', r.contractDigest, contractDigest);
    if (r.workerId !== expected.workerId || reply.workerId !== expected.workerId)
      throw mismatch('IDENTITY_MISMATCH', 'workerId', r.workerId, expected.workerId);
    if (r.role !== expected.role) throw mismatch('IDENTITY_MISMATCH', 'role', r.role, expected.role);
    if (r.selectedMajor !== PROTOCOL_MAJOR)
      throw mismatch('UNSUPPORTED', 'selectedMajor', r.selectedMajor, PROTOCOL_MAJOR);
    const required = expected.requiredCapabilities ?? [
      expected.role === 'agent' ? CAPABILITIES.agentStep : CAPABILITIES.worldStep,
    ];
    const caps = Array.isArray(r.capabilities) ? r.capabilities : [];
    for (const cap of required) {
      if (!caps.includes(cap))
        throw new HelloRefusedError(
          'UNSUPPORTED',
          `worker ${this.label}: UNSUPPORTED: capabilities ${JSON.stringify(caps)} lack required capability ${JSON.stringify(cap)}`,
          'capabilities',
        );
    }
    this.helloResult = r;
    return r;
  }

  /** Tell the client its worker's process exited: pending calls fail as 'process-exited'. */
  notifyProcessExit(info: ProcessExitInfo): void {
    this.exitInfo = info;
    // Replies the worker sent before it exited may still be on their way (a socket read after the
    // exit was seen): let the link deliver them, so a Commit answered before the worker died in
    // the Prepare pipelined behind it succeeds, and the failure names that Prepare.
    if (this.linkEnded || this.pending.length === 0 || this.exitGraceMs === 0) return this.failExited();
    this.exitTimer ??= setTimeout(() => this.failExited(), this.exitGraceMs);
  }

  private failExited(): void {
    if (this.exitTimer) clearTimeout(this.exitTimer);
    this.exitTimer = undefined;
    this.failAll(
      new WorkerCallError(
        'process-exited',
        `worker ${this.label}: process exited (${describeExit(this.exitInfo!)})`,
        this.address,
        undefined,
        undefined,
      ),
    );
  }

  /** Number of calls still waiting for a reply (including abandoned ones whose reply is still due). */
  get inFlight(): number {
    return this.pending.length;
  }

  /** Fail every call whose deadline has passed; returns the earliest deadline still ahead. */
  private expireDeadlines(now: number): number | undefined {
    let next: number | undefined;
    for (const entry of this.pending) {
      if (entry.abandoned || entry.deadlineAt === undefined) continue;
      if (entry.deadlineAt <= now) {
        this.settleFailure(
          entry,
          new WorkerCallError(
            'deadline',
            `worker ${this.label}: ${entry.method} ${entry.requestId} got no reply within ${entry.deadlineMs} ms (mutation unknown)`,
            this.address,
            entry.method,
            entry.requestId,
          ),
        );
      } else if (next === undefined || entry.deadlineAt < next) next = entry.deadlineAt;
    }
    return next;
  }

  /** Close the link; pending calls fail as 'closed'. */
  close(): void {
    this.deadlines.stop();
    this.failAll(
      new WorkerCallError('closed', `worker ${this.label}: client closed`, this.address, undefined, undefined),
    );
    this.link.close();
  }

  private onMessage(body: Body | ReplyValue, attachment: Buffer | undefined, droppedAttachmentBytes?: number): void {
    let reply: Reply;
    try {
      // A ReplyValue comes only from a worker runtime in this thread, already checked as plain data (link.ts).
      reply = readReply(isReplyValue(body) ? body.envelope : decodeBody(body, this.link.printedHere === true));
    } catch (e) {
      return this.protocolFailure(`bad reply: ${e instanceof DetsimError ? e.message : String(e)}`);
    }
    const entry = this.pending.shift();
    if (!entry) return this.protocolFailure(`reply ${reply.requestId} arrived with no request outstanding`);
    if (entry.requestId !== reply.requestId) {
      return this.protocolFailure(
        `reply ${reply.requestId} arrived where ${entry.requestId} (${entry.method}) was due`,
      );
    }
    if (entry.abandoned) return;
    entry.abandoned = true;
    if (this.faults.takeDrop(entry.method)) {
      return entry.reject(
        new WorkerCallError(
          'reply-dropped',
          `worker ${this.label}: reply to ${entry.method} ${entry.requestId} dropped by a fault hook (mutation unknown)`,
          this.address,
          entry.method,
          entry.requestId,
        ),
      );
    }
    entry.resolve({
      requestId: entry.requestId,
      reply,
      ...(attachment ? { attachment } : {}),
      ...(droppedAttachmentBytes !== undefined ? { droppedAttachmentBytes } : {}),
    });
  }

  /** Fail one call but keep its slot: its reply is still due on the in-order stream. */
  private settleFailure(entry: Pending, error: WorkerCallError): void {
    if (entry.abandoned) return;
    entry.abandoned = true;
    entry.reject(error);
  }

  private onLinkEnd(kind: LinkEndKind, why: string): void {
    this.linkEnded = true;
    if (kind === 'protocol') return this.protocolFailure(why);
    if (this.exitTimer) return this.failExited(); // the process had exited: everything it sent is in
    if (this.failure || this.endTimer) return;
    const fail = (): void => {
      this.endTimer = undefined;
      if (this.exitInfo) return; // notifyProcessExit already failed everything with the better reason
      this.failAll(
        new WorkerCallError('stream-ended', `worker ${this.label}: ${why}`, this.address, undefined, undefined),
      );
    };
    // A killed process usually ends the stream a moment before its exit is observed: give the
    // exit signal a short grace so the failure names the real cause.
    if (this.exitGraceMs > 0 && this.pending.length > 0) this.endTimer = setTimeout(fail, this.exitGraceMs);
    else fail();
  }

  private protocolFailure(why: string): void {
    this.failAll(
      new WorkerCallError(
        'protocol',
        `worker ${this.label}: protocol violation: ${why}`,
        this.address,
        undefined,
        undefined,
      ),
    );
    this.link.close();
  }

  private failAll(error: WorkerCallError): void {
    if (this.endTimer) {
      clearTimeout(this.endTimer);
      this.endTimer = undefined;
    }
    if (this.exitTimer) {
      clearTimeout(this.exitTimer);
      this.exitTimer = undefined;
    }
    if (!this.failure) this.failure = error;
    const entries = this.pending.splice(0);
    for (const entry of entries) {
      this.settleFailure(
        entry,
        new WorkerCallError(
          error.kind,
          `${error.message} (during ${entry.method} ${entry.requestId})`,
          this.address,
          entry.method,
          entry.requestId,
        ),
      );
    }
  }
}

/**
 * A single lazily re-armed timer: watch(at) makes sure it fires no later than `at`; when it fires
 * it asks for expiries and re-arms for the next deadline. A reply that arrives in time costs no
 * timer call at all. Unref'd: the link (socket, thread) is what keeps the process alive.
 */
class DeadlineTimer {
  private timer: NodeJS.Timeout | undefined;
  private armedFor = Infinity;

  constructor(private readonly expire: (now: number) => number | undefined) {}

  watch(at: number): void {
    if (this.timer && this.armedFor <= at) return;
    this.arm(at);
  }

  stop(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
    this.armedFor = Infinity;
  }

  private arm(at: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.armedFor = at;
    this.timer = setTimeout(() => this.fire(), Math.max(0, Math.ceil(at - performance.now())));
    this.timer.unref();
  }

  private fire(): void {
    this.timer = undefined;
    this.armedFor = Infinity;
    const next = this.expire(performance.now());
    if (next !== undefined) this.arm(next);
  }
}

export function describeExit(info: ProcessExitInfo): string {
  if (info.error !== undefined) return info.error;
  return info.signal ? `signal ${info.signal}` : `exit code ${info.code}`;
}
