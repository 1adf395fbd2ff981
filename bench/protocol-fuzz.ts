// Protocol fuzz against a real TypeScript worker process over its real transport, either wire: gRPC
// Session streams on a Unix socket (raw frames through grpc-js), or the socket wire (raw bytes on
// the socket, `--wire socket`): random and mutated request envelopes (wrong fields, huge numbers,
// wrong scopes, hostile model paths), deep nesting, non-JSON and non-canonical bodies, bad framing
// (gRPC: both body and chunk, empty frames, oversized chunks, chunks never followed by a body,
// frames past the message limit; socket wire: headers announcing an empty or oversized body, an
// oversized attachment, or more bytes than come before the client ends). Properties: every request message
// gets exactly one reply, a result or a named error (a code of ERROR_CODES); bad framing ends only
// that stream; the worker never exits or hangs, its peak RSS stays bounded, and no module named
// by a client is ever executed (a marker module's import would write a file).
// Usage: node --import tsx bench/protocol-fuzz.ts [--cases N] [--seed S] [--role agent|environment] [--wire grpc|socket]
// (test/protocol/fuzz.test.ts runs a bounded number of cases through runProtocolFuzz). Not a benchmark.
import * as grpc from '@grpc/grpc-js';
import fc from 'fast-check';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { type Socket, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { canonicalBytes } from '../core/formats/canonical-json.js';
import {
  ALL_METHODS,
  CONTRACT_DIGEST,
  DEFAULT_MAX_MESSAGE_BYTES,
  ERROR_CODES,
  type Frame,
  FrameAssembler,
  MAX_CHUNK_BYTES,
  METHODS,
  type Reply,
  type Role,
  SocketReader,
  channelOptions,
  decodeBody,
  parseAddress,
  readReply,
  socketMessageHead,
  workerServiceDefinition,
} from '../core/protocol/index.js';
import { type SpawnedWorker, launchWorker } from '../test/workers/harness.js';

const SESSION = 's1';
const WORKER_ID = 'w-fuzz';
/** A reply (or the end of a stream that must end) slower than this is a hang. */
const REPLY_TIMEOUT_MS = 10_000;

export type Wire = 'grpc' | 'socket';

export interface FuzzOptions {
  cases: number;
  role?: Role;
  /** The wire the worker speaks (default gRPC). */
  wire?: Wire;
  /** fast-check seed; default random (printed on failure so a finding can be replayed). */
  seed?: number;
  /** Peak resident set (VmHWM) the worker may reach, in MiB. */
  maxPeakRssMiB?: number;
}

export interface FuzzReport {
  cases: number;
  seed: number | undefined;
  replies: number;
  /** Error replies by code (every key is one of ERROR_CODES). */
  codes: Record<string, number>;
  results: number;
  streamsEndedByWorker: number;
  peakRssMiB: number;
}

// ---------------------------------------------------------------------------------------------
// The worker under test and a raw Session stream to it.

interface Target {
  worker: SpawnedWorker;
  wire: Wire;
  /** gRPC only: the channel every Session stream of the fuzz opens on. */
  grpcClient: grpc.Client | undefined;
  /** Importing this module writes `markerFile`: it must never exist. */
  markerModule: string;
  markerFile: string;
  dir: string;
}

async function startTarget(role: Role, wire: Wire): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), 'detsim-fuzz-'));
  const markerFile = join(dir, 'IMPORTED');
  const markerModule = join(dir, 'marker-model.mjs');
  writeFileSync(
    markerModule,
    `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(markerFile)}, 'imported');\nexport default {};\n`,
  );
  const worker = await launchWorker(process.execPath, ['--import', 'tsx', 'workers/main.ts'], {
    role,
    workerId: WORKER_ID,
    extra: wire === 'socket' ? ['--wire', 'socket'] : [],
  });
  if (wire === 'socket') return { worker, wire, grpcClient: undefined, markerModule, markerFile, dir };
  const Ctor = grpc.makeGenericClientConstructor(workerServiceDefinition(), 'Worker');
  const grpcClient = new Ctor(
    parseAddress(worker.listen).target,
    grpc.credentials.createInsecure(),
    channelOptions(DEFAULT_MAX_MESSAGE_BYTES * 2),
  );
  return { worker, wire, grpcClient, markerModule, markerFile, dir };
}

