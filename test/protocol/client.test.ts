// WorkerClient and the frame codec over a real Unix socket, against a small scripted server (the
// real worker is exercised in test/workers), on both wires a worker process speaks: gRPC and the
// socket wire. Checks correlation, attachments, deadlines, the drop-reply fault hook, Hello refusals
// and the distinct failure kinds — the same cases, the same outcomes, on either wire.
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { canonicalBytes, parseStrict } from '../../core/formats/canonical-json.js';
import {
  CONTRACT_DIGEST,
  FrameAssembler,
  HelloRefusedError,
  MAX_CHUNK_BYTES,
  METHODS,
  PROTO_PATH,
  type StartedServer,
  WorkerCallError,
  WorkerClient,
  encodeFrames,
  readReply,
  readRequest,
  type SessionHandler,
  startSocketServer,
  startWorkerServer,
} from '../../core/protocol/index.js';

type Wire = 'grpc' | 'socket';

let dir: string;
let server: StartedServer | undefined;
let client: WorkerClient | undefined;
let helloResult: Record<string, unknown>;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'dsp-'));
  helloResult = {
    selectedMajor: 1,
    selectedMinor: 0,
    workerId: 'w1',
    incarnationId: 'inc-1',
    role: 'agent',
    runtime: 'test',
    buildDigest: '0'.repeat(64),
    contractDigest: CONTRACT_DIGEST,
    capabilities: ['agent-step-v1', 'checkpoint-v1'],
    limits: { maxAgents: 64, maxMessageBytes: 8388608, workerThreads: 1 },
  };
});
afterEach(async () => {
  client?.close();
  client = undefined;
  await server?.close();
  server = undefined;
  rmSync(dir, { recursive: true, force: true });
});

/** A scripted worker: echoes params and attachment; `delayMs` delays the reply (replies stay in order); `end` ends the stream. */
async function startScripted(wire: Wire): Promise<string> {
  const listen = `unix:${join(dir, 'w.sock')}`;
  let queue: Promise<void> = Promise.resolve();
  const start = (h: SessionHandler) =>
    wire === 'socket' ? startSocketServer(listen, h) : startWorkerServer(listen, h);
  server = await start({
    onMessage(message, conn) {
      const req = readRequest(parseStrict(message.body));
      if (req.method === 'end') return conn.end();
      const result =
        req.method === METHODS.hello
          ? helloResult
          : { method: req.method, params: req.params, attachmentBytes: String(message.attachment?.length ?? 0) };
      const body = canonicalBytes({
        type: 'result',
        requestId: req.requestId,
        workerId: 'w1',
        incarnationId: 'inc-1',
        scope: req.scope,
        result,
      });
      const delay = typeof req.params.delayMs === 'number' ? req.params.delayMs : 0;
      queue = queue
        .then(() => new Promise<void>((resolve) => setTimeout(resolve, delay)))
        .then(() => conn.send(body, message.attachment));
    },
  });
  return listen;
}

describe('contract', () => {
  it('CONTRACT_DIGEST is the SHA-256 of the proto file bytes', () => {
    expect(CONTRACT_DIGEST).toBe(createHash('sha256').update(readFileSync(PROTO_PATH)).digest('hex'));
    expect(PROTO_PATH.endsWith('proto/detsim/v1/worker.proto')).toBe(true);
  });
});

describe('envelopes', () => {
  const base = { requestId: 'req-1', workerId: 'w1', incarnationId: 'i1', scope: null };
  it('refuses a before-mutation code that claims a mutation', () => {
    expect(() =>
      readReply({ ...base, type: 'error', error: { code: 'STALE_STEP', message: 'x', mutation: 'applied' } }),
    ).toThrow(/mutation "none"/);
    expect(
      readReply({ ...base, type: 'error', error: { code: 'INTERNAL', message: 'x', mutation: 'unknown' } }).type,
    ).toBe('error');
  });
  it('refuses unknown codes, unknown fields and bad request ids', () => {
    expect(() =>
      readReply({ ...base, type: 'error', error: { code: 'NOPE', message: 'x', mutation: 'none' } }),
    ).toThrow(/15 error codes/);
    expect(() => readReply({ ...base, type: 'result', result: {}, extra: 1 })).toThrow(/unknown field "extra"/);
    expect(() => readRequest({ method: 'Worker.Status', requestId: 'req-01', scope: null, params: {} })).toThrow(
      /requestId/,
    );
    expect(
      readRequest({
        method: 'Worker.Status',
        requestId: 'req-7',
        scope: { sessionId: 's', epoch: 'e0', step: '3' },
        params: {},
      }).scope?.step,
    ).toBe('3');
  });
});

