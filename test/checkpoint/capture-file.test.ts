// Co-located capture (store-files-v1: the workers hold their payload and hash it as they write it)
// over real worker processes: the envelope the workers write straight into the store's temp file is
// byte-identical to the streamed path's; no payload byte travels through the coordinator; the seal
// pass reads in bounded chunks and still refuses a payload damaged after its write; a write reply
// without its digest refuses the capture; a fleet of TypeScript, Rust and Python workers writes the
// same bytes (also when one language streams) and restores.
import { closeSync, openSync, readFileSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { captureGroup, STREAM_BELOW_BYTES } from '../../coordinator/checkpoint/capture.js';
import { storeDirOf } from '../../coordinator/checkpoint/checkpointing.js';
import { restoreGroup } from '../../coordinator/checkpoint/restore.js';
import type { RunPlan } from '../../coordinator/config.js';
import { decodeEnvelope } from '../../core/formats/envelope.js';
import { THREAD_SEAL_MIN_BYTES } from '../../coordinator/store/seal-thread.js';
import { CAPABILITIES, METHODS } from '../../core/protocol/index.js';
import { prepareRuntimesFor } from '../cross-lang/example-runtimes.js';
import { LIF, planOf, startSession, type Session } from './harness.js';

const open: Session[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
});

/** Count the payload bytes that reach the coordinator in capture replies, and the writes that gave a digest. */
function countAttachments(s: Session): { bytes: number; writes: number; digestsAtWrite: number } {
  const seen = { bytes: 0, writes: 0, digestsAtWrite: 0 };
  for (const w of s.fleet.all()) {
    const orig = w.client.call.bind(w.client);
    w.client.call = async (method, scope, params, o) => {
      const rep = await orig(method, scope, params, o);
      if (method === METHODS.capture) seen.bytes += rep.attachment?.byteLength ?? 0;
      if (method === METHODS.writePayload) seen.writes++;
      if (method === METHODS.writePayload && 'digest' in ((rep.reply as { result?: object }).result ?? {}))
        seen.digestsAtWrite++;
      return rep;
    };
  }
  return seen;
}

/** Start a session, step to `k`, capture `id` and wait until it is durable; the committed file's bytes. */
async function committedAt(
  plan: RunPlan,
  k: number,
  id: string,
  opts: { streamed?: boolean; chunkBytes?: number; streamFrom?: RegExp; withoutHoldFrom?: boolean } = {},
): Promise<{ s: Session; file: Buffer; seen: ReturnType<typeof countAttachments>; maxAlloc: number }> {
  const s = await startSession(plan, opts.streamed ? { streamed: true } : {});
  open.push(s);
  // Workers whose runtime matches `streamFrom` say they lack store-files-v1, so they stream (a mixed
  // capture, as with workers on another node).
  if (opts.streamFrom)
    for (const w of s.fleet.all())
      if (opts.streamFrom.test(w.hello.runtime))
        w.hello.capabilities = w.hello.capabilities.filter((c) => c !== CAPABILITIES.storeFiles);
  // Workers that say they lack capture-hold-from-v1 (as an older worker would) are asked to hold
  // every payload at the first capture of a session, whatever its size.
  if (opts.withoutHoldFrom)
    for (const w of s.fleet.all())
      w.hello.capabilities = w.hello.capabilities.filter((c) => c !== CAPABILITIES.captureHoldFrom);
  for (let i = 0; i < k; i++) await s.group.step();
  const seen = countAttachments(s);
  let maxAlloc = 0;
  const fileHooks =
    opts.chunkBytes === undefined
      ? {}
      : { chunkBytes: opts.chunkBytes, onAllocate: (n: number) => (maxAlloc = Math.max(maxAlloc, n)) };
  const rec = await captureGroup(s.group, { checkpointId: id, fileHooks });
  expect(await rec.ticket.wait(60_000)).toMatchObject({ kind: 'Committed' });
  const file = readFileSync(join(storeDirOf(s.runDir), `${id}.flysess`));
  return { s, file, seen, maxAlloc };
}