/** A new raw session to the target on its wire. */
function sessionTo(target: Target): RawSession {
  return target.grpcClient ? new GrpcSession(target.grpcClient) : new SocketSession(target.worker.listen);
}

type Next = { kind: 'reply'; reply: Reply } | { kind: 'ended'; why: string } | { kind: 'timeout' };

/** One raw session (a gRPC Session stream, or a socket-wire connection): replies in order, or its end. */
abstract class RawSession {
  private readonly queue: Next[] = [];
  private waiter: ((n: Next) => void) | undefined;
  ended = false;

  /** Send one well-framed message. */
  abstract send(body: Uint8Array, attachment?: Uint8Array): void;
  /** Send a bad-framing action's frames or bytes as they are. */
  abstract sendBad(a: BadFrame): void;
  /** End our half: the worker must then end its half. */
  abstract halfClose(): void;
  abstract close(): void;

  protected reply(body: Uint8Array): void {
    try {
      this.deliver({ kind: 'reply', reply: readReply(decodeBody(body)) });
    } catch (e) {
      this.finish(`an unreadable reply: ${(e as Error).message}`);
    }
  }

  protected finish(why: string): void {
    if (this.ended) return;
    this.ended = true;
    this.deliver({ kind: 'ended', why });
  }

  private deliver(n: Next): void {
    const w = this.waiter;
    this.waiter = undefined;
    if (w) w(n);
    else this.queue.push(n);
  }

  /** The next reply or the session's end, or 'timeout' if neither comes in time. */
  next(timeoutMs = REPLY_TIMEOUT_MS): Promise<Next> {
    const queued = this.queue.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.waiter = undefined;
        resolve({ kind: 'timeout' });
      }, timeoutMs);
      this.waiter = (n) => {
        clearTimeout(timer);
        resolve(n);
      };
    });
  }
}

/** A Session stream with raw frame access: write any frame, read reassembled replies in order. */
class GrpcSession extends RawSession {
  private readonly stream: grpc.ClientDuplexStream<Frame, Frame>;
  private readonly assembler = new FrameAssembler();

  constructor(client: grpc.Client) {
    super();
    this.stream = (client as unknown as { Session(): grpc.ClientDuplexStream<Frame, Frame> }).Session();
    this.stream.on('data', (frame: Frame) => {
      try {
        const m = this.assembler.push(frame);
        if (m) this.reply(m.body);
      } catch (e) {
        this.finish(`an unreadable reply: ${(e as Error).message}`);
      }
    });
    this.stream.on('end', () => this.finish('the worker ended the stream'));
    this.stream.on('error', (e: Error) => this.finish(`stream error: ${e.message}`));
  }

  private write(frame: Frame): void {
    if (!this.ended) this.stream.write(frame);
  }

  send(body: Uint8Array, attachment?: Uint8Array): void {
    if (attachment)
      for (let off = 0; off < attachment.length; off += MAX_CHUNK_BYTES)
        this.write({ chunk: attachment.subarray(off, off + MAX_CHUNK_BYTES) });
    this.write({ body });
  }

  sendBad(a: BadFrame): void {
    for (const f of a.frames ?? [])
      this.write(
        a.size === undefined
          ? f
          : f.body
            ? { body: new Uint8Array(a.size).fill(0x20) }
            : { chunk: new Uint8Array(a.size) },
      );
  }

  halfClose(): void {
    this.stream.end();
  }

  close(): void {
    this.stream.end();
    this.stream.cancel();
  }
}

/** A socket-wire connection: write any bytes, read the worker's messages in order. */
class SocketSession extends RawSession {
  private readonly socket: Socket;
  private readonly reader = new SocketReader({
    maxBodyBytes: DEFAULT_MAX_MESSAGE_BYTES,
    maxAttachmentBytes: DEFAULT_MAX_MESSAGE_BYTES,
  });

