// WorkerClient: the coordinator's end of one worker process's long-lived bidirectional stream.
// It correlates replies in request order, runs an application timer per call, and reports
// stream end, process exit and deadlines as distinct failures. Not the lockstep logic.
import * as grpc from '@grpc/grpc-js';
import { DetsimError } from '../formats/errors.js';
import type { Id, Scope } from '../formats/scalars.js';
import { decodeBody, encodeBody } from './body-codec.js';
import { CAPABILITIES, type HelloParams, type HelloResult, type Role } from './bodies.js';
import {
  CONTRACT_DIGEST,
  DEFAULT_MAX_MESSAGE_BYTES,
  type Frame,
  PROTOCOL_MAJOR,
  channelOptions,
  parseAddress,
  workerServiceDefinition,
} from './contract.js';
import { type ErrorCode, METHODS, type Method, type Params, type Reply, readReply } from './envelope.js';
import type { ParamsOf, ReplyOf } from './methods.js';
import { FrameAssembler, FrameWriter } from './frames.js';

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

export interface ProcessExitInfo {
  code: number | null;
  signal: string | null;
}

export interface ConnectOptions {
  maxMessageBytes?: number;
  /** How long to wait for the channel to become ready ("never connected" after that). */
  connectTimeoutMs?: number;
  /** Resolves when the worker's process exits; pending calls then fail as 'process-exited'. */
  processExit?: Promise<ProcessExitInfo>;
  /** After the stream ends, wait this long for processExit before calling it 'stream-ended'. */
  exitGraceMs?: number;
  credentials?: grpc.ChannelCredentials;
  /** A label for messages (e.g. the worker id); defaults to the address. */
  label?: string;
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
  timer: NodeJS.Timeout | undefined;
  /** Settled already (deadline or dropped): the late reply is consumed and discarded. */
  abandoned: boolean;
}

type SessionStream = grpc.ClientDuplexStream<Frame, Frame>;

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

export class WorkerClient {
  readonly faults = new ClientFaults();
  private readonly pending: Pending[] = [];
  private readonly writer: FrameWriter;
  private readonly assembler = new FrameAssembler();
  private nextId = 1;
  private failure: WorkerCallError | undefined;
  private exitInfo: ProcessExitInfo | undefined;
  private endTimer: NodeJS.Timeout | undefined;
  private helloResult: HelloResult | undefined;

  private constructor(
    readonly address: string,
    readonly label: string,
    private readonly grpcClient: grpc.Client,
    private readonly stream: SessionStream,
    private readonly exitGraceMs: number,
  ) {
    this.writer = new FrameWriter(stream);
    stream.on('data', (frame: Frame) => this.onFrame(frame));
    stream.on('end', () => this.onStreamEnd('the worker ended the stream'));
    stream.on('error', (e: Error) => this.onStreamEnd(`stream error: ${e.message}`));
  }

  /** Connect to one worker and open its session stream. Fails as 'never-connected' if it never comes up. */
  static async connect(address: string, options: ConnectOptions = {}): Promise<WorkerClient> {
    const target = parseAddress(address, 'address').target;
    const label = options.label ?? address;
    const Ctor = grpc.makeGenericClientConstructor(workerServiceDefinition(), 'Worker');
    const grpcClient = new Ctor(
      target,
      options.credentials ?? grpc.credentials.createInsecure(),
      channelOptions(options.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES),
    );
    const timeout = options.connectTimeoutMs ?? 10_000;
    let exited: ProcessExitInfo | undefined;
    options.processExit?.then((info) => {
      exited = info;
    });
    await new Promise<void>((resolve, reject) => {
      grpcClient.waitForReady(Date.now() + timeout, (err) => {
        if (!err) return resolve();
        grpcClient.close();
        const why = exited ? `its process exited (${describeExit(exited)})` : `not ready within ${timeout} ms`;
        reject(
          new WorkerCallError(
            'never-connected',
            `worker ${label} at ${address} never connected: ${why}`,
            address,
            undefined,
            undefined,
          ),
        );
      });
    });
    const stream = (grpcClient as unknown as { Session(): SessionStream }).Session();
    const client = new WorkerClient(address, label, grpcClient, stream, options.exitGraceMs ?? 250);
    options.processExit?.then((info) => client.notifyProcessExit(info));
    return client;
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
    params: ParamsOf<M>,
    options: CallOptions = {},
  ): Promise<Typed<M>> {
    return this.callUnchecked(method, scope, params as unknown as Params, options) as Promise<Typed<M>>;
  }

  /** call() for any method name and params, unchecked: for tests that send what a real caller never would. */
  callUnchecked(method: string, scope: Scope | null, params: Params, options: CallOptions = {}): Promise<CallReply> {
    const requestId = options.requestId ?? `req-${this.nextId++}`;
    if (this.failure) {
      return Promise.reject(
        new WorkerCallError(this.failure.kind, this.failure.message, this.address, method, requestId),
      );
    }
    // Keys in RFC 8785 order: with canonical params the encoder takes its fast path.
    const body = encodeBody({ method, params, requestId, scope });
    return new Promise<CallReply>((resolve, reject) => {
      const entry: Pending = { method, requestId, resolve, reject, timer: undefined, abandoned: false };
      if (options.deadlineMs !== undefined) {
        entry.timer = setTimeout(() => {
          this.settleFailure(
            entry,
            new WorkerCallError(
              'deadline',
              `worker ${this.label}: ${method} ${requestId} got no reply within ${options.deadlineMs} ms (mutation unknown)`,
              this.address,
              method,
              requestId,
            ),
          );
        }, options.deadlineMs);
      }
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
        this.writer.send(body, options.attachment).catch(failed);
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
    this.failAll(
      new WorkerCallError(
        'process-exited',
        `worker ${this.label}: process exited (${describeExit(info)})`,
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

  /** Close the stream and channel; pending calls fail as 'closed'. */
  close(): void {
    this.failAll(
      new WorkerCallError('closed', `worker ${this.label}: client closed`, this.address, undefined, undefined),
    );
    try {
      this.stream.end();
    } catch {
      // already ended
    }
    this.stream.cancel();
    this.grpcClient.close();
  }

  private onFrame(frame: Frame): void {
    let message;
    try {
      message = this.assembler.push(frame);
    } catch (e) {
      return this.protocolFailure(`bad frame: ${(e as Error).message}`);
    }
    if (!message) return;
    let reply: Reply;
    try {
      reply = readReply(decodeBody(message.body));
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
    if (entry.timer) clearTimeout(entry.timer);
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
    entry.resolve(
      message.attachment
        ? { requestId: entry.requestId, reply, attachment: message.attachment }
        : { requestId: entry.requestId, reply },
    );
  }

  /** Fail one call but keep its slot: its reply is still due on the in-order stream. */
  private settleFailure(entry: Pending, error: WorkerCallError): void {
    if (entry.abandoned) return;
    entry.abandoned = true;
    if (entry.timer) clearTimeout(entry.timer);
    entry.reject(error);
  }

  private onStreamEnd(why: string): void {
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
    this.stream.cancel();
  }

  private failAll(error: WorkerCallError): void {
    if (this.endTimer) {
      clearTimeout(this.endTimer);
      this.endTimer = undefined;
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

export function describeExit(info: ProcessExitInfo): string {
  return info.signal ? `signal ${info.signal}` : `exit code ${info.code}`;
}