describe('frames', () => {
  it('splits an attachment into <= 1 MiB chunks and reassembles it exactly', () => {
    const att = Buffer.alloc(3 * MAX_CHUNK_BYTES + 12345);
    for (let i = 0; i < att.length; i++) att[i] = (i * 31) & 255;
    const frames = encodeFrames(Buffer.from('{"a":1}'), att);
    expect(frames.length).toBe(5);
    expect(frames.every((f) => (f.chunk?.length ?? 0) <= MAX_CHUNK_BYTES)).toBe(true);
    const asm = new FrameAssembler();
    const out = frames.map((f) => asm.push(f));
    expect(out.slice(0, 4).every((m) => m === undefined)).toBe(true);
    expect(out[4]!.attachment!.equals(att)).toBe(true);
    expect(out[4]!.body.toString()).toBe('{"a":1}');
  });
  it('an attachment past the limit breaks the framing, or with dropOversized arrives as its length only and the next message assembles', () => {
    const att = Buffer.alloc(2 * MAX_CHUNK_BYTES + 7, 1);
    const limit = MAX_CHUNK_BYTES + 1;
    const strict = new FrameAssembler(limit);
    const [first, second] = encodeFrames(Buffer.from('{"a":1}'), att);
    strict.push(first!);
    expect(() => strict.push(second!)).toThrow(`attachment exceeds ${limit} bytes`);
    const dropping = new FrameAssembler(limit, true);
    const out = encodeFrames(Buffer.from('{"a":1}'), att).map((f) => dropping.push(f));
    expect(out.slice(0, 3)).toEqual([undefined, undefined, undefined]);
    expect(out[3]).toEqual({ body: Buffer.from('{"a":1}'), attachment: undefined, droppedAttachmentBytes: att.length });
    expect(dropping.partial).toBe(false);
    const small = Buffer.alloc(limit, 2);
    const next = encodeFrames(Buffer.from('{"b":2}'), small).map((f) => dropping.push(f));
    expect(next[next.length - 1]).toEqual({ body: Buffer.from('{"b":2}'), attachment: small });
  });
  it('refuses a frame with both body and chunk, or neither', () => {
    expect(() => new FrameAssembler().push({ body: Buffer.from('x'), chunk: Buffer.from('y') })).toThrow(/both/);
    expect(() => new FrameAssembler().push({})).toThrow(/empty frame/);
  });
});