  constructor(listen: string) {
    super();
    this.socket = connect(parseAddress(listen).target.replace(/^unix:/, ''));
    this.socket.on('data', (chunk: Buffer) => {
      try {
        for (const m of this.reader.push(chunk)) this.reply(m.body);
      } catch (e) {
        this.finish(`an unreadable reply: ${(e as Error).message}`);
      }
    });
    this.socket.on('end', () => this.finish('the worker ended the connection'));
    this.socket.on('close', () => this.finish('the worker closed the connection'));
    this.socket.on('error', (e: Error) => this.finish(`socket error: ${e.message}`));
  }

  send(body: Uint8Array, attachment?: Uint8Array): void {
    if (this.ended) return;
    this.socket.write(socketMessageHead(body, attachment?.length ?? 0));
    if (attachment) this.socket.write(attachment);
  }

  sendBad(a: BadFrame): void {
    if (!this.ended && a.raw) this.socket.write(a.raw);
  }

  halfClose(): void {
    this.socket.end();
  }

  close(): void {
    this.socket.destroy();
  }
}

// ---------------------------------------------------------------------------------------------
// What the fuzz sends.

/** Framing the worker must refuse by ending the stream or connection. */
interface BadFrame {
  kind: 'badFrame';
  what: string;
  /** gRPC: the frames to send. */
  frames?: Frame[];
  /** gRPC: grow the one frame's empty field to this many bytes when sent (keeps counterexamples printable). */
  size?: number;
  /** The socket wire: the bytes to send. */
  raw?: Uint8Array;
  /** End our half after sending (what was announced never comes). */
  thenEnd?: boolean;
}

type Action =
  | { kind: 'envelope'; value: Record<string, unknown>; attachmentBytes?: number }
  | { kind: 'bytes'; bytes: Uint8Array }
  | BadFrame;

const scopeOf = (step = '0', epoch = 'e1', sessionId = SESSION) => ({ sessionId, epoch, step });
const WALKER = {
  agentId: 'a-0',
  model: 'walker',
  params: {},
  seed: 7,
  stepDuration: { numerator: '50000000', denominator: '3' },
  observation: { x: 0 },
};

/** Valid (or nearly valid) requests of every method but Shutdown, the seeds the mutations start from. */
function templates(marker: string): Record<string, unknown>[] {
  const t = (method: string, scope: unknown, params: Record<string, unknown>) => ({
    method,
    requestId: 'req-1',
    scope,
    params,
  });
  const digest = 'a'.repeat(64);
  return [
    t(METHODS.hello, null, {
      sessionId: SESSION,
      expectedWorkerId: WORKER_ID,
      role: 'agent',
      supportedMajors: [1],
      contractDigest: CONTRACT_DIGEST,
    }),
    t(METHODS.status, null, {}),
    t(METHODS.acknowledge, null, { requestIds: ['req-1'] }),
    t(METHODS.agentInitialize, scopeOf(), { agents: [WALKER] }),
    t(METHODS.agentInitialize, scopeOf(), { agents: [{ ...WALKER, agentId: 'a-x', model: marker }] }),
    t(METHODS.agentPrepare, scopeOf(), { agents: [{ agentId: 'a-0' }] }),
    t(METHODS.agentCommit, scopeOf(), {
      agents: [{ agentId: 'a-0', preparedRequestId: 'req-1', observation: { x: 1 }, rewards: [] }],
    }),
    t(METHODS.environmentInitialize, scopeOf(), {
      environmentId: 'env',
      model: 'forage',
      params: {},
      seed: 1,
      stepDuration: WALKER.stepDuration,
      ports: [{ portId: 'p-0', agentId: 'a-0' }],
    }),
    t(METHODS.environmentInitialize, scopeOf(), {
      environmentId: 'env-x',
      model: marker,
      params: {},
      seed: 1,
      stepDuration: WALKER.stepDuration,
      ports: [{ portId: 'p-0', agentId: 'a-0' }],
    }),
    t(METHODS.environmentAdvance, scopeOf(), {
      batchId: 'b-0',
      actions: [{ portId: 'p-0', agentId: 'a-0', action: { move: 'stay' } }],
    }),
    t(METHODS.capture, scopeOf(), { checkpointId: 'ck-1', agentId: 'a-0' }),
    t(METHODS.stageRestore, scopeOf('0', 'e2'), {
      checkpointId: 'ck-1',
      agentId: 'a-0',
      sourceScope: scopeOf(),
      compatibilityDigest: digest,
      payload: { digest, byteLength: '4096', file: { path: '/etc/passwd', offset: '0' } },
    }),
    t(METHODS.activateRestore, scopeOf('0', 'e2'), { restoreToken: 'rt-0', agentId: 'a-0' }),
  ];
}