describe('co-located capture (store-files-v1)', () => {
  it('[STORE-15] TypeScript workers write their payloads into the envelope file: byte-identical to the streamed path, no payload through the coordinator, seal pass in bounded chunks', async () => {
    const plan = LIF(4096);
    const chunk = 8 * 1024;
    const local = await committedAt(plan, 3, 'ckpt-e1-3', { chunkBytes: chunk, withoutHoldFrom: true });
    const streamed = await committedAt(plan, 3, 'ckpt-e1-3', { streamed: true });
    for (const w of local.s.fleet.all()) expect(w.hello.capabilities).toContain(CAPABILITIES.storeFiles);
    for (const w of streamed.s.fleet.all()) expect(w.hello.capabilities).not.toContain(CAPABILITIES.storeFiles);
    // environment + two agents, none streamed, each hashing as it wrote
    expect(local.seen).toEqual({ bytes: 0, writes: 3, digestsAtWrite: 3 });
    expect(streamed.seen.writes).toBe(0);
    expect(streamed.seen.bytes).toBeGreaterThan(chunk * 4);
    expect(local.file.equals(streamed.file)).toBe(true);
    // The seal pass read the many-chunk file a chunk at a time: never a buffer the size of a payload.
    const largest = Math.max(...decodeEnvelope(local.file).layout.entries.map((e) => e.byteLength));
    expect(largest).toBeGreaterThan(chunk * 2);
    expect(local.maxAlloc).toBe(chunk);
    expect((await local.s.ck.store.scan()).temporaries).toEqual([]);
  }, 180_000);

  it('[STORE-15] asked to hold from 64 KiB (capture-hold-from-v1), each worker sends a smaller payload in its Capture reply at the first capture of a session and holds a larger one; the envelopes are the same bytes', async () => {
    // A 4-neuron LIF state is a few hundred bytes, the world's too: nothing is held, nothing written.
    const small = await committedAt(LIF(4), 2, 'ckpt-e1-2');
    for (const w of small.s.fleet.all()) expect(w.hello.capabilities).toContain(CAPABILITIES.captureHoldFrom);
    expect(small.seen.writes).toBe(0);
    const sizes = decodeEnvelope(small.file).layout.entries.map((e) => e.byteLength);
    expect(Math.max(...sizes)).toBeLessThan(STREAM_BELOW_BYTES);
    const streamed = await committedAt(LIF(4), 2, 'ckpt-e1-2', { streamed: true });
    expect(small.seen.bytes).toBe(streamed.seen.bytes);
    expect(small.file.equals(streamed.file)).toBe(true);
    // 8,192 neurons: each agent's payload is past 64 KiB and held at once; the world's is streamed.
    const mixed = await committedAt(LIF(8192), 1, 'ckpt-e1-1');
    const all = await committedAt(LIF(8192), 1, 'ckpt-e1-1', { streamed: true });
    const big = decodeEnvelope(mixed.file).layout.entries.filter((e) => e.byteLength >= STREAM_BELOW_BYTES);
    expect(big.length).toBe(2);
    expect(mixed.seen).toEqual({
      bytes: all.seen.bytes - big.reduce((n, e) => n + e.byteLength, 0),
      writes: 2,
      digestsAtWrite: 2,
    });
    expect(mixed.seen.bytes).toBeGreaterThan(0);
    expect(mixed.file.equals(all.file)).toBe(true);
  }, 180_000);

  it('[STORE-15] a worker without capture-hold-from-v1 holds every payload at the first capture, then streams one that was under 64 KiB at its last capture and holds a larger one again', async () => {
    const small = await committedAt(LIF(4), 2, 'ckpt-e1-2', { withoutHoldFrom: true });
    expect(small.seen).toEqual({ bytes: 0, writes: 3, digestsAtWrite: 3 });
    await small.s.group.step();
    const again = countAttachments(small.s);
    const second = await captureGroup(small.s.group, { checkpointId: 'ckpt-e1-3' });
    expect(await second.ticket.wait(60_000)).toMatchObject({ kind: 'Committed' });
    expect(again.writes).toBe(0);
    expect(again.bytes).toBeGreaterThan(0);
    const streamed = await committedAt(LIF(4), 3, 'ckpt-e1-3', { streamed: true });
    expect(readFileSync(join(storeDirOf(small.s.runDir), 'ckpt-e1-3.flysess')).equals(streamed.file)).toBe(true);
    // A large state (65,536 neurons: the agents' payloads are MiBs) is held at every capture.
    const large = await committedAt(LIF(65_536), 1, 'ckpt-e1-1', { withoutHoldFrom: true });
    expect(large.seen.writes).toBe(3);
    await large.s.group.step();
    const later = countAttachments(large.s);
    const next = await captureGroup(large.s.group, { checkpointId: 'ckpt-e1-2' });
    expect(await next.ticket.wait(60_000)).toMatchObject({ kind: 'Committed' });
    const held = decodeEnvelope(readFileSync(join(storeDirOf(large.s.runDir), 'ckpt-e1-2.flysess'))).layout.entries;
    const big = held.filter((e) => e.byteLength >= STREAM_BELOW_BYTES).length;
    expect(big).toBeGreaterThan(0);
    expect(later.writes).toBe(big);
  }, 180_000);

  it('[STORE-15] an envelope of 8 MiB or more (sealed on the sealing thread) has the same bytes, and a damaged payload still fails the save naming it', async () => {
    const plan = LIF(400_000); // 2 agents x 12 bytes per neuron: a 9.6 MB envelope
    const local = await committedAt(plan, 1, 'ckpt-e1-1');
    const streamed = await committedAt(plan, 1, 'ckpt-e1-1', { streamed: true });
    expect(local.file.byteLength).toBeGreaterThan(THREAD_SEAL_MIN_BYTES);
    expect(local.file.equals(streamed.file)).toBe(true);
    // The sealing thread's refusal crosses back as the same seal_failed, naming the payload.
    const s = local.s;
    const victim = s.fleet.agents[0]!;
    const orig = victim.client.call.bind(victim.client);
    victim.client.call = async (method, scope, params, o) => {
      const rep = await orig(method, scope, params, o);
      if (method === METHODS.writePayload && rep.reply.type === 'result') {
        const { path, offset } = (params as { file: { path: string; offset: string } }).file;
        const fd = openSync(path, 'r+');
        const at = Number(offset) + 1_000_000;
        const b = Buffer.alloc(1);
        readSync(fd, b, 0, 1, at);
        b[0]! ^= 0xff;
        writeSync(fd, b, 0, 1, at);
        closeSync(fd);
      }
      return rep;
    };
    await s.group.step();
    const rec = await captureGroup(s.group, { checkpointId: 'ckpt-e1-2' });
    const outcome = await rec.ticket.wait(60_000);
    expect(outcome).toMatchObject({ kind: 'Failed', reason: 'seal_failed' });
    expect(outcome.kind === 'Failed' && outcome.message).toContain(
      `payload "agent-${victim.plan.agentIds[0]}": its bytes hash to`,
    );
    expect(s.ck.store.highWater()?.checkpointId).toBe('ckpt-e1-1');
  }, 180_000);

  it('a WritePayload reply without the digest refuses the capture naming the participant, and leaves no temp file', async () => {
    const s = await startSession(LIF(8192)); // payloads past 64 KiB: held
    open.push(s);
    await s.group.step();
    const victim = s.fleet.agents[1]!;
    const orig = victim.client.call.bind(victim.client);
    victim.client.call = async (method, scope, params, o) => {
      const rep = await orig(method, scope, params, o);
      if (method === METHODS.writePayload && rep.reply.type === 'result')
        delete (rep.reply.result as { digest?: string }).digest;
      return rep;
    };
    const refused = await captureGroup(s.group, { checkpointId: 'ckpt-e1-1' }).then(
      () => null,
      (e: unknown) => e as Error & { reason?: string },
    );
    expect(refused?.message).toMatch(
      new RegExp(`agent ${victim.plan.agentIds[0]}: State.WritePayload gave no digest of what it wrote`),
    );
    expect((await s.ck.store.scan()).temporaries).toEqual([]);
    expect(s.ck.store.highWater()).toBeNull();
  }, 180_000);

  it('[STORE-10] a superseded hot capture removes its temp file; the durable one in flight and the newer hot one commit', async () => {
    // States of 64 KiB or more, so every capture is held and laid out in a temp file (smaller ones
    // stream after the first capture and are sealed in memory).
    const s = await startSession(LIF(16_384), { checkpointing: { capacity: 3 } });
    open.push(s);
    await s.group.step();
    const release = s.ck.writer.testHooks.stall();
    const x = await captureGroup(s.group, { checkpointId: 'ckpt-x' });
    const a = await captureGroup(s.group, { checkpointId: 'ckpt-a', replaceable: true });
    expect((await s.ck.store.scan()).temporaries).toEqual(['tmp-ckpt-a.flysess', 'tmp-ckpt-x.flysess']);
    const b = await captureGroup(s.group, { checkpointId: 'ckpt-b', replaceable: true });
    expect(await a.ticket.wait(30_000)).toMatchObject({ kind: 'Superseded', by: 'ckpt-b' });
    // The discard runs asynchronously beside the supersession: wait for it (bounded).
    await expect
      .poll(async () => (await s.ck.store.scan()).temporaries, { timeout: 10_000 })
      .toEqual(['tmp-ckpt-b.flysess', 'tmp-ckpt-x.flysess']);
    release();
    expect(await x.ticket.wait(60_000)).toMatchObject({ kind: 'Committed' });
    expect(await b.ticket.wait(60_000)).toMatchObject({ kind: 'Committed' });
    expect((await s.ck.store.scan()).temporaries).toEqual([]);
    expect((await s.ck.store.verify()).ok).toBe(true);
  }, 120_000);

  it('[STORE-15] workers in all three languages (TypeScript, Rust, Python) write into the envelope file: the same bytes as the streamed path, also with one language streaming, and the group restores', async (ctx) => {
    const config = 'examples/mixed-python.yaml';
    const skip = prepareRuntimesFor(config);
    if (skip) return ctx.skip(skip);
    const plan = planOf(config);
    // Walkers' states are small: asked to hold them all (as a worker without capture-hold-from-v1 is
    // at a session's first capture), every language writes its own; asked from 64 KiB, each sends them.
    const local = await committedAt(plan, 4, 'ckpt-e1-4', { chunkBytes: 4096, withoutHoldFrom: true });
    const mixed = await committedAt(plan, 4, 'ckpt-e1-4', { streamFrom: /^detsim-py\//, withoutHoldFrom: true });
    const sized = await committedAt(plan, 4, 'ckpt-e1-4');
    const streamed = await committedAt(plan, 4, 'ckpt-e1-4', { streamed: true });
    const runtimes = local.s.fleet.all().map((w) => w.hello.runtime.split('/')[0]);
    expect(new Set(runtimes)).toEqual(new Set(['detsim-ts', 'detsim-rs', 'detsim-py']));
    for (const w of local.s.fleet.all()) expect(w.hello.capabilities).toContain(CAPABILITIES.storeFiles);
    // The environment and six agents: every payload written by its own worker, hashed as it was written.
    expect(local.seen).toEqual({ bytes: 0, writes: 7, digestsAtWrite: 7 });
    // The Python workers (the environment and two agents) stream; the others write.
    expect(mixed.seen.writes).toBe(4);
    expect(mixed.seen.bytes).toBeGreaterThan(0);
    for (const w of sized.s.fleet.all()) expect(w.hello.capabilities).toContain(CAPABILITIES.captureHoldFrom);
    expect(sized.seen.writes).toBe(0);
    expect(sized.seen.bytes).toBe(streamed.seen.bytes);
    expect(local.file.equals(streamed.file)).toBe(true);
    expect(mixed.file.equals(streamed.file)).toBe(true);
    expect(sized.file.equals(streamed.file)).toBe(true);
    const traces = [];
    for (let i = 0; i < 2; i++) traces.push((await local.s.group.step()).behaviour);
    await restoreGroup(local.s.group, { store: local.s.ck.store }, { epoch: 'e2' });
    local.s.group.resume();
    for (let i = 0; i < 2; i++) {
      const again = (await local.s.group.step()).behaviour;
      expect(again.agents).toEqual(traces[i]!.agents);
      expect(again.worldDigest).toBe(traces[i]!.worldDigest);
      expect(again.controlDigest).toBe(traces[i]!.controlDigest);
    }
  }, 180_000);
});