describe.each<Wire>(['grpc', 'socket'])('WorkerClient over %s', (wire) => {
  const connect = (listen: string, options: Parameters<typeof WorkerClient.connect>[1] = {}) =>
    WorkerClient.connect(listen, { ...options, wire });
  it('correlates replies in order with req-<n> ids from a per-client counter', async () => {
    client = await connect(await startScripted(wire));
    const [a, b, c] = await Promise.all([
      client.callUnchecked('Worker.Status', null, { delayMs: 30 }),
      client.callUnchecked('Worker.Status', null, { n: 2 }),
      client.callUnchecked('Worker.Status', null, { n: 3 }),
    ]);
    expect([a.requestId, b.requestId, c.requestId]).toEqual(['req-1', 'req-2', 'req-3']);
    expect(a.reply.type === 'result' && a.reply.result.params).toEqual({ delayMs: 30 });
    expect(c.reply.type === 'result' && c.reply.result.params).toEqual({ n: 3 });
  });

  it('carries a multi-MiB attachment both ways in chunks', async () => {
    client = await connect(await startScripted(wire));
    const att = Buffer.alloc(9 * 1024 * 1024 + 7, 0xab); // above the 8 MiB message limit: only chunking gets it through
    att[12345] = 1;
    const r = await client.callUnchecked('State.StageRestore', null, {}, { attachment: att });
    expect(r.reply.type === 'result' && r.reply.result.attachmentBytes).toBe(String(att.length));
    expect(r.attachment?.equals(att)).toBe(true);
  });

  it('[LOCK-14] a deadline fails one call with mutation unknown; the late reply is discarded and the stream stays usable', async () => {
    client = await connect(await startScripted(wire));
    const slow = client.callUnchecked('Agent.Prepare', null, { delayMs: 300 }, { deadlineMs: 50 });
    await expect(slow).rejects.toMatchObject({ kind: 'deadline', mutation: 'unknown', requestId: 'req-1' });
    const next = await client.call('Worker.Status', null, {});
    expect(next.requestId).toBe('req-2');
    expect(next.reply.requestId).toBe('req-2');
  });

  it('[LOCK-14] the drop-reply fault fails the call as reply-dropped; re-sending the same id gets a reply', async () => {
    client = await connect(await startScripted(wire));
    client.faults.dropNextReply('Agent.Prepare');
    const first = client.callUnchecked('Agent.Prepare', null, { x: 1 });
    await expect(first).rejects.toMatchObject({ kind: 'reply-dropped', mutation: 'unknown', requestId: 'req-1' });
    const again = await client.callUnchecked('Agent.Prepare', null, { x: 1 }, { requestId: 'req-1' });
    expect(again.reply.requestId).toBe('req-1');
    expect((await client.callUnchecked('Agent.Prepare', null, {})).requestId).toBe('req-2');
  });

  it('hello accepts the expected worker and refuses mismatches naming the field', async () => {
    client = await connect(await startScripted(wire));
    const ok = await client.hello({ sessionId: 's1', workerId: 'w1', role: 'agent' });
    expect(ok.incarnationId).toBe('inc-1');
    await expect(client.hello({ sessionId: 's1', workerId: 'w2', role: 'agent' })).rejects.toMatchObject({
      code: 'IDENTITY_MISMATCH',
      field: 'workerId',
    });
    await expect(client.hello({ sessionId: 's1', workerId: 'w1', role: 'environment' })).rejects.toMatchObject({
      code: 'IDENTITY_MISMATCH',
      field: 'role',
    });
    helloResult.contractDigest = 'f'.repeat(64);
    const err = await client.hello({ sessionId: 's1', workerId: 'w1', role: 'agent' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(HelloRefusedError);
    expect((err as HelloRefusedError).message).toMatch(/IDENTITY_MISMATCH: contractDigest/);
    helloResult.contractDigest = CONTRACT_DIGEST;
    await expect(
      client.hello({ sessionId: 's1', workerId: 'w1', role: 'agent', requiredCapabilities: ['pixel-observation-v1'] }),
    ).rejects.toMatchObject({ code: 'UNSUPPORTED', field: 'capabilities' });
  });

  it('reports a stream ended by the worker as stream-ended, and a process exit as process-exited', async () => {
    const listen = await startScripted(wire);
    client = await connect(listen, { exitGraceMs: 0 });
    const pending = client.callUnchecked('Agent.Prepare', null, { delayMs: 10_000 });
    void client.callUnchecked('end', null, {}).catch(() => undefined);
    await expect(pending).rejects.toMatchObject({ kind: 'stream-ended', mutation: 'unknown' });
    await expect(client.call('Worker.Status', null, {})).rejects.toBeInstanceOf(WorkerCallError);
    client.close();

    let exit!: (i: { code: number | null; signal: string | null }) => void;
    client = await connect(listen, {
      processExit: new Promise((r) => {
        exit = r;
      }),
    });
    const waiting = client.callUnchecked('Agent.Prepare', null, { delayMs: 10_000 });
    exit({ code: null, signal: 'SIGKILL' });
    await expect(waiting).rejects.toMatchObject({ kind: 'process-exited' });
    await expect(waiting).rejects.toThrow(/signal SIGKILL/);
  });

  it('a worker that never comes up is never-connected, distinct from a stall', async () => {
    await expect(connect(`unix:${join(dir, 'none.sock')}`, { connectTimeoutMs: 200 })).rejects.toMatchObject({
      kind: 'never-connected',
      mutation: 'none',
    });
  });
});