/** Values a hostile or broken client would put anywhere. */
function hostileValue(marker: string): fc.Arbitrary<unknown> {
  return fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.constantFrom<unknown>(
      1e308,
      -1e308,
      2 ** 53,
      2 ** 64,
      -1,
      0.5,
      '18446744073709551615',
      '18446744073709551616',
      '99999999999999999999999999',
      '-1',
      '',
      'x'.repeat(70_000),
      null,
      true,
      [],
      {},
      marker,
      `file://${marker}`,
      '../../../../../../etc/passwd',
      '/etc/passwd',
      './workers/models/walker.ts',
      'Worker.Shutdown',
      scopeOf('18446744073709551615'),
      scopeOf('0', 'e1', 's2'),
      scopeOf('-1'),
      { sessionId: SESSION },
      Array.from({ length: 2000 }, (_, i) => ({ agentId: `a-${i}` })),
    ),
  );
}

/** Walk `path` (indexes into the keys met) and set or delete there. */
function mutate(
  value: Record<string, unknown>,
  path: number[],
  replacement: unknown,
  remove: boolean,
): Record<string, unknown> {
  const root = structuredClone(value);
  let node: unknown = root;
  for (let i = 0; i < path.length; i++) {
    if (node === null || typeof node !== 'object') break;
    const keys = Object.keys(node);
    if (keys.length === 0) break;
    const key = keys[path[i]! % keys.length]!;
    const last =
      i === path.length - 1 ||
      (node as Record<string, unknown>)[key] === null ||
      typeof (node as Record<string, unknown>)[key] !== 'object';
    if (last) {
      if (remove && !Array.isArray(node)) delete (node as Record<string, unknown>)[key];
      else (node as Record<string, unknown>)[key] = replacement;
      break;
    }
    node = (node as Record<string, unknown>)[key];
  }
  return root;
}

/** A Shutdown would end the run under test: anything the mutations turn into one becomes a Status. */
function withoutShutdown(v: Record<string, unknown>): Record<string, unknown> {
  return v.method === METHODS.shutdown ? { ...v, method: METHODS.status } : v;
}

/** `arb` one time in `inN`, else undefined (fc.option builds its nil only one time in `freq`). */
function sometimes<T>(arb: fc.Arbitrary<T>, inN = 4): fc.Arbitrary<T | undefined> {
  return fc.oneof({ arbitrary: fc.constant(undefined), weight: inN - 1 }, { arbitrary: arb, weight: 1 });
}

function envelopeAction(marker: string): fc.Arbitrary<Action> {
  const base = fc.constantFrom(...templates(marker));
  const op = fc.record({
    path: fc.array(fc.nat(40), { minLength: 1, maxLength: 5 }),
    replacement: hostileValue(marker),
    remove: fc.boolean(),
  });
  // Often no mutation at all, so that sequences of well-formed requests reach the deeper checks.
  const method = fc.oneof(
    fc.constantFrom(...ALL_METHODS.filter((m) => m !== METHODS.shutdown)),
    fc.string({ maxLength: 70 }),
  );
  return fc
    .record({
      base,
      ops: fc.oneof(fc.constant([]), fc.array(op, { maxLength: 4 })),
      method: sometimes(method),
      requestId: fc.oneof(
        fc.constant('req-1'),
        fc.nat().map((n) => `req-${n}`),
        fc.string({ maxLength: 12 }),
      ),
      // Well-formed but wrong scopes: another session, a stale or future epoch or step, the U64 limit.
      scope: sometimes(
        fc.oneof(
          fc.constant(null),
          fc.record({
            sessionId: fc.constantFrom(SESSION, 's2'),
            epoch: fc.constantFrom('e1', 'e2', 'e9'),
            step: fc.constantFrom('0', '1', '2', '18446744073709551615'),
          }),
        ),
      ),
      extraTop: sometimes(fc.tuple(fc.string({ maxLength: 8 }), hostileValue(marker)), 6),
      // A length, not the bytes: a counterexample stays printable.
      attachmentBytes: sometimes(fc.integer({ min: 1, max: 3 * MAX_CHUNK_BYTES + 7 }), 8),
    })
    .map(({ base, ops, method, requestId, scope, extraTop, attachmentBytes }) => {
      let v: Record<string, unknown> = { ...base, requestId };
      if (method !== undefined) v.method = method;
      if (scope !== undefined) v.scope = scope;
      for (const o of ops) v = mutate(v, o.path, o.replacement, o.remove);
      if (extraTop) v[extraTop[0]] = extraTop[1];
      const out: Action = { kind: 'envelope', value: withoutShutdown(v) };
      if (attachmentBytes !== undefined) out.attachmentBytes = attachmentBytes;
      return out;
    });
}

const text = (s: string) => new Uint8Array(Buffer.from(s, 'utf8'));

/** Bodies that are not a canonical JSON envelope at all. */
function bytesAction(): fc.Arbitrary<Action> {
  const deep = (open: string, close: string) =>
    fc
      .integer({ min: 50, max: 200_000 })
      .map((d) =>
        text(
          `{"method":"Worker.Status","params":{"x":${open.repeat(d)}${close.repeat(d)}},"requestId":"req-1","scope":null}`,
        ),
      );
  return fc
    .oneof(
      fc.uint8Array({ minLength: 1, maxLength: 4096 }),
      fc.string({ minLength: 1, maxLength: 300 }).map(text),
      deep('[', ']'),
      deep('{"a":', '}'),
      fc.constantFrom(
        text('{"method":"Worker.Status","params":{},"requestId":"req-1","scope":null,"method":"Worker.Shutdown"}'), // duplicate key
        text('{ "method":"Worker.Status","params":{},"requestId":"req-1","scope":null}'), // not canonical
        text('{"method":"Worker.Status","params":{"n":1e400},"requestId":"req-1","scope":null}'),
        text('{"method":"Worker.Status","params":{"n":12345678901234567890},"requestId":"req-1","scope":null}'),
        text('{"method":"Worker.Status","params":{"s":"\\ud800"},"requestId":"req-1","scope":null}'),
        new Uint8Array([0x7b, 0x22, 0xff, 0xfe, 0x22, 0x3a, 0x31, 0x7d]),
        text('null'),
        text('[]'),
        text('"Worker.Status"'),
        text('0'),
      ),
    )
    .map((bytes) => ({ kind: 'bytes', bytes }) as Action);
}

/** Framing a gRPC worker must refuse by ending the stream. */
function badFrameAction(): fc.Arbitrary<Action> {
  const body = text('{"method":"Worker.Status","params":{},"requestId":"req-1","scope":null}');
  return fc.constantFrom<Action>(
    { kind: 'badFrame', what: 'a frame with both body and chunk', frames: [{ body, chunk: text('x') }] },
    { kind: 'badFrame', what: 'an empty frame', frames: [{}] },
    { kind: 'badFrame', what: 'a chunk over 1 MiB', frames: [{ chunk: new Uint8Array(0) }], size: MAX_CHUNK_BYTES + 1 },
    {
      kind: 'badFrame',
      what: 'a frame over the message limit',
      frames: [{ body: new Uint8Array(0) }],
      size: DEFAULT_MAX_MESSAGE_BYTES + 16,
    },
    {
      kind: 'badFrame',
      what: 'chunks with no body, then the client ends',
      frames: [{ chunk: new Uint8Array(1000) }, { chunk: new Uint8Array(1000) }],
      thenEnd: true,
    },
  );
}

/** A socket-wire header: the body's and the attachment's lengths. */
function wireHead(body: number, attachment: number): Uint8Array {
  const b = Buffer.alloc(8);
  b.writeUInt32BE(body, 0);
  b.writeUInt32BE(attachment, 4);
  return b;
}

/** Framing a socket-wire worker must refuse by ending the connection. */
function badWireAction(): fc.Arbitrary<Action> {
  const body = text('{"method":"Worker.Status","params":{},"requestId":"req-1","scope":null}');
  return fc.oneof(
    fc.constantFrom<Action>(
      { kind: 'badFrame', what: 'a header with an empty body', raw: wireHead(0, 0) },
      {
        kind: 'badFrame',
        what: 'a header with a body over the message limit',
        raw: wireHead(DEFAULT_MAX_MESSAGE_BYTES + 1, 0),
      },
      { kind: 'badFrame', what: 'a header with an attachment over 2 GiB', raw: wireHead(body.length, 0xffffffff) },
    ),
    // A header announcing more than comes: the worker must not wait for it once the client ends.
    fc.integer({ min: 1, max: body.length + 1000 }).map(
      (announced) =>
        ({
          kind: 'badFrame',
          what: `a header announcing ${announced} body bytes, ${Math.min(announced - 1, body.length)} sent, then the client ends`,
          raw: Buffer.concat([wireHead(announced, 0), body.subarray(0, Math.min(announced - 1, body.length))]),
          thenEnd: true,
        }) as Action,
    ),
  );
}

function caseArbitrary(marker: string, wire: Wire): fc.Arbitrary<Action[]> {
  const action = fc.oneof(
    { arbitrary: envelopeAction(marker), weight: 6 },
    { arbitrary: bytesAction(), weight: 3 },
    { arbitrary: wire === 'socket' ? badWireAction() : badFrameAction(), weight: 1 },
  );
  return fc.array(action, { minLength: 1, maxLength: 6 });
}

/** Cases always run first: well-formed Initialize requests naming the marker module (the code-execution probe). */
function hostileExamples(marker: string): [Action[]][] {
  const initialize = templates(marker).filter(
    (t) =>
      (t.method === METHODS.agentInitialize || t.method === METHODS.environmentInitialize) &&
      JSON.stringify(t).includes(marker),
  );
  const named = (path: string) =>
    initialize.map(
      (t) =>
        ({
          kind: 'envelope',
          value: JSON.parse(JSON.stringify(t).replaceAll(JSON.stringify(marker), JSON.stringify(path))),
        }) as Action,
    );
  return [[[...named(marker), ...named(`file://${marker}`)]]];
}

// ---------------------------------------------------------------------------------------------
// Running a case and checking what came back.

function encodeEnvelope(value: Record<string, unknown>): Uint8Array {
  try {
    return canonicalBytes(value);
  } catch {
    return text(JSON.stringify(value) ?? 'null'); // a value canonical JSON refuses (e.g. a number it cannot write)
  }
}

class Finding extends Error {}

function helloOn(s: RawSession, role: Role): void {
  s.send(
    canonicalBytes({
      method: METHODS.hello,
      params: {
        contractDigest: CONTRACT_DIGEST,
        expectedWorkerId: WORKER_ID,
        role,
        sessionId: SESSION,
        supportedMajors: [1],
      },
      requestId: 'req-0',
      scope: null,
    }),
  );
}

async function expectReply(s: RawSession, what: string, report: FuzzReport): Promise<Reply> {
  const n = await s.next();
  if (n.kind === 'timeout') throw new Finding(`no reply within ${REPLY_TIMEOUT_MS} ms to ${what}`);
  if (n.kind === 'ended') throw new Finding(`the stream ended (${n.why}) instead of a reply to ${what}`);
  report.replies++;
  if (n.reply.type === 'result') report.results++;
  else {
    // readReply already refused a code outside ERROR_CODES; count the named ones.
    if (!(ERROR_CODES as readonly string[]).includes(n.reply.error.code))
      throw new Finding(`unnamed error code ${n.reply.error.code}`);
    report.codes[n.reply.error.code] = (report.codes[n.reply.error.code] ?? 0) + 1;
  }
  return n.reply;
}

/**
 * How a case names its envelope's method in a finding: a generated method may be any JSON value,
 * an object with a `toString` key too (String() of that throws), so never through String().
 */
function methodText(method: unknown): string {
  return typeof method === 'string' ? method : (JSON.stringify(method) ?? typeof method);
}

async function runCase(target: Target, role: Role, actions: Action[], report: FuzzReport): Promise<void> {
  const s = sessionTo(target);
  try {
    helloOn(s, role);
    const hello = await expectReply(s, 'Hello', report);
    if (hello.type !== 'result')
      throw new Finding(`a valid Hello was refused: ${hello.error.code} ${hello.error.message}`);
    for (const a of actions) {
      if (a.kind === 'badFrame') {
        s.sendBad(a);
        if (a.thenEnd) s.halfClose();
        const n = await s.next();
        if (n.kind === 'timeout')
          throw new Finding(`the worker neither replied to nor ended the stream after ${a.what}`);
        if (n.kind === 'reply') throw new Finding(`the worker replied to ${a.what}`);
        report.streamsEndedByWorker++;
        return;
      }
      const what =
        a.kind === 'bytes'
          ? `${a.bytes.length} non-envelope bytes`
          : `${methodText(a.value.method).slice(0, 40)} (${JSON.stringify(a.value).slice(0, 160)})`;
      const attachment =
        a.kind === 'envelope' && a.attachmentBytes !== undefined
          ? new Uint8Array(a.attachmentBytes).fill(a.attachmentBytes & 0xff)
          : undefined;
      s.send(a.kind === 'bytes' ? a.bytes : encodeEnvelope(a.value), attachment);
      await expectReply(s, what, report);
    }
  } finally {
    s.close();
  }
}

/** Peak and current resident set of a process, in MiB (/proc/<pid>/status VmHWM, VmRSS). */
export function rssMiB(pid: number): { peak: number; now: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (key: string) => Number(new RegExp(`^${key}:\\s+(\\d+) kB$`, 'm').exec(status)![1]);
  return { peak: kib('VmHWM') / 1024, now: kib('VmRSS') / 1024 };
}

/** After the fuzz: a fresh stream still gets Hello and Status answered. */
async function checkAlive(target: Target, role: Role, report: FuzzReport): Promise<void> {
  const s = sessionTo(target);
  try {
    helloOn(s, role);
    if ((await expectReply(s, 'the final Hello', report)).type !== 'result')
      throw new Finding('the final Hello was refused');
    s.send(canonicalBytes({ method: METHODS.status, params: {}, requestId: 'req-1', scope: null }));
    if ((await expectReply(s, 'the final Status', report)).type !== 'result')
      throw new Finding('the final Status was refused');
  } finally {
    s.close();
  }
}

export async function runProtocolFuzz(options: FuzzOptions): Promise<FuzzReport> {
  const role = options.role ?? 'agent';
  const maxPeak = options.maxPeakRssMiB ?? 768;
  const target = await startTarget(role, options.wire ?? 'grpc');
  const report: FuzzReport = {
    cases: 0,
    seed: options.seed,
    replies: 0,
    codes: {},
    results: 0,
    streamsEndedByWorker: 0,
    peakRssMiB: 0,
  };
  const pid = target.worker.proc.pid!;
  try {
    await fc.assert(
      fc.asyncProperty(caseArbitrary(target.markerModule, target.wire), async (actions) => {
        report.cases++;
        await runCase(target, role, actions, report);
        if (target.worker.proc.exitCode !== null || target.worker.proc.signalCode !== null)
          throw new Finding(`the worker exited: ${target.worker.stderr().slice(-2000)}`);
        if (existsSync(target.markerFile))
          throw new Finding('a client-named module was imported (the marker file exists)');
        const rss = rssMiB(pid);
        report.peakRssMiB = Math.max(report.peakRssMiB, rss.peak);
        if (rss.peak > maxPeak)
          throw new Finding(`the worker's peak RSS reached ${rss.peak.toFixed(0)} MiB (bound ${maxPeak} MiB)`);
      }),
      {
        numRuns: options.cases,
        examples: hostileExamples(target.markerModule),
        ...(options.seed !== undefined ? { seed: options.seed } : {}),
        endOnFailure: true,
      },
    );
    await checkAlive(target, role, report);
    return report;
  } finally {
    target.grpcClient?.close();
    await target.worker.stop();
    rmSync(target.dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      cases: { type: 'string' },
      seed: { type: 'string' },
      role: { type: 'string' },
      wire: { type: 'string' },
    },
  });
  const role = values.role === 'environment' ? 'environment' : 'agent';
  const report = await runProtocolFuzz({
    cases: Number(values.cases ?? 2000),
    role,
    wire: values.wire === 'socket' ? 'socket' : 'grpc',
    ...(values.seed !== undefined ? { seed: Number(values.seed) } : {}),
  });
  process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
}
